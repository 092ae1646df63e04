package fusefs

import (
	"context"
	"errors"
	"github.com/topicfs/topicfs/backend"
	"io"
	"sync"
	"time"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
)

// notifyInterval is the least time between two rounds of size updates of a
// partition's open views (docs/FUSE.md §1): tail -f and
// less +F see growth well within a second, and a busy partition costs at
// most 50 notification rounds a second.
const notifyInterval = 20 * time.Millisecond

// partState is the mount's per-partition state: the views open on it and
// the notifier goroutine that tells the kernel when they grow.
type partState struct {
	fsys *fsys
	p    backend.Partition

	mu struct {
		sync.Mutex
		views   map[*viewNode]struct{} // views the kernel knows (looked up, not forgotten)
		running bool                   // a notifier goroutine runs
		stop    chan struct{}
		kick    chan struct{}   // wakes the notifier for a waiting closer
		waiters []chan struct{} // closed after the next notification round
		failed  bool            // the notifier panicked: none runs again (recover.go)
		offs    backend.Offsets // the partition's offsets when last asked
		offsAt  time.Time       // when that was (zero: never)
	}
}

func newPartState(f *fsys, p backend.Partition) *partState {
	ps := &partState{fsys: f, p: p}
	ps.mu.views = map[*viewNode]struct{}{}
	return ps
}

// notified returns a channel closed once the notifier has told the kernel
// about everything appended so far, or nil if no view of the partition is
// known to the kernel. An append handle's close waits on it (bounded), so
// "echo x >> append; cat records" never reads a cached, shorter size.
func (ps *partState) notified() chan struct{} {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if !ps.mu.running {
		return nil
	}
	ch := make(chan struct{})
	ps.mu.waiters = append(ps.mu.waiters, ch)
	select {
	case ps.mu.kick <- struct{}{}:
	default:
	}
	return ch
}

// logCorrupt reports a failed read of a segment with the segment and
// position, once per failing read (the errno is EIO, or ENOENT...).
func (ps *partState) logCorrupt(seg segmentReader, pos int64, err error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return
	}
	if errors.Is(err, io.EOF) || errors.Is(err, record.ErrTruncated) {
		err = errors.Join(engine.ErrCorrupt, err)
	}
	ps.fsys.log.Error("fusefs: cannot read record batch",
		"topic", ps.p.Topic(), "partition", ps.p.ID(), "segment", seg.LogPath(), "position", pos, "err", err)
}

// watch registers v (which the kernel just looked up) for growth
// notifications and starts the notifier if it is not running.
func (ps *partState) watch(v *viewNode) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.mu.views[v] = struct{}{}
	if !ps.mu.running && !ps.mu.failed {
		ps.mu.running = true
		ps.mu.stop = make(chan struct{})
		ps.mu.kick = make(chan struct{}, 1)
		go ps.runNotifier(ps.mu.stop, ps.mu.kick)
	}
}

// unwatch removes v (forgotten by the kernel); the notifier stops with the
// last view.
func (ps *partState) unwatch(v *viewNode) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	delete(ps.mu.views, v)
	if len(ps.mu.views) == 0 && ps.mu.running {
		ps.mu.running = false
		close(ps.mu.stop)
	}
}

// notifier waits for appends to the partition and then, at most every
// notifyInterval, brings the open views up to date and tells the kernel
// with NotifyContent(-1, 0): that drops the cached attributes, so the next
// fstat of tail -f sees the new size; the kernel then drops the stale pages
// itself when it sees the size change (AUTO_INVAL_DATA), in the reader's
// context. It deliberately does not invalidate page ranges
// (NotifyContent(oldSize, 0)): that waits for page locks held by READs in
// flight, and if the server dies (SIGKILL) before answering them, the
// notifying thread sticks in D state and the process can never exit
// (observed in the crash test). It runs outside every FUSE handler, as
// notifications from inside one can deadlock the kernel (docs/FUSE.md §5).
// end returns the partition's end offset, or last if the backend cannot
// say now (a cluster that is unreachable: the next round asks again).
func (ps *partState) end(last int64) int64 {
	offs, err := ps.p.Offsets(context.Background())
	if err != nil {
		return last
	}
	ps.noteOffsets(offs)
	return offs.End
}

func (ps *partState) notifier(stop, kick chan struct{}) {
	ch, cancel := ps.p.Subscribe()
	defer cancel()
	ticker := time.NewTicker(time.Second) // a safety net for missed signals
	defer ticker.Stop()
	lastEnd := ps.end(-1)
	for {
		select {
		case <-stop:
			ps.releaseWaiters()
			return
		case <-ch:
		case <-kick:
		case <-ticker.C:
		}
		ps.mu.Lock()
		waiters := ps.mu.waiters
		ps.mu.waiters = nil
		ps.mu.Unlock()
		end := ps.end(lastEnd)
		ps.notifyViews(end != lastEnd)
		lastEnd = end
		for _, w := range waiters {
			close(w)
		}
		// Rate limit rounds caused by appends; a closer waiting for its
		// round (kick) is served at once.
		pause := time.NewTimer(notifyInterval)
		select {
		case <-stop:
			pause.Stop()
			ps.releaseWaiters()
			return
		case <-kick:
			pause.Stop()
			select { // run the next round now
			case kick <- struct{}{}:
			default:
			}
		case <-pause.C:
		}
	}
}

func (ps *partState) releaseWaiters() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, w := range ps.mu.waiters {
		close(w)
	}
	ps.mu.waiters = nil
}

// notifyViews brings open views up to date and notifies their growth; if
// the log grew, it also drops the cached attributes (and last page) of the
// views the kernel knows but nobody has open, whose size it cannot know
// without rendering.
func (ps *partState) notifyViews(grew bool) {
	testPanicPart("notify", ps.p)
	ps.mu.Lock()
	views := make([]*viewNode, 0, len(ps.mu.views))
	for v := range ps.mu.views {
		views = append(views, v)
	}
	ps.mu.Unlock()
	for _, v := range views {
		st := v.openState()
		if st != nil && st.streaming() != nil {
			continue // its reader takes in the records as they arrive
		}
		if st == nil {
			if grew {
				if v.attrsSeen() {
					v.NotifyContent(-1, 0)
				}
			}
			continue
		}
		oldSize, newSize, err := st.refresh(context.Background())
		if err != nil || newSize == oldSize {
			continue
		}
		v.NotifyContent(-1, 0) // ENOENT when the kernel forgot the inode: harmless
	}
}
