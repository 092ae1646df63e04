package fusefs

import (
	"context"
	"errors"
	"slices"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/keyindex"
)

// byKeyNode is by-key/K: reading gives K's latest value and a newline.
// Open for writing, it is a file holding that content (empty with
// O_TRUNC) to edit as any file: the content at the close that follows a
// change becomes K's new value (one trailing newline dropped, as echo adds
// it), one record appended to K's partition.
type byKeyNode struct {
	fs.Inode
	dir *byKeyDir
	ref keyindex.Ref

	mu       sync.Mutex
	writers  []*keyWriteHandle // open writers, newest last
	released chan struct{}     // closed and replaced when a writer is released
}

var (
	_ fs.NodeGetattrer = (*byKeyNode)(nil)
	_ fs.NodeSetattrer = (*byKeyNode)(nil)
	_ fs.NodeOpener    = (*byKeyNode)(nil)
	_ fs.NodeReader    = (*byKeyNode)(nil)
	_ fs.NodeWriter    = (*byKeyNode)(nil)
	_ fs.NodeFlusher   = (*byKeyNode)(nil)
	_ fs.NodeReleaser  = (*byKeyNode)(nil)
)

// content is how a value reads: the value and a newline.
func content(value []byte) []byte {
	return append(append(make([]byte, 0, len(value)+1), value...), '\n')
}

// valueOf is the value a file's content stands for: one trailing newline
// dropped.
func valueOf(content []byte) []byte {
	if n := len(content); n > 0 && content[n-1] == '\n' {
		content = content[:n-1]
	}
	return append([]byte{}, content...)
}

func (n *byKeyNode) attr(a *fuse.Attr, size int) {
	a.Mode = syscall.S_IFREG | n.dir.fsys.perm(0644)
	a.Nlink = 1
	a.Size = uint64(size)
	a.Blksize = viewBlksize
	t := n.dir.fsys.mounted
	a.SetTimes(&t, &t, &t)
}

// Getattr gives the size of an open writer's content, else of the
// current value (a reader's value fixed at its open is not the file's).
func (n *byKeyNode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h, ok := f.(*keyWriteHandle); ok {
		h.mu.Lock()
		defer h.mu.Unlock()
		n.attr(&out.Attr, len(h.buf))
		return 0
	}
	n.awaitWriters(ctx)
	e, _, err := n.dir.find(ctx, n.ref)
	if errors.Is(err, keyindex.ErrNotFound) {
		if h := n.newestWriter(); h != nil {
			// A key being created (touch sets times by path before
			// its close appends the value).
			return n.Getattr(ctx, h, out)
		}
	}
	if err != nil {
		return n.dir.fsys.keyErrno("getattr", err)
	}
	n.attr(&out.Attr, len(e.Value)+1)
	out.SetTimeout(0)
	return 0
}

// newestWriter returns the last writer opened and not yet released.
func (n *byKeyNode) newestWriter() *keyWriteHandle {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.writers) == 0 {
		return nil
	}
	return n.writers[len(n.writers)-1]
}

// addWriter and dropWriter keep n.writers.
func (n *byKeyNode) addWriter(h *keyWriteHandle) {
	n.mu.Lock()
	n.writers = append(n.writers, h)
	if n.released == nil {
		n.released = make(chan struct{})
	}
	n.mu.Unlock()
	n.dir.fsys.addWriter(n.dir.topic, 1)
}

func (n *byKeyNode) dropWriter(h *keyWriteHandle) {
	n.mu.Lock()
	n.writers = slices.DeleteFunc(n.writers, func(o *keyWriteHandle) bool { return o == h })
	if n.released != nil {
		close(n.released)
	}
	n.released = make(chan struct{})
	n.mu.Unlock()
	n.dir.fsys.addWriter(n.dir.topic, -1)
}

// Setattr resizes an open writer's content, or, without a handle
// (truncate(1)), the current value's content at once.
func (n *byKeyNode) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if n.dir.fsys.opts.ReadOnly {
		return syscall.EROFS
	}
	if changesOwnerOrMode(in) {
		return syscall.EPERM
	}
	sz, ok := in.GetSize()
	if !ok {
		return n.Getattr(ctx, f, out)
	}
	if h, isWrite := f.(*keyWriteHandle); isWrite {
		h.mu.Lock()
		errno := h.err
		if errno == 0 {
			if errno = n.checkSize(ctx, int64(sz)); errno != 0 {
				h.err = errno
			} else {
				h.buf = resized(h.buf, int(sz))
				h.changed = true
			}
		}
		h.mu.Unlock()
		if errno != 0 {
			return errno
		}
		return n.Getattr(ctx, f, out)
	}
	if n.ref.Digest != nil {
		return syscall.EINVAL // the key cannot be spelt from its digest name
	}
	if errno := n.checkSize(ctx, int64(sz)); errno != 0 {
		return errno
	}
	n.awaitWriters(ctx)
	e, _, err := n.dir.find(ctx, n.ref)
	if err != nil {
		return n.dir.fsys.keyErrno("setattr", err)
	}
	if errno := n.dir.put(ctx, n.ref.Key, valueOf(resized(content(e.Value), int(sz))), "setattr"); errno != 0 {
		return errno
	}
	n.attr(&out.Attr, int(sz))
	return 0
}

// resized cuts b to size or extends it with zero bytes.
func resized(b []byte, size int) []byte {
	if size <= len(b) {
		return b[:size]
	}
	return append(b, make([]byte, size-len(b))...)
}

// checkSize refuses content of size bytes whose record could pass the
// topic's max.message.bytes: the bound of an uncompressed batch of the one
// record (a few bytes above its exact size, never below), so that a value
// refused is refused by write(2), which the shell reports, not at the
// append after close.
func (n *byKeyNode) checkSize(ctx context.Context, size int64) syscall.Errno {
	t, err := n.dir.fsys.topic(ctx, n.dir.topic, n.dir.gen)
	if err != nil {
		return n.dir.fsys.errno("write", err)
	}
	batch := size + int64(record.HeaderSize+record.MaxRecordOverhead+len(n.ref.Key))
	if limit := t.Settings().MaxRecordBytes; limit > 0 && batch > limit {
		n.dir.fsys.log.Info("fusefs: by-key value larger than max.message.bytes (EMSGSIZE)",
			"topic", n.dir.topic, "key", n.ref.String(), "bytes", size, "max", limit)
		return syscall.EMSGSIZE
	}
	return 0
}

// keyReadHandle holds the value read at open.
type keyReadHandle struct{ data []byte }

// keyWriteHandle is the content of a writer. It is appended once, when
// the last descriptor of the open file is closed (RELEASE): a FLUSH comes
// at every close(2) of any copy, a forked child's too, so appending there
// would publish half-written values. Readers of the key wait for a
// flushed writer's RELEASE (awaitWriters). A handle whose write was
// refused fails its later writes and its close with the same errno and
// appends nothing: the key keeps its value.
type keyWriteHandle struct {
	mu      sync.Mutex
	buf     []byte
	append  bool          // O_APPEND: writes go to the end
	trunc   bool          // opened with O_TRUNC (or created): empty means the empty value
	changed bool          // written or resized
	flushed bool          // a close(2) was seen: RELEASE is near
	err     syscall.Errno // the refused write's errno
	done    bool          // released
}

// pending reports whether releasing h will append (h.mu held).
func (h *keyWriteHandle) pending() bool { return h.err == 0 && (h.changed || h.trunc) && !h.done }

// Open reads the value for a reader; a writer starts from the current
// content (empty with O_TRUNC), as with a regular file.
func (n *byKeyNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	write := flags&syscall.O_ACCMODE != syscall.O_RDONLY
	if write && n.dir.fsys.opts.ReadOnly {
		return nil, 0, syscall.EROFS
	}
	if write && n.ref.Digest != nil {
		return nil, 0, syscall.EINVAL // the key cannot be spelt from its digest name
	}
	n.awaitWriters(ctx)
	e, _, err := n.dir.find(ctx, n.ref)
	if err != nil && (!write || !errors.Is(err, keyindex.ErrNotFound)) {
		return nil, 0, n.dir.fsys.keyErrno("open", err)
	}
	if !write {
		return &keyReadHandle{data: content(e.Value)}, fuse.FOPEN_DIRECT_IO, 0
	}
	h := &keyWriteHandle{append: flags&syscall.O_APPEND != 0, trunc: flags&syscall.O_TRUNC != 0}
	if !h.trunc && err == nil {
		h.buf = content(e.Value)
	}
	n.addWriter(h)
	return h, fuse.FOPEN_DIRECT_IO, 0
}

// Read reads a reader's value, or a writer's content (O_RDWR).
func (n *byKeyNode) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	var data []byte
	switch h := f.(type) {
	case *keyReadHandle:
		data = h.data
	case *keyWriteHandle:
		h.mu.Lock()
		defer h.mu.Unlock()
		data = h.buf
	default:
		return nil, syscall.EBADF
	}
	if off >= int64(len(data)) {
		return fuse.ReadResultData(nil), 0
	}
	end := min(off+int64(len(dest)), int64(len(data)))
	return fuse.ReadResultData(append([]byte{}, data[off:end]...)), 0
}

// Write places data at off (at the end with O_APPEND); content larger
// than the topic's max.message.bytes is refused with EMSGSIZE at once,
// and the handle then changes nothing.
func (n *byKeyNode) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	h, ok := f.(*keyWriteHandle)
	if !ok {
		return 0, syscall.EBADF
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != 0 {
		return 0, h.err
	}
	if h.append {
		off = int64(len(h.buf))
	}
	end := off + int64(len(data))
	if errno := n.checkSize(ctx, end); errno != 0 {
		h.err = errno
		return 0, errno
	}
	if end > int64(len(h.buf)) {
		h.buf = resized(h.buf, int(end))
	}
	copy(h.buf[off:], data)
	h.changed = true
	return uint32(len(data)), 0
}

// Flush reports a refused write to close(2); the content is appended at
// RELEASE.
func (n *byKeyNode) Flush(ctx context.Context, f fs.FileHandle) syscall.Errno {
	h, ok := f.(*keyWriteHandle)
	if !ok {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.flushed = true
	return h.err
}

// Release appends the content of a writer that changed it (or truncated
// it, for the empty value of `: > K`), then wakes readers waiting for it.
// A failure here reaches no caller: it is logged, and the key keeps its
// value.
func (n *byKeyNode) Release(ctx context.Context, f fs.FileHandle) syscall.Errno {
	h, ok := f.(*keyWriteHandle)
	if !ok {
		return 0
	}
	h.mu.Lock()
	var errno syscall.Errno
	if h.pending() {
		errno = n.dir.put(ctx, n.ref.Key, valueOf(h.buf), "release")
		if errno != 0 {
			n.dir.fsys.log.Warn("fusefs: by-key value not stored at close", "topic", n.dir.topic, "key", n.ref.String(), "errno", errno)
		}
	}
	released := h.done
	h.done = true
	h.mu.Unlock()
	if !released {
		n.dropWriter(h)
	}
	return errno
}

// awaitWriters waits, at most releaseGrace, until no writer of the key
// that was closed is still to append: what `echo v > K` wrote is what the
// next `cat K` reads, although the kernel sends RELEASE after close(2)
// returned.
func (n *byKeyNode) awaitWriters(ctx context.Context) {
	var g graceWait
	defer g.stop()
	for {
		n.mu.Lock()
		waiting := false
		for _, h := range n.writers {
			h.mu.Lock()
			waiting = waiting || (h.flushed && h.pending())
			h.mu.Unlock()
		}
		ch := n.released
		n.mu.Unlock()
		if !waiting || g.wait(ctx, ch) != 0 {
			return
		}
	}
}
