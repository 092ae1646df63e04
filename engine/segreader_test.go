package engine

import (
	"bytes"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// segReaderModes are SegmentReader configurations with small chunks, so
// that batches straddle chunk ends (and their tails are carried over) and
// some are larger than the chunk.
var segReaderModes = []SegmentReaderOptions{
	{MinChunk: 4 << 10},
	{MinChunk: 4 << 10, Prefetch: true},
	{MinChunk: 4 << 10, MaxChunk: 16 << 10, Prefetch: true, Ahead: 2},
	{MinChunk: 4 << 10, MaxChunk: 16 << 10, Prefetch: true, Ahead: 3, Spin: true},
}

// batchStarts returns the position of every batch of seg, read with
// ReadBatch.
func batchStarts(t *testing.T, seg *Segment) []int64 {
	t.Helper()
	var starts []int64
	for pos := int64(0); pos < seg.Size(); {
		b, err := seg.ReadBatch(pos, nil)
		require.NoError(t, err)
		starts = append(starts, pos)
		pos += int64(b.Size())
	}
	return starts
}

// TestSegmentReaderMatchesReadBatch: read in order, from every start and
// at random batch starts (seeks back and forth), the reader returns what
// ReadBatch returns; a position inside a batch or outside [0, limit) is an
// error, never a batch.
func TestSegmentReaderMatchesReadBatch(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	p := openTest(t, vfs.NewMem(), "t-0", cfg)
	defer p.Close()
	for i := range 60 {
		recs := makeRecs(i*10, 1+i%9, int64(i))
		if i%7 == 3 { // some batches larger than the chunks
			recs[0].Value = bytes.Repeat([]byte{'v'}, 9<<10+i*500)
		}
		_, _, err := p.Append(recs)
		require.NoError(t, err)
	}
	snap := p.Snapshot()
	defer snap.Release()
	seg := snap.Segments[0]
	size := seg.Size()
	starts := batchStarts(t, seg)
	isStart := map[int64]bool{}
	for _, s := range starts {
		isStart[s] = true
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, mode := range segReaderModes {
		r := NewSegmentReader(mode)
		check := func(pos int64) {
			t.Helper()
			want, err := seg.ReadBatch(pos, nil)
			require.NoError(t, err)
			got, err := r.Batch(seg, pos, size)
			require.NoError(t, err, "pos %d %+v", pos, mode)
			require.Equal(t, want.Raw, got.Raw, "pos %d %+v", pos, mode)
		}
		for round := range 2 { // the second round after Free: the reader is reusable
			for _, pos := range starts {
				check(pos)
			}
			for range 100 {
				check(starts[rng.IntN(len(starts))])
			}
			for from := len(starts) / 2; from < len(starts); from++ {
				check(starts[from])
			}
			for range 50 {
				pos := rng.Int64N(size)
				if isStart[pos] {
					continue
				}
				_, err := r.Batch(seg, pos, size)
				require.Error(t, err, "pos %d inside a batch (round %d)", pos, round)
			}
			_, err := r.Batch(seg, size, size)
			require.Error(t, err, "at the limit")
			_, err = r.Batch(seg, -3, size)
			require.Error(t, err, "before the start")
			r.Free()
		}
	}
}

// firstSegment returns the first segment of a fresh partition of n
// records in batches of 10 (held until the test ends), and the partition.
func firstSegment(t *testing.T, n int) (*Segment, *Partition) {
	t.Helper()
	p := openTest(t, vfs.NewMem(), "t-0", testConfig())
	t.Cleanup(func() { p.Close() })
	fillTest(t, p, n, 10)
	snap := p.Snapshot()
	t.Cleanup(snap.Release)
	return snap.Segments[0], p
}

// panickySource panics once, in a ReadAt at or after position at.
type panickySource struct {
	*Segment
	at    int64
	fired atomic.Bool
}

func (s *panickySource) ReadAt(p []byte, off int64) (int, error) {
	if off >= s.at && s.fired.CompareAndSwap(false, true) {
		panic("boom")
	}
	return s.Segment.ReadAt(p, off)
}

// TestSegmentReaderPrefetchPanic: a panic in the prefetch goroutine is
// reported once, the reader loads in the caller's goroutine from then on,
// and every batch still comes back.
func TestSegmentReaderPrefetchPanic(t *testing.T) {
	seg, _ := firstSegment(t, 3_000)
	src := &panickySource{Segment: seg, at: 8 << 10} // past the first chunk: the goroutine's
	var reported atomic.Int64
	r := NewSegmentReader(SegmentReaderOptions{MinChunk: 4 << 10, Prefetch: true, OnPanic: func(v any, stack []byte) {
		reported.Add(1)
		assert.Equal(t, "boom", v)
		assert.Contains(t, string(stack), "panickySource")
	}})
	defer r.Free()
	n := 0
	for pos := int64(0); pos < seg.Size(); {
		b, err := r.Batch(src, pos, seg.Size())
		require.NoError(t, err, "pos %d", pos)
		n += int(b.RecordCount)
		pos += int64(b.Size())
	}
	want := 0
	for _, pos := range batchStarts(t, seg) {
		b, err := seg.ReadBatch(pos, nil)
		require.NoError(t, err)
		want += int(b.RecordCount)
	}
	assert.Equal(t, want, n)
	assert.Greater(t, seg.Size(), int64(32<<10), "several chunks past the panic")
	assert.True(t, src.fired.Load())
	assert.Equal(t, int64(1), reported.Load())
	assert.True(t, r.failed.Load(), "no more prefetching")
}

// TestFileBatches: a plain file read through FileBatches gives the
// segment's batches, and record's own errors (unlogged) where it ends.
func TestFileBatches(t *testing.T) {
	seg, p := firstSegment(t, 200)
	size := seg.Size()
	data := make([]byte, size)
	_, err := seg.ReadAt(data, 0)
	require.NoError(t, err)
	src := FileBatches(bytes.NewReader(data), size-5) // the last batch cut short
	r := NewSegmentReader(SegmentReaderOptions{MinChunk: 4 << 10, Prefetch: true})
	defer r.Free()
	var pos int64
	n := 0
	for {
		b, err := r.Batch(src, pos, size-5)
		if err != nil {
			require.ErrorIs(t, err, record.ErrTruncated)
			break
		}
		n += int(b.RecordCount)
		pos += int64(b.Size())
	}
	assert.Equal(t, 190, n)
	assert.Zero(t, p.Stats().Corruptions, "nothing logged or counted")
}

// TestSegmentReaderBigBatchReadOnce: a seek to a batch larger than the
// first load reads its bytes once (what the load read, then the rest),
// and it comes back whole.
func TestSegmentReaderBigBatchReadOnce(t *testing.T) {
	p := openTest(t, vfs.NewMem(), "t-0", testConfig())
	defer p.Close()
	for i := range 3 {
		recs := makeRecs(i*10, 4, int64(i))
		recs[1].Value = bytes.Repeat([]byte{'v'}, 20<<10)
		_, _, err := p.Append(recs)
		require.NoError(t, err)
	}
	snap := p.Snapshot()
	defer snap.Release()
	seg := snap.Segments[0]
	starts := batchStarts(t, seg)
	want, err := seg.ReadBatch(starts[1], nil)
	require.NoError(t, err)
	require.Greater(t, want.Size(), 8<<10)
	r := NewSegmentReader(SegmentReaderOptions{MinChunk: 4 << 10})
	defer r.Free()
	before := p.Stats().BytesRead
	got, err := r.Batch(seg, starts[1], seg.Size())
	require.NoError(t, err)
	assert.Equal(t, want.Raw, got.Raw)
	assert.Equal(t, int64(want.Size()), p.Stats().BytesRead-before, "each byte of the batch read once")
}
