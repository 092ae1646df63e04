package fusefs

import (
	"context"
	"fmt"
	"github.com/topicfs/topicfs/backend"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/topicfs/topicfs/internal/panics"
)

// A panic while serving one request is recovered at the request boundary
// (safeFS). The goroutines the mount starts itself recover theirs here and
// fail only what they worked for:
//
//   - a view handle's renderer (workAhead.run) and a reader's .log loader
//     (the engine's SegmentReader recovers it and calls its logChunk's
//     panicSink): read ahead stops for that handle; its READs
//     render (and load) in place, so a persistent bug fails them (EIO at the
//     request boundary) and a passing one costs nothing but the read ahead;
//   - a partition's notifier (runNotifier): the partition's open views are
//     no longer told of growth (they still see it within the attribute
//     timeout), and closers stop waiting for it;
//   - an append handle's background job or linger flush (runJob,
//     catchLinger): the handle's next write or close fails with EIO, as after
//     a failed background append;
//   - the periodic ViewSizesFile save (saveSizesGuarded): no more saves
//     while the mount serves.
//
// Each is logged with its stack and counted (internal/panics).

// errPanic wraps a recovered panic as an error that maps to EIO.
func errPanic(e *panics.Error) error { return fmt.Errorf("%w (%w)", syscall.EIO, e) }

// panicHook, set by tests only, is called at the points named by op
// ("lookup", "getattr", "open", "read", "readahead", "measure", "write",
// "append-job", "linger", "notify") with the path (below the mount root) of the file or
// directory being served; it injects a panic by panicking.
var panicHook atomic.Pointer[func(op, path string)]

// testPanic calls panicHook, if set, for n (and the entry name, if any).
func testPanic(op string, n *fs.Inode, name string) {
	h := panicHook.Load()
	if h == nil {
		return
	}
	path := n.Path(nil)
	if name != "" {
		path += "/" + name
	}
	(*h)(op, path)
}

// testPanicName calls panicHook, if set, for the file or directory at path.
func testPanicName(op, path string) {
	if h := panicHook.Load(); h != nil {
		(*h)(op, path)
	}
}

// testPanicPart calls panicHook, if set, for partition p ("topic/id").
func testPanicPart(op string, p backend.Partition) {
	if h := panicHook.Load(); h != nil {
		(*h)(op, fmt.Sprintf("%s/%d", p.Topic(), p.ID()))
	}
}

// render fills dest from view position off through the handle's cursor.
// Whoever renders (Read, the read-ahead goroutine) goes through here: h.mu
// is released however st.read ends, and a panic in it drops the cursor,
// whose state it left unknown (the next read seeks afresh, as a fresh
// handle would), before it goes on up to the caller's boundary.
func (h *viewHandle) render(ctx context.Context, st *viewState, dest []byte, off int64, op string) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	done := false
	defer func() {
		if !done {
			h.cur.reset()
		}
	}()
	testPanicPart(op, st.ps.p)
	n, err := st.read(ctx, &h.cur, dest, off)
	done = true
	return n, err
}

// reset forgets where the cursor stands and gives its buffers back.
func (c *cursor) reset() {
	c.rd.free()
	c.valid, c.err = false, nil
	c.pend, c.recs, c.ri = nil, c.recs[:0], 0
	c.raw, c.rawDone = nil, 0
}

// guard makes the handle's background goroutines (renderer, loader)
// report a panic as one of v's.
func (h *viewHandle) guard(v *viewNode) *viewHandle {
	h.ahead.onPanic = func(val any, stack []byte) { v.recovered("render", val, stack) }
	h.cur.rd.onPanic = func(val any, stack []byte) { v.recovered("load", val, stack) }
	return h
}

func (v *viewNode) recovered(op string, val any, stack []byte) {
	panics.Recovered(v.fsys.log, "readahead", op, val, stack, "path", v.Path(nil))
}

// fallbackLog is the logger of the latest mount, for goroutines that know
// no mount of their own (the loader of a segment index being measured).
var fallbackLog atomic.Pointer[slog.Logger]

// produceGuarded runs produce for pos; ok is false if it panicked (the
// panic is reported through onPanic, or logged on fallbackLog without
// one).
func (w *workAhead[T]) produceGuarded(produce produceFunc[T], pos int64) (it T, next int64, more, ok bool) {
	defer func() {
		if v := recover(); v != nil {
			stack := debug.Stack()
			if w.onPanic != nil {
				w.onPanic(v, stack)
			} else {
				panics.Recovered(fallbackLog.Load(), "readahead", "load", v, stack)
			}
			ok = false
		}
	}()
	it, next, more = produce(pos)
	return it, next, more, true
}

// panicSink is where a reader's prefetch goroutine reports a panic (the
// engine's SegmentReader recovered it and loads in the caller's goroutine
// from then on): through the onPanic of the logChunk that holds the
// reader now (logChunk.batch keeps it current: a reader kept by
// spareReaders changes hands), or on fallbackLog without one.
type panicSink struct {
	to atomic.Pointer[func(v any, stack []byte)]
}

func (s *panicSink) report(v any, stack []byte) {
	if f := s.to.Load(); f != nil && *f != nil {
		(*f)(v, stack)
		return
	}
	panics.Recovered(fallbackLog.Load(), "readahead", "load", v, stack)
}

// catchMeasure is deferred by a worker measuring segments of a view
// (settleWholeLocked): a panic ends that worker only; what it left
// unmeasured is measured by the request itself (extendLocked).
func (ps *partState) catchMeasure() {
	if v := recover(); v != nil {
		panics.Recovered(ps.fsys.log, "measure", "render", v, debug.Stack(),
			"topic", ps.p.Topic(), "partition", ps.p.ID())
	}
}

// runNotifier runs the partition's notifier; after a panic in it the
// partition gets no notifier again (notifierFailed), and closers waiting
// for a round are let go.
func (ps *partState) runNotifier(stop, kick chan struct{}) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		panics.Recovered(ps.fsys.log, "notifier", "notify", v, debug.Stack(),
			"topic", ps.p.Topic(), "partition", ps.p.ID())
		ps.mu.Lock()
		ps.mu.failed = true
		if ps.mu.stop == stop {
			ps.mu.running = false
		}
		ps.mu.Unlock()
		ps.releaseWaiters()
	}()
	ps.notifier(stop, kick)
}

// runJob runs a background (or in-place) append job; a panic in it
// becomes the job's error, which the handle's next write or close
// returns (EIO).
func (h *appendHandle) runJob(job *appendJob) {
	defer func() {
		if v := recover(); v != nil {
			e := panics.Recovered(h.fsys.log, "append", "append-job", v, debug.Stack(), "topic", h.topicName())
			job.err = errPanic(e)
		}
	}()
	testPanicName("append-job", h.topicName())
	job.run()
}

// catchLinger is deferred by the linger timer's flush, which holds h.mu:
// a panic in it becomes the handle's error for its next write or close.
func (h *appendHandle) catchLinger() {
	if v := recover(); v != nil {
		e := panics.Recovered(h.fsys.log, "append", "linger", v, debug.Stack(), "topic", h.topicName())
		if h.err == nil {
			h.err = errPanic(e)
		}
	}
}

// saveSizesGuarded is saveSizes; a panic in a save ends the periodic saves
// (Wait still tries its final one).
func (s *Server) saveSizesGuarded(every time.Duration) {
	defer s.catchSave()
	s.saveSizes(every)
}

// catchSave, deferred, logs and counts a panic in a ViewSizesFile save.
func (s *Server) catchSave() {
	if v := recover(); v != nil {
		panics.Recovered(s.f.log, "viewsizes", "save", v, debug.Stack())
	}
}

// requestPanic is go-fuse's MountOptions.PanicHandler: go-fuse recovers a
// panic anywhere in a request's handling and answers EIO; safeFS catches
// those in the operations first (with the operation's name), so this sees
// only panics in go-fuse's own glue around them.
func (f *fsys) requestPanic(v any) fuse.Status {
	panics.Recovered(f.log, "fuse", "request", v, debug.Stack())
	return fuse.EIO
}

// finalSave is Wait's last ViewSizesFile save; a panic in it is logged and
// the data directory still closes cleanly (the file is only a cache).
func (s *Server) finalSave() {
	defer s.catchSave()
	s.f.sizes.write(s.f.cache, slog.LevelInfo)
	s.f.sizes.close()
}

// newSafeFS wraps raw (see safeFS), logging to log.
func newSafeFS(raw fuse.RawFileSystem, log *slog.Logger) fuse.RawFileSystem {
	fallbackLog.Store(log)
	return &safeFS{fs: raw, log: log}
}

// topicName names the handle's topic in logs (tests build handles
// without one).
func (h *appendHandle) topicName() string {
	if h.topic == nil {
		return ""
	}
	return h.topic.Name()
}
