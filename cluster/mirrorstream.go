// A streaming fill: Stream starts filling a partition's copy in the
// background and hands readers the records as they arrive, instead of
// making them wait for the whole range (backend.Streamer).

package cluster

import (
	"context"
	"math"
	"sync"

	"github.com/topicfs/topicfs/backend"
)

// mirrorStream is a fill of a MirrorPartition running in the background,
// from from to end, for the readers waiting in Next. Its goroutine holds
// the partition's sem until the fill ends, so the copy has one filler at a
// time as with Snapshot.
type mirrorStream struct {
	mp        *MirrorPartition
	from, end int64
	cancel    context.CancelFunc

	ask chan struct{} // a reader began waiting (room for one)

	mu       sync.Mutex
	waits    []streamWait
	handed   bool // a snapshot was handed out: the copy may not restart
	done     bool
	err      error
	finished chan struct{} // closed when the fill has ended and released sem
}

// streamWait is a reader waiting in Next for records past past.
type streamWait struct {
	past int64
	ch   chan streamAnswer // buffered: the filler never blocks on it
}

type streamAnswer struct {
	snap *backend.Snapshot
	last bool
	err  error
}

var _ backend.Stream = (*mirrorStream)(nil)

// Stream is Snapshot that returns as soon as the copy holds records from
// from on (or the whole range), with a Snapshot of them; the fill goes on
// in the background up to end, and stream (nil when nothing was left to
// fetch) hands out the rest. The fill runs until it reaches end, fails, or
// stream is closed; what it copied stays in the copy.
func (mp *MirrorPartition) Stream(ctx context.Context, src Source, from, end int64) (snap *backend.Snapshot, stream backend.Stream, err error) {
	if err := mp.acquire(ctx); err != nil {
		return nil, nil, err
	}
	from, err = mp.beginLocked(ctx, src, from, end)
	if err != nil {
		mp.release()
		return nil, nil, err
	}
	if le := mp.p.LogEndOffset(); le >= end && !mp.openBelow(end) {
		defer mp.release()
		mp.floor = math.MaxInt64
		snap, err := mp.snapshotLocked(from, end)
		mp.enforceLocked()
		return snap, nil, err
	}
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &mirrorStream{mp: mp, from: from, end: end, cancel: cancel, ask: make(chan struct{}, 1), finished: make(chan struct{})}
	mp.filling.Store(s)
	go s.run(fctx, src)
	snap, last, err := s.Next(ctx, from)
	if err != nil || last {
		s.Close()
		return snap, nil, err
	}
	return snap, s, nil
}

// run fills the copy, then answers every reader still waiting with the
// outcome, and lets go of the copy.
func (s *mirrorStream) run(ctx context.Context, src Source) {
	mp := s.mp
	defer close(s.finished)
	defer mp.release()
	err := mp.fillLocked(ctx, src, s.from, s.end, s)
	s.mu.Lock()
	s.done, s.err = true, err
	waits := s.waits
	s.waits = nil
	s.mu.Unlock()
	for _, w := range waits {
		a := streamAnswer{last: true, err: err}
		if err == nil {
			a.snap, a.err = mp.snapshotLocked(s.from, s.end)
		}
		w.ch <- a
	}
	mp.floor = math.MaxInt64
	mp.filling.CompareAndSwap(s, nil)
	mp.enforceLocked()
}

// progress answers the readers waiting for records the copy now holds,
// each with a Snapshot up to them. The filler calls it, holding sem,
// after each append and when a reader asks while a fetch travels.
func (s *mirrorStream) progress() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.waits) == 0 {
		return
	}
	at := s.mp.shownEnd(s.end)
	kept := s.waits[:0]
	for _, w := range s.waits {
		if at <= w.past || at <= s.from {
			kept = append(kept, w)
			continue
		}
		snap, err := s.mp.snapshotLocked(s.from, at)
		s.handed = s.handed || err == nil
		w.ch <- streamAnswer{snap: snap, err: err}
	}
	clear(s.waits[len(kept):])
	s.waits = kept
}

// asked is the channel a waiting reader signals on (nil for no stream: it
// never fires).
func (s *mirrorStream) asked() <-chan struct{} {
	if s == nil {
		return nil
	}
	return s.ask
}

// handedOut reports whether a reader got records of this fill: the copy
// may then no longer start over.
func (s *mirrorStream) handedOut() bool {
	if s == nil {
		return false
	}
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

// Next waits for records past offset past, or the end of the fill, and
// returns a Snapshot of the copy from the stream's start up to them.
func (s *mirrorStream) Next(ctx context.Context, past int64) (*backend.Snapshot, bool, error) {
	s.mu.Lock()
	if s.done {
		err := s.err
		s.mu.Unlock()
		if err != nil {
			return nil, true, err
		}
		snap, err := s.mp.snapshotOf(ctx, s.from, s.end)
		return snap, true, err
	}
	w := streamWait{past: past, ch: make(chan streamAnswer, 1)}
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

// Close stops the fill and waits for it to let go of the copy.
func (s *mirrorStream) Close() {
	s.cancel()
	<-s.finished
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
