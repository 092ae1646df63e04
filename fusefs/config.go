package fusefs

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/topicfs/topicfs/engine"
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
	topic   *engine.Topic
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
	b, t, err := c.content()
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
	if err := h.applyLines(lines); err != nil {
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

// applyLines validates lines against the topic's config and applies them
// together. Nothing is applied on error. The caller holds h.mu.
func (h *configHandle) applyLines(lines [][]byte) error {
	kv, err := h.accept(lines)
	if err != nil || len(kv) == 0 {
		return err
	}
	return applyConfig(h.topic, kv)
}

// accept validates lines against the topic config, each with the lines
// before it applied, and returns the changes.
func (h *configHandle) accept(lines [][]byte) (map[string]string, error) {
	next := h.topic.Config()
	next.NumPartitions = int64(h.topic.NumPartitions())
	partitions := next.NumPartitions
	add := map[string]string{}
	for _, l := range lines {
		line := string(bytes.TrimSuffix(l, []byte("\r")))
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%w: config line %q has no '='", engine.ErrInvalidConfig, line)
		}
		name = strings.TrimSpace(name)
		if old, err := next.Get(name); err == nil && old == value {
			continue // restates the current value
		}
		if !engine.IsTopicSetting(name) {
			return nil, fmt.Errorf("%w: %s is not a topic setting", engine.ErrInvalidConfig, name)
		}
		if err := next.Set(name, value); err != nil {
			return nil, err
		}
		if name == "num.partitions" && next.NumPartitions < partitions {
			return nil, fmt.Errorf("%w: num.partitions cannot shrink from %d to %d", engine.ErrInvalidConfig, partitions, next.NumPartitions)
		}
		add[name] = value
	}
	return add, nil
}

// applyConfig applies validated changes: the settings (persisted first),
// then new partitions. If adding the partitions fails, the settings are
// put back, so a write applies all or nothing.
func applyConfig(t *engine.Topic, kv map[string]string) error {
	kv = maps.Clone(kv)
	n := -1
	if v, ok := kv["num.partitions"]; ok {
		n, _ = strconv.Atoi(strings.TrimSpace(v))
		delete(kv, "num.partitions")
	}
	old := map[string]string{}
	cur := t.Config()
	for k := range kv {
		v, err := cur.Get(k)
		if err != nil {
			return err
		}
		old[k] = v
	}
	if len(kv) > 0 {
		if err := t.AlterConfig(kv); err != nil {
			return err
		}
	}
	if n > t.NumPartitions() {
		if err := t.AddPartitions(n); err != nil {
			if len(old) > 0 {
				if rerr := t.AlterConfig(old); rerr != nil {
					return fmt.Errorf("%w (and restoring the settings of the same write failed: %v)", err, rerr)
				}
			}
			return err
		}
	}
	return nil
}

// applyTail applies a final line without '\n' and forgets it.
func (h *configHandle) applyTail() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	tail := h.split.take()
	if len(tail) == 0 {
		return nil
	}
	return h.applyLines([][]byte{tail})
}

// Flush applies a final line without '\n' (every other line was applied
// by its write), so close(2) reports its errno.
func (c *configNode) Flush(ctx context.Context, f fs.FileHandle) syscall.Errno {
	h, ok := f.(*configHandle)
	if !ok || !h.write {
		return 0
	}
	if err := h.applyTail(); err != nil {
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
	if err := h.applyTail(); err != nil {
		c.errno(err)
	}
	c.fsys.addWriter(c.topic, -1)
	return 0
}
