package policies

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOffsetMapPutGet(t *testing.T) {
	m := NewOffsetMap(24 * 1000)
	require.Equal(t, 1000, m.Slots())
	require.Equal(t, 900, m.MaxEntries())
	assert.Equal(t, int64(-1), m.Get([]byte("a")))
	assert.Equal(t, int64(-1), m.LatestOffset())

	require.True(t, m.Put([]byte("a"), 5))
	require.True(t, m.Put([]byte("b"), 6))
	require.True(t, m.Put([]byte("a"), 7))
	assert.Equal(t, int64(7), m.Get([]byte("a")))
	assert.Equal(t, int64(6), m.Get([]byte("b")))
	assert.Equal(t, int64(-1), m.Get([]byte("c")))
	assert.Equal(t, int64(-1), m.Get(nil), "null key never stored")
	assert.Equal(t, 2, m.Len())
	assert.Equal(t, int64(7), m.LatestOffset())

	m.UpdateLatestOffset(3)
	assert.Equal(t, int64(7), m.LatestOffset(), "latest never goes back")
	m.UpdateLatestOffset(10)
	assert.Equal(t, int64(10), m.LatestOffset())

	// The empty key and a null key hash alike (a hash of nothing); the cleaner
	// never puts a null key.
	require.True(t, m.Put([]byte{}, 11))
	assert.Equal(t, int64(11), m.Get([]byte{}))

	m.Reset()
	assert.Equal(t, 0, m.Len())
	assert.Equal(t, int64(-1), m.LatestOffset())
	assert.Equal(t, int64(-1), m.Get([]byte("a")))
}

func TestOffsetMapFillsToLoadFactor(t *testing.T) {
	m := NewOffsetMap(24 * 100)
	for i := 0; i < 90; i++ {
		require.False(t, m.Full())
		require.True(t, m.Put(fmt.Appendf(nil, "k%d", i), int64(i)))
	}
	require.True(t, m.Full())
	assert.False(t, m.Put([]byte("new"), 100), "a new key is refused when full")
	assert.True(t, m.Put([]byte("k3"), 101), "an existing key is updated when full")
	assert.Equal(t, int64(101), m.Get([]byte("k3")))
	for i := 0; i < 90; i++ {
		if i == 3 {
			continue
		}
		assert.Equal(t, int64(i), m.Get(fmt.Appendf(nil, "k%d", i)))
	}
	assert.Equal(t, int64(-1), m.Get([]byte("new")))
	assert.Equal(t, int64(24*100), m.MemoryBytes())
}

func TestOffsetMapTiny(t *testing.T) {
	m := NewOffsetMap(0)
	require.Equal(t, 2, m.Slots())
	require.True(t, m.Put([]byte("x"), 1))
	require.True(t, m.Full())
	require.False(t, m.Put([]byte("y"), 2))
	assert.Equal(t, int64(-1), m.Get([]byte("y")), "lookup of an absent key ends")
}

func TestOffsetMapResetFor(t *testing.T) {
	m := NewOffsetMap(24 * 1000)
	m.ResetFor(90)
	assert.Equal(t, 102, m.Slots(), "90 keys at load factor 0.9 (+2)")
	for i := 0; i < 90; i++ {
		require.True(t, m.Put(fmt.Appendf(nil, "k%d", i), int64(i)))
	}
	assert.Equal(t, 90, m.Len())
	m.ResetFor(1 << 40)
	assert.Equal(t, 1000, m.Slots(), "never more than the memory")
	assert.Equal(t, 900, m.MaxEntries())
	assert.Equal(t, int64(-1), m.Get([]byte("k1")), "reset clears every slot")
	m.ResetFor(0)
	assert.Equal(t, 2, m.Slots())
	assert.True(t, m.Put([]byte("x"), 1))
	assert.False(t, m.Put([]byte("y"), 2))
	assert.Equal(t, int64(24*1000), m.MemoryBytes())
}

func TestOffsetMapWraparound(t *testing.T) {
	// Many keys in few slots force probe sequences across the end of the table.
	m := NewOffsetMap(24 * 11)
	for i := 0; i < m.MaxEntries(); i++ {
		require.True(t, m.Put(fmt.Appendf(nil, "w%d", i), int64(i*10)))
	}
	for i := 0; i < m.MaxEntries(); i++ {
		assert.Equal(t, int64(i*10), m.Get(fmt.Appendf(nil, "w%d", i)))
	}
}

func BenchmarkOffsetMapPut(b *testing.B) {
	m := NewOffsetMap(24 << 20)
	keys := make([][]byte, m.MaxEntries())
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key-%09d", i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%len(keys) == 0 {
			m.Reset()
		}
		m.Put(keys[i%len(keys)], int64(i))
	}
}

func BenchmarkOffsetMapGet(b *testing.B) {
	m := NewOffsetMap(24 << 20)
	keys := make([][]byte, m.MaxEntries())
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key-%09d", i)
		m.Put(keys[i], int64(i))
	}
	miss := fmt.Appendf(nil, "miss-%09d", 0)
	b.Run("hit", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			m.Get(keys[i%len(keys)])
		}
	})
	b.Run("miss", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			miss[5] = byte(i)
			miss[6] = byte(i >> 8)
			miss[7] = byte(i >> 16)
			m.Get(miss)
		}
	})
}
