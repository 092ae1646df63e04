package engine

import (
	"sync"
	"sync/atomic"
	"time"
)

// Snapshot is a consistent view of a partition's segments for a reader. It
// holds a reference on every segment, so their files stay open (and
// readable, even after retention or compaction removed them from the
// partition) until Release. The active segment (the last) keeps growing: read
// it up to its Size().
type Snapshot struct {
	Segments       []*Segment // oldest first; the last is the active segment
	LogStartOffset int64
	LogEndOffset   int64
	// LastStableOffset is where a read_committed reader stops: the first
	// offset of the oldest transaction without a COMMIT or ABORT marker
	// yet, else LogEndOffset. The txn indexes of Segments list every
	// aborted transaction with records below it.
	LastStableOffset int64

	released atomic.Bool
}

// Snapshot returns the current segments, retained. The caller must Release it.
// A closed partition returns a snapshot without segments.
func (p *Partition) Snapshot() *Snapshot {
	for {
		// The log end first: a batch opening a transaction is published
		// after the first unstable offset that holds it back, an ABORT
		// marker's txn index entry before the offset moves on.
		leo := p.logEnd.Load()
		lso := min(p.firstUnstable.Load(), leo)
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
			return &Snapshot{Segments: segs, LogStartOffset: ls, LogEndOffset: leo, LastStableOffset: max(lso, ls)}
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

// Segments describes every segment, oldest first (for the policies).
func (p *Partition) Segments() []SegmentInfo {
	snap := p.Snapshot()
	defer snap.Release()
	out := make([]SegmentInfo, len(snap.Segments))
	for i, s := range snap.Segments {
		out[i] = SegmentInfo{
			BaseOffset:     s.BaseOffset(),
			NextOffset:     s.NextOffset(),
			Size:           s.Size(),
			MaxTimestamp:   s.MaxTimestamp(),
			FirstBatchTime: s.FirstBatchTime(),
			Created:        s.Created(),
			Active:         i == len(snap.Segments)-1,
		}
	}
	return out
}

// SegmentInfo describes one segment for the retention and cleaning policies.
type SegmentInfo struct {
	BaseOffset, NextOffset, Size int64
	MaxTimestamp                 int64 // ms
	FirstBatchTime               int64 // max timestamp of the first batch (for max.compaction.lag.ms), -1 none
	Created                      time.Time
	Active                       bool
}

// Subscribe returns a channel that receives a value (without blocking the
// writer; the channel has room for one) after each append, and a cancel
// function that stops the notifications.
func (p *Partition) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	p.subMu.Lock()
	old := *p.subs.Load()
	l := make([]chan struct{}, len(old), len(old)+1)
	copy(l, old)
	l = append(l, ch)
	p.subs.Store(&l)
	p.subMu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			p.subMu.Lock()
			defer p.subMu.Unlock()
			old := *p.subs.Load()
			l := make([]chan struct{}, 0, len(old))
			for _, c := range old {
				if c != ch {
					l = append(l, c)
				}
			}
			p.subs.Store(&l)
		})
	}
}

func (p *Partition) notify() {
	for _, ch := range *p.subs.Load() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// OffsetForTime returns the first offset whose record timestamp is >= ts,
// or LogEndOffset if there is none.
func (p *Partition) OffsetForTime(ts int64) (int64, error) {
	snap := p.Snapshot()
	defer snap.Release()
	for _, s := range snap.Segments {
		if s.Size() == 0 || s.MaxTimestamp() < ts {
			continue
		}
		off, ok, err := s.FindTimestamp(ts)
		if err != nil {
			return 0, err
		}
		if ok {
			return max(off, snap.LogStartOffset), nil
		}
	}
	return snap.LogEndOffset, nil
}
