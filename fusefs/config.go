package fusefs

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/topicfs/topicfs/backend"
)

// configNode is a topic's config file: reading gives the effective config
// as name=value lines; writing name=value lines alters it. Each write(2)'s
// complete lines are validated and applied inside that write, all or
// nothing, so the writer sees the errno: EINVAL for an unknown name, a bad
// value or a line without '=', ENOSPC, EIO, EMFILE... when the change
// cannot be persisted (then nothing of it is applied). Blank lines and #
// comments are skipped, and a line that restates the current value is a
// no-op, so `cat config > config` works. A final line without '\n' is
// applied at close (FLUSH, where close(2) reports its errno).
// num.partitions=N grows the topic to N partitions (shrinking is EINVAL).
type configNode struct {
	fs.Inode
	fsys  *fsys
	topic string
	gen   uint64
}

var (
	_ fs.NodeGetattrer = (*configNode)(nil)
	_ fs.NodeSetattrer = (*configNode)(nil)
	_ fs.NodeOpener    = (*configNode)(nil)
	_ fs.NodeReader    = (*configNode)(nil)
	_ fs.NodeWriter    = (*configNode)(nil)
	_ fs.NodeFlusher   = (*configNode)(nil)
	_ fs.NodeFsyncer   = (*configNode)(nil)
	_ fs.NodeReleaser  = (*configNode)(nil)
)

// content renders the topic's config.
func (c *configNode) content(ctx context.Context) ([]byte, backend.Topic, error) {
	t, err := c.fsys.topic(ctx, c.topic, c.gen)
	if err != nil {
		return nil, nil, err
	}
	b, err := t.ConfigText(ctx)
	return b, t, err
}

func (c *configNode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	b, _, err := c.content(ctx)
	if err != nil {
		return c.fsys.errno("getattr", err)
	}
	out.Mode = syscall.S_IFREG | c.fsys.perm(0644)
	out.Nlink = 1
	out.Size = uint64(len(b))
	c.fsys.setTimes(&out.Attr, c.fsys.mounted)
	return 0
}

// Setattr accepts truncation to 0 (echo x > config) and time changes;
// chmod and chown are EPERM, as on append (the tree's modes and owners are
// fixed), rather than a chown that succeeds and changes nothing.
func (c *configNode) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if c.fsys.opts.ReadOnly {
		return syscall.EROFS
	}
	if changesOwnerOrMode(in) {
		return syscall.EPERM
	}
	return c.Getattr(ctx, f, out)
}

// configHandle is an open config file: the content at open for reading,
// the line framing for writing.
type configHandle struct {
	content []byte
	topic   backend.Topic
	write   bool

	mu    sync.Mutex
	split lineSplitter
}

// Open serves the content read at open time, bypassing the page cache
// (FOPEN_DIRECT_IO) since the config changes behind the kernel's back.
func (c *configNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	write := flags&syscall.O_ACCMODE != syscall.O_RDONLY
	if write && c.fsys.opts.ReadOnly {
		return nil, 0, syscall.EROFS
	}
	b, t, err := c.content(ctx)
	if err != nil {
		return nil, 0, c.fsys.errno("open", err)
	}
	h := &configHandle{content: b, topic: t, write: write}
	if write {
		c.fsys.addWriter(c.topic, 1)
	}
	return h, fuse.FOPEN_DIRECT_IO, 0
}

func (c *configNode) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h, ok := f.(*configHandle)
	if !ok {
		return nil, syscall.EBADF
	}
	if off >= int64(len(h.content)) {
		return fuse.ReadResultData(nil), 0
	}
	return fuse.ReadResultData(h.content[off:min(int64(len(h.content)), off+int64(len(dest)))]), 0
}

func (c *configNode) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	h, ok := f.(*configHandle)
	if !ok || !h.write {
		return 0, syscall.EBADF
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	lines, tail := h.split.split(data)
	if len(tail) > 1<<16 {
		c.fsys.log.Warn("fusefs: refused a config line over 64 KiB (EINVAL)", "topic", c.topic)
		return 0, syscall.EINVAL
	}
	if err := h.applyLines(ctx, lines); err != nil {
		return 0, c.errno(err)
	}
	h.split.set(tail)
	return uint32(len(data)), 0
}

// errno maps a refused config change and logs why.
func (c *configNode) errno(err error) syscall.Errno {
	c.fsys.log.Warn("fusefs: config change refused, nothing of it applied", "topic", c.topic, "err", err)
	return c.fsys.errno("write config", err)
}

// applyLines parses lines and has the backend validate and apply them
// together. Nothing is applied on error. The caller holds h.mu.
func (h *configHandle) applyLines(ctx context.Context, lines [][]byte) error {
	kv, err := parseConfigLines(lines)
	if err != nil || len(kv) == 0 {
		return err
	}
	return h.topic.AlterConfig(ctx, kv)
}

// parseConfigLines reads name=value lines (blank lines and # comments
// skipped). A name given twice in one write is refused, so that no line
// of a write goes unchecked.
func parseConfigLines(lines [][]byte) (map[string]string, error) {
	kv := map[string]string{}
	for _, l := range lines {
		line := string(bytes.TrimSuffix(l, []byte("\r")))
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%w: config line %q has no '='", backend.ErrInvalidConfig, line)
		}
		name = strings.TrimSpace(name)
		if name == "" {
			return nil, fmt.Errorf("%w: config line %q has no name before '='", backend.ErrInvalidConfig, line)
		}
		if _, dup := kv[name]; dup {
			return nil, fmt.Errorf("%w: %s is set twice in one write", backend.ErrInvalidConfig, name)
		}
		kv[name] = value
	}
	return kv, nil
}

// applyTail applies a final line without '\n' and forgets it.
func (h *configHandle) applyTail(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	tail := h.split.take()
	if len(tail) == 0 {
		return nil
	}
	return h.applyLines(ctx, [][]byte{tail})
}

// Flush applies a final line without '\n' (every other line was applied
// by its write), so close(2) reports its errno.
func (c *configNode) Flush(ctx context.Context, f fs.FileHandle) syscall.Errno {
	h, ok := f.(*configHandle)
	if !ok || !h.write {
		return 0
	}
	if err := h.applyTail(ctx); err != nil {
		return c.errno(err)
	}
	return 0
}

func (c *configNode) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	return c.Flush(ctx, f)
}

func (c *configNode) Release(ctx context.Context, f fs.FileHandle) syscall.Errno {
	h, ok := f.(*configHandle)
	if !ok || !h.write {
		return 0
	}
	if err := h.applyTail(ctx); err != nil {
		c.errno(err)
	}
	c.fsys.addWriter(c.topic, -1)
	return 0
}
