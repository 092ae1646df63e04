package fusefs

import (
	"context"
	"fmt"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/engine"
)

// newHeld retains s for a view that shows it from offset from (-1: whole).
func newHeld(s backend.Segment, format viewFormat, from int64) heldSeg {
	s.Retain()
	return heldSeg{held: s, key: keyOf(s, format), from: from, skip: -1}
}

// keyOf is the index key of s in format. A segment that reads an engine
// segment cut short (a cluster copy's, handed out anew by each snapshot as
// the copy grows) is indexed as that engine segment: the bytes below any
// of its cuts are the same, so a view taking in the growth extends one
// index instead of measuring the segment again from its start.
func keyOf(s backend.Segment, format viewFormat) segKey {
	if sb, ok := s.(engine.SegmentBacked); ok {
		if es := sb.EngineSegment(); es != nil {
			return segKey{seg: es, format: format}
		}
	}
	return segKey{seg: s, format: format}
}

// streamFrom takes the snapshot a view starts in from offset from: from a
// partition that fetches what it lacks (backend.Streamer), as soon as the
// first records are there, the rest following through the stream; else
// whole.
func streamFrom(p backend.Partition, from int64) snapshotFunc {
	sp, ok := p.(backend.Streamer)
	if !ok {
		return snapshotFrom(p, from)
	}
	return func(ctx context.Context) (*backend.Snapshot, backend.Stream, error) {
		return sp.SnapshotStream(ctx, from)
	}
}

// streamError is a stream that failed before every record of the view's
// range arrived: a reader must see the failure, never a view that ends
// early (keepsHeld does not apply).
type streamError struct{ err error }

func (e *streamError) Error() string {
	return fmt.Sprintf("fetching the view's records: %v", e.err)
}

func (e *streamError) Unwrap() error { return e.err }

// streaming returns the view's stream while records of its range are
// still arriving, else nil.
func (st *viewState) streaming() backend.Stream {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.mu.stream
}

// streamStep waits for records past the view's end from s and takes them
// in (refresh while streaming). It waits without holding st.mu: readers
// of what the view holds go on meanwhile.
func (st *viewState) streamStep(ctx context.Context, s backend.Stream) (oldSize, newSize int64, err error) {
	st.mu.Lock()
	past := st.mu.end
	st.mu.Unlock()
	snap, last, err := s.Next(ctx, past)
	st.mu.Lock()
	defer st.mu.Unlock()
	oldSize = st.mu.size
	ended := st.mu.stream != s // released, or another step saw the end
	if err != nil {
		serr := &streamError{err}
		if !ended && ctx.Err() == nil {
			// Every later read and stat of this state fails the same way:
			// the records of its range never all arrived.
			st.mu.stream, st.mu.failed = nil, serr
			go s.Close()
		}
		return oldSize, oldSize, serr
	}
	defer snap.Release()
	if last && !ended {
		st.mu.stream = nil
		go s.Close()
	}
	if st.mu.released {
		return oldSize, oldSize, nil
	}
	err = st.takeInLocked(ctx, snap)
	return oldSize, st.mu.size, err
}
