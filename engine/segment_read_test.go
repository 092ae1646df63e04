package engine

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/index"
	"github.com/topicfs/topicfs/engine/vfs"
)

// TestSequentialReadLoadsNoIndexes: reading sealed segments from their start
// (what `cat records` does) and asking for their aborted transactions must
// not load their offset and time indexes: memory would then follow the
// partition's size. A segment with a .txnindex still answers from it.
func TestSequentialReadLoadsNoIndexes(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig()
	p := openTest(t, fs, "/d/t-0", cfg)
	for i := 0; i < 200; i++ {
		_, _, err := p.Append(makeRecs(i*100, 100, int64(i)))
		require.NoError(t, err)
	}
	require.NoError(t, p.Close())

	p = openTest(t, fs, "/d/t-0", cfg, func(o *PartitionOptions) {
		o.CleanShutdown = true
		o.RecoveryPoint = 20000
	})
	defer p.Close()
	snap := p.Snapshot()
	defer snap.Release()
	require.Greater(t, len(snap.Segments), 3, "the test needs several sealed segments")
	n := 0
	for _, s := range snap.Segments[:len(snap.Segments)-1] {
		pos, err := s.FindOffset(s.BaseOffset())
		require.NoError(t, err)
		assert.Zero(t, pos)
		assert.Empty(t, s.AbortedTxns())
		for pos := int64(0); pos < s.Size(); {
			b, err := s.ReadBatch(pos, nil)
			require.NoError(t, err)
			n += int(b.RecordCount)
			pos += int64(b.Size())
		}
		s.mu.RLock()
		loaded := s.mu.loaded
		s.mu.RUnlock()
		assert.False(t, loaded, "segment %d: indexes loaded by a sequential read", s.BaseOffset())
	}
	assert.Greater(t, n, 0)
}

// TestSegmentIndexSizes: IndexSizes is the bytes of the index entries
// (Kafka's sizeInBytes), for loaded and unloaded indexes alike.
func TestSegmentIndexSizes(t *testing.T) {
	cfg := testConfig()
	cfg.IndexIntervalBytes = 1 // an offset index entry per batch
	p := openTest(t, vfs.NewMem(), "/d/t-0", cfg)
	defer p.Close()
	for i := 0; i < 5; i++ {
		_, _, err := p.Append(makeRecs(i, 1, int64(1000+i)))
		require.NoError(t, err)
	}
	require.NoError(t, p.Roll())
	snap := p.Snapshot()
	defer snap.Release()
	seg := snap.Segments[0]
	o, ti, err := seg.IndexSizes()
	require.NoError(t, err)
	var oe, te int
	require.NoError(t, seg.withIndexes(func(x *index.OffsetIndex, y *index.TimeIndex) { oe, te = x.Entries(), y.Entries() }))
	assert.Positive(t, oe)
	assert.Equal(t, int64(oe)*8, o)
	assert.Equal(t, int64(te)*12, ti)
	o, ti, err = snap.Segments[1].IndexSizes()
	require.NoError(t, err)
	assert.Zero(t, o, "the new active segment has no entries")
	assert.Zero(t, ti)
}

// TestFindOffsetReadsEachHeaderOnce: with an index entry per batch,
// finding an offset reads one batch header (the indexed batch holding it);
// with sparser entries, each header of the scan once.
func TestFindOffsetReadsEachHeaderOnce(t *testing.T) {
	for _, interval := range []int64{1, 300} {
		t.Run(fmt.Sprint(interval), func(t *testing.T) { testFindOffsetReads(t, interval) })
	}
}

func testFindOffsetReads(t *testing.T, interval int64) {
	cfg := testConfig()
	cfg.IndexIntervalBytes = interval
	p := openTest(t, vfs.NewMem(), "t-0", cfg)
	defer p.Close()
	fillTest(t, p, 200, 10)
	snap := p.Snapshot()
	defer snap.Release()
	seg := snap.Segments[0]
	starts := make(map[int64]int64) // first offset of each batch → position
	for pos := int64(0); pos < seg.Size(); {
		b, err := seg.ReadBatch(pos, nil)
		require.NoError(t, err)
		starts[b.BaseOffset] = pos
		pos += int64(b.Size())
	}
	before := p.Stats().BytesRead
	_, err := seg.peekHeader(starts[50], seg.Size())
	require.NoError(t, err)
	peek := p.Stats().BytesRead - before // what one header read reads
	require.Positive(t, peek)
	for target := range int64(200) {
		before := p.Stats().BytesRead
		pos, err := seg.FindOffset(target)
		require.NoError(t, err)
		assert.Equal(t, starts[target/10*10], pos, "offset %d", target)
		read := p.Stats().BytesRead - before
		if interval == 1 && target >= 20 { // (the first batch has no entry, the second the first)
			assert.LessOrEqual(t, read, peek, "offset %d: header reads", target)
		} else {
			assert.LessOrEqual(t, read, peek*(interval/100+3), "offset %d: header reads", target)
		}
	}
}
