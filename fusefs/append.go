package fusefs

import (
	"bytes"
	"context"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
)

// appendNode is an append or append.jsonl file of a topic (partition -1:
// records are partitioned by key) or of one partition. It is write-only and
// always empty; each '\n'-terminated line written to it is one record.
type appendNode struct {
	fs.Inode
	fsys      *fsys
	topic     string
	gen       uint64
	partition int // -1: the topic-level file
	jsonl     bool
}

var (
	_ fs.NodeGetattrer = (*appendNode)(nil)
	_ fs.NodeSetattrer = (*appendNode)(nil)
	_ fs.NodeOpener    = (*appendNode)(nil)
	_ fs.NodeWriter    = (*appendNode)(nil)
	_ fs.NodeFlusher   = (*appendNode)(nil)
	_ fs.NodeFsyncer   = (*appendNode)(nil)
	_ fs.NodeReleaser  = (*appendNode)(nil)
)

func (a *appendNode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | a.fsys.perm(0200)
	out.Nlink = 1
	a.fsys.setTimes(&out.Attr, a.fsys.mounted)
	return 0
}

// Setattr accepts truncation to 0 (bash's "echo x > append" opens with
// O_TRUNC, which arrives as SETATTR size=0) and time changes (touch) as
// no-ops: appends never truncate. Anything else is EPERM.
func (a *appendNode) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if a.fsys.opts.ReadOnly {
		return syscall.EROFS
	}
	if sz, ok := in.GetSize(); ok && sz != 0 {
		return syscall.EPERM
	}
	if _, ok := in.GetMode(); ok {
		return syscall.EPERM
	}
	if _, ok := in.GetUID(); ok {
		return syscall.EPERM
	}
	if _, ok := in.GetGID(); ok {
		return syscall.EPERM
	}
	return a.Getattr(ctx, f, out)
}

// Open opens for writing only (EACCES for reading). Writes bypass the page
// cache (FOPEN_DIRECT_IO): each write(2) reaches Write at once, and the
// kernel skips its per-write security xattr lookup (go-fuse-notes §2).
func (a *appendNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if a.fsys.opts.ReadOnly {
		return nil, 0, syscall.EROFS
	}
	if flags&syscall.O_ACCMODE != syscall.O_WRONLY {
		return nil, 0, syscall.EACCES
	}
	t, err := a.fsys.topic(a.topic, a.gen)
	if err != nil {
		return nil, 0, syscall.ENOENT
	}
	h := &appendHandle{fsys: a.fsys, topic: t, jsonl: a.jsonl, fixed: -1}
	cfg := t.Config()
	if a.partition >= 0 {
		p, err := t.Partition(a.partition)
		if err != nil {
			return nil, 0, syscall.ENOENT
		}
		h.fixed = a.partition
		h.fixedLog = p
		cfg = p.Config()
	}
	h.lc = lineConfig{parseKey: cfg.ParseKey, separator: cfg.KeySeparator, nullMarker: cfg.NullMarker}
	h.maxMessage = cfg.MaxMessageBytes
	h.checkSize = cfg.CompressionType == "none" || cfg.CompressionType == "producer" || cfg.CompressionType == "uncompressed"
	h.batchSize = max(cfg.BatchSize, 1)
	h.linger = time.Duration(max(cfg.LingerMs, 0)) * time.Millisecond
	h.pending = map[int]*pendingBatch{}
	h.sticky = int(a.fsys.sticky.Add(1))
	a.fsys.addWriter(a.topic, 1)
	return h, fuse.FOPEN_DIRECT_IO, 0
}

func (a *appendNode) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	h, ok := f.(*appendHandle)
	if !ok {
		return 0, syscall.EBADF
	}
	return h.write(data)
}

func (a *appendNode) Flush(ctx context.Context, f fs.FileHandle) syscall.Errno {
	h, ok := f.(*appendHandle)
	if !ok {
		return 0
	}
	return h.flush()
}

func (a *appendNode) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	h, ok := f.(*appendHandle)
	if !ok {
		return 0
	}
	return h.fsync()
}

func (a *appendNode) Release(ctx context.Context, f fs.FileHandle) syscall.Errno {
	h, ok := f.(*appendHandle)
	if !ok {
		return 0
	}
	if errno := h.flush(); errno != 0 {
		a.fsys.log.Warn("fusefs: records of a closed append handle not appended", "topic", a.topic, "errno", errno)
	}
	a.fsys.addWriter(a.topic, -1)
	return 0
}

// pendingBatch is the records a handle has buffered for one partition.
type pendingBatch struct {
	p     partitionLog
	recs  []record.Record
	bytes int64
}

// appendHandle is one open append file: its line framing and its batches.
// Lines are framed per handle, so concurrent writers never interleave
// inside a record. Complete lines are parsed and validated inside Write (so
// the writer's write(2) reports a bad line) and buffered; a batch is
// appended when it reaches batch.size, when linger.ms passes (a timer), on
// every close (Flush) and on fsync (which also makes it durable).
type appendHandle struct {
	fsys       *fsys
	topic      *engine.Topic
	fixed      int // the partition of a partition-level file, -1 for the topic's
	fixedLog   partitionLog
	jsonl      bool
	lc         lineConfig
	maxMessage int64
	checkSize  bool // records are stored uncompressed: check their size exactly
	batchSize  int64
	linger     time.Duration

	mu      sync.Mutex // protects everything below
	split   lineSplitter
	pending map[int]*pendingBatch
	sticky  int // keyless records of a topic-level file go here, round robin by batch
	timer   *time.Timer
	err     error // from a background (linger) append; returned by the next call
	// skipping is set while the rest of a too-long line arrives.
	skipping bool
	// broken is set when a write failed after a line was begun: the begun
	// line is dropped at close unless a later write completes it.
	broken bool
	// arena holds the bytes of buffered plain records (they alias it),
	// recs is write's scratch and idle keeps emptied batches for reuse, so
	// a write allocates nothing in the steady state.
	arena   []byte
	recs    []record.Record
	idle    map[int]*pendingBatch
	touched map[int]partitionLog // appended to since open (fsync flushes them)
	written map[int]partitionLog // appended to since the last close
}

// recordSize is the exact size of r alone in an uncompressed v2 batch.
func recordSize(r *record.Record) int64 {
	body := 1 + 1 + 1 // attributes, timestampDelta 0, offsetDelta 0
	body += bytesLen(r.Key) + bytesLen(r.Value) + varintLen(int64(len(r.Headers)))
	for _, h := range r.Headers {
		body += varintLen(int64(len(h.Key))) + len(h.Key) + bytesLen(h.Value)
	}
	return int64(record.HeaderSize + varintLen(int64(body)) + body)
}

func bytesLen(b []byte) int {
	if b == nil {
		return 1
	}
	return varintLen(int64(len(b))) + len(b)
}

// varintLen is the size of v as a zig-zag varint.
func varintLen(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

func (h *appendHandle) parse(line []byte) (record.Record, error) {
	if h.jsonl {
		return parseJSONLine(line)
	}
	return parsePlainLine(line, h.lc)
}

// keyRequired reports whether the topic is compacted now (cleanup.policy
// contains compact; it can change at run time through config): then, as in
// Kafka ("Compacted topic cannot accept message without key"), every record
// needs a key.
func (h *appendHandle) keyRequired() bool {
	return h.topic != nil && h.topic.Config().Compact()
}

// logKeyless logs a refused keyless record of a compacted topic. The caller
// holds h.mu.
func (h *appendHandle) logKeyless() {
	file := "append"
	if h.jsonl {
		file = "append.jsonl"
	}
	if h.fixed >= 0 {
		file = strconv.Itoa(h.fixed) + "/" + file
	}
	h.fsys.log.Warn("fusefs: refused a record without a key (EINVAL): a compacted topic (cleanup.policy contains compact) needs a key on every record, as in Kafka; write KEY<key.separator>VALUE lines with parse.key=true, or give append.jsonl lines a \"key\"",
		"topic", h.topic.Name(), "file", file, "cleanup_policy", h.topic.Config().CleanupPolicy, "parse_key", h.lc.parseKey)
}

// write frames data into lines and buffers their records. Either every
// complete line of data is accepted or none is (the errno says why).
func (h *appendHandle) write(data []byte) (uint32, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.takeErr(); err != nil {
		// A background append failed: this write is refused, and a line
		// begun earlier cannot be completed by it.
		h.broken = h.broken || len(h.split.partial) > 0
		return 0, h.fsys.errno("write", err)
	}
	if h.skipping {
		// Inside a line already refused as too long: refuse the rest of it,
		// including the write that ends it, so no tail of it becomes a
		// record.
		if bytes.IndexByte(data, '\n') >= 0 {
			h.skipping = false
		}
		return 0, syscall.EMSGSIZE
	}
	// Frame without copying data: complete lines are parsed from data (the
	// first one joined with the buffered partial line in the arena), only
	// the unterminated tail is copied for the next write.
	last := bytes.LastIndexByte(data, '\n')
	partial := h.split.partial
	var tail []byte
	if last < 0 {
		if int64(len(partial)+len(data)) > h.maxMessage {
			// An unterminated line that can never fit: drop what was
			// buffered of it and refuse it up to its end.
			h.split.set(nil)
			h.skipping = true
			return 0, syscall.EMSGSIZE
		}
		tail = append(append(make([]byte, 0, len(partial)+len(data)), partial...), data...)
	} else {
		if int64(len(data)-last-1) > h.maxMessage {
			h.split.set(nil)
			h.skipping = true
			return 0, syscall.EMSGSIZE
		}
		if last+1 < len(data) {
			tail = append([]byte(nil), data[last+1:]...)
		}
	}
	keyRequired := last >= 0 && h.keyRequired()
	if len(h.pending) == 0 {
		// No buffered record aliases the arena: reuse all of it.
		h.arena = h.arena[:0]
	}
	if need := len(partial) + last + 1; !h.jsonl && cap(h.arena)-len(h.arena) < need {
		// Records still buffered keep the old arena alive; they are
		// appended within linger.ms.
		h.arena = make([]byte, 0, max(need, min(max(2*cap(h.arena), 4<<10), arenaSize)))
	}
	arenaStart := len(h.arena)
	recs := h.recs[:0]
	defer func() {
		clear(recs)
		h.recs = recs[:0]
	}()
	for rest := data[:last+1]; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		l := rest[:i]
		rest = rest[i+1:]
		var (
			r   record.Record
			err error
		)
		if h.jsonl {
			if len(partial) > 0 {
				l = append(append(make([]byte, 0, len(partial)+len(l)), partial...), l...)
				partial = nil
			}
			r, err = parseJSONLine(l)
		} else {
			start := len(h.arena)
			if len(partial) > 0 {
				h.arena = append(h.arena, partial...)
				partial = nil
			}
			h.arena = append(h.arena, l...)
			r, err = parsePlainLineAliased(h.arena[start:len(h.arena):len(h.arena)], h.lc)
		}
		if err == nil && h.checkSize && recordSize(&r) > h.maxMessage {
			err = errTooLong
		}
		if err == nil && keyRequired && r.Key == nil {
			h.logKeyless()
			err = errKeyRequired
		}
		if err != nil {
			h.arena = h.arena[:arenaStart]
			if err == errTooLong {
				return 0, syscall.EMSGSIZE
			}
			return 0, h.fsys.errno("write", err)
		}
		recs = append(recs, r)
	}
	prev := h.split.partial
	h.split.set(tail)
	if err := h.add(recs); err != nil {
		// The write failed (disk full, ...): keep the framing as it was
		// before it, so a retry of the same bytes continues the line. If a
		// line was begun by an earlier write, it is incomplete now and must
		// not become a record at close.
		h.split.set(prev)
		h.broken = len(prev) > 0
		return 0, h.fsys.errno("write", err)
	}
	if last >= 0 {
		h.broken = false // the begun line was completed
	}
	return uint32(len(data)), 0
}

// add buffers recs and appends full batches. The caller holds h.mu.
func (h *appendHandle) add(recs []record.Record) error {
	var n int
	if h.fixed < 0 {
		n = len(h.topic.Partitions())
		if n == 0 {
			return engine.ErrUnknownPartition
		}
	}
	for i := range recs {
		id := h.fixed
		if id < 0 {
			if recs[i].Key != nil {
				id = partitionForKey(recs[i].Key, n)
			} else {
				id = h.sticky % n
			}
		}
		b := h.pending[id]
		if b == nil {
			p := h.fixedLog
			if p == nil {
				var err error
				if p, err = h.topic.Partition(id); err != nil {
					return err
				}
			}
			if b = h.idle[id]; b != nil {
				delete(h.idle, id)
				b.p = p
			} else {
				b = &pendingBatch{p: p}
			}
			h.pending[id] = b
		}
		b.recs = append(b.recs, recs[i])
		b.bytes += recordSize(&recs[i])
		if b.bytes >= h.batchSize {
			if err := h.appendBatch(id, b); err != nil {
				return err
			}
		}
	}
	if h.linger == 0 {
		return h.appendAll()
	}
	if len(h.pending) > 0 && h.timer == nil {
		h.timer = time.AfterFunc(h.linger, h.lingerFlush)
	}
	return nil
}

// appendBatch appends b's records to its partition. The caller holds h.mu.
func (h *appendHandle) appendBatch(id int, b *pendingBatch) error {
	delete(h.pending, id)
	if h.fixed < 0 && id == h.sticky%max(len(h.topic.Partitions()), 1) {
		h.sticky++ // keyless records move on to the next partition
	}
	if h.touched == nil {
		h.touched = map[int]partitionLog{}
	}
	h.touched[id] = b.p
	if h.written == nil {
		h.written = map[int]partitionLog{}
	}
	h.written[id] = b.p
	_, _, err := b.p.Append(b.recs)
	clear(b.recs) // the arena may be reused once nothing is pending
	b.recs, b.bytes = b.recs[:0], 0
	if cap(b.recs) <= maxIdleRecords {
		if h.idle == nil {
			h.idle = map[int]*pendingBatch{}
		}
		h.idle[id] = b
	}
	return err
}

// arenaSize caps the geometric growth of a handle's arena (MaxWrite, the
// largest WRITE): a steady writer of big WRITEs allocates about one arena
// per arenaSize bytes while records are pending, none when nothing is.
const arenaSize = 1 << 20

// maxIdleRecords bounds the record slice a handle keeps for reuse.
const maxIdleRecords = 1 << 14

// appendAll appends every buffered batch. The caller holds h.mu.
func (h *appendHandle) appendAll() error {
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	var first error
	for id, b := range h.pending {
		if err := h.appendBatch(id, b); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func (h *appendHandle) lingerFlush() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.timer = nil
	if err := h.appendAll(); err != nil && h.err == nil {
		h.err = err
	}
}

func (h *appendHandle) takeErr() error {
	err := h.err
	h.err = nil
	return err
}

// flush commits a final unterminated line as a record and appends every
// buffered batch: close(2) returns only after the records are visible.
func (h *appendHandle) flush() syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	var err error
	h.skipping = false
	if tail := h.split.take(); h.broken {
		// The rest of this line was in a write that failed: a torn line
		// is not a record.
		h.broken = false
		h.fsys.log.Warn("fusefs: dropping an incomplete line after a failed write", "bytes", len(tail))
	} else if len(tail) > 0 {
		r, perr := h.parse(tail)
		switch {
		case perr != nil:
			err = perr
		case h.checkSize && recordSize(&r) > h.maxMessage:
			err = errTooLong
		case r.Key == nil && h.keyRequired():
			h.logKeyless()
			err = errKeyRequired
		default:
			err = h.add([]record.Record{r})
		}
	}
	if aerr := h.appendAll(); err == nil {
		err = aerr
	}
	if serr := h.takeErr(); err == nil {
		err = serr
	}
	h.awaitNotified()
	return h.fsys.errno("flush", err)
}

// notifyWait bounds how long close(2) waits for the kernel to learn of the
// appended records (a notification could in theory wait on a page lock).
const notifyWait = 200 * time.Millisecond

// awaitNotified waits (bounded) until the views of the partitions this
// handle appended to have been told of their growth. The caller holds h.mu.
func (h *appendHandle) awaitNotified() {
	var chans []chan struct{}
	for _, p := range h.written {
		if ch := h.fsys.notified(p); ch != nil {
			chans = append(chans, ch)
		}
	}
	h.written = nil
	if len(chans) == 0 {
		return
	}
	timeout := time.NewTimer(notifyWait)
	defer timeout.Stop()
	for _, ch := range chans {
		select {
		case <-ch:
		case <-timeout.C:
			return
		}
	}
}

// fsync appends what is buffered and flushes the partitions written to.
func (h *appendHandle) fsync() syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	err := h.appendAll()
	if serr := h.takeErr(); err == nil {
		err = serr
	}
	for _, p := range h.touched {
		if ferr := p.Flush(); err == nil {
			err = ferr
		}
	}
	return h.fsys.errno("fsync", err)
}
