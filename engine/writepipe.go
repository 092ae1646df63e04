package engine

import (
	"runtime"
	"sync"
	"time"

	"github.com/topicfs/topicfs/engine/vfs"
)

// minSubmit is the least the appender hands to an idle write goroutine
// (smaller writes cost more per byte than the overlap saves).
const minSubmit = 64 << 10

// writerPoll is how long the write goroutine polls for the next job before
// it blocks, and resultPoll how long the appender polls for a job's result
// (a write of a run takes up to a few hundred microseconds). Waking a
// blocked goroutine costs ~70 µs on these VMs, each way; polling yields
// the CPU, so a busy machine loses little to it.
const (
	writerPoll = 200 * time.Microsecond
	resultPoll = 2 * time.Millisecond
)

// appendBatchBytes is the size at which Append cuts an uncompressed group
// into batches (a soft limit: a larger record gets a batch of its own, up
// to max.message.bytes), so that a large Append yields several pieces for
// the write goroutine: the kernel writes one while the next is encoded.
// Appending 1 KiB values on 2 CPUs, encoding (copy and CRC) costs about
// half of what the kernel's write of the same bytes does; overlapped, an
// append of 1000 such values took 25-35% less time (128 KiB batches were
// slower again: more, smaller writes). Producers' batches are 16 KiB by
// default; nothing in Kafka depends on where records are cut into batches.
const appendBatchBytes = 256 << 10

// writeJob is one contiguous piece of the run for the write goroutine.
type writeJob struct {
	f   vfs.File
	b   []byte
	off int64
}

// runWriter is the partition's write goroutine and the appender's view of
// it. At most one job is outstanding; its bytes sit in the run before
// run.end, so the appender only appends after them. The run is published
// only after every job of it succeeded (writeRunLocked waits). The fields
// are the writer mutex's.
type runWriter struct {
	off     bool // no OverlapWrites, or GOMAXPROCS < 2 (nothing would overlap): write in place
	jobs    chan writeJob
	results chan error
	busy    bool  // a job was sent whose result was not received yet
	err     error // the first failed job's error, until the run is written or dropped
	wg      sync.WaitGroup
}

func (w *runWriter) start() {
	if w.jobs != nil {
		return
	}
	w.jobs = make(chan writeJob, 1)
	w.results = make(chan error, 1)
	w.wg.Go(func() {
		for {
			pollFor(w.jobs, writerPoll)
			j, ok := <-w.jobs
			if !ok {
				return
			}
			_, err := j.f.WriteAt(j.b, j.off)
			w.results <- err
		}
	})
}

// note records a finished job's result.
func (w *runWriter) note(err error) {
	w.busy = false
	if w.err == nil {
		w.err = err
	}
}

// wait waits for the outstanding job, if any, and returns the first error
// of the run's jobs so far.
func (w *runWriter) wait() error {
	if w.busy { // only when not off: maybeSubmitLocked submits nothing then
		pollFor(w.results, resultPoll)
		w.note(<-w.results)
	}
	return w.err
}

// stop ends the goroutine; no job may be outstanding (the partition is
// closed, no append runs).
func (w *runWriter) stop() {
	if w.jobs != nil {
		close(w.jobs)
		w.wg.Wait()
		w.jobs = nil
	}
}

// newRunWriter is a writer that overlaps only where the caller asked for
// it and another P can run it.
func newRunWriter(overlap bool) runWriter {
	return runWriter{off: !overlap || runtime.GOMAXPROCS(0) < 2}
}

// maybeSubmitLocked hands the run's bytes not yet submitted to the write
// goroutine if there are at least minSubmit of them and it is idle. Callers
// call it only when more batches of the call follow (a hand-off that
// overlaps nothing only costs). A
// failed job stops submissions; writeRunLocked then fails the run.
// Callers hold mu.
func (p *Partition) maybeSubmitLocked() {
	r, w := &p.w.run, &p.w.pipe
	if w.off || r.end-r.sub < minSubmit {
		return
	}
	if w.busy {
		select {
		case err := <-w.results:
			w.note(err)
		default:
			return
		}
	}
	if w.err != nil {
		return
	}
	p.submitLocked()
}

// submitLocked hands the run's bytes from sub to end to the idle write
// goroutine. Callers hold mu.
func (p *Partition) submitLocked() {
	r, w := &p.w.run, &p.w.pipe
	w.start()
	p.reserveLocked(r.seg, r.pos0+int64(r.end))
	w.busy = true
	w.jobs <- writeJob{f: r.seg.log, b: p.w.encBuf[r.sub:r.end:r.end], off: r.pos0 + int64(r.sub)}
	r.sub = r.end
}

// finishLocked writes the rest of the run and returns the first error of
// its writes. A run that was handed to the write goroutine in part has it
// write the rest too: the goroutine stays busy (and polling) from one run
// to the next, where waking a blocked one costs more than the overlap
// saves. Callers hold mu.
func (p *Partition) finishLocked() error {
	r, w := &p.w.run, &p.w.pipe
	err := w.wait()
	w.err = nil
	if err != nil || r.sub == r.end {
		return err
	}
	if r.sub == 0 {
		p.reserveLocked(r.seg, r.pos0+int64(r.end))
		_, err = r.seg.log.WriteAt(p.w.encBuf[:r.end], r.pos0)
		return err
	}
	p.submitLocked()
	err = w.wait()
	w.err = nil
	return err
}

// unsubmitLocked is called before the run is rewound to m: bytes after the
// mark that were already handed to the write goroutine are cut from the
// file again, so that no batch of a failed group survives in it (recovery
// would take it for appended). Callers hold mu.
func (p *Partition) unsubmitLocked(m runMark) {
	r := &p.w.run
	if r.gen != m.gen || r.seg == nil {
		return
	}
	keep := 0
	if m.ok {
		keep = m.end
	}
	if r.sub <= keep {
		return
	}
	_ = p.w.pipe.wait() // a failed job keeps failing the run
	if err := r.seg.truncateLogLocked(r.pos0 + int64(keep)); err != nil {
		p.logger.Warn("engine: cannot truncate a rewound append", "segment", r.seg.LogPath(), "err", err)
	}
	r.sub = keep
}
