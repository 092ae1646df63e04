package fusefs

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/topicfs/topicfs/backend"
)

type viewKind int

const (
	viewRecords  viewKind = iota // records, records.jsonl: from the log start
	viewByOffset                 // by-offset/N: from offset N; by-offset/-N: N offsets before the end
	viewByTime                   // by-time/T: from the first record at or after T
)

// viewNode is a view file: records, records.jsonl, by-offset/N[.jsonl] or
// by-time/T[.jsonl]. It is a growing read-only regular file whose size is the
// rendered length from its start to the end of the log. While it is open
// its content is a viewState shared by its handles.
type viewNode struct {
	fs.Inode
	fsys   *fsys
	loc    partLoc
	kind   viewKind
	jsonl  bool
	offset int64    // viewByOffset: N, or -N for the last N offsets
	tspec  timeSpec // viewByTime

	mu struct {
		sync.Mutex
		st    *viewState // while open
		opens int
		ps    *partState
		// watched is the partition state notifying this view.
		watched *partState
		// mtime is when Getattr last saw the size change.
		mtime    time.Time
		seen     bool
		seenSize int64
		seenAt   viewEnds // the offsets seenSize was measured at (noteSize)
	}
}

var (
	_ fs.NodeOnAdder     = (*viewNode)(nil)
	_ fs.NodeOnForgetter = (*viewNode)(nil)
	_ fs.NodeGetattrer   = (*viewNode)(nil)
	_ fs.NodeSetattrer   = (*viewNode)(nil)
	_ fs.NodeOpener      = (*viewNode)(nil)
	_ fs.NodeReader      = (*viewNode)(nil)
	_ fs.NodeReleaser    = (*viewNode)(nil)
)

// start resolves where the view starts: take, the snapshot to start in
// (from an offset at or before the start), and from, the start in that
// snapshot. by-offset/N must lie in the snapshot's range
// (ErrOffsetOutOfRange); by-offset/-N starts N offsets before the end, and
// by-time/T at the first record at or after T, both kept within the range.
func (v *viewNode) start(ctx context.Context, p backend.Partition) (take snapshotFunc, from func(*backend.Snapshot) (int64, error), err error) {
	var hint int64
	switch {
	case v.kind == viewByOffset && v.offset >= 0:
		return streamFrom(p, v.offset), func(*backend.Snapshot) (int64, error) { return v.offset, nil }, nil
	case v.kind == viewByOffset:
		if tp, ok := p.(backend.TailSnapshotter); ok {
			n := -v.offset
			take = func(ctx context.Context) (*backend.Snapshot, backend.Stream, error) {
				snap, err := tp.SnapshotLast(ctx, n)
				return snap, nil, err
			}
			return take, func(s *backend.Snapshot) (int64, error) {
				return min(max(s.Offsets.End-n, s.Offsets.LogStart), s.Offsets.End), nil
			}, nil
		}
		offs, err := p.Offsets(ctx)
		if err != nil {
			return nil, nil, err
		}
		hint = max(offs.End+v.offset, offs.LogStart)
	case v.kind == viewByTime:
		if hint, err = p.OffsetForTime(ctx, v.tspec.resolve(time.Now())); err != nil {
			return nil, nil, err
		}
	default:
		return streamFrom(p, backend.FromStart), func(s *backend.Snapshot) (int64, error) { return s.Offsets.LogStart, nil }, nil
	}
	return streamFrom(p, hint), func(s *backend.Snapshot) (int64, error) {
		return min(max(hint, s.Offsets.LogStart), s.Offsets.End), nil
	}, nil
}

// snapshotFunc takes the snapshot a new view state starts in, and the
// stream of the rest of its records when they are still arriving.
type snapshotFunc func(ctx context.Context) (*backend.Snapshot, backend.Stream, error)

func snapshotFrom(p backend.Partition, from int64) snapshotFunc {
	return func(ctx context.Context) (*backend.Snapshot, backend.Stream, error) {
		snap, err := p.Snapshot(ctx, from)
		return snap, nil, err
	}
}

// newState builds a fresh state from the partition as it is now.
func (v *viewNode) newState(ctx context.Context) (*viewState, *partState, error) {
	t, err := v.fsys.topic(ctx, v.loc.topic, v.loc.gen)
	if err != nil {
		return nil, nil, err
	}
	p, err := t.Partition(v.loc.id)
	if err != nil {
		return nil, nil, err
	}
	ps := v.fsys.partState(p)
	take, from, err := v.start(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	st, err := newViewState(ctx, ps, formatFor(t.Settings(), v.jsonl), take, from)
	return st, ps, err
}

// OnAdd registers the view for growth notifications while the kernel knows
// it (the entry and its attributes may be cached for a second).
func (v *viewNode) OnAdd(ctx context.Context) {
	if _, ps, err := v.fsys.partition(ctx, v.loc); err == nil {
		v.mu.Lock()
		v.mu.watched = ps
		v.mu.Unlock()
		ps.watch(v)
	}
}

// OnForget unregisters the view once the kernel has forgotten it.
func (v *viewNode) OnForget() {
	v.mu.Lock()
	ps := v.mu.watched
	v.mu.watched = nil
	v.mu.Unlock()
	if ps != nil {
		ps.unwatch(v)
	}
}

// attrsSeen reports whether Getattr has reported a size (the kernel may
// hold cached attributes of the view).
func (v *viewNode) attrsSeen() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.mu.seen
}

// keepsHeld reports whether an open view, failing to take in what was
// appended since with err, goes on with what it holds: when the backend
// cannot be asked now (a cluster with no broker reachable, a request
// timed out). The view then stops growing until the cluster answers
// (the notifier refreshes it), instead of failing stat(2) and read(2) of
// a file already open: tail -f would give up on it for good.
func (v *viewNode) keepsHeld(op string, err error) bool {
	var se *streamError
	if errors.As(err, &se) || !errors.Is(err, backend.ErrUnavailable) && !errors.Is(err, backend.ErrTimedOut) {
		return false
	}
	v.fsys.log.Debug("fusefs: open view not refreshed, showing what it holds", "op", op,
		"topic", v.loc.topic, "partition", v.loc.id, "err", err)
	return true
}

// openState returns the state while the view is open, else nil.
func (v *viewNode) openState() *viewState {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.mu.st
}

func (v *viewNode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	testPanic("getattr", &v.Inode, "")
	v.fsys.awaitTails(ctx, v.loc.topic) // a final line closed just before (appendline.go)
	size, exact, err := v.statSize(ctx)
	if err != nil {
		return v.fsys.errno("getattr", err)
	}
	v.mu.Lock()
	if exact && (!v.mu.seen || size != v.mu.seenSize) {
		// The mtime is when the view was last seen to change size.
		v.mu.mtime = time.Now()
		if !v.mu.seen {
			v.mu.mtime = v.fsys.mounted
		}
		v.mu.seen, v.mu.seenSize = true, size
	}
	mtime := v.mu.mtime
	if !v.mu.seen {
		mtime = v.fsys.mounted
	}
	v.mu.Unlock()
	out.Mode = syscall.S_IFREG | v.fsys.perm(0444)
	out.Nlink = 1
	out.Size = uint64(size)
	out.Blksize = viewBlksize
	out.Blocks = (out.Size + 4095) / 4096 * 8 // as go-fuse counts without a Blksize
	v.fsys.setTimes(&out.Attr, mtime)
	if !exact || v.kind == viewByTime && v.tspec.relative {
		out.SetTimeout(time.Millisecond)
	}
	return 0
}

// statSize is the size stat(2) reports (viewsize.go); exact is false for
// a size the kernel must not keep: records still arriving, or a closed
// cluster view whose size is not known without fetching.
func (v *viewNode) statSize(ctx context.Context) (size int64, exact bool, err error) {
	if st := v.openState(); st != nil {
		if st.streaming() != nil {
			// Not known until every record arrived; 0 makes tail, wc
			// and the like read the view to its end (which waits for
			// them) instead of trusting a size.
			return 0, false, nil
		}
		_, s, err := st.refresh(ctx)
		if err != nil && !v.keepsHeld("getattr", err) {
			return 0, false, err
		}
		return s, true, nil
	}
	if v.fsys.local == nil {
		// Sizing a closed cluster view would fetch its records.
		size, known := v.closedSize(ctx)
		return size, known, nil
	}
	st, _, err := v.newState(ctx)
	if err != nil {
		return 0, false, err
	}
	defer st.release()
	return st.size(), true, nil
}

// Setattr refuses truncation and chmod of a view.
func (v *viewNode) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if v.fsys.opts.ReadOnly {
		return syscall.EROFS
	}
	return syscall.EACCES
}

// viewHandle is an open view: its read cursor, and the read ahead of a
// sequential reader.
type viewHandle struct {
	// mu guards cur; whoever renders (Read or the read-ahead goroutine)
	// holds it (render).
	mu  sync.Mutex
	cur cursor

	ahead workAhead[readAhead] // chunks rendered ahead of a sequential reader

	// until is the partition's end when the handle opened a view another
	// handle held open (cluster mode): the records below it are the
	// handle's to read, and an error short of them is not an end.
	until int64

	// amu guards the fields below.
	amu  sync.Mutex
	end  int64 // view position where the last read ended
	read int64 // bytes served
}

// readAhead is a chunk of a view rendered ahead (workAhead) while the
// kernel copies an earlier one to the reader (the two cores work in
// parallel). Its buffer comes from a free list, so a sequential reader's
// READs allocate next to nothing: the mount's heap does not fill up with
// garbage between collections.
type readAhead struct {
	off int64
	buf []byte
	n   int
	err error
}

// readAheadMax bounds a read-ahead chunk (MaxWrite caps READs at 1 MiB
// anyway); a handle holds at most aheadDepth of them (rendered or
// rendering) and the one being sent.
const readAheadMax = 1 << 20

// viewBlksize is the st_blksize of a view: cat, cp and other tools read in
// max(128 KiB, st_blksize) units, and under direct I/O every read(2) is a
// FUSE round trip, so 1 MiB reads (MaxWrite, which bounds READs too) cross
// the kernel eight times less often than 128 KiB ones.
const viewBlksize = 1 << 20

// aheadResult is a read-ahead chunk handed to go-fuse: written to the
// kernel with writev straight from buf (Slices), which go-fuse prefers to
// its splice attempt for plain data, and given back to its free list by
// Done.
type aheadResult struct {
	buf []byte
	n   int
}

func (r *aheadResult) Size() int { return r.n }

func (r *aheadResult) Bytes(dst []byte) ([]byte, fuse.Status) { return r.buf[:r.n], fuse.OK }

func (r *aheadResult) Slices() ([][]byte, fuse.Status) { return [][]byte{r.buf[:r.n]}, fuse.OK }

func (r *aheadResult) Done() {
	if r.buf != nil {
		putBuf(r.buf)
		r.buf = nil
	}
}

// destResult is data rendered into go-fuse's own READ buffer. Like
// aheadResult it is written with writev: go-fuse would otherwise try to
// splice it first, which for a 1 MiB READ always fails (the reply is
// larger than a pipe) and logs "trySplice: ... max pipe size" per READ.
type destResult []byte

func (r destResult) Size() int { return len(r) }

func (r destResult) Bytes(dst []byte) ([]byte, fuse.Status) { return r, fuse.OK }

func (r destResult) Slices() ([][]byte, fuse.Status) { return [][]byte{r}, fuse.OK }

func (r destResult) Done() {}

// takeAhead returns the chunk rendered ahead at off, waiting for it if it
// is the one rendering; ok is false if there is none (a seek: read ahead
// stops until Read starts it again).
func (h *viewHandle) takeAhead(off int64) (readAhead, bool) {
	return h.ahead.take(off, func(a *readAhead) bool { return a.off == off }, dropAhead)
}

func dropAhead(a readAhead) { putBuf(a.buf) }

// startAhead makes sure chunks of n bytes are rendered in the background
// from end on (where the READ just served ended): while there is room for
// them, the view has more and nobody seeks or releases the handle.
func (h *viewHandle) startAhead(st *viewState, end int64, n int) {
	if !h.ahead.idle() {
		return // rendering ahead already (the usual case)
	}
	h.ahead.start(end, func(off int64) (readAhead, int64, bool) {
		a := readAhead{off: off, buf: getBuf(n)}
		a.n, a.err = h.render(context.Background(), st, a.buf, off, "readahead")
		next := off + int64(a.n)
		return a, next, a.err == nil && a.n == n && next < st.size()
	}, dropAhead)
}

// stop ends read ahead for good (at Release) and lets go of the buffers.
func (h *viewHandle) stop() {
	h.ahead.close(dropAhead)
	h.mu.Lock()
	h.cur.rd.free()
	h.mu.Unlock()
}

// Open pins the view's content (see viewState) for as long as any handle
// is open, and serves it with direct I/O (FOPEN_DIRECT_IO), bypassing the
// page cache. Through the page cache, a READ that ends at the old end of
// a growing view is answered short; if the kernel has meanwhile learned a
// larger size (a GETATTR answered between the READ's request and its
// reply), it keeps that page zero-filled past the old end, and readers see
// NUL bytes (observed under the load test). Invalidating pages from a
// notifier closes only part of that window and can wedge the process in D
// state if it dies while a READ holds the page lock. With direct I/O every
// read(2) reaches Read, which serves exactly the view's bytes up to its
// current end (so cat sees an append at once, whatever the cached size),
// and a short read is just a short read (corruption: good bytes, then
// EIO). Each read(2) is one round trip, so views report st_blksize 1 MiB
// (cat then reads 1 MiB at a time), and a sequential reader's next chunk
// is rendered while the kernel copies the current one (viewHandle).
// MAP_SHARED mmap still works (CAP_DIRECT_IO_ALLOW_MMAP).
func (v *viewNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	testPanic("open", &v.Inode, "")
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		if v.fsys.opts.ReadOnly {
			return nil, 0, syscall.EROFS
		}
		return nil, 0, syscall.EACCES
	}
	v.fsys.awaitTails(ctx, v.loc.topic) // a final line closed just before (appendline.go)
	v.mu.Lock()
	defer v.mu.Unlock()
	h := &viewHandle{}
	if v.mu.st == nil {
		st, ps, err := v.newState(ctx)
		if err != nil {
			return nil, 0, v.fsys.errno("open", err)
		}
		v.mu.st, v.mu.ps = st, ps
	} else if v.fsys.local == nil {
		// Another handle's content, which may end before this open: the
		// records up to the end now are owed to this handle.
		if offs, err := v.mu.ps.offsets(ctx); err == nil {
			h.until = offs.End
		}
	}
	v.mu.opens++
	// FOPEN_NOFLUSH: a view has nothing to flush, and without it every
	// close(2) waits for a FLUSH round trip to the mount.
	return h.guard(v), fuse.FOPEN_DIRECT_IO | fuse.FOPEN_NOFLUSH, 0
}

// Read serves a READ of the view. A sequential reader's next chunk is
// rendered in the background while the kernel copies this one (see
// viewHandle); anything else renders in place into dest.
func (v *viewNode) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h, ok := f.(*viewHandle)
	st := v.openState()
	if !ok || st == nil {
		return nil, syscall.EBADF
	}
	for off >= st.size() {
		// Past what the view holds: records of its range still arriving
		// (wait for them), else appends since (never wait). Only a view
		// that holds every record up to its handle's open goes on with
		// what it holds when the backend cannot be asked (keepsHeld):
		// short of that, a reader would take an early end for the end.
		streaming := st.streaming() != nil
		if _, _, err := st.refresh(ctx); err != nil && (st.endOffset() < h.until || !v.keepsHeld("read", err)) {
			return nil, v.fsys.errno("read", err)
		}
		if !streaming {
			break
		}
	}
	h.amu.Lock()
	sequential := off == h.end && off > 0
	h.amu.Unlock()
	var (
		res fuse.ReadResult
		n   int
	)
	if a, ok := h.takeAhead(off); ok {
		if a.err == nil && a.n > 0 && a.n <= len(dest) && cap(a.buf) >= len(dest) {
			n = a.n
			if n < len(dest) {
				// Top up from the cursor, which stands at off+n: the
				// request is larger, or the view grew since.
				a.buf = a.buf[:len(dest)]
				k, _ := h.render(ctx, st, a.buf[n:], off+int64(n), "read")
				n += k
			}
			res = &aheadResult{buf: a.buf, n: n}
		} else {
			putBuf(a.buf)
		}
	}
	if res == nil {
		k, err := h.render(ctx, st, dest, off, "read")
		if err != nil && k == 0 {
			return nil, v.fsys.errno("read", err)
		}
		n = k
		res = destResult(dest[:n])
	}
	if n < len(dest) {
		// The end of the view (for now): an idle handle keeps no buffers.
		h.mu.Lock()
		h.cur.idle()
		h.mu.Unlock()
	}
	end := off + int64(n)
	h.amu.Lock()
	h.end = end
	h.read += int64(n)
	h.amu.Unlock()
	if sequential && n == len(dest) && n <= readAheadMax && end < st.size() {
		h.startAhead(st, end, n)
	}
	return res, 0
}

// Release drops the state with the last handle, letting its segments go.
func (v *viewNode) Release(ctx context.Context, f fs.FileHandle) syscall.Errno {
	if h, ok := f.(*viewHandle); ok {
		h.stop()
		collectAfterRead(h.read)
	}
	v.mu.Lock()
	v.mu.opens--
	var st *viewState
	if v.mu.opens == 0 && v.mu.st != nil {
		st = v.mu.st
		v.mu.st, v.mu.ps = nil, nil
	}
	v.mu.Unlock()
	if st != nil {
		v.noteSize(st)
		st.release()
	}
	return 0
}

// formatFor is the format of a plain (jsonl false) or JSON view under cfg.
func formatFor(cfg backend.Settings, jsonl bool) viewFormat {
	if jsonl {
		return viewFormat{json: true}
	}
	return viewFormat{printKey: cfg.PrintKey, separator: cfg.KeySeparator, nullMarker: cfg.NullMarker}
}

// collectAfter is how many view bytes are served between two collections
// started by collectAfterRead.
const collectAfter = 256 << 20

var (
	readSinceGC atomic.Int64
	collecting  atomic.Bool
)

// collectAfterRead counts n bytes served by a released handle and, once
// collectAfter bytes were served since the last time, runs a garbage
// collection in the background. A sequential reader allocates next to
// nothing in this package, but go-fuse allocates a few hundred bytes per
// request, and the heap's goal is twice the live heap, which the idle read
// buffers (free lists, go-fuse's request buffers) make large: without a
// collection that garbage takes fresh pages cat after cat and the mount's
// resident memory creeps up until it reaches the goal. A collection every
// collectAfter bytes costs little next to the reads that produced the
// garbage, and the next reader reuses the freed pages (docs/PERFORMANCE.md,
// "Memory").
func collectAfterRead(n int64) {
	if readSinceGC.Add(n) < collectAfter || !collecting.CompareAndSwap(false, true) {
		return
	}
	readSinceGC.Store(0)
	go func() {
		defer collecting.Store(false)
		runtime.GC()
	}()
}
