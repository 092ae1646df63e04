// A streaming fill: Stream starts filling a partition's copy in the
// background and hands readers the records as they arrive, instead of
// making them wait for the whole range (backend.Streamer). Readers that
// come while a fill runs join it when it covers their range, instead of
// queueing behind it for the copy.

package cluster

import (
	"context"
	"math"
	"sync"

	"github.com/topicfs/topicfs/backend"
)

// mirrorStream is a fill of a MirrorPartition running in the background,
// from from up to end, for its readers (streamReader). Its goroutine
// holds the partition's sem until the fill ends, so the copy has one
// filler at a time as with Snapshot; readers of a range the fill covers
// join it (MirrorPartition.join) rather than wait for sem.
type mirrorStream struct {
	mp     *MirrorPartition
	from   int64
	id     [16]byte // the topic id of the copy when the fill began
	cancel context.CancelFunc

	ask chan struct{} // a reader began waiting (room for one)

	mu     sync.Mutex
	end    int64 // the largest end of the readers: where the fill goes
	users  int   // readers not closed; the last to close stops the fill
	waits  []streamWait
	handed bool // a snapshot was handed out: the copy may not restart
	ending bool // the fill reached end or failed: nobody joins any more
	done   bool
	err    error
	// kept holds the fill's range from its end until the last reader
	// closes: a reader that asks only then (next after done) must find
	// the segments the cap would delete once the fill no longer keeps
	// them (floor).
	kept     *backend.Snapshot
	finished chan struct{} // closed when the fill has ended and released sem
}

// streamWait is a reader waiting for records of [from, end) past past;
// whole: only for all of them (Snapshot).
type streamWait struct {
	from, end, past int64
	whole           bool
	ch              chan streamAnswer // buffered: the filler never blocks on it
}

type streamAnswer struct {
	snap *backend.Snapshot
	last bool
	err  error
}

// streamReader is one reader of a fill: the range [from, end) it asked
// for. It is the backend.Stream a Stream call hands out.
type streamReader struct {
	s         *mirrorStream
	from, end int64
	once      sync.Once
}

var _ backend.Stream = (*streamReader)(nil)

// Stream is Snapshot that returns as soon as the copy holds records from
// from on (or the whole range), with a Snapshot of them; the fill goes on
// in the background up to end, and stream (nil when nothing was left to
// fetch) hands out the rest. The fill runs until it reaches the end of
// every reader's range, fails, or every reader has closed; what it copied
// stays in the copy. A Stream or Snapshot of a range a running fill covers
// joins that fill (its end moves up to the new range's end if need be).
func (mp *MirrorPartition) Stream(ctx context.Context, src Source, from, end int64) (snap *backend.Snapshot, stream backend.Stream, err error) {
	r, snap, err := mp.reader(ctx, src, from, end)
	if r == nil {
		return snap, nil, err
	}
	snap, last, err := r.next(ctx, r.from, false)
	if err != nil || last {
		r.Close()
		return snap, nil, err
	}
	return snap, r, nil
}

// reader returns a reader of [from, end) of a fill: the one running, or
// one it starts; or, when the copy holds the whole range already, a
// Snapshot of it.
func (mp *MirrorPartition) reader(ctx context.Context, src Source, from, end int64) (*streamReader, *backend.Snapshot, error) {
	if r := mp.join(from, end); r != nil {
		return r, nil, nil
	}
	if err := mp.acquire(ctx); err != nil {
		return nil, nil, err
	}
	from, err := mp.beginLocked(ctx, src, from, end)
	if err != nil {
		mp.release()
		return nil, nil, err
	}
	if mp.reached(end, -1) {
		defer mp.release()
		snap, err := mp.finishLocked(from, end)
		return nil, snap, err
	}
	return mp.startFill(ctx, src, from, end), nil, nil
}

// startFill starts a streaming fill of [from, end) by the caller, who
// holds sem and hands it to the fill's goroutine; it returns the caller's
// reader of it.
func (mp *MirrorPartition) startFill(ctx context.Context, src Source, from, end int64) *streamReader {
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &mirrorStream{mp: mp, from: from, id: mp.topicID, end: end, users: 1, cancel: cancel,
		ask: make(chan struct{}, 1), finished: make(chan struct{})}
	mp.filling.Store(s)
	go s.run(fctx, src)
	return &streamReader{s: s, from: from, end: end}
}

// join returns a reader of [from, end) of the fill running now, or nil if
// none runs or it does not cover the range: one that starts before the
// fill (the copy may not hold it) or is ending. backend.FromStart reads
// from where the fill started.
func (mp *MirrorPartition) join(from, end int64) *streamReader {
	s := mp.filling.Load()
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if from == backend.FromStart {
		from = s.from
	}
	if s.ending || s.users == 0 || from < s.from || end < from || !mp.wanted(s.id) {
		return nil
	}
	s.users++
	s.end = max(s.end, end)
	return &streamReader{s: s, from: from, end: end}
}

// finishLocked ends a fill of [from, end) that needs no fetching (any
// more): it takes the Snapshot, then lets the cap run again.
func (mp *MirrorPartition) finishLocked(from, end int64) (*backend.Snapshot, error) {
	snap, err := mp.snapshotLocked(from, end)
	mp.endFillLocked()
	return snap, err
}

// endFillLocked lets the cap delete segments a fill kept, and runs it.
func (mp *MirrorPartition) endFillLocked() {
	mp.floor = math.MaxInt64
	mp.enforceLocked()
}

// run fills the copy, then answers every reader still waiting with the
// outcome, and lets go of the copy.
func (s *mirrorStream) run(ctx context.Context, src Source) {
	mp := s.mp
	defer close(s.finished)
	defer mp.release()
	err := mp.fillLocked(ctx, src, s)
	s.mu.Lock()
	s.ending, s.done, s.err = true, true, err
	if err == nil {
		s.kept, _ = mp.snapshotLocked(s.from, s.end)
	}
	waits := s.waits
	s.waits = nil
	s.mu.Unlock()
	for _, w := range waits {
		a := streamAnswer{last: true, err: err}
		if err == nil {
			a.snap, a.err = mp.snapshotLocked(w.from, w.end)
		}
		w.ch <- a
	}
	mp.filling.CompareAndSwap(s, nil)
	mp.endFillLocked()
}

// target brings a fill's end (and bound, which a new end resets) up to
// date with the readers that joined, and says whether the fill may stop
// with the copy ending at le (MirrorPartition.reachedAt). A fill that may
// stop takes no more readers, so its end cannot move past what it
// fetched.
func (s *mirrorStream) target(le int64, end, bound *int64) (stop bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.end != *end {
		*end, *bound = s.end, -1
	}
	if s.mp.reachedAt(le, *end, *bound) {
		s.ending = true
		return true
	}
	return false
}

// progress answers the readers waiting for records the copy now holds,
// each with a Snapshot of its range up to them. The filler calls it,
// holding sem, after each append and when a reader asks while a fetch
// travels.
func (s *mirrorStream) progress() {
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.waits[:0]
	for _, w := range s.waits {
		at := s.mp.shownEnd(w.end)
		if at < w.end && (w.whole || at <= w.past || at <= w.from) {
			kept = append(kept, w)
			continue
		}
		snap, err := s.mp.snapshotLocked(w.from, at)
		s.handed = s.handed || err == nil
		w.ch <- streamAnswer{snap: snap, last: at >= w.end, err: err}
	}
	clear(s.waits[len(kept):])
	s.waits = kept
}

// handedOut reports whether a reader got records of this fill: the copy
// may then no longer start over.
func (s *mirrorStream) handedOut() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handed
}

// shownEnd is where a reader of the copy up to end may read to now: the
// copy's end, but never into a transaction whose marker is not there yet
// (its records could still turn out aborted). The caller holds sem.
func (mp *MirrorPartition) shownEnd(end int64) int64 {
	at := min(mp.p.LogEndOffset(), end)
	for _, first := range mp.p.OpenTransactions() {
		at = min(at, first)
	}
	return at
}

// Next waits for records past offset past, or the end of the reader's
// range, and returns a Snapshot of the copy from the reader's start up
// to them; last when it reaches the end.
func (r *streamReader) Next(ctx context.Context, past int64) (*backend.Snapshot, bool, error) {
	return r.next(ctx, past, false)
}

// next is Next; whole waits for the whole range.
func (r *streamReader) next(ctx context.Context, past int64, whole bool) (*backend.Snapshot, bool, error) {
	s := r.s
	s.mu.Lock()
	if s.done {
		err := s.err
		s.mu.Unlock()
		if err != nil {
			return nil, true, err
		}
		snap, err := s.mp.snapshotOf(ctx, r.from, r.end)
		return snap, true, err
	}
	w := streamWait{from: r.from, end: r.end, past: past, whole: whole, ch: make(chan streamAnswer, 1)}
	s.waits = append(s.waits, w)
	s.mu.Unlock()
	select {
	case s.ask <- struct{}{}:
	default: // the filler has been told already
	}
	select {
	case a := <-w.ch:
		return a.snap, a.last, a.err
	case <-ctx.Done():
		// The filler answers every wait (at the latest when it ends): let
		// go of what it hands this one.
		go func() {
			if a := <-w.ch; a.snap != nil {
				a.snap.Release()
			}
		}()
		return nil, false, context.Cause(ctx)
	}
}

// Close lets go of the reader's fill: the last reader to close stops it,
// and waits for it to let go of the copy.
func (r *streamReader) Close() {
	r.once.Do(func() {
		s := r.s
		s.mu.Lock()
		s.users--
		last := s.users == 0
		s.mu.Unlock()
		if last {
			s.cancel()
			<-s.finished
			if s.kept != nil {
				s.kept.Release() // (set before finished: no lock needed)
				s.kept = nil
			}
		}
	})
}

// snapshotOf takes a Snapshot of what the copy holds of [from, end)
// without fetching.
func (mp *MirrorPartition) snapshotOf(ctx context.Context, from, end int64) (*backend.Snapshot, error) {
	if err := mp.acquire(ctx); err != nil {
		return nil, err
	}
	defer mp.release()
	if mp.closed {
		return nil, backend.ErrClosed
	}
	return mp.snapshotLocked(from, end)
}
