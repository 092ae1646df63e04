package fusefs

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/topicfs/topicfs/backend"
)

// maxCursorLine bounds what a write to a cursor file may hold: one line
// naming a position.
const maxCursorLine = 4096

// cursorWriteHandle is a cursor open for writing: the line it collects,
// applied at FLUSH (close(2) reports a bad one).
type cursorWriteHandle struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write moves the cursor to each complete line (so echo reports a bad
// one); a final line without '\n' is applied at FLUSH.
func (n *cursorNode) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	h, ok := f.(*cursorWriteHandle)
	if !ok {
		return 0, syscall.EBADF
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.buf.Len()+len(data) > maxCursorLine {
		n.fsys.log.Warn("fusefs: a cursor position is one short line (EINVAL)", "topic", n.topic, "cursor", n.name)
		return 0, syscall.EINVAL
	}
	h.buf.Write(data)
	for {
		i := bytes.IndexByte(h.buf.Bytes(), '\n')
		if i < 0 {
			return uint32(len(data)), 0
		}
		line := string(h.buf.Next(i + 1))
		if errno := n.move(ctx, line); errno != 0 {
			h.buf.Reset()
			return 0, errno
		}
	}
}

// flushWrite applies a final line without '\n'.
func (n *cursorNode) flushWrite(ctx context.Context, h *cursorWriteHandle) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	line := h.buf.String()
	h.buf.Reset()
	return n.move(ctx, line)
}

// move moves the cursor to the position line names; a blank line changes
// nothing.
func (n *cursorNode) move(ctx context.Context, line string) syscall.Errno {
	line = strings.TrimSpace(line)
	if line == "" {
		return 0
	}
	offs, err := n.resolve(ctx, line)
	if err != nil {
		n.fsys.log.Warn("fusefs: cursor not moved", "topic", n.topic, "cursor", n.name, "position", line, "err", err)
		return n.fsys.errno("move cursor", err)
	}
	cb, err := n.fsys.cursorsOf()
	if err == nil {
		err = cb.CommitCursor(ctx, n.topic, n.name, offs)
	}
	if err != nil {
		n.fsys.log.Warn("fusefs: cursor not moved", "topic", n.topic, "cursor", n.name, "position", line, "err", err)
		return n.fsys.errno("move cursor", err)
	}
	n.fsys.log.Info("fusefs: cursor moved", "topic", n.topic, "partition", n.id, "cursor", n.name, "position", line, "at", offs)
	return 0
}

// resolve turns a written position into offsets per partition: a decimal
// offset (for one partition it must lie within the retained range; for a
// topic it applies to every partition, kept within each one's range),
// earliest, latest, or any time by-time/ takes (the first record at or
// after it).
func (n *cursorNode) resolve(ctx context.Context, line string) (map[int]int64, error) {
	t, ids, err := n.ids(ctx)
	if err != nil {
		return nil, err
	}
	num, numErr := strconv.ParseInt(line, 10, 64)
	isNum := numErr == nil && line[0] != '-' && line[0] != '+'
	var spec timeSpec
	if !isNum && line != "earliest" && line != "latest" {
		if spec, _, err = parseByTime(line); err != nil || strings.HasSuffix(line, jsonlSuffix) {
			return nil, fmt.Errorf("%w: %q is no offset, earliest, latest or time (as by-time/ names)", errParse, line)
		}
	}
	now := time.Now()
	bounds, err := backend.TopicOffsets(ctx, t, ids)
	if err != nil {
		return nil, err
	}
	offs := map[int]int64{}
	for _, id := range ids {
		b := bounds[id]
		switch {
		case line == "earliest":
			offs[id] = b.LogStart
		case line == "latest":
			offs[id] = b.End
		case isNum && n.id >= 0 && (num < b.LogStart || num > b.End):
			return nil, fmt.Errorf("%w: offset %d is outside partition %d's retained offsets [%d, %d]", errParse, num, id, b.LogStart, b.End)
		case isNum:
			offs[id] = min(max(num, b.LogStart), b.End)
		default:
			p, err := t.Partition(id)
			if err != nil {
				return nil, err
			}
			off, err := p.OffsetForTime(ctx, spec.resolve(now))
			if err != nil {
				return nil, err
			}
			offs[id] = min(max(off, b.LogStart), b.End)
		}
	}
	return offs, nil
}
