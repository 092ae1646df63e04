package cluster

import (
	"fmt"
	"io"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/index"
	"github.com/topicfs/topicfs/engine/record"
)

// mirrorSegment is a segment of a MirrorPartition as one Snapshot hands it
// out: the engine segment cut at the Snapshot's end, so its bytes never
// change, with the aborted transactions the reader must apply (fixed when
// the Snapshot was taken). Retain and Release also count the reader's hold
// for the cap.
type mirrorSegment struct {
	seg     *engine.Segment
	mp      *MirrorPartition
	size    int64
	next    int64
	aborted []index.AbortedTxn
}

var (
	_ backend.Segment      = (*mirrorSegment)(nil)
	_ engine.SegmentBacked = (*mirrorSegment)(nil)
)

// EngineSegment is the copy's segment s reads: readers of s then skip the
// CRC check of the batches the fill verified before writing them
// (engine.Segment.VerifiedBytes), as they do reading it directly.
func (s *mirrorSegment) EngineSegment() *engine.Segment { return s.seg }

// cut ends the segment before the first batch holding no offset below end
// (a batch holding end and earlier offsets stays whole).
func (s *mirrorSegment) cut(end int64) error {
	pos, err := s.seg.FindOffset(end)
	if err != nil {
		return err
	}
	if pos >= s.size {
		return nil
	}
	b, err := s.seg.ReadBatch(pos, nil)
	if err != nil {
		return err
	}
	if b.BaseOffset < end {
		s.size, s.next = pos+int64(b.Size()), b.NextOffset()
	} else {
		s.size, s.next = pos, end
	}
	return nil
}

func (s *mirrorSegment) BaseOffset() int64 { return s.seg.BaseOffset() }
func (s *mirrorSegment) NextOffset() int64 { return s.next }
func (s *mirrorSegment) Size() int64       { return s.size }
func (s *mirrorSegment) LogPath() string   { return s.seg.LogPath() }

func (s *mirrorSegment) AbortedTxns() []index.AbortedTxn { return s.aborted }

// ReadBatch reads and verifies the batch at pos; io.EOF at the cut.
func (s *mirrorSegment) ReadBatch(pos int64, buf []byte) (record.Batch, error) {
	if pos >= s.size {
		return record.Batch{}, io.EOF
	}
	b, err := s.seg.ReadBatch(pos, buf)
	if err == nil && pos+int64(b.Size()) > s.size {
		return record.Batch{}, fmt.Errorf("%w: %s: batch at %d runs past the end of the copy's snapshot %d",
			backend.ErrCorrupt, s.LogPath(), pos, s.size)
	}
	return b, err
}

// ReadAt reads bytes below the cut, as io.ReaderAt.
func (s *mirrorSegment) ReadAt(p []byte, off int64) (int, error) {
	if off >= s.size {
		return 0, io.EOF
	}
	short := int64(len(p)) > s.size-off
	if short {
		p = p[:s.size-off]
	}
	n, err := s.seg.ReadAt(p, off)
	if err == nil && short {
		err = io.EOF
	}
	return n, err
}

// FindOffset returns the position of the batch holding target, or the
// cut when the snapshot has none.
func (s *mirrorSegment) FindOffset(target int64) (int64, error) {
	pos, err := s.seg.FindOffset(target)
	return min(pos, s.size), err
}

func (s *mirrorSegment) Retain() {
	s.mp.hold(s.seg, 1)
	s.seg.Retain()
}

func (s *mirrorSegment) Release() {
	s.seg.Release()
	s.mp.hold(s.seg, -1)
}
