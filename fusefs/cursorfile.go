package fusefs

import (
	"context"
	"maps"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/internal/panics"
)

// cursorNode is a cursor file, cursors/NAME[.jsonl]: of partition id, or
// with id -1 of every partition of the topic. Read, it is the records from
// the cursor's position to the end of the log when it was opened, in the
// rendering of records (records.jsonl); unlike a view it does not grow
// while open. Written, a line moves the cursor (cursorwrite.go).
type cursorNode struct {
	fs.Inode
	fsys  *fsys
	topic string
	gen   uint64
	id    int
	name  string
	jsonl bool

	mu struct {
		sync.Mutex
		// seenSize is the size when last measured on this mount: what a
		// cluster cursor that is not open shows (sizing it would fetch
		// its records), as views do.
		seenSize int64
		mtime    time.Time
	}
}

var (
	_ fs.NodeGetattrer = (*cursorNode)(nil)
	_ fs.NodeSetattrer = (*cursorNode)(nil)
	_ fs.NodeOpener    = (*cursorNode)(nil)
	_ fs.NodeReader    = (*cursorNode)(nil)
	_ fs.NodeWriter    = (*cursorNode)(nil)
	_ fs.NodeFlusher   = (*cursorNode)(nil)
	_ fs.NodeReleaser  = (*cursorNode)(nil)
)

// cursorPart is one partition's share of an open cursor file: its view
// state, fixed at open, from the cursor's position to end.
type cursorPart struct {
	id    int
	st    *viewState
	vh    *viewHandle // the read position within st
	pos   int64       // file position of the part's first byte
	size  int64
	from  int64 // the offset the part starts at
	end   int64 // the log end when it was opened: what a full read commits
	known bool  // the cursor had a position on this partition
}

// cursorContent is the content of a cursor file at one moment.
type cursorContent struct {
	parts []cursorPart
	size  int64
}

func (c *cursorContent) release() {
	for _, p := range c.parts {
		if p.vh != nil {
			p.vh.stop()
		}
		p.st.release()
	}
}

// ends returns what reading the content to the end commits.
func (c *cursorContent) ends() map[int]int64 {
	m := make(map[int]int64, len(c.parts))
	for _, p := range c.parts {
		m[p.id] = p.end
	}
	return m
}

// ids looks the topic up and returns it with the partitions the file
// covers.
func (n *cursorNode) ids(ctx context.Context) (backend.Topic, []int, error) {
	t, err := n.fsys.topic(ctx, n.topic, n.gen)
	if err != nil {
		return nil, nil, err
	}
	if n.id >= 0 {
		if _, err := t.Partition(n.id); err != nil {
			return nil, nil, err
		}
		return t, []int{n.id}, nil
	}
	ids := make([]int, t.NumPartitions())
	for i := range ids {
		ids[i] = i
	}
	return t, ids, nil
}

// content builds the file's content now: each partition from the
// cursor's position (cursor.start where it has none), clamped into the
// retained range. atOpen logs a position retention went past.
func (n *cursorNode) content(ctx context.Context, atOpen bool) (*cursorContent, error) {
	cb, err := n.fsys.cursorsOf()
	if err != nil {
		return nil, err
	}
	t, ids, err := n.ids(ctx)
	if err != nil {
		return nil, err
	}
	pos, _, err := cb.Cursor(ctx, n.topic, n.name)
	if err != nil {
		return nil, err
	}
	format := formatFor(t.Settings(), n.jsonl)
	latest := t.Settings().CursorStart == "latest"
	bounds, err := backend.TopicOffsets(ctx, t, ids)
	if err != nil {
		return nil, err
	}
	// Where each partition's part starts, as far as known before its
	// Snapshot; the Snapshots are taken together.
	want, hints := map[int]int64{}, map[int]int64{}
	for _, id := range ids {
		offs := bounds[id]
		w, known := pos[id]
		if !known {
			w = offs.LogStart
			if latest {
				w = offs.End
			}
		}
		want[id], hints[id] = w, min(max(w, offs.LogStart), offs.End)
	}
	snaps, err := backend.TopicSnapshots(ctx, t, hints)
	if err != nil {
		return nil, err
	}
	defer backend.ReleaseSnapshots(snaps) // those no part took
	c := &cursorContent{}
	for _, id := range ids {
		_, known := pos[id]
		snap := snaps[id]
		delete(snaps, id)
		part, err := n.part(ctx, t, id, snap, want[id], known, format, atOpen)
		if err != nil {
			c.release()
			return nil, err
		}
		part.pos = c.size
		c.size += part.size
		c.parts = append(c.parts, part)
	}
	return c, nil
}

// part builds partition id's share of the content from snap, which it
// takes over: from want (the cursor's position if known, else where
// cursor.start says), kept within the snapshot's range.
func (n *cursorNode) part(ctx context.Context, t backend.Topic, id int, snap *backend.Snapshot, want int64, known bool, format viewFormat, atOpen bool) (cursorPart, error) {
	p, err := t.Partition(id)
	if err != nil {
		snap.Release()
		return cursorPart{}, err
	}
	part := cursorPart{id: id, known: known}
	from := func(s *backend.Snapshot) (int64, error) {
		start := min(max(want, s.Offsets.LogStart), s.Offsets.End)
		if atOpen && known && want < s.Offsets.LogStart {
			n.fsys.log.Warn("fusefs: cursor below the log start (retention deleted what it pointed at): it restarts at the log start",
				"topic", n.topic, "partition", id, "cursor", n.name, "committed", want, "log_start", s.Offsets.LogStart,
				"records_skipped", s.Offsets.LogStart-want)
		} else if atOpen && known && want > s.Offsets.End {
			n.fsys.log.Warn("fusefs: cursor past the log end (the topic was recreated or truncated): it restarts at the log end",
				"topic", n.topic, "partition", id, "cursor", n.name, "committed", want, "log_end", s.Offsets.End)
		}
		part.from, part.end = start, s.Offsets.End
		return start, nil
	}
	taken := func(context.Context) (*backend.Snapshot, backend.Stream, error) { return snap, nil, nil }
	st, err := newViewState(ctx, n.fsys.partState(p), format, taken, from)
	if err != nil {
		return cursorPart{}, err
	}
	part.st, part.size = st, st.size()
	return part, nil
}

// remember keeps size as the last measured size.
func (n *cursorNode) remember(size int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if size != n.mu.seenSize || n.mu.mtime.IsZero() {
		n.mu.seenSize, n.mu.mtime = size, time.Now()
	}
}

// Getattr reports the size reading the cursor now would return: measured
// on one disk, the last measured size for a cluster (as views).
func (n *cursorNode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	switch h := f.(type) {
	case *cursorHandle:
		n.remember(h.c.size)
	default:
		if n.fsys.local != nil {
			c, err := n.content(ctx, false)
			if err != nil {
				return n.fsys.errno("getattr", err)
			}
			n.remember(c.size)
			c.release()
		} else if _, err := n.fsys.topic(ctx, n.topic, n.gen); err != nil {
			return n.fsys.errno("getattr", err)
		}
	}
	n.mu.Lock()
	size, mtime := n.mu.seenSize, n.mu.mtime
	n.mu.Unlock()
	if mtime.IsZero() {
		mtime = n.fsys.mounted
	}
	out.Mode = syscall.S_IFREG | n.fsys.perm(0644)
	out.Nlink = 1
	out.Size = uint64(size)
	out.Blksize = viewBlksize
	out.Blocks = (out.Size + 4095) / 4096 * 8
	n.fsys.setTimes(&out.Attr, mtime)
	out.SetTimeout(time.Millisecond)
	return 0
}

// Setattr accepts the truncation of `echo N > cursors/c` (the write moves
// the cursor); chmod and chown are EPERM.
func (n *cursorNode) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if n.fsys.opts.ReadOnly {
		return syscall.EROFS
	}
	if changesOwnerOrMode(in) {
		return syscall.EPERM
	}
	if sz, ok := in.GetSize(); ok && sz != 0 {
		return syscall.EINVAL
	}
	return n.Getattr(ctx, f, out)
}

// cursorHandle is a cursor open for reading: its content, fixed at open,
// and how far it was read.
type cursorHandle struct {
	key string // in fsys.curLocks while open
	c   *cursorContent

	mu        sync.Mutex
	covered   int64 // bytes read from 0 without a gap
	eof       bool  // a read at or past the end returned nothing
	committed bool
	released  bool
}

// Open opens the cursor for reading (one handle at a time: EBUSY) or, with
// O_WRONLY or O_RDWR, for moving it.
func (n *cursorNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		if n.fsys.opts.ReadOnly {
			return nil, 0, syscall.EROFS
		}
		if _, err := n.fsys.topic(ctx, n.topic, n.gen); err != nil {
			return nil, 0, n.fsys.errno("open", err)
		}
		return &cursorWriteHandle{}, fuse.FOPEN_DIRECT_IO, 0
	}
	n.fsys.awaitTails(ctx, n.topic) // a final line closed just before (appendline.go)
	key := cursorKey(n.topic, n.name)
	if errno := n.fsys.curLocks.acquire(ctx, key); errno != 0 {
		if errno == syscall.EBUSY {
			n.fsys.log.Info("fusefs: cursor already open for reading (EBUSY)", "topic", n.topic, "cursor", n.name)
		}
		return nil, 0, errno
	}
	c, err := n.content(ctx, true)
	if err != nil {
		n.fsys.curLocks.release(key)
		return nil, 0, n.fsys.errno("open", err)
	}
	if err := n.create(ctx, c); err != nil {
		c.release()
		n.fsys.curLocks.release(key)
		return nil, 0, n.fsys.errno("open", err)
	}
	for i := range c.parts {
		vh := &viewHandle{}
		vh.cur.rd.onPanic = func(val any, stack []byte) {
			panics.Recovered(n.fsys.log, "readahead", "load", val, stack, "path", n.Path(nil))
		}
		c.parts[i].vh = vh
	}
	n.remember(c.size)
	return &cursorHandle{key: key, c: c}, fuse.FOPEN_DIRECT_IO, 0
}

// create commits the start of every partition the cursor had no position
// on: opening a cursor creates it (not on a read-only mount, which only
// reads).
func (n *cursorNode) create(ctx context.Context, c *cursorContent) error {
	if n.fsys.opts.ReadOnly {
		return nil
	}
	missing := map[int]int64{}
	for _, p := range c.parts {
		if !p.known {
			missing[p.id] = p.from
		}
	}
	if len(missing) == 0 {
		return nil
	}
	cb, err := n.fsys.cursorsOf()
	if err != nil {
		return err
	}
	if err := cb.CommitCursor(ctx, n.topic, n.name, missing); err != nil {
		return err
	}
	n.fsys.log.Info("fusefs: cursor created", "topic", n.topic, "partition", n.id, "cursor", n.name, "at", missing)
	for i := range c.parts {
		c.parts[i].known = true
	}
	return nil
}

// Read serves the content: the parts in partition order.
func (n *cursorNode) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h, ok := f.(*cursorHandle)
	if !ok {
		return nil, syscall.EBADF
	}
	k, err := h.read(ctx, dest, off)
	if err != nil && k == 0 {
		return nil, n.fsys.errno("read", err)
	}
	h.mu.Lock()
	if off <= h.covered {
		h.covered = max(h.covered, off+int64(k))
	}
	if k == 0 && off >= h.c.size {
		h.eof = true
	}
	h.mu.Unlock()
	return destResult(dest[:k]), 0
}

// read fills dest from file position off; an error ends it with the bytes
// it has.
func (h *cursorHandle) read(ctx context.Context, dest []byte, off int64) (int, error) {
	parts := h.c.parts
	i := sort.Search(len(parts), func(i int) bool { return parts[i].pos+parts[i].size > off })
	k := 0
	for ; i < len(parts) && k < len(dest); i++ {
		p := &parts[i]
		at := off + int64(k) - p.pos
		if at >= p.size {
			continue
		}
		want := min(int64(len(dest)-k), p.size-at)
		m, err := p.vh.render(ctx, p.st, dest[k:k+int(want)], at, "read")
		k += m
		if err != nil {
			return k, err
		}
		if int64(m) < want {
			break // should not happen: the part's content is fixed
		}
	}
	return k, nil
}

// Flush commits where the content ended if the handle read it to the end:
// every byte from the start, then a read that found nothing more. A reader
// that stopped early (head) or died commits nothing. close(2) returns
// after FLUSH, so the next reader sees the commit, and a failed commit is
// close(2)'s error.
func (n *cursorNode) Flush(ctx context.Context, f fs.FileHandle) syscall.Errno {
	switch h := f.(type) {
	case *cursorWriteHandle:
		return n.flushWrite(ctx, h)
	case *cursorHandle:
		return n.commitRead(ctx, h)
	}
	return 0
}

func (n *cursorNode) commitRead(ctx context.Context, h *cursorHandle) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.committed || !h.eof || h.covered < h.c.size {
		return 0
	}
	ends := h.c.ends()
	moved := false
	for _, p := range h.c.parts {
		moved = moved || p.end != p.from || !p.known
	}
	if !moved {
		h.committed = true
		return 0
	}
	if n.fsys.opts.ReadOnly {
		return syscall.EROFS
	}
	cb, err := n.fsys.cursorsOf()
	if err == nil {
		err = cb.CommitCursor(ctx, n.topic, n.name, ends)
	}
	if err != nil {
		n.fsys.log.Warn("fusefs: cursor commit failed: the next read starts where this one did", "topic", n.topic, "cursor", n.name, "err", err)
		return n.fsys.errno("commit cursor", err)
	}
	h.committed = true
	n.fsys.log.Debug("fusefs: cursor committed", "topic", n.topic, "partition", n.id, "cursor", n.name, "at", maps.Clone(ends))
	n.remember(0)
	return 0
}

// Release lets the content go and the cursor be opened again.
func (n *cursorNode) Release(ctx context.Context, f fs.FileHandle) syscall.Errno {
	switch h := f.(type) {
	case *cursorWriteHandle:
		return n.flushWrite(ctx, h)
	case *cursorHandle:
		h.mu.Lock()
		done := h.released
		h.released = true
		h.mu.Unlock()
		if !done {
			h.c.release()
			n.fsys.curLocks.release(h.key)
		}
	}
	return 0
}
