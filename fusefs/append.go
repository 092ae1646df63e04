package fusefs

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
)

// Append files: the node (open, write, flush, fsync, close) and the handle
// that frames a WRITE into lines, validates them as records and buffers them.
// Batching per partition is in appendbatch.go, background appends in
// appendjobs.go, too-long and final lines in appendline.go.

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
	// The preferred write size is the largest WRITE the mount takes:
	// cat (coreutils io_blksize) then writes 1 MiB at a time, and the
	// kernel hands each write(2) over as one WRITE instead of eight
	// 128 KiB ones.
	out.Blksize = appendBlksize
	a.fsys.setTimes(&out.Attr, a.fsys.mounted)
	return 0
}

// appendBlksize is st_blksize of append files: MaxWrite (see Mount).
const appendBlksize = maxWrite

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
	if changesOwnerOrMode(in) {
		return syscall.EPERM
	}
	return a.Getattr(ctx, f, out)
}

// changesOwnerOrMode reports whether a SETATTR asks for chmod, chown or
// chgrp, which the writable files refuse (EPERM): the tree's modes and
// owners are fixed.
func changesOwnerOrMode(in *fuse.SetAttrIn) bool {
	_, mode := in.GetMode()
	_, uid := in.GetUID()
	_, gid := in.GetGID()
	return mode || uid || gid
}

// Open opens for writing only (EACCES for reading). Writes bypass the page
// cache (FOPEN_DIRECT_IO): each write(2) reaches Write at once, and the
// kernel skips its per-write security xattr lookup (docs/FUSE.md §2).
func (a *appendNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if a.fsys.opts.ReadOnly {
		return nil, 0, syscall.EROFS
	}
	if flags&syscall.O_ACCMODE != syscall.O_WRONLY {
		return nil, 0, syscall.EACCES
	}
	t, err := a.fsys.writeTopic(ctx, a.topic, a.gen)
	if err != nil {
		return nil, 0, a.fsys.errno("open", err)
	}
	h := &appendHandle{fsys: a.fsys, topic: t, jsonl: a.jsonl, fixed: -1}
	if a.partition >= 0 {
		p, err := t.Partition(a.partition)
		if err != nil {
			return nil, 0, a.fsys.errno("open", err)
		}
		h.fixed = a.partition
		h.fixedLog = p
	}
	cfg := t.Settings()
	h.lc = lineConfig{parseKey: cfg.ParseKey, separator: cfg.KeySeparator, nullMarker: cfg.NullMarker}
	h.maxMessage = cfg.MaxRecordBytes
	h.checkSize = cfg.Uncompressed
	h.batchSize = max(cfg.BatchSize, 1)
	h.linger = time.Duration(max(cfg.LingerMs, 0)) * time.Millisecond
	h.sticky = int(a.fsys.sticky.Add(1))
	a.fsys.addWriter(a.topic, 1)
	return h, fuse.FOPEN_DIRECT_IO, 0
}

func (a *appendNode) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	h, ok := f.(*appendHandle)
	if !ok {
		return 0, syscall.EBADF
	}
	testPanic("write", &a.Inode, "")
	return h.write(data)
}

func (a *appendNode) Flush(ctx context.Context, f fs.FileHandle) syscall.Errno {
	h, ok := f.(*appendHandle)
	if !ok {
		return 0
	}
	return a.fsys.interruptible(ctx, "flush", h.flush)
}

func (a *appendNode) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	h, ok := f.(*appendHandle)
	if !ok {
		return 0
	}
	return a.fsys.interruptible(ctx, "fsync", h.fsync)
}

func (a *appendNode) Release(ctx context.Context, f fs.FileHandle) syscall.Errno {
	h, ok := f.(*appendHandle)
	if !ok {
		return 0
	}
	if errno := h.release(); errno != 0 {
		a.fsys.log.Warn("fusefs: records of a closed append handle not appended", "topic", a.topic, "errno", errno)
	}
	a.fsys.addWriter(a.topic, -1)
	return 0
}

// minSplit is the least WRITE part Write leaves to its job (below it, the
// hand-off costs more than it balances).
const minSplit = 64 << 10

// appendHandle is one open append file: its line framing and its batches.
// Lines are framed per handle, so concurrent writers never interleave
// inside a record. Complete lines are parsed and validated inside Write (so
// the writer's write(2) reports a bad line) and buffered; a batch is
// appended when it reaches batch.size (the full batches of a WRITE in one
// engine call per partition, in the background with linger.ms > 0), when
// linger.ms passes (a timer), on every close (Flush) and on fsync (which
// also makes it durable). Close and fsync wait for the background appends.
type appendHandle struct {
	fsys       *fsys
	topic      backend.Topic
	fixed      int // the partition of a partition-level file, -1 for the topic's
	fixedLog   backend.Partition
	jsonl      bool
	lc         lineConfig
	maxMessage int64
	checkSize  bool // records are stored uncompressed: check their size exactly
	batchSize  int64
	linger     time.Duration

	mu     sync.Mutex // protects everything below
	split  lineSplitter
	parts  []*partBatch // by partition id; nil: not written to yet
	dirty  []int        // partitions routed to by the current write
	sticky int          // keyless records of a topic-level file go here, round robin by batch
	timer  *time.Timer
	err    error // from a background (linger or job) append; returned by the next call
	// jobs are the background appends in flight, oldest first (at most
	// maxJobs): each runs after the one before it, so the engine goes
	// from one WRITE's batches straight to the next.
	jobs []*appendJob
	// acks are the records jobs handed to a remote log (backend.Enqueuer)
	// and not yet known acknowledged, oldest first (at most maxAcks).
	acks []backend.Pending
	// long is the state of a line refused as too long whose rest may
	// still arrive (appendline.go).
	long longLine
	// tailHeld: a FLUSH left an unterminated line, which readers of the
	// topic wait for (fsys.holdTail) until RELEASE or the next write.
	tailHeld bool
	// broken is set when a write failed after a line was begun: the begun
	// line is dropped at close unless a later write completes it.
	broken bool
	// Reused buffers, so a write allocates nothing in the steady state:
	// recs and sizes are write's scratch; bulk holds the lines of WRITEs
	// whose full batches are appended in the background (one per job in
	// flight and one for the WRITE being framed); arena holds the bytes
	// of records still pending after their WRITE returned; join is a
	// line begun in an earlier WRITE joined with its end; tail is the
	// spare buffer of the unterminated rest; spareJobs are finished jobs.
	recs      []record.Record
	sizes     []int64
	bulk      [maxJobs + 1][]byte
	arena     []byte
	join      []byte
	tail      []byte
	spareJobs []*appendJob
}

// recordSize is the exact size of r alone in an uncompressed v2 batch.
func recordSize(r *record.Record) int64 {
	body := 1 + 1 + 1 // attributes, timestampDelta 0, offsetDelta 0
	body += bytesLen(r.Key) + bytesLen(r.Value) + record.VarintLen(int64(len(r.Headers)))
	for _, h := range r.Headers {
		body += record.VarintLen(int64(len(h.Key))) + len(h.Key) + bytesLen(h.Value)
	}
	return int64(record.HeaderSize + record.VarintLen(int64(body)) + body)
}

func bytesLen(b []byte) int {
	if b == nil {
		return 1
	}
	return record.VarintLen(int64(len(b))) + len(b)
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
	return h.topic != nil && h.topic.Settings().Compacted
}

// logKeyless logs a refused keyless record of a compacted topic. The caller
// holds h.mu.
func (h *appendHandle) logKeyless() {
	file := h.fileName()
	h.fsys.log.Warn("fusefs: refused a record without a key (EINVAL): a compacted topic (cleanup.policy contains compact) needs a key on every record, as in Kafka; write KEY<key.separator>VALUE lines with parse.key=true, or give append.jsonl lines a \"key\"",
		"topic", h.topic.Name(), "file", file, "parse_key", h.lc.parseKey)
}

// setTail makes the unterminated rest a copy of a then b, in the spare
// buffer (the current one becomes the spare).
func (h *appendHandle) setTail(a, b []byte) {
	if len(a)+len(b) == 0 {
		h.tail = h.split.take()[:0]
		return
	}
	t := append(append(h.tail[:0], a...), b...)
	h.tail = h.split.take()[:0]
	h.split.set(t)
}

// failed is the errno of a write refused because an earlier background
// append failed; a line begun earlier cannot be completed by it.
func (h *appendHandle) failed(err error) (uint32, syscall.Errno) {
	h.broken = h.broken || len(h.split.partial) > 0
	return 0, h.fsys.errno("write", err)
}

// write frames data into lines and buffers their records. Either every
// complete line of data is accepted or none is (the errno says why), except
// at a line too long for max.message.bytes (see overlong): the complete
// lines before it are accepted, with a short count.
func (h *appendHandle) write(data []byte) (uint32, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for len(h.jobs) > 0 && h.jobs[0].finished() {
		if err := h.reap(); err != nil && h.err == nil {
			h.err = err
		}
	}
	if err := h.reapAcks(); err != nil && h.err == nil {
		h.err = err
	}
	h.keepTail() // the descriptor is still written to: a begun line is not final
	if err := h.takeErr(); err != nil {
		// A background append failed: this write is refused.
		return h.failed(err)
	}
	if h.long.active {
		return h.writeInLong(data)
	}
	return h.writeFramed(data)
}

// writeLines is write for data in which no line is too long by the bound
// of overlong. The caller holds h.mu. It stays one function: its steps
// (frame, validate, wait for room, route, hand off, keep) share the state
// of one WRITE and must run in this order.
func (h *appendHandle) writeLines(data []byte) (uint32, syscall.Errno) {
	last := bytes.LastIndexByte(data, '\n')
	partial := h.split.partial
	if last < 0 {
		h.setTail(partial, data)
		return uint32(len(data)), 0
	}
	async := h.linger > 0
	lines := data[:last+1]
	keyRequired := h.keyRequired()
	valueOnly := !h.jsonl && (!h.lc.parseKey || h.lc.separator == "")
	bareLines := async && h.fixed >= 0 && valueOnly && !keyRequired && int64(len(partial)+len(lines)) >= h.batchSize
	if bareLines {
		return h.writeBare(partial, lines, data[last+1:], len(data))
	}
	bulk, prefix := -1, 0 // prefix: bytes of the begun line in front of lines
	if async && !h.jsonl {
		// Full batches are appended after Write returns, when go-fuse has
		// reused data: frame a copy (with the begun line in front).
		var err error
		if bulk, lines, err = h.copyBulk(partial, lines); err != nil {
			return h.failed(err)
		}
		prefix, partial = len(partial), nil
	}

	// Parse and validate every complete line before anything changes:
	// into the partition's pending records for a partition-level file
	// (the job in flight has its own slice), else into scratch.
	var fixed *partBatch
	recs := h.recs[:0]
	if h.fixed >= 0 {
		fixed = h.fixedBatch()
		recs = fixed.recs
	}
	base := len(recs)
	recs, sizes, at, err := h.parseLines(recs, h.sizes[:0], partial, lines, valueOnly, keyRequired)
	if err != nil {
		h.drop(fixed, recs, base)
		if errors.Is(err, errTooLong) {
			return h.tooLongAt(data, at-prefix)
		}
		return 0, h.fsys.errno("write", err)
	}
	h.sizes = sizes[:0]
	for async && len(h.jobs) >= maxJobs {
		// Wait for room (an error of an earlier WRITE's batches is this
		// write's).
		if err := h.reap(); err != nil {
			h.drop(fixed, recs, base)
			return h.failed(err)
		}
	}
	h.keepRecs(fixed, recs)
	n, err := h.resolve()
	if err != nil {
		return 0, h.fsys.errno("write", err)
	}
	h.route(recs[base:], sizes, n)

	// Hand the full batches (every record, without linger.ms) to the
	// engine: in the background with linger.ms, else now.
	job := h.newJob()
	job.bulk = bulk
	for _, id := range h.dirty {
		h.take(job, id, h.parts[id], !async, n)
	}
	if len(job.items) > 0 {
		if async {
			h.start(job)
		} else if err := h.runNow(job); err != nil {
			// The write failed (disk full, ...): keep the framing as it
			// was before it, so a retry of the same bytes continues the
			// line. If a line was begun by an earlier write, it is
			// incomplete now and must not become a record at close.
			h.dirty = h.dirty[:0]
			h.broken = len(h.split.partial) > 0
			return 0, h.fsys.errno("write", err)
		}
	} else {
		h.spareJobs = append(h.spareJobs, job)
	}
	h.keep()
	h.setTail(nil, data[last+1:])
	h.broken = false // the begun line was completed
	if h.pending() && h.timer == nil {
		h.timer = time.AfterFunc(h.linger, h.lingerFlush)
	}
	return uint32(len(data)), 0
}

// parseLines parses and validates the complete lines of lines (the first
// one after partial, the begun line) into recs, their recordSizes into
// sizes. On error it also returns where the refused line starts in lines.
// The records alias lines (and h.join). The caller holds h.mu.
func (h *appendHandle) parseLines(recs []record.Record, sizes []int64, partial, lines []byte, valueOnly, keyRequired bool) ([]record.Record, []int64, int, error) {
	for rest := lines; len(rest) > 0; {
		at := len(lines) - len(rest)
		i := bytes.IndexByte(rest, '\n')
		l := rest[:i:i]
		rest = rest[i+1:]
		if len(partial) > 0 {
			h.join = append(append(h.join[:0], partial...), l...)
			l = h.join[:len(h.join):len(h.join)]
			partial = nil
		}
		if valueOnly {
			size := valueRecordSize(len(l))
			if (h.checkSize && size > h.maxMessage) || keyRequired {
				return recs, sizes, at, h.check(nil, size, keyRequired)
			}
			recs = append(recs, record.Record{Timestamp: -1, Value: l})
			sizes = append(sizes, size)
			continue
		}
		var (
			r   record.Record
			err error
		)
		if h.jsonl {
			r, err = parseJSONLine(l)
		} else {
			r, err = parsePlainLineAliased(l, h.lc)
		}
		size := recordSize(&r)
		if err == nil {
			err = h.check(r.Key, size, keyRequired)
		} else {
			h.logRefused(err, len(l))
		}
		if err != nil {
			return recs, sizes, at, err
		}
		recs = append(recs, r)
		sizes = append(sizes, size)
	}
	return recs, sizes, 0, nil
}

// writeBare is write's path for a WRITE that brings at least batch.size
// of whole lines to a partition-level file of bare values (the common
// "cat lines > TOPIC/0/append"): no Record per line. On an uncompressed
// topic the lines (partial, the begun line, in front) are encoded into
// batches right here, straight from the request (Partition.EncodeLines:
// one pass, no copy of the WRITE first) — of a WRITE of at least
// 2*minSplit only the first half, the rest copied for its job to encode —
// and the background job appends them (AppendEncoded) after the
// partition's pending records, when the job before it is done. On a
// compressed topic the lines are copied and the job hands them to
// AppendLines. Batches are cut at batch.size from the WRITE's first line
// on; the last may be short rather than wait for the next WRITE. rest is
// the unterminated end of the WRITE, n its size. The caller holds h.mu.
func (h *appendHandle) writeBare(partial, lines, rest []byte, n int) (uint32, syscall.Errno) {
	for len(h.jobs) >= maxJobs {
		// Wait for room (an error of an earlier WRITE's batches is this
		// write's).
		if err := h.reap(); err != nil {
			return h.failed(err)
		}
	}
	pb := h.fixedBatch()
	job := h.newJob()
	job.linesLog, job.batchSize = pb.p, int(h.batchSize)
	job.linesEng, _ = pb.p.(lineEncoder)
	err := h.encodeBare(job, partial, lines)
	if errors.Is(err, engine.ErrNotEncodable) {
		job.enc.Reset()
		job.bulk, job.lines, err = h.copyBulk(partial, lines)
	}
	if err != nil {
		job.enc.Reset()
		job.bulk, job.lines = -1, nil
		h.spareJobs = append(h.spareJobs, job)
		return 0, h.fsys.errno("write", err)
	}
	h.take(job, h.fixed, pb, true, 0)
	pb.touched, pb.written = true, true
	h.start(job)
	h.setTail(nil, rest)
	h.broken = false // a begun line was completed
	return uint32(n), 0
}

// encodeBare encodes partial+lines into job.enc (the begun line joined
// with its end first), leaving the second half of a large WRITE to the
// job (a copy in job.lines): the chain cat waits on (its write, go-fuse's
// read, this handler) and the job chain (the disk write) are balanced when
// Write encodes about half. The caller holds h.mu.
func (h *appendHandle) encodeBare(job *appendJob, partial, lines []byte) error {
	p := job.linesEng
	if p == nil {
		return engine.ErrNotEncodable // not on local disk: the job appends the lines
	}
	if len(partial) > 0 {
		i := bytes.IndexByte(lines, '\n')
		h.join = append(append(h.join[:0], partial...), lines[:i+1]...)
		if err := p.EncodeLines(&job.enc, h.join, job.batchSize); err != nil {
			return err
		}
		lines = lines[i+1:]
	}
	var tail []byte
	if half := len(lines) / 2; len(lines) >= 2*minSplit {
		if j := bytes.IndexByte(lines[half:], '\n'); j >= 0 && half+j+1 < len(lines) {
			lines, tail = lines[:half+j+1], lines[half+j+1:]
		}
	}
	if len(lines) > 0 {
		if err := p.EncodeLines(&job.enc, lines, job.batchSize); err != nil {
			return err
		}
	}
	job.encoded = true
	if tail != nil {
		var err error
		job.bulk, job.lines, err = h.copyBulk(nil, tail)
		return err
	}
	return nil
}

// valueRecordSize is the size of a record of an n-byte value alone
// (no key, no headers) in an uncompressed v2 batch (recordSize inlined).
func valueRecordSize(n int) int64 {
	body := 5 + record.VarintLen(int64(n)) + n
	return int64(record.HeaderSize + record.VarintLen(int64(body)) + body)
}

// check validates a record of the given recordSize with the given key:
// its size against max.message.bytes (when that is the size on disk) and,
// when keys are required (keyRequired), its key.
func (h *appendHandle) check(key []byte, size int64, keyRequired bool) error {
	if h.checkSize && size > h.maxMessage {
		return errTooLong
	}
	if keyRequired && key == nil {
		h.logKeyless()
		return errKeyRequired
	}
	return nil
}

// drop undoes a refused write's parsed records, recs[base:].
func (h *appendHandle) drop(fixed *partBatch, recs []record.Record, base int) {
	clear(recs[base:])
	h.keepRecs(fixed, recs[:base])
}

// fsync appends what is buffered and flushes the partitions written to.
func (h *appendHandle) fsync() syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	err := h.appendAll()
	if serr := h.takeErr(); err == nil {
		err = serr
	}
	if err != nil {
		// The appends failed (after up to the delivery timeout): another
		// wait in Sync would add a second one.
		return h.fsys.errno("fsync", err)
	}
	for _, pb := range h.parts {
		if pb == nil || !pb.touched {
			continue
		}
		if ferr := pb.p.Sync(context.Background()); err == nil {
			err = ferr
		}
	}
	return h.fsys.errno("fsync", err)
}
