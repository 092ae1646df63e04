package policies

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOffsetMapPutGet(t *testing.T) {
	m := newMap(t, OffsetMapSlotSize*1000)
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
	m := newMap(t, OffsetMapSlotSize*100)
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
	assert.Equal(t, int64((OffsetMapSlotSize+1)*100), m.MemoryBytes(), "slots and their tags")
}

func TestOffsetMapTiny(t *testing.T) {
	m := newMap(t, 0)
	require.Equal(t, 2, m.Slots())
	require.True(t, m.Put([]byte("x"), 1))
	require.True(t, m.Full())
	require.False(t, m.Put([]byte("y"), 2))
	assert.Equal(t, int64(-1), m.Get([]byte("y")), "lookup of an absent key ends")
}

func TestOffsetMapResetFor(t *testing.T) {
	m := newMap(t, OffsetMapSlotSize*1000)
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
	assert.Equal(t, int64((OffsetMapSlotSize+1)*1000), m.MemoryBytes())
}

func TestOffsetMapWraparound(t *testing.T) {
	// Many keys in few slots force probe sequences across the end of the table.
	m := newMap(t, OffsetMapSlotSize*11)
	for i := 0; i < m.MaxEntries(); i++ {
		require.True(t, m.Put(fmt.Appendf(nil, "w%d", i), int64(i*10)))
	}
	for i := 0; i < m.MaxEntries(); i++ {
		assert.Equal(t, int64(i*10), m.Get(fmt.Appendf(nil, "w%d", i)))
	}
}

// TestOffsetMapKafkaSizing: as Kafka's SkimpyOffsetMap, the map has one
// slot per 24 bytes of the memory given (16-byte hash, 8-byte offset), and
// its probe tags take one byte per slot on top.
func TestOffsetMapKafkaSizing(t *testing.T) {
	for _, memory := range []int64{0, 1, 24, 25, 47, 48, 49, 50, 51, 1000, 1 << 20, 128 << 20} {
		m := newMap(t, memory)
		assert.Equal(t, max(memory/24, 2), int64(m.Slots()), "memory %d", memory)
		assert.Equal(t, int64(m.Slots())*25, m.MemoryBytes(), "slots and tags counted")
		assert.LessOrEqual(t, m.MemoryBytes(), max(memory, 48)+max(memory, 48)/24, "memory %d", memory)
		m.Release()
	}
}

// TestOffsetMapKeysMatchKafka: one cleaning maps as many keys as a
// broker's with the same log.cleaner.dedupe.buffer.size, threads and
// log.cleaner.io.buffer.load.factor: (buffer / threads / 24) slots ×
// the load factor (Kafka's maxDesiredMapSize).
func TestOffsetMapKeysMatchKafka(t *testing.T) {
	for _, tc := range []struct {
		buffer  int64
		threads int64
		load    float64
		want    int
	}{
		{134217728, 1, 0.9, 5033164}, // 5592405 slots
		{134217728, 2, 0.9, 2516581}, // 2796202 slots
		{134217728, 1, 0.5, 2796202},
		{1 << 20, 1, 0.9, 39321}, // 43690 slots
		{1 << 20, 1, 1, 43689},   // never the last empty slot
	} {
		m, err := NewOffsetMap(tc.buffer/tc.threads, tc.load)
		require.NoError(t, err)
		assert.Equal(t, tc.want, m.Capacity(), "%+v", tc)
		m.ResetFor(-1)
		assert.Equal(t, tc.want, m.MaxEntries(), "%+v", tc)
		m.Release()
	}
}

// TestOffsetMapLoadFactor: the map is Full at its load factor's share of
// the slots, and takes every key up to it.
func TestOffsetMapLoadFactor(t *testing.T) {
	m, err := NewOffsetMap(OffsetMapSlotSize*100, 0.5)
	require.NoError(t, err)
	defer m.Release()
	assert.Equal(t, 0.5, m.LoadFactor())
	for i := 0; i < 50; i++ {
		require.False(t, m.Full())
		require.True(t, m.Put(fmt.Appendf(nil, "k%d", i), int64(i)))
	}
	assert.True(t, m.Full())
	assert.False(t, m.Put([]byte("new"), 100))
	m.ResetFor(40)
	assert.GreaterOrEqual(t, m.MaxEntries(), 40, "a small range still fits")
}

// TestOffsetMapMatchesGoMap puts and looks up many random keys in a nearly
// full map (long probe runs, tag collisions) and checks each answer, hits
// and misses, against a Go map, across resets.
func TestOffsetMapMatchesGoMap(t *testing.T) {
	m := newMap(t, OffsetMapSlotSize*5000)
	defer m.Release()
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 3; round++ {
		m.ResetFor(int64(4000 - round*1000))
		model := map[uint64]int64{}
		key := make([]byte, 8)
		k := func(v uint64) []byte {
			for i := range key {
				key[i] = byte(v >> (8 * i))
			}
			return key
		}
		for i := 0; !m.Full(); i++ {
			v := rng.Uint64N(uint64(m.MaxEntries()) * 2)
			require.True(t, m.Put(k(v), int64(i)))
			model[v] = int64(i)
		}
		require.Equal(t, len(model), m.Len())
		require.False(t, m.Put(k(1<<63), 1), "new key refused when full")
		for v := uint64(0); v < uint64(m.MaxEntries())*3; v++ {
			want, ok := model[v]
			if !ok {
				want = -1
			}
			require.Equal(t, want, m.Get(k(v)), "round %d key %d", round, v)
		}
	}
}

// TestOffsetMapOffHeap checks that the slots do not live in the Go heap
// (so they do not raise the GC goal) and that Release frees them.
func TestOffsetMapOffHeap(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m := newMap(t, 64<<20)
	for i := 0; i < 1000; i++ {
		require.True(t, m.Put(fmt.Appendf(nil, "k%d", i), int64(i)))
	}
	runtime.ReadMemStats(&after)
	require.NotNil(t, m.mem, "mmap available on this platform")
	assert.Less(t, int64(after.HeapAlloc)-int64(before.HeapAlloc), int64(8<<20), "slots off the heap")
	assert.Equal(t, int64(999), m.Get([]byte("k999")))
	m.Release()
	assert.Nil(t, m.mem)
	assert.Equal(t, 0, m.Slots())
}

func BenchmarkOffsetMapPut(b *testing.B) {
	m := newMap(b, OffsetMapSlotSize<<20)
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
	m := newMap(b, OffsetMapSlotSize<<20)
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

// newMap is NewOffsetMap for a size the test knows to be possible.
func newMap(t testing.TB, memory int64) *OffsetMap {
	t.Helper()
	m, err := NewOffsetMap(memory, LoadFactor)
	require.NoError(t, err)
	return m
}

// TestOffsetMapRefusesImpossibleSize: a size past Kafka's per-thread limit,
// up to int64's largest (once a makeslice panic), is an error, not a crash;
// the limit itself is only reserved, not touched.
func TestOffsetMapRefusesImpossibleSize(t *testing.T) {
	for _, memory := range []int64{MaxOffsetMapBytes + 1, 64 << 30, math.MaxInt64} {
		m, err := NewOffsetMap(memory, 0)
		assert.Error(t, err, "memory %d", memory)
		assert.Nil(t, m)
		assert.Contains(t, err.Error(), "log.cleaner.dedupe.buffer.size")
	}
	m, err := NewOffsetMap(MaxOffsetMapBytes, 0)
	require.NoError(t, err)
	assert.LessOrEqual(t, m.MemoryBytes(), int64(MaxOffsetMapBytes)/24*25)
	m.Release()
}
