package fusefs

import (
	"context"
	"errors"
	"github.com/topicfs/topicfs/backend"
	"syscall"
	"time"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
)

// Background appends of an append handle: the jobs that hand batches to the
// engine (one per WRITE, each after the one before it), the bulk buffers their
// lines alias, reaping them, appending everything pending (close, fsync,
// linger.ms timer) and waiting until views learned of the appended records.

// appendJob is one call to the engine per partition: the full batches of
// one WRITE (or everything pending, on close, fsync and linger.ms). With
// linger.ms > 0 the job of a WRITE runs in the background while the writer
// sends the next WRITEs (at most maxJobs jobs per handle are in flight,
// each starting when the one before it ends); its error is returned by a
// later write of the handle (at the latest the one that waits for room)
// or by close, as a linger append's is. With linger.ms 0 every job runs
// inside the Write that made it.
type appendJob struct {
	items []jobItem
	// lines are whole lines appended after the items: by
	// linesLog.AppendLines (writeLines), or encoded by the job after the
	// lines Write encoded into enc (encoded, writeEncoded); they alias
	// the bulk buffer.
	lines     []byte
	linesLog  backend.Partition
	linesEng  lineEncoder // linesLog's encoder (nil: its lines are never encoded ahead)
	batchSize int
	enc       engine.EncodedLines
	encoded   bool
	bulk      int  // the bulk buffer its records alias, -1: none
	arena     bool // some records alias the handle's arena
	err       error
	pend      []backend.Pending // records handed to a remote log (backend.Enqueuer)
	done      chan struct{}
	free      [][][]record.Record // group slices of earlier items, for reuse
}

type jobItem struct {
	pb     *partBatch        // its partition is pb.p (set once, so the job may read it)
	groups [][]record.Record // one batch each
	recs   []record.Record   // the backing slice of groups, reused afterwards
}

// run appends the job's records. To a remote log (backend.Enqueuer) it
// only hands them over: the handle waits for their acknowledgements later
// (appendHandle.acks), so the next WRITE's records follow while these are
// in flight and the producer never drains between WRITEs.
func (j *appendJob) run() {
	ctx := context.Background()
	for i := range j.items {
		it := &j.items[i]
		var err error
		if q, ok := it.pb.p.(backend.Enqueuer); ok {
			var pend backend.Pending
			if pend, err = q.EnqueueEach(ctx, it.groups); err == nil {
				j.pend = append(j.pend, pend)
			}
		} else {
			_, _, err = it.pb.p.AppendEach(ctx, it.groups)
		}
		if err != nil && j.err == nil {
			j.err = err
		}
	}
	if (j.lines != nil || j.encoded) && j.err == nil {
		// After the pending records they follow; not after a failure of
		// those (the records would come out of order).
		switch q, ok := j.linesLog.(backend.Enqueuer); {
		case j.encoded:
			j.appendEncoded()
		case ok:
			var pend backend.Pending
			if pend, j.err = q.EnqueueLines(ctx, j.lines); j.err == nil {
				j.pend = append(j.pend, pend)
			}
		default:
			_, _, j.err = j.linesLog.AppendLines(ctx, j.lines, j.batchSize)
		}
	}
	j.enc.Reset()
}

// appendEncoded appends the lines Write encoded and, encoded now, the
// lines it left to the job (the second part of the WRITE). If the topic's
// batches cannot be encoded ahead any more (it turned compressed), those
// follow the encoded ones through AppendLines.
func (j *appendJob) appendEncoded() {
	var rest []byte
	if j.lines != nil {
		err := j.linesEng.EncodeLines(&j.enc, j.lines, j.batchSize)
		switch {
		case errors.Is(err, engine.ErrNotEncodable):
			rest = j.lines
		case err != nil:
			j.err = err
			return
		}
	}
	if _, _, j.err = j.linesEng.AppendEncoded(&j.enc); j.err == nil && rest != nil {
		_, _, j.err = j.linesLog.AppendLines(context.Background(), rest, j.batchSize)
	}
}

// maxJobs is how many WRITEs' batches may be in flight per handle: two,
// so one is queued when the engine finishes the other.
const maxJobs = 2

// copyBulk copies a then b into a free bulk buffer (one not aliased by a
// job in flight) and returns its index and the copy. The caller holds h.mu.
func (h *appendHandle) copyBulk(a, b []byte) (int, []byte, error) {
	i, err := h.freeBulk()
	if err != nil {
		return -1, nil, err
	}
	buf := append(append(h.bulk[i][:0], a...), b...)
	if cap(buf) <= 2*maxWrite {
		h.bulk[i] = buf
	}
	return i, buf, nil
}

// newJob returns an empty job, reusing a finished one.
func (h *appendHandle) newJob() *appendJob {
	var j *appendJob
	if k := len(h.spareJobs); k > 0 {
		j, h.spareJobs = h.spareJobs[k-1], h.spareJobs[:k-1]
	} else {
		j = &appendJob{}
	}
	for i := range j.items {
		j.free = append(j.free, j.items[i].groups[:0])
		j.items[i] = jobItem{}
	}
	j.items = j.items[:0]
	j.bulk, j.arena, j.err = -1, false, nil
	j.pend = j.pend[:0]
	j.lines, j.linesLog, j.linesEng, j.encoded = nil, nil, nil, false
	j.done = make(chan struct{})
	return j
}

func (j *appendJob) finished() bool {
	select {
	case <-j.done:
		return true
	default:
		return false
	}
}

// start runs job in the background after the jobs in flight. The caller
// holds h.mu.
func (h *appendHandle) start(job *appendJob) {
	var prev chan struct{}
	if k := len(h.jobs); k > 0 {
		prev = h.jobs[k-1].done
	}
	h.jobs = append(h.jobs, job)
	go func() {
		if prev != nil {
			<-prev
		}
		h.runJob(job)
		close(job.done)
	}()
}

// runNow runs job in the caller's goroutine, after the jobs in flight, and
// returns its error (or theirs). The caller holds h.mu.
func (h *appendHandle) runNow(job *appendJob) error {
	first := h.reapAll()
	h.runJob(job)
	close(job.done)
	h.jobs = append(h.jobs, job)
	if err := h.reap(); first == nil {
		first = err
	}
	if err := h.waitAcks(0); first == nil {
		first = err
	}
	return first
}

// maxAcks bounds the handed-over appends a handle waits for: the
// producer's own buffer bounds the records in flight, this the calls.
const maxAcks = 64

// waitAcks waits until at most keep handed-over appends are unacknowledged
// and returns the first failure among those it waited for. The caller
// holds h.mu.
func (h *appendHandle) waitAcks(keep int) error {
	var first error
	for len(h.acks) > keep {
		if _, _, err := h.acks[0].Wait(); err != nil && first == nil {
			first = err
		}
		h.acks[0] = nil
		h.acks = h.acks[1:]
	}
	return first
}

// reapAcks drops the acknowledged appends at the front of acks without
// waiting and returns the first failure among them. The caller holds h.mu.
func (h *appendHandle) reapAcks() error {
	var first error
	for len(h.acks) > 0 {
		select {
		case <-h.acks[0].Done():
		default:
			return first
		}
		if err := h.waitAcks(len(h.acks) - 1); first == nil {
			first = err
		}
	}
	return first
}

// freeBulk returns a bulk buffer no job in flight uses, waiting for the
// oldest job if need be. The caller holds h.mu.
func (h *appendHandle) freeBulk() (int, error) {
	for {
		var used [maxJobs + 1]bool
		for _, j := range h.jobs {
			if j.bulk >= 0 {
				used[j.bulk] = true
			}
		}
		for i, u := range used {
			if !u {
				return i, nil
			}
		}
		if err := h.reap(); err != nil {
			return 0, err
		}
	}
}

// reapAll waits for every job in flight and returns the first error.
func (h *appendHandle) reapAll() error {
	var first error
	for len(h.jobs) > 0 {
		if err := h.reap(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// reap waits for the oldest job in flight, recycles its buffers and
// returns its error. The caller holds h.mu.
func (h *appendHandle) reap() error {
	if len(h.jobs) == 0 {
		return nil
	}
	j := h.jobs[0]
	<-j.done
	h.jobs = append(h.jobs[:0], h.jobs[1:]...)
	for i := range j.items {
		it := &j.items[i]
		if h.jsonl {
			// Parsed JSON records own their bytes: drop them. Plain
			// records alias the bulk buffers and arenas the handle
			// keeps anyway, and clearing them costs a pass per WRITE.
			clear(it.recs)
		}
		if len(it.pb.spares) <= maxJobs && cap(it.recs) <= maxIdleRecords {
			it.pb.spares = append(it.pb.spares, it.recs[:0])
		}
		clear(it.groups)
	}
	h.spareJobs = append(h.spareJobs, j)
	if errors.Is(j.err, syscall.ENOSPC) {
		h.logNoSpace(j.err)
	}
	h.acks = append(h.acks, j.pend...)
	clear(j.pend)
	err := j.err
	if aerr := h.waitAcks(maxAcks); err == nil {
		err = aerr
	}
	return err
}

// appendAll appends every buffered batch, after the job in flight. The
// caller holds h.mu.
func (h *appendHandle) appendAll() error {
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	first := h.reapAll()
	n := 0
	if h.fixed < 0 && h.topic != nil {
		n = h.topic.NumPartitions()
	}
	job := h.newJob()
	for id, pb := range h.parts {
		if pb != nil && len(pb.recs) > 0 {
			h.take(job, id, pb, true, n)
		}
	}
	if err := h.runNow(job); err != nil && first == nil {
		first = err
	}
	return first
}

func (h *appendHandle) lingerFlush() {
	h.mu.Lock()
	defer h.mu.Unlock()
	defer h.catchLinger()
	testPanicName("linger", h.topicName())
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

// notifyWait bounds how long close(2) waits for the kernel to learn of the
// appended records (a notification could in theory wait on a page lock).
// It is the attribute timeout: by then the kernel's cached sizes have
// expired anyway, so a stat after close(2) is exact even when a loaded
// machine delays the notification past a shorter wait.
const notifyWait = attrTimeout

// awaitNotified waits (bounded) until the views of the partitions this
// handle appended to have been told of their growth. The caller holds h.mu.
func (h *appendHandle) awaitNotified() {
	var chans []chan struct{}
	for _, pb := range h.parts {
		if pb == nil || !pb.written {
			continue
		}
		pb.written = false
		if ch := h.fsys.notified(pb.p); ch != nil {
			chans = append(chans, ch)
		}
	}
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

// logNoSpace logs an append that failed for a full disk (the writer gets
// ENOSPC; the operator needs to know too): the topic, the partition of a
// partition's append file (-1 for the topic's own, which spreads records
// over partitions), and the engine's error, which names the segment file.
func (h *appendHandle) logNoSpace(err error) {
	topic := ""
	if h.topic != nil {
		topic = h.topic.Name()
	}
	h.fsys.log.Warn("fusefs: append failed: no space left on device", "topic", topic, "partition", h.fixed, "err", err)
}
