// The Partition type: one partition directory of segments, opening it
// (with recovery, see recovery.go), its accessors and Close. Appends are in
// append.go and appendrun.go; rolls, flushes and retention's deletes in
// roll.go.

package engine

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// PartitionOptions configure OpenPartition. The zero value of every field but
// Config means "unknown" or "default"; use DefaultConfig() for Config.
type PartitionOptions struct {
	Config         Config
	RecoveryPoint  int64 // from recovery-point-offset-checkpoint; -1 unknown
	LogStartOffset int64 // from log-start-offset-checkpoint; -1 unknown
	FirstDirty     int64 // from cleaner-offset-checkpoint; -1 unknown
	CleanShutdown  bool  // skip recovery scanning
	ReadOnly       bool  // never write, never truncate (recover in memory)
	Logger         *slog.Logger
	Now            func() time.Time // nil = time.Now

	// LeaderEpochs keeps leader-epoch-checkpoint as a single-replica
	// broker does (leaderepoch.go); a LogDir sets it for its partitions.
	LeaderEpochs bool

	// DeleteHorizon is the earliest pending delete horizon (Unix ms) from
	// topicfs-delete-horizons; 0 or negative: none (horizons.go).
	DeleteHorizon int64

	// indexes bounds the sealed segments with open indexes, shared by
	// every partition of a LogDir; nil: the process's (defaultIndexLRU).
	indexes *indexLRU
}

// PartitionStats are a partition's counters since it was opened.
type PartitionStats struct {
	BytesAppended   int64 // bytes written to .log files by Append/AppendBatch
	RecordsAppended int64
	BatchesAppended int64
	BytesRead       int64 // bytes read from .log files (ReadAt, ReadBatch, index scans)
	Reads           int64 // read calls
	Flushes         int64
	Rolls           int64
	SegmentsDeleted int64
	Corruptions     int64 // corrupt batches found by readers
	// LastRollReason says why the last roll since the partition was opened
	// happened ("" none); LastRollTime is when.
	LastRollReason RollReason
	LastRollTime   time.Time
}

// Partition is one partition's log: a list of segments, the last of which
// (the active segment) takes appends.
//
// One writer mutex serialises appends, rolls, deletions and replacements.
// Readers never take it: they load the immutable segment list published
// through an atomic pointer (Snapshot) and read committed bytes.
//
// flush.messages and flush.ms are honoured at append time; an idle partition
// with unflushed data is flushed when its owner calls Flush (the mount runs a
// ticker every few seconds that calls Flush on each partition, and Close
// flushes).
type Partition struct {
	fs     vfs.FS
	dir    string
	topic  string
	id     int
	opts   PartitionOptions
	logger *slog.Logger
	now    func() time.Time

	cfg           atomic.Pointer[Config]
	segs          atomic.Pointer[[]*Segment] // immutable; oldest first, last = active
	logStart      atomic.Int64
	logEnd        atomic.Int64
	recoveryPoint atomic.Int64
	firstDirty    atomic.Int64
	horizon       atomic.Int64 // earliest pending delete horizon, ms; <= 0 none
	epochs        epochCache
	// firstUnstable is the first offset of the oldest open transaction
	// (MaxInt64: none), published for readers (producerstate.go).
	firstUnstable atomic.Int64
	closed        atomic.Bool
	stats         counters

	// mu is the writer mutex. It protects appends to the active segment,
	// changes of the segment list and the fields of w.
	mu sync.Mutex
	w  struct {
		encBuf    []byte // encoded batches of the pending run
		run       appendRun
		params    appendParams // parsed config of the last append call
		recBuf    []record.Record
		lineRecs  []record.Record // AppendLines' records on compressed topics
		spans     []batchSpan
		unflushed int64 // records appended since the last flush
		lastFlush time.Time
		dirDirty  bool // directory entries changed since the last SyncDir
		producers *producerState
		snaps     snapshotFiles // the producer snapshots on disk
		deleted   []deletedFile
	}
	flushMu sync.Mutex // serialises Flush
	indexes *indexLRU  // bounds the sealed segments with open indexes (shared)

	subMu sync.Mutex                      // serialises Subscribe/cancel
	subs  atomic.Pointer[[]chan struct{}] // copy on write
}

// deletedFile is a file renamed .deleted, waiting for file.delete.delay.ms:
// due is when it was renamed plus the delay in force then (Kafka schedules
// the unlink when it deletes the segment, with the config of that time).
type deletedFile struct {
	path string
	due  time.Time
}

// batchSpan locates one encoded batch in the encode buffer.
type batchSpan struct {
	start, end  int
	first, last int64
	maxTs       int64
	count       int
}

// OpenPartition opens (creating if needed, unless read-only) the partition
// directory dir and recovers it (see recovery.go).
func OpenPartition(fsys vfs.FS, dir, topic string, id int, opts PartitionOptions) (*Partition, error) {
	p := &Partition{fs: fsys, dir: dir, topic: topic, id: id, opts: opts, logger: opts.Logger, now: opts.Now}
	if p.logger == nil {
		p.logger = slog.Default()
	}
	p.logger = p.logger.With("topic", topic, "partition", id)
	if p.now == nil {
		p.now = time.Now
	}
	cfg := opts.Config
	p.cfg.Store(&cfg)
	p.firstDirty.Store(opts.FirstDirty)
	p.horizon.Store(max(opts.DeleteHorizon, 0))
	p.w.lastFlush = p.now()
	p.indexes = cmp.Or(opts.indexes, defaultIndexLRU)
	p.w.producers = newProducerState()
	p.w.snaps.unsynced = map[int64]bool{}
	p.firstUnstable.Store(math.MaxInt64)
	empty := []*Segment{}
	p.segs.Store(&empty)
	p.subs.Store(&[]chan struct{}{})
	if err := p.load(); err != nil {
		p.releaseAll()
		return nil, fmt.Errorf("engine: open partition %s: %w", dir, err)
	}
	return p, nil
}

// Topic returns the partition's topic name.
func (p *Partition) Topic() string { return p.topic }

// ID returns the partition number.
func (p *Partition) ID() int { return p.id }

// Dir returns the partition's directory.
func (p *Partition) Dir() string { return p.dir }

// FS returns the file system the partition's directory lives on.
func (p *Partition) FS() vfs.FS { return p.fs }

// Config returns the partition's current configuration.
func (p *Partition) Config() Config { return *p.cfg.Load() }

// SetConfig replaces the configuration; it applies from the next append or roll.
func (p *Partition) SetConfig(c Config) { p.cfg.Store(&c) }

// LogStartOffset returns the first offset readers may see.
func (p *Partition) LogStartOffset() int64 { return p.logStart.Load() }

// LogEndOffset returns the next offset to be assigned.
func (p *Partition) LogEndOffset() int64 { return p.logEnd.Load() }

// RecoveryPoint returns the offset below which everything is fsynced.
func (p *Partition) RecoveryPoint() int64 { return p.recoveryPoint.Load() }

// FirstDirtyOffset returns the cleaner's first dirty offset (-1 unknown).
func (p *Partition) FirstDirtyOffset() int64 { return p.firstDirty.Load() }

// SetFirstDirtyOffset records the cleaner's progress (LogDir checkpoints it).
func (p *Partition) SetFirstDirtyOffset(off int64) { p.firstDirty.Store(off) }

// Stats returns the partition's counters.
func (p *Partition) Stats() PartitionStats {
	c := &p.stats
	var last rollInfo
	if r := c.lastRoll.Load(); r != nil {
		last = *r
	}
	return PartitionStats{
		LastRollReason:  last.reason,
		LastRollTime:    last.at,
		BytesAppended:   c.bytesAppended.Load(),
		RecordsAppended: c.recordsAppended.Load(),
		BatchesAppended: c.batchesAppended.Load(),
		BytesRead:       c.bytesRead.Load(),
		Reads:           c.reads.Load(),
		Flushes:         c.flushes.Load(),
		Rolls:           c.rolls.Load(),
		SegmentsDeleted: c.segmentsDeleted.Load(),
		Corruptions:     c.corruptions.Load(),
	}
}

func (p *Partition) list() []*Segment { return *p.segs.Load() }

// ActiveBaseOffset returns the base offset of the active segment; ok is
// false for a closed partition, which has none. Every segment with a lower
// base is sealed: its .log, .index and .timeindex are never written again
// in place (the cleaner and an index rebuild put new files under their
// names, retention renames them to *.deleted).
func (p *Partition) ActiveBaseOffset() (base int64, ok bool) {
	l := p.list()
	if len(l) == 0 {
		return 0, false
	}
	return l[len(l)-1].base, true
}

func (p *Partition) active() *Segment {
	l := p.list()
	return l[len(l)-1]
}

// publish installs a new segment list; callers hold mu.
func (p *Partition) publish(l []*Segment) { p.segs.Store(&l) }

// Close flushes the partition, finishes the active segment's indexes (final
// time-index entry, trimmed) and drops its references to the segments;
// segments held by open Snapshots stay readable until released.
func (p *Partition) Close() error {
	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		return nil
	}
	p.mu.Unlock()
	var errs []error
	if !p.opts.ReadOnly {
		errs = append(errs, p.Flush())
	}
	p.mu.Lock()
	if !p.opts.ReadOnly && len(errs) == 1 && errs[0] == nil {
		errs = append(errs, p.closeSnapshotLocked())
	}
	p.closed.Store(true)
	l := p.list()
	if !p.opts.ReadOnly && len(l) > 0 {
		a := l[len(l)-1]
		a.mu.Lock()
		if a.mu.tidx != nil && a.w.ib.maxTs >= 0 {
			errs = append(errs, finalTimeEntry(a.mu.tidx, a.w.ib.maxTs, a.w.ib.offsetOfMax))
		}
		if a.mu.oidx != nil {
			errs = append(errs, a.mu.oidx.Trim(), a.mu.oidx.Sync())
		}
		if a.mu.tidx != nil {
			errs = append(errs, a.mu.tidx.Trim(), a.mu.tidx.Sync())
		}
		if a.mu.txn != nil && a.mu.idxFS == p.fs {
			errs = append(errs, a.mu.txn.Sync()) // Flush syncs only sealed segments' indexes
		}
		a.mu.Unlock()
		p.releaseReserved(a)
	}
	p.mu.Unlock()
	p.releaseAll()
	p.notify()
	return errors.Join(errs...)
}

// releaseAll drops the list's references.
func (p *Partition) releaseAll() {
	p.mu.Lock()
	l := p.list()
	empty := []*Segment{}
	p.segs.Store(&empty)
	p.mu.Unlock()
	for _, s := range l {
		s.Release()
	}
}
