package policies

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/internal/panics"
)

// Options configures a Scheduler. The zero value means defaults.
type Options struct {
	// Now is the clock for every decision (retention ages, horizons,
	// flush.ms); nil = time.Now. Tickers still use real time.
	Now func() time.Time
	// Logger receives progress and errors; nil = slog.Default().
	Logger *slog.Logger
	// CleanerThreads is log.cleaner.threads; 0 = engine.DefaultConfig's,
	// negative = no cleaner at all (log.cleaner.threads=0 in Kafka: the
	// logs are never compacted, CleanPartition fails with ErrNoCleaner).
	CleanerThreads int
	// DedupeBufferSize is log.cleaner.dedupe.buffer.size, shared by all
	// cleaner threads; 0 = engine.DefaultConfig's.
	DedupeBufferSize int64
	// LoadFactor is log.cleaner.io.buffer.load.factor: the share of its
	// offset map's slots a cleaning fills; 0 = engine.DefaultConfig's.
	LoadFactor float64
	// TickInterval is how often the housekeeping loop runs (purge .deleted
	// files, time-based flush, retention when due) and how often idle
	// cleaners look for work; 0 = 1 s. Segments roll only at append time,
	// as a broker's do.
	TickInterval time.Duration
	// ProgressBytes logs a cleaning's progress every so many bytes read;
	// 0 = 256 MiB, < 0 = never.
	ProgressBytes int64
}

// Scheduler runs retention, the log cleaner and time-based housekeeping
// for every partition of a LogDir in the background. It never holds a
// partition's lock itself; the engine calls it makes (Segments,
// DeleteSegmentsBelow, ReplaceSegments, ...) take the writer lock only
// briefly, so appends and reads go on during a cleaning.
//
// All methods are safe for concurrent use.
type Scheduler struct {
	d        *engine.LogDir
	now      func() time.Time
	log      *slog.Logger
	tick     time.Duration
	threads  int
	cleaners chan *cleaner // idle cleaners; each owns an offset map

	mu struct {
		sync.Mutex
		parts   map[engine.TopicPartition]*partState
		started bool
		stopped bool
	}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// partState is the scheduler's memory of one partition; protected by
// Scheduler.mu.
type partState struct {
	p             *engine.Partition
	cleaning      bool
	cleanings     int64
	last          *CleaningRun
	lastRetention time.Time
	nextRetention time.Time
	bytesDeleted  int64
	segsDeleted   int64
	lastReason    string
	lastFlush     time.Time
	lastErr       string
	lastErrTime   time.Time
	// cleanAfter: after a failed cleaning (corrupt data, I/O error) the
	// cleaner leaves the log alone until then, instead of failing every
	// tick (Kafka marks such a log uncleanable until restart).
	cleanAfter time.Time
	cleanWhy   string // why it waits until cleanAfter
	// stopped: a task of this partition panicked; its policies no longer
	// run (recover.go).
	stopped *PoliciesStopped
}

// ErrNoCleaner: the scheduler runs no cleaner (log.cleaner.threads=0).
var ErrNoCleaner = errors.New("policies: log.cleaner.threads=0: no log cleaner runs")

// initialRetentionDelay bounds the wait before a partition's first
// retention check (Kafka's log.initial.task.delay.ms).
const initialRetentionDelay = 30 * time.Second

// cleanerBackoff is how long a log whose cleaning failed is skipped.
const cleanerBackoff = 5 * time.Minute

// NewScheduler returns a scheduler for d; call Start to run it in the
// background, or drive it with RunRetention and RunCleaner.
func NewScheduler(d *engine.LogDir, opts Options) *Scheduler {
	def := engine.DefaultConfig()
	s := &Scheduler{d: d, now: opts.Now, log: opts.Logger, tick: opts.TickInterval}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.log = s.log.With("component", "policies")
	if s.tick <= 0 {
		s.tick = time.Second
	}
	switch s.threads = opts.CleanerThreads; {
	case s.threads < 0:
		s.threads = 0
	case s.threads == 0:
		s.threads = int(max(def.CleanerThreads, 1))
	}
	buf := opts.DedupeBufferSize
	if buf <= 0 {
		buf = def.CleanerDedupeBufferSize
	}
	load := opts.LoadFactor
	if load <= 0 {
		load = def.CleanerLoadFactor
	}
	progress := opts.ProgressBytes
	if progress == 0 {
		progress = 256 << 20
	}
	s.cleaners = make(chan *cleaner, s.threads)
	for i := 0; i < s.threads; i++ {
		s.cleaners <- newCleaner(buf/int64(s.threads), load, s.log, progress)
	}
	s.mu.parts = map[engine.TopicPartition]*partState{}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// Start launches the housekeeping loop and the cleaner threads. It does
// nothing after Stop or when already started.
func (s *Scheduler) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.started || s.mu.stopped {
		return
	}
	s.mu.started = true
	s.wg.Add(1 + s.threads)
	go s.housekeepingLoop()
	for i := 0; i < s.threads; i++ {
		go s.cleanerLoop()
	}
}

// Stop stops the background work and waits for it. A cleaning in progress
// is abandoned at its next batch: its .cleaned files are removed and the
// log keeps its old segments (a group already swapped in stays; it holds
// the same records). Stop is idempotent.
func (s *Scheduler) Stop() {
	s.mu.Lock()
	s.mu.stopped = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

func (s *Scheduler) housekeepingLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.tick)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			s.housekeeping(false)
		}
	}
}

func (s *Scheduler) cleanerLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.tick)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		// Clean while there is work; after nothing to do, an error (logged)
		// or an abandoned run, wait for the next tick.
		for s.ctx.Err() == nil {
			run, err := s.cleanFilthiest(nil)
			if run == nil || err != nil {
				break
			}
		}
	}
}

// stateLocked returns (creating) the state of p; s.mu must be held.
func (s *Scheduler) stateLocked(p *engine.Partition) *partState {
	tp := engine.TopicPartition{Topic: p.Topic(), Partition: p.ID()}
	st := s.mu.parts[tp]
	if st == nil || st.p != p { // new, or the topic was deleted and recreated
		now := s.now()
		// The first check comes after Kafka's log.initial.task.delay.ms
		// (30 s) at most, not a whole retention.check.interval.ms.
		first := min(msDuration(p.Config().RetentionCheckIntervalMs), initialRetentionDelay)
		st = &partState{p: p, lastFlush: now, nextRetention: now.Add(first)}
		s.mu.parts[tp] = st
	}
	return st
}

func (s *Scheduler) noteErr(p *engine.Partition, what string, err error) {
	s.log.Error(what, "topic", p.Topic(), "partition", p.ID(), "err", err)
	s.mu.Lock()
	st := s.stateLocked(p)
	st.lastErr = what + ": " + err.Error()
	st.lastErrTime = s.now()
	s.mu.Unlock()
}

// housekeeping runs the periodic per-partition work: retention when due (or
// always when force), time-based flush (flush.ms) and purging .deleted
// files past file.delete.delay.ms. It rolls nothing: a broker rolls a
// segment only when an append finds it due, and retention rolls the active
// segment itself when it deletes it.
func (s *Scheduler) housekeeping(force bool) error {
	var errs []error
	parts := s.d.Partitions()
	for _, p := range parts {
		if s.ctx.Err() != nil && !force {
			return nil
		}
		if err := s.housekeepGuarded(p, force); err != nil {
			errs = append(errs, err)
		}
	}
	s.prune(parts)
	return errors.Join(errs...)
}

// prune forgets the state of partitions that no longer exist (deleted
// topics), so the scheduler's memory follows the partition count.
func (s *Scheduler) prune(live []*engine.Partition) {
	alive := make(map[*engine.Partition]bool, len(live))
	for _, p := range live {
		alive[p] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for tp, st := range s.mu.parts {
		if !alive[st.p] && !st.cleaning {
			delete(s.mu.parts, tp)
		}
	}
}

func (s *Scheduler) housekeepPartition(p *engine.Partition, force bool) error {
	var errs []error
	now := s.now()
	cfg := p.Config()
	s.mu.Lock()
	st := s.stateLocked(p)
	due := force || !now.Before(st.nextRetention)
	flushDue := cfg.FlushMs >= 0 && cfg.FlushMs < math.MaxInt64 && now.Sub(st.lastFlush) >= msDuration(cfg.FlushMs)
	s.mu.Unlock()

	if due {
		if err := s.retain(p, now); err != nil {
			errs = append(errs, err)
		}
	}
	if flushDue {
		if err := p.Flush(); err != nil && !ignorable(err) {
			s.noteErr(p, "flush", err)
			errs = append(errs, err)
		} else {
			s.mu.Lock()
			s.stateLocked(p).lastFlush = now
			s.mu.Unlock()
		}
	}
	if err := p.PurgeDeleted(now); err != nil && !ignorable(err) {
		s.noteErr(p, "purge deleted segments", err)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// retain runs one retention check of p.
func (s *Scheduler) retain(p *engine.Partition, now time.Time) error {
	cfg := p.Config()
	segs := p.Segments()
	n, reason := RetentionPlan(segs, cfg, p.LogStartOffset(), now)
	var freed int64
	var err error
	if n > 0 {
		n, freed, err = p.DeleteSegmentsBelow(DeleteEnd(segs, n), reason)
		if err == nil && n > 0 {
			s.log.Info("deleted segments", "topic", p.Topic(), "partition", p.ID(), "segments", n, "bytes", freed, "reason", reason)
		}
	}
	s.mu.Lock()
	st := s.stateLocked(p)
	st.lastRetention = now
	st.nextRetention = now.Add(msDuration(cfg.RetentionCheckIntervalMs))
	if n > 0 && err == nil {
		st.bytesDeleted += freed
		st.segsDeleted += int64(n)
		st.lastReason = reason
	}
	s.mu.Unlock()
	if err != nil && !ignorable(err) {
		s.noteErr(p, "retention", err)
		return err
	}
	return nil
}

// RunRetention runs one housekeeping pass over every partition now,
// synchronously, with retention forced whatever retention.check.interval.ms
// says: delete what retention allows (rolling an expired active segment
// first), flush on
// flush.ms, purge .deleted files past file.delete.delay.ms. For tests and
// tools.
func (s *Scheduler) RunRetention() error {
	return s.housekeeping(true)
}

// RunCleaner cleans every eligible partition once, filthiest first,
// synchronously, and returns the runs (abandoned ones included). For tests
// and tools.
func (s *Scheduler) RunCleaner() ([]*CleaningRun, error) {
	done := map[*engine.Partition]bool{}
	var runs []*CleaningRun
	var errs []error
	for {
		run, err := s.cleanFilthiest(done)
		if run == nil && err == nil {
			return runs, errors.Join(errs...)
		}
		if run != nil {
			runs = append(runs, run)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
}

// CleanPartition cleans p now, synchronously, even when its dirty ratio is
// below min.cleanable.dirty.ratio (force); it returns nil when there is
// nothing cleanable. Waits for a free cleaner thread.
func (s *Scheduler) CleanPartition(p *engine.Partition, force bool) (*CleaningRun, error) {
	if s.threads == 0 {
		return nil, ErrNoCleaner
	}
	s.mu.Lock()
	st := s.stateLocked(p)
	if st.cleaning {
		s.mu.Unlock()
		return nil, errors.New("policies: partition is being cleaned")
	}
	if st.stopped != nil {
		s.mu.Unlock()
		return nil, errStopped
	}
	st.cleaning = true
	s.mu.Unlock()
	return s.runClean(p, force)
}

// cleanFilthiest picks the eligible compacted partition with the highest
// dirty ratio (skipping those in skip, and marking the chosen one there)
// and cleans it. It returns nil, nil when none is eligible.
func (s *Scheduler) cleanFilthiest(skip map[*engine.Partition]bool) (*CleaningRun, error) {
	if s.threads == 0 {
		return nil, nil
	}
	now := s.now()
	type cand struct {
		p     *engine.Partition
		ratio float64
		force bool
	}
	var cands []cand
	for _, p := range s.d.Partitions() {
		if skip[p] || s.policiesStopped(p) {
			continue
		}
		_ = s.guard(p, "cleaner", func() error {
			cfg := p.Config()
			if !HasPolicy(cfg.CleanupPolicy, "compact") {
				return nil
			}
			c := CleanableRange(p.Segments(), cfg, p.LogStartOffset(), p.LogEndOffset(), p.FirstDirtyOffset(), now)
			if c.Eligible(cfg) && !s.backingOff(p, now) {
				cands = append(cands, cand{p, c.Ratio, false})
			} else if tombstonesDue(p, now) && !s.backingOff(p, now) {
				// Kafka waits for the dirty ratio; topicfs also cleans when the
				// tombstones the last run kept have passed their delete horizon,
				// so a quiet compacted topic does lose them.
				cands = append(cands, cand{p, c.Ratio, true})
			}
			return nil
		})
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].ratio > cands[j].ratio })
	s.mu.Lock()
	var chosen *engine.Partition
	force := false
	for _, c := range cands {
		st := s.stateLocked(c.p)
		if !st.cleaning {
			st.cleaning = true
			chosen, force = c.p, c.force
			break
		}
	}
	s.mu.Unlock()
	if chosen == nil {
		return nil, nil
	}
	if skip != nil {
		skip[chosen] = true
	}
	return s.runClean(chosen, force)
}

// backOff makes the cleaner leave p alone for cleanerBackoff, for why.
func (s *Scheduler) backOff(p *engine.Partition, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stateLocked(p)
	st.cleanAfter = s.now().Add(cleanerBackoff)
	st.cleanWhy = why
}

// backingOff reports whether p's last cleaning failed less than
// cleanerBackoff ago.
func (s *Scheduler) backingOff(p *engine.Partition, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return now.Before(s.stateLocked(p).cleanAfter)
}

// tombstonesDue reports whether the last completed cleaning of p kept
// tombstones or markers whose delete horizon has now passed. The horizon
// is the partition's (engine.DeleteHorizonsFile), not the scheduler's
// memory, so it holds across a remount.
func tombstonesDue(p *engine.Partition, now time.Time) bool {
	h := p.PendingDeleteHorizon()
	return h > 0 && h <= now.UnixMilli()
}

// runClean cleans p, already marked cleaning, with a free cleaner.
func (s *Scheduler) runClean(p *engine.Partition, force bool) (*CleaningRun, error) {
	var c *cleaner
	select {
	case c = <-s.cleaners:
	case <-s.ctx.Done():
		s.mu.Lock()
		s.stateLocked(p).cleaning = false
		s.mu.Unlock()
		return nil, errAbandoned
	}
	run, err := s.cleanGuarded(c, p, force)
	s.cleaners <- c

	s.mu.Lock()
	st := s.stateLocked(p)
	st.cleaning = false
	if run == nil && err == nil && force {
		// A forced run found no segment to clean: no tombstone is left
		// outside the active segment, so none is pending.
		p.SetPendingDeleteHorizon(0)
	}
	if run != nil {
		if err == nil {
			st.cleanings++
			st.last = run
			p.SetPendingDeleteHorizon(run.EarliestHorizonMs) // -1 (none kept) is stored as 0
			st.cleanAfter, st.cleanWhy = time.Time{}, ""
		} else if st.last == nil || !errors.Is(err, errAbandoned) && !errors.Is(err, errOpenTxn) {
			st.last = run
		}
	}
	s.mu.Unlock()
	switch {
	case err == nil:
	case errors.As(err, new(*panics.Error)): // logged; the partition's policies stopped
	case errors.Is(err, errAbandoned):
		s.log.Info("cleaning abandoned", "topic", p.Topic(), "partition", p.ID(), "why", err)
	case errors.Is(err, errOpenTxn):
		s.log.Info("cleaning skipped", "topic", p.Topic(), "partition", p.ID(), "why", run.Outcome)
		s.backOff(p, fmt.Sprintf("a transaction is open at offset %d (no COMMIT or ABORT marker yet)", run.OpenTxnOffset))
	default:
		s.noteErr(p, "clean", err)
		s.backOff(p, "the last cleaning failed ("+err.Error()+")")
	}
	return run, err
}

// State returns what the scheduler knows of a partition, with plain-words
// explanations; the zero PartitionState (Partition -1) when the partition
// does not exist.
func (s *Scheduler) State(topic string, partition int) PartitionState {
	st, ok := s.Lookup(topic, partition)
	if !ok {
		return PartitionState{Topic: topic, Partition: -1}
	}
	return st
}

// Lookup is State reporting whether the partition exists (the shape
// fusefs.Options.State takes).
func (s *Scheduler) Lookup(topic string, partition int) (PartitionState, bool) {
	t, err := s.d.Topic(topic)
	if err != nil {
		return PartitionState{}, false
	}
	p, err := t.Partition(partition)
	if err != nil {
		return PartitionState{}, false
	}
	return s.PartitionState(p), true
}

// PartitionState returns the state of p.
func (s *Scheduler) PartitionState(p *engine.Partition) PartitionState {
	now := s.now()
	cfg := p.Config()
	segs := p.Segments()
	logStart := p.LogStartOffset()
	c := CleanableRange(segs, cfg, logStart, p.LogEndOffset(), p.FirstDirtyOffset(), now)

	s.mu.Lock()
	st := s.stateLocked(p)
	out := PartitionState{
		Topic: p.Topic(), Partition: p.ID(), CleanupPolicy: cfg.CleanupPolicy,
		DirtyRatio: c.Ratio, MinCleanableDirtyRatio: cfg.MinCleanableDirtyRatio,
		FirstDirtyOffset: c.FirstDirty, FirstUncleanableOffset: c.FirstUncleanable, CleanableBytes: c.CleanableBytes,
		Cleaning: st.cleaning, Cleanings: st.cleanings,
		LastRetentionCheck: st.lastRetention, NextRetentionCheck: st.nextRetention,
		BytesDeleted: st.bytesDeleted, SegmentsDeleted: st.segsDeleted, LastDeletionReason: st.lastReason,
		LastFlush: st.lastFlush, LastError: st.lastErr, LastErrorTime: st.lastErrTime,
	}
	if st.last != nil {
		run := *st.last
		out.LastCleaning = &run
	}
	if st.stopped != nil {
		stopped := *st.stopped
		out.PoliciesStopped = &stopped
	}
	cleaning := st.cleaning
	cleanAfter, cleanWhy := st.cleanAfter, st.cleanWhy
	s.mu.Unlock()

	out.RetentionExplanation = ExplainRetention(segs, cfg, logStart, now)
	why := ExplainCleaner(c, cfg, out.LastCleaning, cleaning, now)
	if s.threads == 0 && HasPolicy(cfg.CleanupPolicy, "compact") {
		why = append([]string{"not cleaned: log.cleaner.threads=0, so no log cleaner runs (as on a broker); set it to 1 or more to compact"}, why...)
	}
	if now.Before(cleanAfter) && HasPolicy(cfg.CleanupPolicy, "compact") {
		why = append([]string{fmt.Sprintf("not cleaned: %s; the cleaner looks again after %s",
			cleanWhy, cleanAfter.UTC().Format(time.RFC3339))}, why...)
	}
	out.CleanerExplanation = why[0]
	out.Explanations = append([]string{out.RetentionExplanation}, why...)
	if out.PoliciesStopped != nil {
		out.Explanations = append([]string{stoppedExplanation(out.PoliciesStopped)}, out.Explanations...)
	}
	return out
}

// ignorable reports errors that mean "not now" rather than failure: a
// partition closed under us (topic deleted, unmount) or opened read-only.
func ignorable(err error) bool {
	return errors.Is(err, engine.ErrClosed) || errors.Is(err, engine.ErrReadOnly)
}

// setHook installs a test hook on every cleaner (tests only; call before
// any cleaning runs).
func (s *Scheduler) setHook(h func(event string)) {
	for i := 0; i < s.threads; i++ {
		c := <-s.cleaners
		c.hook = h
		defer func() { s.cleaners <- c }()
	}
}

func msDuration(ms int64) time.Duration {
	if ms > int64(math.MaxInt64/time.Millisecond) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(ms) * time.Millisecond
}
