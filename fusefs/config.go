package fusefs

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/topicfs/topicfs/engine"
)

// configNode is a topic's config file: reading gives the effective config
// as name=value lines; writing name=value lines alters it. Lines are
// validated in write(2) (EINVAL for an unknown name, a bad value or a line
// without '='), blank lines and # comments are skipped, and a line that
// restates the current value is a no-op, so `cat config > config` works.
// The accepted lines are applied together when the file is closed: all or
// nothing. num.partitions=N grows the topic to N partitions (shrinking is
// EINVAL).
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

// content renders the topic's config; num.partitions shows the actual count.
func (c *configNode) content() ([]byte, *engine.Topic, error) {
	t, err := c.fsys.topic(c.topic, c.gen)
	if err != nil {
		return nil, nil, err
	}
	cfg := t.Config()
	cfg.NumPartitions = int64(t.NumPartitions())
	return []byte(cfg.String()), t, nil
}

func (c *configNode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	b, _, err := c.content()
	if err != nil {
		return c.fsys.errno("getattr", err)
	}
	out.Mode = syscall.S_IFREG | c.fsys.perm(0644)
	out.Nlink = 1
	out.Size = uint64(len(b))
	c.fsys.setTimes(&out.Attr, c.fsys.mounted)
	return 0
}

// Setattr accepts truncation to 0 (echo x > config) and time changes.
func (c *configNode) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if c.fsys.opts.ReadOnly {
		return syscall.EROFS
	}
	if _, ok := in.GetMode(); ok {
		return syscall.EPERM
	}
	return c.Getattr(ctx, f, out)
}

// configHandle is an open config file: the content at open for reading,
// the accepted lines for writing.
type configHandle struct {
	content []byte
	topic   *engine.Topic
	write   bool

	mu      sync.Mutex
	split   lineSplitter
	kv      map[string]string // accepted changes
	bad     bool              // a line was refused: apply nothing
	applied bool
}

// Open serves the content read at open time, bypassing the page cache
// (FOPEN_DIRECT_IO) since the config changes behind the kernel's back.
func (c *configNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	write := flags&syscall.O_ACCMODE != syscall.O_RDONLY
	if write && c.fsys.opts.ReadOnly {
		return nil, 0, syscall.EROFS
	}
	b, t, err := c.content()
	if err != nil {
		return nil, 0, c.fsys.errno("open", err)
	}
	h := &configHandle{content: b, topic: t, write: write, kv: map[string]string{}}
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
		h.bad = true
		return 0, syscall.EINVAL
	}
	if err := h.accept(lines); err != nil {
		h.bad = true
		return 0, c.fsys.errno("write config", err)
	}
	h.split.set(tail)
	return uint32(len(data)), 0
}

// accept validates lines against the topic config with every earlier
// accepted line applied, and records them. Nothing is recorded on error.
func (h *configHandle) accept(lines [][]byte) error {
	cur := h.topic.Config()
	cur.NumPartitions = int64(h.topic.NumPartitions())
	partitions := cur.NumPartitions
	next, err := cur.Apply(h.kv)
	if err != nil {
		return err
	}
	add := map[string]string{}
	for _, l := range lines {
		line := string(bytes.TrimSuffix(l, []byte("\r")))
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok {
			return fmt.Errorf("%w: config line %q has no '='", engine.ErrInvalidConfig, line)
		}
		name = strings.TrimSpace(name)
		if old, err := next.Get(name); err == nil && old == value {
			continue // restates the current value
		}
		if !engine.IsTopicSetting(name) {
			return fmt.Errorf("%w: %s is not a topic setting", engine.ErrInvalidConfig, name)
		}
		if err := next.Set(name, value); err != nil {
			return err
		}
		if name == "num.partitions" && next.NumPartitions < partitions {
			return fmt.Errorf("%w: num.partitions cannot shrink from %d to %d", engine.ErrInvalidConfig, partitions, next.NumPartitions)
		}
		add[name] = value
	}
	for k, v := range add {
		h.kv[k] = v
	}
	return nil
}

// apply commits the accepted lines (and a final unterminated one) once.
func (h *configHandle) apply() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if tail := h.split.take(); len(tail) > 0 && !h.bad {
		if err := h.accept([][]byte{tail}); err != nil {
			h.bad = true
			return err
		}
	}
	if h.bad || h.applied || len(h.kv) == 0 {
		return nil
	}
	kv := map[string]string{}
	for k, v := range h.kv {
		kv[k] = v
	}
	if v, ok := kv["num.partitions"]; ok {
		n, _ := strconv.Atoi(strings.TrimSpace(v))
		delete(kv, "num.partitions")
		if n > h.topic.NumPartitions() {
			if err := h.topic.AddPartitions(n); err != nil {
				return err
			}
		}
	}
	if len(kv) > 0 {
		if err := h.topic.AlterConfig(kv); err != nil {
			return err
		}
	}
	h.kv = map[string]string{}
	return nil
}

func (c *configNode) Flush(ctx context.Context, f fs.FileHandle) syscall.Errno {
	h, ok := f.(*configHandle)
	if !ok || !h.write {
		return 0
	}
	return c.fsys.errno("apply config", h.apply())
}

func (c *configNode) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	return c.Flush(ctx, f)
}

func (c *configNode) Release(ctx context.Context, f fs.FileHandle) syscall.Errno {
	h, ok := f.(*configHandle)
	if !ok || !h.write {
		return 0
	}
	if err := h.apply(); err != nil {
		c.fsys.log.Warn("fusefs: config change not applied", "topic", c.topic, "err", err)
	}
	c.fsys.addWriter(c.topic, -1)
	return 0
}
