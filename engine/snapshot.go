package engine

import "sync/atomic"

// Snapshot is a consistent view of a partition's segments for a reader. It
// holds a reference on every segment, so their files stay open (and
// readable, even after retention or compaction removed them from the
// partition) until Release. The active segment (the last) keeps growing: read
// it up to its Size().
type Snapshot struct {
	Segments       []*Segment // oldest first; the last is the active segment
	LogStartOffset int64
	LogEndOffset   int64

	released atomic.Bool
}

// Snapshot returns the current segments, retained. The caller must Release it.
// A closed partition returns a snapshot without segments.
func (p *Partition) Snapshot() *Snapshot {
	for {
		leo := p.logEnd.Load()
		l := p.list()
		ls := p.logStart.Load()
		segs := make([]*Segment, 0, len(l))
		ok := true
		for _, s := range l {
			if !s.tryRetain() {
				ok = false
				break
			}
			segs = append(segs, s)
		}
		if ok {
			return &Snapshot{Segments: segs, LogStartOffset: ls, LogEndOffset: leo}
		}
		// A segment was released between loading the list and retaining it:
		// the list has been replaced already, so load it again.
		for _, s := range segs {
			s.Release()
		}
	}
}

// Release drops the snapshot's segment references. It is idempotent.
func (s *Snapshot) Release() {
	if s == nil || !s.released.CompareAndSwap(false, true) {
		return
	}
	for _, seg := range s.Segments {
		seg.Release()
	}
}

// SegmentFor returns the index in Segments of the segment that holds offset
// (the last segment whose base offset is <= offset), or 0 if offset is below
// every base.
func (s *Snapshot) SegmentFor(offset int64) int {
	lo, hi := 0, len(s.Segments)
	for lo < hi {
		m := (lo + hi) / 2
		if s.Segments[m].BaseOffset() <= offset {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return max(lo-1, 0)
}
