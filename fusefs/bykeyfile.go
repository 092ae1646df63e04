package fusefs

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/keyindex"
)

// byKeyNode is by-key/K: reading gives K's latest value and a newline;
// what is written, closed, becomes its new value (one trailing newline
// dropped, as echo adds it).
type byKeyNode struct {
	fs.Inode
	dir *byKeyDir
	ref keyindex.Ref
	// writers counts the open write handles; truncated is set by a
	// truncate to 0 that came without a handle while one is open (the
	// kernel's O_TRUNC), and empties the next unwritten handle's value.
	writers   atomic.Int32
	truncated atomic.Bool
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

func (n *byKeyNode) attr(a *fuse.Attr, size int) {
	a.Mode = syscall.S_IFREG | n.dir.fsys.perm(0644)
	a.Nlink = 1
	a.Size = uint64(size)
	a.Blksize = viewBlksize
	t := n.dir.fsys.mounted
	a.SetTimes(&t, &t, &t)
}

func (n *byKeyNode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	switch h := f.(type) {
	case *keyReadHandle:
		n.attr(&out.Attr, len(h.data))
		return 0
	case *keyWriteHandle:
		h.mu.Lock()
		defer h.mu.Unlock()
		n.attr(&out.Attr, len(h.buf))
		return 0
	}
	e, _, err := n.dir.find(ctx, n.ref)
	if err != nil {
		return n.dir.fsys.keyErrno("getattr", err)
	}
	n.attr(&out.Attr, len(e.Value)+1)
	out.SetTimeout(0)
	return 0
}

// Setattr truncates an open write handle (O_TRUNC, truncate(1)); other
// changes of owner, mode or size are refused.
func (n *byKeyNode) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if n.dir.fsys.opts.ReadOnly {
		return syscall.EROFS
	}
	if changesOwnerOrMode(in) {
		return syscall.EPERM
	}
	if sz, ok := in.GetSize(); ok {
		h, isWrite := f.(*keyWriteHandle)
		if !isWrite {
			return n.truncate(ctx, sz, out)
		}
		h.mu.Lock()
		if int(sz) <= len(h.buf) {
			h.buf = h.buf[:sz]
		} else {
			h.buf = append(h.buf, make([]byte, int(sz)-len(h.buf))...)
		}
		h.dirty = true
		h.mu.Unlock()
	}
	return n.Getattr(ctx, f, out)
}

// truncate handles a size change without a handle: open(O_TRUNC) (the
// kernel truncates after the open, without naming the handle) or
// truncate(1) of a path. Only 0 is taken: the value becomes empty.
func (n *byKeyNode) truncate(ctx context.Context, size uint64, out *fuse.AttrOut) syscall.Errno {
	if size != 0 {
		return syscall.EINVAL
	}
	if n.writers.Load() > 0 {
		n.truncated.Store(true)
		n.attr(&out.Attr, 0)
		return 0
	}
	if n.ref.Digest != nil {
		return syscall.EINVAL
	}
	t, err := n.dir.fsys.topic(ctx, n.dir.topic, n.dir.gen)
	if err != nil {
		return n.dir.fsys.errno("setattr", err)
	}
	if errno := n.dir.put(ctx, partitionForKey(n.ref.Key, t.NumPartitions()), record.Record{Key: n.ref.Key, Value: []byte{}}, "setattr"); errno != 0 {
		return errno
	}
	n.attr(&out.Attr, 1)
	return 0
}

// keyReadHandle holds the value read at open.
type keyReadHandle struct{ data []byte }

// keyWriteHandle collects the new value until FLUSH.
type keyWriteHandle struct {
	mu     sync.Mutex
	buf    []byte
	append bool // O_APPEND: writes go to the end
	dirty  bool // buf differs from what was last appended
	done   bool // released
}

// Open reads the value for a reader; a writer starts from the current
// content (empty with O_TRUNC), as a regular file does.
func (n *byKeyNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	write := flags&syscall.O_ACCMODE != syscall.O_RDONLY
	if write && n.dir.fsys.opts.ReadOnly {
		return nil, 0, syscall.EROFS
	}
	if write && n.ref.Digest != nil {
		return nil, 0, syscall.EINVAL // the key cannot be spelt from its digest name
	}
	e, _, err := n.dir.find(ctx, n.ref)
	if err != nil && (!write || !errors.Is(err, keyindex.ErrNotFound)) {
		return nil, 0, n.dir.fsys.keyErrno("open", err)
	}
	if !write {
		return &keyReadHandle{data: content(e.Value)}, fuse.FOPEN_DIRECT_IO, 0
	}
	// Writing replaces the value; O_APPEND adds to it.
	h := &keyWriteHandle{append: flags&syscall.O_APPEND != 0}
	if h.append && err == nil {
		h.buf = content(e.Value)
	}
	n.writers.Add(1)
	n.dir.fsys.addWriter(n.dir.topic, 1)
	return h, fuse.FOPEN_DIRECT_IO, 0
}

func (n *byKeyNode) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h, ok := f.(*keyReadHandle)
	if !ok {
		return nil, syscall.EBADF
	}
	if off >= int64(len(h.data)) {
		return fuse.ReadResultData(nil), 0
	}
	return fuse.ReadResultData(h.data[off:min(off+int64(len(dest)), int64(len(h.data)))]), 0
}

// Write places data at off (at the end with O_APPEND); a value larger
// than the topic's max.message.bytes is refused with EMSGSIZE at once.
func (n *byKeyNode) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	h, ok := f.(*keyWriteHandle)
	if !ok {
		return 0, syscall.EBADF
	}
	t, err := n.dir.fsys.topic(ctx, n.dir.topic, n.dir.gen)
	if err != nil {
		return 0, n.dir.fsys.errno("write", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.append {
		off = int64(len(h.buf))
	}
	end := off + int64(len(data))
	if limit := t.Settings().MaxRecordBytes; limit > 0 && end > limit {
		n.dir.fsys.log.Info("fusefs: by-key value larger than max.message.bytes (EMSGSIZE)",
			"topic", n.dir.topic, "key", n.ref.String(), "bytes", end, "max", limit)
		return 0, syscall.EMSGSIZE
	}
	if end > int64(len(h.buf)) {
		h.buf = append(h.buf, make([]byte, end-int64(len(h.buf)))...)
	}
	copy(h.buf[off:], data)
	h.dirty = true
	return uint32(len(data)), 0
}

// Flush appends the value written (once per change): close(2) reports a
// refused record.
func (n *byKeyNode) Flush(ctx context.Context, f fs.FileHandle) syscall.Errno {
	h, ok := f.(*keyWriteHandle)
	if !ok {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.dirty && len(h.buf) == 0 && n.truncated.Swap(false) {
		h.dirty = true // open(O_TRUNC) and nothing written: the empty value
	}
	if !h.dirty {
		return 0
	}
	value := h.buf
	if len(value) > 0 && value[len(value)-1] == '\n' {
		value = value[:len(value)-1]
	}
	t, err := n.dir.fsys.topic(ctx, n.dir.topic, n.dir.gen)
	if err != nil {
		return n.dir.fsys.errno("flush", err)
	}
	id := partitionForKey(n.ref.Key, t.NumPartitions())
	if errno := n.dir.put(ctx, id, record.Record{Key: n.ref.Key, Value: append([]byte{}, value...)}, "flush"); errno != 0 {
		return errno
	}
	h.dirty = false
	return 0
}

func (n *byKeyNode) Release(ctx context.Context, f fs.FileHandle) syscall.Errno {
	h, ok := f.(*keyWriteHandle)
	if !ok {
		return 0
	}
	errno := n.Flush(ctx, f)
	h.mu.Lock()
	released := h.done
	h.done = true
	h.mu.Unlock()
	if !released {
		n.writers.Add(-1)
		n.dir.fsys.addWriter(n.dir.topic, -1)
	}
	return errno
}
