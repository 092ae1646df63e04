package engine

import (
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/index"
	"github.com/topicfs/topicfs/engine/vfs"
)

// lruLogDir opens a LogDir on the real file system (indexes are mapped)
// with log.index.mapped.max.segments=bound and a topic of parts partitions
// of sealed sealed segments each, one index entry per batch.
func lruLogDir(t *testing.T, bound, parts, sealed int) (*LogDir, []*Partition) {
	t.Helper()
	opts := ldOpts()
	opts.Defaults = DefaultConfig()
	opts.Defaults.IndexMappedMaxSegments = int64(bound)
	opts.Defaults.SegmentBytes = 1024
	opts.Defaults.IndexIntervalBytes = 0
	opts.Defaults.FileDeleteDelayMs = 0
	opts.CheckpointInterval = -1
	d, err := OpenLogDir(vfs.OS, t.TempDir(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	topic, err := d.CreateTopic("t", parts)
	require.NoError(t, err)
	ps := topic.Partitions()
	for i, p := range ps {
		for n := 0; len(p.list()) <= sealed; n++ {
			_, _, err := p.Append(makeRecs(i*100000+n, 1, 1_000_000+int64(n)))
			require.NoError(t, err)
		}
	}
	return d, ps
}

// sealedOf returns the sealed segments of ps.
func sealedOf(ps []*Partition) []*Segment {
	var out []*Segment
	for _, p := range ps {
		l := p.list()
		out = append(out, l[:len(l)-1]...)
	}
	return out
}

// lookupAnswer is what FindOffset and FindTimestamp answer for one target.
type lookupAnswer struct {
	pos, tsOffset int64
	tsOK          bool
}

func lookup(t testing.TB, s *Segment, target int64) lookupAnswer {
	pos, err := s.FindOffset(target)
	require.NoError(t, err)
	off, ok, err := s.FindTimestamp(1_000_000 + target - s.BaseOffset())
	require.NoError(t, err)
	return lookupAnswer{pos, off, ok}
}

// answers looks up every offset of every segment.
func answers(t *testing.T, segs []*Segment) map[*Segment][]lookupAnswer {
	out := map[*Segment][]lookupAnswer{}
	for _, s := range segs {
		for o := s.BaseOffset(); o < s.NextOffset(); o++ {
			out[s] = append(out[s], lookup(t, s, o))
		}
	}
	return out
}

func loadedCount(segs []*Segment) int {
	n := 0
	for _, s := range segs {
		s.mu.RLock()
		if s.mu.loaded {
			n++
		}
		s.mu.RUnlock()
	}
	return n
}

// TestIndexBoundIsMountWide: lookups in every sealed segment of several
// partitions keep the open indexes (and the mapped files) within one bound
// for the whole data directory, and lookups after an eviction remap and
// answer as before.
func TestIndexBoundIsMountWide(t *testing.T) {
	const bound, parts = 6, 4
	files0, _ := index.Mapped()
	d, ps := lruLogDir(t, bound, parts, 5)
	segs := sealedOf(ps)
	require.Len(t, segs, parts*5)
	first := map[*Segment][]lookupAnswer{}
	for _, s := range segs {
		first[s] = answers(t, []*Segment{s})[s]
		st := d.IndexStats()
		assert.LessOrEqual(t, st.Segments, bound)
		assert.LessOrEqual(t, loadedCount(segs), bound)
		// Two files per sealed segment kept, two per partition's active one.
		assert.LessOrEqual(t, st.MappedFiles-files0, int64(2*bound+2*parts))
	}
	st := d.IndexStats()
	assert.Equal(t, bound, st.Segments)
	assert.Equal(t, bound, st.Max)
	assert.Positive(t, st.Evictions)
	mapped := 0
	for _, s := range segs {
		s.mu.RLock()
		if s.mu.loaded && s.mu.oidx != nil && s.mu.oidx.Mapped() && s.mu.tidx.Mapped() {
			mapped++
		}
		s.mu.RUnlock()
	}
	assert.Equal(t, bound, mapped, "the sealed indexes kept are mappings")
	assert.Equal(t, first, answers(t, segs), "the same answers after remapping")
	assert.LessOrEqual(t, loadedCount(segs), bound)
}

// TestIndexLRUKeepsTheRecentlyUsed: a segment looked up again and again
// stays while others come and go.
func TestIndexLRUKeepsTheRecentlyUsed(t *testing.T) {
	d, ps := lruLogDir(t, 3, 1, 8)
	segs := sealedOf(ps)
	hot := segs[0]
	for _, s := range segs[1:] {
		lookup(t, hot, hot.BaseOffset()+1)
		lookup(t, s, s.BaseOffset()+1)
	}
	hot.mu.RLock()
	assert.True(t, hot.mu.loaded)
	hot.mu.RUnlock()
	assert.Equal(t, 3, d.IndexStats().Segments)
}

// TestIndexLookupsWhileEvicting: concurrent lookups over more segments
// than the bound (so every few lookups evicts an index another goroutine
// may be reading) all answer as a lone reader does. Run with -race.
func TestIndexLookupsWhileEvicting(t *testing.T) {
	d, ps := lruLogDir(t, 2, 2, 5)
	segs := sealedOf(ps)
	want := answers(t, segs)
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			for range 300 {
				s := segs[rng.IntN(len(segs))]
				i := rng.IntN(len(want[s]))
				if got := lookup(t, s, s.BaseOffset()+int64(i)); got != want[s][i] {
					t.Errorf("segment %d offset %d: %+v, want %+v", s.BaseOffset(), s.BaseOffset()+int64(i), got, want[s][i])
					return
				}
			}
		}()
	}
	wg.Wait()
	assert.LessOrEqual(t, d.IndexStats().Segments, 2)
	assert.Positive(t, d.IndexStats().Evictions)
}

// TestIndexMappedSegmentDeleted: retention deletes segments whose indexes
// are mapped while a snapshot holds them; the snapshot's lookups still
// answer (after the files are unlinked too), and releasing it unmaps them
// and leaves the bound's count.
func TestIndexMappedSegmentDeleted(t *testing.T) {
	d, ps := lruLogDir(t, 100, 1, 4)
	p := ps[0]
	segs := sealedOf(ps)
	want := answers(t, segs)
	require.Equal(t, 4, d.IndexStats().Segments)
	files0, _ := index.Mapped()
	snap := p.Snapshot()
	_, err := p.DeleteOldestSegments(2, "test")
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(segs[0].LogPath(), deletedSuffix))
	require.NoError(t, p.PurgeDeleted(time.Now().Add(time.Hour)))
	_, err = os.Stat(segs[0].LogPath())
	require.ErrorIs(t, err, os.ErrNotExist, "unlinked")
	for _, s := range segs[:2] {
		assert.Equal(t, want[s], answers(t, []*Segment{s})[s], "segment %d through the snapshot", s.BaseOffset())
	}
	snap.Release()
	assert.Equal(t, 2, d.IndexStats().Segments)
	files, _ := index.Mapped()
	assert.Equal(t, files0-4, files, "the deleted segments' mappings are gone")
}

// TestSealedIndexOddLengthOnDisk: a sealed .index whose length is not a
// multiple of 8 fails its sanity check when first used, is rebuilt on
// disk, and then mapped; lookups answer as with the good file.
func TestSealedIndexOddLengthOnDisk(t *testing.T) {
	_, ps := lruLogDir(t, 100, 1, 3)
	segs := sealedOf(ps)
	s := segs[1]
	want := answers(t, []*Segment{s})[s]
	s.evictIndexes()
	path := s.mu.files.index
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte{1, 2, 3})
	require.NoError(t, err)
	require.NoError(t, f.Close())
	assert.Equal(t, want, answers(t, []*Segment{s})[s])
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Zero(t, st.Size()%index.OffsetEntrySize, "rebuilt")
	s.mu.RLock()
	assert.True(t, s.mu.oidx.Mapped())
	s.mu.RUnlock()
}

// TestSealedIndexCutShortWhileMapped: a sealed .index cut short behind
// topicfs's back while mapped (read-write as rolled in this process, or
// read-only as opened later) does not crash a lookup: it answers right (by
// scanning) and the indexes are rebuilt.
func TestSealedIndexCutShortWhileMapped(t *testing.T) {
	for _, reopen := range []bool{false, true} {
		_, ps := lruLogDir(t, 100, 1, 3)
		s := sealedOf(ps)[1]
		want := answers(t, []*Segment{s})[s]
		if reopen {
			s.evictIndexes()
			lookup(t, s, s.BaseOffset()+1)
		}
		s.mu.RLock()
		path := s.mu.files.index
		require.True(t, s.mu.oidx.Mapped())
		s.mu.RUnlock()
		st, err := os.Stat(path)
		require.NoError(t, err)
		require.Positive(t, st.Size())
		require.NoError(t, os.Truncate(path, 0))
		assert.Equal(t, want, answers(t, []*Segment{s})[s], "reopened read-only: %v", reopen)
		s.mu.RLock()
		assert.False(t, s.faultedLocked())
		s.mu.RUnlock()
		after, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, st.Size(), after.Size(), "rebuilt")
	}
}
