package engine

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// readSegment reads every batch of s through a SegmentReader, as views do;
// it returns the batches' positions and the first error.
func readSegment(s *Segment) ([]int64, error) {
	rd := NewSegmentReader(SegmentReaderOptions{MinChunk: 512, MaxChunk: 4096})
	defer rd.Free()
	var out []int64
	for pos, size := int64(0), s.Size(); pos < size; {
		b, err := rd.Batch(s, pos, size)
		if err != nil {
			return out, err
		}
		out = append(out, pos)
		pos += int64(b.Size())
	}
	return out, nil
}

// TestVerifiedSpan: the bytes AppendAsFollower writes (it verified every
// batch first) are marked in their segment, across rolls; bytes appended
// otherwise are not, and are still checked when read: a damaged batch there
// reads as corruption. A segment opened again has no span: its batches
// are checked when read.
func TestVerifiedSpan(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1000
	mem := vfs.NewMem()
	p := openTest(t, mem, "/d/t-0", cfg)
	for base := int64(0); base < 200; base += 10 {
		_, _, err := p.AppendAsFollower(plainBatch(t, base, 10))
		require.NoError(t, err)
	}
	segs := p.Segments()
	require.Greater(t, len(segs), 2, "several rolls")
	snap := p.Snapshot()
	for _, s := range snap.Segments {
		from, to := s.VerifiedBytes()
		assert.Equal(t, [2]int64{0, s.Size()}, [2]int64{from, to}, "segment %d", s.BaseOffset())
	}
	snap.Release()

	// A leader append after them is not marked; a follower append after
	// that starts a span of its own.
	active := func() *Segment { s := p.Snapshot(); defer s.Release(); return s.Segments[len(s.Segments)-1] }
	before := active().Size()
	_, _, err := p.Append([]record.Record{{Value: []byte("leader")}})
	require.NoError(t, err)
	s := active()
	leaderPos, leaderEnd := before, s.Size()
	from, to := s.VerifiedBytes()
	assert.Equal(t, [2]int64{0, before}, [2]int64{from, to}, "the leader's batch is not marked")
	_, _, err = p.AppendAsFollower(plainBatch(t, p.LogEndOffset(), 3))
	require.NoError(t, err)
	from, to = s.VerifiedBytes()
	assert.Equal(t, [2]int64{leaderEnd, s.Size()}, [2]int64{from, to})

	// Damage the leader's batch under the segment: reading it fails.
	f, err := mem.OpenFile(s.LogPath(), os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{0xff}, leaderEnd-1)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	got, err := readSegment(s)
	assert.ErrorIs(t, err, ErrCorrupt)
	require.NotEmpty(t, got)
	last := mustBatchAt(t, s, got[len(got)-1])
	assert.Equal(t, leaderPos, got[len(got)-1]+int64(last.Size()), "every batch before it read")
	require.NoError(t, p.Close())

	q := openTest(t, mem, "/d/t-0", cfg)
	defer q.Close()
	qs := q.Snapshot()
	defer qs.Release()
	for _, s := range qs.Segments {
		from, to := s.VerifiedBytes()
		assert.Equal(t, [2]int64{0, 0}, [2]int64{from, to}, "segment %d reopened", s.BaseOffset())
	}
}

func mustBatchAt(t *testing.T, s *Segment, pos int64) record.Batch {
	t.Helper()
	b, err := s.ReadBatch(pos, nil)
	require.NoError(t, err)
	return b
}
