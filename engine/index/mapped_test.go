package index

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/vfs"
)

// openBoth opens raw as a read-only offset index and time index on the
// real file system (mapped) and on a MemFS (heap).
func openBothOffset(t *testing.T, raw []byte, base int64) (mapped, heap *OffsetIndex) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "0.index")
	require.NoError(t, os.WriteFile(p, raw, 0o644))
	mapped, err := OpenOffsetIndex(vfs.OS, p, base, 1<<16, false)
	require.NoError(t, err)
	t.Cleanup(func() { _ = mapped.Close() })
	mem := vfs.NewMem()
	writeRaw(t, mem, "/0.index", raw)
	heap, err = OpenOffsetIndex(mem, "/0.index", base, 1<<16, false)
	require.NoError(t, err)
	return mapped, heap
}

func openBothTime(t *testing.T, raw []byte, base int64) (mapped, heap *TimeIndex) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "0.timeindex")
	require.NoError(t, os.WriteFile(p, raw, 0o644))
	mapped, err := OpenTimeIndex(vfs.OS, p, base, 1<<16, false)
	require.NoError(t, err)
	t.Cleanup(func() { _ = mapped.Close() })
	mem := vfs.NewMem()
	writeRaw(t, mem, "/0.timeindex", raw)
	heap, err = OpenTimeIndex(mem, "/0.timeindex", base, 1<<16, false)
	require.NoError(t, err)
	return mapped, heap
}

// TestReadOnlyIndexIsMapped: a read-only index on the real file system is a
// mapping (counted by Mapped until closed), on a MemFS a heap copy; both
// answer alike.
func TestReadOnlyIndexIsMapped(t *testing.T) {
	files0, bytes0 := Mapped()
	o, oh := openBothOffset(t, offsetEntries(1, 10, 2, 20, 7, 90), 100)
	tx, th := openBothTime(t, timeEntries(1000, 1, 2000, 2, 3000, 7), 100)
	assert.True(t, o.Mapped())
	assert.True(t, tx.Mapped())
	assert.False(t, oh.Mapped())
	assert.False(t, th.Mapped())
	files, bytes := Mapped()
	assert.Equal(t, files0+2, files)
	assert.Equal(t, bytes0+24+36, bytes)
	for target := int64(95); target < 110; target++ {
		mo, mp := o.Lookup(target)
		ho, hp := oh.Lookup(target)
		assert.Equal(t, [2]int64{ho, hp}, [2]int64{mo, mp}, "offset lookup %d", target)
	}
	for ts := int64(500); ts < 3500; ts += 250 {
		mts, mo := tx.Lookup(ts)
		hts, ho := th.Lookup(ts)
		assert.Equal(t, [2]int64{hts, ho}, [2]int64{mts, mo}, "time lookup %d", ts)
	}
	require.NoError(t, o.Close())
	require.NoError(t, tx.Close())
	files, bytes = Mapped()
	assert.Equal(t, files0, files)
	assert.Equal(t, bytes0, bytes)
}

// TestMappedOpenMatchesHeap: a corrupt or truncated index file reads the
// same mapped as in the heap: the same valid entries and the same sanity
// check verdict.
func TestMappedOpenMatchesHeap(t *testing.T) {
	offsets := map[string][]byte{
		"empty":             nil,
		"shorter than one":  {1, 2, 3},
		"good":              offsetEntries(1, 10, 2, 20),
		"odd length":        append(offsetEntries(1, 10), 1, 2, 3),
		"below base":        offsetEntries(2, 5, -3, 10),
		"out of order":      offsetEntries(5, 10, 3, 20, 9, 30),
		"preallocated tail": append(offsetEntries(1, 10, 4, 40), make([]byte, 4096)...),
	}
	for name, raw := range offsets {
		t.Run("offset/"+name, func(t *testing.T) {
			m, h := openBothOffset(t, raw, 50)
			assert.Equal(t, h.Entries(), m.Entries())
			for i := range h.Entries() {
				mo, mp := m.Entry(i)
				ho, hp := h.Entry(i)
				assert.Equal(t, [2]int64{ho, hp}, [2]int64{mo, mp})
			}
			he, me := h.SanityCheck(), m.SanityCheck()
			assert.Equal(t, he != nil, me != nil, "heap: %v; mapped: %v", he, me)
			if he != nil {
				assert.ErrorIs(t, me, ErrCorruptIndex)
			}
		})
	}
	times := map[string][]byte{
		"good":         timeEntries(10, 1, 20, 2),
		"odd length":   append(timeEntries(10, 1), 1, 2, 3, 4, 5),
		"out of order": timeEntries(10, 1, 5, 2, 30, 3),
		"offset back":  timeEntries(10, 4, 20, 2),
	}
	for name, raw := range times {
		t.Run("time/"+name, func(t *testing.T) {
			m, h := openBothTime(t, raw, 50)
			assert.Equal(t, h.Entries(), m.Entries())
			for i := range h.Entries() {
				mt, mo := m.Entry(i)
				ht, ho := h.Entry(i)
				assert.Equal(t, [2]int64{ht, ho}, [2]int64{mt, mo})
			}
			he, me := h.SanityCheck(), m.SanityCheck()
			assert.Equal(t, he != nil, me != nil, "heap: %v; mapped: %v", he, me)
		})
	}
}

// TestMappedIndexCutShort: a sealed index file cut short under its mapping
// (by something other than topicfs) does not kill the process: reads answer
// as for an empty index and the index reports Faulted.
func TestMappedIndexCutShort(t *testing.T) {
	var raw []byte
	for i := int32(1); i <= 2000; i++ { // several pages
		raw = append(raw, offsetEntries(i*3, i*100)...)
	}
	o, _ := openBothOffset(t, raw, 0)
	var traw []byte
	for i := int64(1); i <= 2000; i++ {
		traw = append(traw, timeEntries(i*10, i*3)...)
	}
	tx, _ := openBothTime(t, traw, 0)
	off, pos := o.Lookup(3000)
	require.Equal(t, [2]int64{3000, 100000}, [2]int64{off, pos})
	require.False(t, o.Faulted())

	require.NoError(t, os.Truncate(o.Path(), 0))
	require.NoError(t, os.Truncate(tx.Path(), 0))
	// Ceiling (the by-offset open's lookup) is guarded as Lookup is.
	_, _, ok := o.Ceiling(3001)
	assert.False(t, ok, "no ceiling in a faulted index")
	assert.True(t, o.Faulted())
	off, pos = o.Lookup(3000)
	assert.Equal(t, [2]int64{0, 0}, [2]int64{off, pos}, "the empty index's answer")
	assert.True(t, o.Faulted())
	assert.Equal(t, int64(0), o.LastOffset())
	ts, toff := tx.Lookup(5000)
	assert.Equal(t, [2]int64{-1, 0}, [2]int64{ts, toff})
	assert.True(t, tx.Faulted())
	ts, _ = tx.LastEntry()
	assert.Equal(t, int64(-1), ts)
	assert.NoError(t, o.Close())
	assert.NoError(t, tx.Close())
}

// TestHeapIndexNeverFaults: the heap copy of a MemFS index does not mind
// its file being cut.
func TestHeapIndexNeverFaults(t *testing.T) {
	mem := vfs.NewMem()
	writeRaw(t, mem, "/0.index", offsetEntries(1, 10, 2, 20))
	x, err := OpenOffsetIndex(mem, "/0.index", 0, 1<<10, false)
	require.NoError(t, err)
	writeRaw(t, mem, "/0.index", nil)
	off, pos := x.Lookup(2)
	assert.Equal(t, [2]int64{2, 20}, [2]int64{off, pos})
	assert.False(t, x.Faulted())
}
