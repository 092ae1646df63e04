package policies

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
)

// errAbandoned marks a cleaning given up without changing anything that
// matters: a stop, a racing retention (engine.ErrConflict), a closed log.
var errAbandoned = errors.New("policies: cleaning abandoned")

// errOpenTxn reports a cleaning that could not start: a transaction with
// no COMMIT or ABORT marker yet begins at the first dirty offset.
var errOpenTxn = errors.New("policies: transaction open at the first dirty offset")

// errMapTooSmall reports a dedupe buffer that cannot map even one record
// past the dirty offset.
var errMapTooSmall = errors.New("policies: log.cleaner.dedupe.buffer.size too small to make progress")

// cleaner compacts one partition at a time, like one of Kafka's
// CleanerThreads. It owns its offset map, allocated (off the Go heap) for
// each run and released at its end, and read/decode/encode buffers, which it
// reuses across batches and runs, so its memory is the map plus a few
// batch-sized buffers, whatever the size of the log or the number of keys,
// and decoding makes next to no garbage.
//
// A cleaner is used by one goroutine at a time.
type cleaner struct {
	mapBytes      int64
	loadFactor    float64    // log.cleaner.io.buffer.load.factor
	m             *OffsetMap // allocated per run (offsetMap), released after it
	logger        *slog.Logger
	progressBytes int64

	// hook, when set (tests only), is called at named points of a run:
	// "group" before a group is rewritten, "replace" before its swap.
	hook func(event string)

	buf     []byte          // read buffer, grows to the largest batch
	buf2    []byte          // second read buffer, for copyPrefix
	out     []byte          // encode buffer
	scratch []byte          // decompression buffer for RecordsInto
	recs    []record.Record // decoded records of the current batch (alias buf or scratch)
	kept    []record.Record // records kept of the current batch
	hashes  []uint64        // OffsetMap.Hash of each record's key (touchKeys)
	touched uint64          // what touchKeys read, kept so the reads stay
}

// touchKeys hashes the keys of recs that m will be asked about (keyed, at
// or below the map's latest offset) into c.hashes (0 for the others) and
// touches their slots (OffsetMap.Touch) so that the lookups' memory misses
// overlap instead of coming one after the other. The cleaner's time was
// mostly such misses: a map of the default size is far larger than the
// CPU caches. Only lookups are touched, not the map's Puts
// (docs/PERFORMANCE.md, "Cleaner").
func (c *cleaner) touchKeys(m *OffsetMap, recs []record.Record) {
	hs := c.hashes[:0]
	latest := m.LatestOffset()
	var t uint64
	for i := range recs {
		var h uint64
		if recs[i].Key != nil && recs[i].Offset <= latest {
			h = m.Hash(recs[i].Key) // 0 (one in 2^64) is only computed again
			t ^= m.Touch(h)
		}
		hs = append(hs, h)
	}
	c.hashes, c.touched = hs, c.touched^t
}

func newCleaner(mapBytes int64, loadFactor float64, logger *slog.Logger, progressBytes int64) *cleaner {
	return &cleaner{mapBytes: mapBytes, loadFactor: loadFactor, logger: logger, progressBytes: progressBytes}
}

// offsetMap returns the cleaner's map, emptied and sized for at most keys
// distinct keys (the offsets of the range to map). Only the pages of the
// slots that range uses are ever touched.
func (c *cleaner) offsetMap(keys int64) (*OffsetMap, error) {
	if c.m == nil {
		m, err := NewOffsetMap(c.mapBytes, c.loadFactor)
		if err != nil {
			return nil, err
		}
		c.m = m
	}
	c.m.ResetFor(keys)
	return c.m, nil
}

// releaseMap returns the map's memory to the system between runs, so an
// idle cleaner holds none of the dedupe buffer.
func (c *cleaner) releaseMap() {
	if c.m != nil {
		c.m.Release()
		c.m = nil
	}
}

// records decodes b into the cleaner's reused record slice and scratch
// buffer; the records alias the read buffer or the scratch until the next
// batch.
func (c *cleaner) records(b *record.Batch) ([]record.Record, error) {
	recs, scratch, err := b.RecordsInto(c.recs[:0], c.scratch)
	c.scratch = scratch
	if err != nil {
		return nil, err
	}
	c.recs = recs
	return recs, nil
}

// cleanRound holds the state of one cleaning of one partition.
type cleanRound struct {
	c       *cleaner
	ctx     context.Context
	p       *engine.Partition
	cfg     engine.Config
	nowMs   int64
	run     *CleaningRun
	logger  *slog.Logger
	start   time.Time // when the run began, for its duration
	readAll int64     // bytes read in both passes, for progress logs
	nextLog int64
	// legacyHorizon is Kafka's legacyDeleteHorizonMs (legacyDeleteHorizon);
	// cleaning is the segment being cleaned, and retainLegacy (once
	// legacyKnown) whether it keeps its legacy tombstones: its last
	// modification is later than legacyHorizon. Only a legacy batch asks
	// (a stat of the segment's file).
	legacyHorizon int64
	cleaning      *engine.Segment
	legacyKnown   bool
	retainLegacy  bool
	// producers holds the last record of each active producer, whose
	// batch is kept, emptied if need be (Kafka's
	// lastRecordsOfActiveProducers): its sequence state stays in the log.
	producers map[int64]engine.ProducerLastRecord
}

// clean compacts p's cleanable range once. It returns nil, nil when there is
// nothing to clean (or, unless force, when the log is not eligible). On an
// abandoned run it returns the run (Outcome says why) and an error wrapping
// errAbandoned; nothing on disk has changed then, or only whole groups were
// swapped in, each equivalent to what it replaced.
func (c *cleaner) clean(ctx context.Context, p *engine.Partition, now time.Time, force bool) (*CleaningRun, error) {
	cfg := p.Config()
	if !HasPolicy(cfg.CleanupPolicy, "compact") && !force {
		return nil, nil
	}
	infos := p.Segments()
	cl := CleanableRange(infos, cfg, p.LogStartOffset(), p.LogEndOffset(), p.FirstDirtyOffset(), now)
	if !force && !cl.Eligible(cfg) {
		return nil, nil
	}
	// A forced run with nothing dirty still rewrites the clean segments below
	// the first dirty offset, so that tombstones and markers past their
	// delete horizon go (the map is empty, and every key there is unique).
	horizonOnly := cl.FirstDirty >= cl.FirstUncleanable
	if horizonOnly {
		cl.FirstUncleanable = cl.FirstDirty
	}

	snap := p.Snapshot()
	defer snap.Release()
	segs := cleanableSegments(snap.Segments, cl.FirstUncleanable)
	if len(segs) == 0 {
		return nil, nil
	}

	r := &cleanRound{
		c: c, ctx: ctx, p: p, cfg: cfg, nowMs: now.UnixMilli(), start: time.Now(),
		run:       &CleaningRun{Start: now, FirstDirtyOffset: cl.FirstDirty, EarliestHorizonMs: -1, OpenTxnOffset: -1},
		logger:    c.logger.With("topic", p.Topic(), "partition", p.ID()),
		producers: p.LastRecordsOfActiveProducers(),
	}
	r.nextLog = c.progressBytes
	r.legacyHorizon = legacyDeleteHorizon(snap.Segments, cl.FirstDirty, cfg.DeleteRetentionMs)
	aborted := abortedTxnsOf(segs)
	m, err := c.offsetMap(cl.FirstUncleanable - cl.FirstDirty)
	if err != nil {
		return r.stopped(err)
	}
	defer c.releaseMap()
	endOffset, err := r.mapDirtyRange(m, segs, cl.FirstDirty, cl.FirstUncleanable, horizonOnly, aborted)
	if err != nil {
		return r.stopped(err)
	}
	if err := r.rewrite(m, segs, endOffset, aborted); err != nil {
		return r.stopped(err)
	}
	p.SetFirstDirtyOffset(endOffset)
	r.finish("done")
	r.logger.Info("cleaned log",
		"first_dirty", r.run.FirstDirtyOffset, "end_offset", endOffset,
		"segments_in", r.run.SegmentsIn, "segments_out", r.run.SegmentsOut,
		"bytes_in", r.run.BytesIn, "bytes_out", r.run.BytesOut,
		"records_kept", r.run.RecordsKept, "records_dropped", r.run.RecordsDropped,
		"map_full", r.run.MapFull, "duration_ms", r.run.DurationMs)
	return r.run, nil
}

// retainsLegacy says whether the segment being cleaned keeps its legacy
// tombstones (cleanRound.retainLegacy).
func (r *cleanRound) retainsLegacy() bool {
	if !r.legacyKnown {
		r.retainLegacy = r.cleaning.LastModified().UnixMilli() > r.legacyHorizon
		r.legacyKnown = true
	}
	return r.retainLegacy
}

// legacyDeleteHorizon is Kafka's legacyDeleteHorizonMs: the last
// modification (ms) of the last segment of the clean part of the log (the
// segments below the first dirty offset) minus delete.retention.ms, 0 when
// nothing is clean yet. Legacy (magic 0 and 1) batches have no field for a
// delete horizon, so their tombstones go once their segment was last
// modified at least delete.retention.ms before the clean part's end was
// (a log that grows and is cleaned moves that end on).
func legacyDeleteHorizon(segs []*engine.Segment, firstDirty, deleteRetentionMs int64) int64 {
	var last *engine.Segment
	for _, s := range segs {
		if s.BaseOffset() >= firstDirty {
			break
		}
		last = s
	}
	if last == nil {
		return 0
	}
	return last.LastModified().UnixMilli() - deleteRetentionMs
}

// cleanableSegments returns the segments of a snapshot the cleaner may
// rewrite: never the active segment (the snapshot's last), and only those
// below the first uncleanable offset.
func cleanableSegments(snapSegs []*engine.Segment, firstUncleanable int64) []*engine.Segment {
	var segs []*engine.Segment
	for _, s := range snapSegs[:max(len(snapSegs)-1, 0)] {
		if s.BaseOffset() >= firstUncleanable {
			break
		}
		segs = append(segs, s)
	}
	return segs
}

// abortedTxnsOf collects the aborted transactions the transaction indexes
// of segs list.
func abortedTxnsOf(segs []*engine.Segment) []abortedTxn {
	var aborted []abortedTxn
	for _, s := range segs {
		for _, a := range s.AbortedTxns() {
			aborted = append(aborted, abortedTxn{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset, LastOffset: a.LastOffset})
		}
	}
	return aborted
}

// finish records the run's outcome and duration.
func (r *cleanRound) finish(outcome string) {
	r.run.Outcome = outcome
	r.run.DurationMs = time.Since(r.start).Milliseconds()
}

// stopped ends a run that err stopped: skipped for a transaction open at
// the first dirty offset (errOpenTxn), else abandoned.
func (r *cleanRound) stopped(err error) (*CleaningRun, error) {
	if errors.Is(err, errOpenTxn) {
		r.finish(fmt.Sprintf("skipped: a transaction is open at offset %d, the first dirty offset", r.run.OpenTxnOffset))
	} else {
		r.finish("abandoned: " + err.Error())
	}
	return r.run, err
}

// mapDirtyRange fills m over the dirty range [firstDirty, firstUncleanable)
// (nothing when horizonOnly) and returns the end of what the run cleans:
// the range's end, cut before a transaction still open there or after the
// last offset a full map holds. It records OpenTxnOffset, MapFull,
// EndOffset and MappedKeys in the run.
func (r *cleanRound) mapDirtyRange(m *OffsetMap, segs []*engine.Segment, firstDirty, firstUncleanable int64, horizonOnly bool, aborted []abortedTxn) (int64, error) {
	full := false
	limit := firstUncleanable
	if horizonOnly {
		m.UpdateLatestOffset(firstDirty - 1)
	} else {
		for {
			var open int64
			var err error
			if full, open, err = r.buildOffsetMap(m, segs, firstDirty, limit, aborted); err != nil {
				return 0, err
			}
			if open < 0 || open >= limit {
				break
			}
			// A transaction open at the map's end: clean only up to its
			// first offset (rebuilding, since later records must not
			// supersede earlier ones outside the cleaned range).
			limit = open
			r.run.OpenTxnOffset = open
			if limit <= firstDirty {
				return 0, errOpenTxn
			}
			m.ResetFor(limit - firstDirty)
		}
	}
	endOffset := limit
	if full {
		endOffset = m.LatestOffset() + 1
		r.run.MapFull = true
		if endOffset <= firstDirty {
			return 0, errMapTooSmall
		}
	}
	r.run.EndOffset = endOffset
	r.run.MappedKeys = int64(m.Len())
	r.run.MapCapacityKeys = int64(m.Capacity())
	return endOffset, nil
}

// rewrite cleans every segment of segs below endOffset (from the log
// start) against m, in groups that each become one cleaned segment.
func (r *cleanRound) rewrite(m *OffsetMap, segs []*engine.Segment, endOffset int64, aborted []abortedTxn) error {
	var spans []segSpan
	byBase := map[int64]*engine.Segment{}
	for _, s := range segs {
		if s.BaseOffset() >= endOffset {
			break
		}
		oidx, tidx, err := s.IndexSizes()
		if err != nil {
			return err
		}
		spans = append(spans, segSpan{Base: s.BaseOffset(), Next: s.NextOffset(), Size: s.Size(), OffsetIdx: oidx, TimeIdx: tidx})
		byBase[s.BaseOffset()] = s
	}
	groups := groupSegments(spans, r.cfg.SegmentBytes, r.cfg.SegmentIndexBytes)
	tr := newTxnTracker(aborted)
	for gi, g := range groups {
		lastGroup := gi == len(groups)-1
		if err := r.cleanGroup(m, g, byBase, tr, lastGroup); err != nil {
			return err
		}
	}
	return nil
}

// progress logs every progressBytes of input read.
func (r *cleanRound) progress(n int64, phase string) {
	r.readAll += n
	if r.c.progressBytes > 0 && r.readAll >= r.nextLog {
		r.nextLog = r.readAll + r.c.progressBytes
		r.logger.Info("cleaner progress", "phase", phase, "read_mb", r.readAll>>20,
			"written_mb", r.run.BytesOut>>20, "mapped_keys", r.c.m.Len())
	}
}

// forEachBatch calls fn with each batch of s from position pos on. The batch
// aliases the cleaner's read buffer until fn returns.
func (r *cleanRound) forEachBatch(s *engine.Segment, pos int64, phase string, fn func(b *record.Batch, pos int64) (bool, error)) error {
	end := s.Size()
	for pos < end {
		if err := r.ctx.Err(); err != nil {
			return fmt.Errorf("%w: %w", errAbandoned, err)
		}
		b, err := s.ReadBatch(pos, r.c.buf)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if cap(b.Raw) > cap(r.c.buf) {
			r.c.buf = b.Raw[:cap(b.Raw)]
		}
		r.progress(int64(b.Size()), phase)
		more, err := fn(&b, pos)
		if err != nil || !more {
			return err
		}
		pos += int64(b.Size())
	}
	return nil
}

// buildOffsetMap maps key → latest offset over the dirty segments from
// firstDirty up to limit (exclusive; a batch base offset), skipping control
// batches and batches of aborted transactions, until the map is full. It
// reports whether the map filled, and the first offset of the earliest
// transaction still open where it stopped (-1 none): its outcome is not
// known yet, so the cleaning must end before it (Kafka bounds the cleanable
// range by the last stable offset for the same reason).
func (r *cleanRound) buildOffsetMap(m *OffsetMap, segs []*engine.Segment, firstDirty, limit int64, aborted []abortedTxn) (full bool, openFrom int64, err error) {
	tr := newTxnTracker(aborted)
	open := map[int64]int64{} // producer → first offset of its open transaction
	stop := false
	for _, s := range segs {
		if s.BaseOffset() >= limit {
			break
		}
		if s.NextOffset() <= firstDirty {
			continue
		}
		pos := int64(0)
		if s.BaseOffset() < firstDirty {
			if pos, err = s.FindOffset(firstDirty); err != nil {
				return false, -1, err
			}
		}
		err = r.forEachBatch(s, pos, "map", func(b *record.Batch, _ int64) (bool, error) {
			if b.BaseOffset >= limit {
				stop = true
				return false, nil
			}
			if b.LastOffset() < firstDirty {
				return true, nil
			}
			if b.IsControl() {
				ctype, err := b.ControlType()
				if err != nil {
					ctype = -1
				}
				tr.onControlBatch(b.ProducerID, b.LastOffset(), b.RecordCount > 0, ctype)
				if b.IsTransactional() {
					delete(open, b.ProducerID)
				}
				m.UpdateLatestOffset(b.LastOffset())
				return true, nil
			}
			if b.IsTransactional() {
				if _, ok := open[b.ProducerID]; !ok {
					open[b.ProducerID] = b.BaseOffset
				}
			}
			if tr.onDataBatch(b.ProducerID, b.LastOffset(), b.IsTransactional()) {
				m.UpdateLatestOffset(b.LastOffset())
				return true, nil
			}
			recs, err := r.c.records(b)
			if err != nil {
				return false, fmt.Errorf("segment %d offset %d: %w", s.BaseOffset(), b.BaseOffset, err)
			}
			for i := range recs {
				rec := &recs[i]
				if rec.Key == nil || rec.Offset < firstDirty {
					continue
				}
				if !m.Put(rec.Key, rec.Offset) {
					full = true
					return false, nil
				}
			}
			m.UpdateLatestOffset(b.LastOffset())
			return true, nil
		})
		clear(r.c.recs[:cap(r.c.recs)]) // drop references to legacy records' keys/values
		if err != nil {
			return false, -1, err
		}
		if full || stop {
			break
		}
	}
	openFrom = -1
	for _, f := range open {
		if openFrom < 0 || f < openFrom {
			openFrom = f
		}
	}
	return full, openFrom, nil
}

// cleanGroup rewrites the segments of one group into one cleaned segment and
// swaps it in. A group of a single segment is written lazily: while every
// batch is kept byte for byte nothing is written, and if that holds to the
// end the segment stays as it is (no write, no fsync, no swap). The output
// would be identical, so this changes nothing but the cost of cleaning a
// mostly clean log.
func (r *cleanRound) cleanGroup(m *OffsetMap, g []segSpan, byBase map[int64]*engine.Segment, tr *txnTracker, lastGroup bool) error {
	if r.c.hook != nil {
		r.c.hook("group")
	}
	out := &groupOutput{r: r, base: g[0].Base, lazy: len(g) == 1}
	done := false
	defer func() {
		if out.w != nil && !done {
			_ = out.w.Abort()
		}
	}()
	if !out.lazy {
		if err := out.open(); err != nil {
			return err
		}
	}
	old := make([]int64, 0, len(g))
	for si, sp := range g {
		old = append(old, sp.Base)
		lastSeg := lastGroup && si == len(g)-1
		if err := r.cleanSegment(m, byBase[sp.Base], out, tr, lastSeg); err != nil {
			return err
		}
	}
	if out.lazy {
		r.run.SegmentsUnchanged++
		r.run.SegmentsOut++
		return nil
	}
	if err := out.w.Finish(); err != nil {
		return err
	}
	if r.c.hook != nil {
		r.c.hook("replace")
	}
	if err := r.p.ReplaceSegments(old, []*engine.SegmentWriter{out.w}); err != nil {
		if errors.Is(err, engine.ErrConflict) || ignorable(err) {
			return fmt.Errorf("%w: %w", errAbandoned, err)
		}
		return err
	}
	done = true
	r.run.SegmentsOut++
	return nil
}

// groupOutput is the cleaned segment cleanGroup writes. A lazy one (a
// group of one segment) is opened only at the first batch that changes.
type groupOutput struct {
	r      *cleanRound
	base   int64                 // the group's first base offset
	w      *engine.SegmentWriter // nil until opened
	lazy   bool                  // nothing written yet: every batch so far kept as it is
	copied int64                 // lazy: bytes of the segment kept as they are so far
}

// open creates the cleaned segment; a cleaning that cannot (the partition
// deleted or closed) is abandoned.
func (o *groupOutput) open() error {
	var err error
	if o.w, err = o.r.p.NewCleanedSegment(o.base); err != nil {
		if ignorable(err) {
			return fmt.Errorf("%w: %w", errAbandoned, err)
		}
		return err
	}
	return nil
}

// write takes the filtered bytes raw of the batch at pos of s (same: the
// batch kept as it is; nil: dropped). While lazy it only counts what is
// kept; at the first change it opens the output and copies what was kept
// so far before going on.
func (o *groupOutput) write(s *engine.Segment, pos int64, raw []byte, same bool) error {
	if o.lazy {
		if same {
			o.copied = pos + int64(len(raw))
			return nil
		}
		o.lazy = false
		if err := o.open(); err != nil {
			return err
		}
		if err := o.r.copyPrefix(o.w, s, o.copied); err != nil {
			return err
		}
	}
	if raw == nil {
		return nil
	}
	return o.w.AppendBatch(raw)
}

// cleanSegment filters every batch of s into out; lastSeg marks the last
// segment of the cleaning round.
func (r *cleanRound) cleanSegment(m *OffsetMap, s *engine.Segment, out *groupOutput, tr *txnTracker, lastSeg bool) error {
	r.run.SegmentsIn++
	r.run.BytesIn += s.Size()
	r.cleaning, r.legacyKnown = s, false
	end := s.Size()
	err := r.forEachBatch(s, 0, "clean", func(b *record.Batch, pos int64) (bool, error) {
		last := lastSeg && pos+int64(b.Size()) >= end
		raw, same, err := r.filterBatch(m, b, tr, last)
		if err != nil {
			return false, fmt.Errorf("segment %d offset %d: %w", s.BaseOffset(), b.BaseOffset, err)
		}
		r.run.BytesOut += int64(len(raw))
		return true, out.write(s, pos, raw, same)
	})
	clear(r.c.recs[:cap(r.c.recs)])
	clear(r.c.kept[:cap(r.c.kept)])
	return err
}

// copyPrefix appends the batches of s in [0, end) to w unchanged, reading
// with its own buffer (the caller's batch lives in the read buffer).
func (r *cleanRound) copyPrefix(w *engine.SegmentWriter, s *engine.Segment, end int64) error {
	for pos := int64(0); pos < end; {
		b, err := s.ReadBatch(pos, r.c.buf2)
		if err != nil {
			return err
		}
		if cap(b.Raw) > cap(r.c.buf2) {
			r.c.buf2 = b.Raw[:cap(b.Raw)]
		}
		if err := w.AppendBatch(b.Raw); err != nil {
			return err
		}
		pos += int64(b.Size())
	}
	return nil
}

// lastOfProducer reports whether b holds the last record of an active
// producer (Kafka's isBatchLastRecordOfProducer): its last data batch, or,
// for a producer that wrote only markers in its epoch, its marker.
func (r *cleanRound) lastOfProducer(b *record.Batch) bool {
	if b.ProducerID < 0 {
		return false
	}
	lr, ok := r.producers[b.ProducerID]
	switch {
	case !ok:
		return false
	case lr.LastDataOffset >= 0:
		return b.LastOffset() == lr.LastDataOffset
	default:
		return b.IsControl() && b.ProducerEpoch == lr.Epoch
	}
}

// filterBatch applies Kafka's batch and record retention to one batch and
// returns the bytes to write (b.Raw itself, with same set, when the batch
// is kept whole), or nil to drop it. last marks the last batch of the
// cleaning round, kept even when emptied so the round's last offset
// survives; so is the last batch of an active producer (Kafka's
// RETAIN_EMPTY), so that its sequence state survives.
func (r *cleanRound) filterBatch(m *OffsetMap, b *record.Batch, tr *txnTracker, last bool) (raw []byte, same bool, err error) {
	last = last || r.lastOfProducer(b)
	canDiscard, discardRecords := r.discardOf(b, tr)
	markerForEmptyTxn := canDiscard && b.IsControl()

	if discardRecords && !last {
		r.run.BatchesDropped++
		r.run.RecordsDropped += int64(max(b.RecordCount, 0))
		return nil, false, nil
	}

	recs, err := r.c.records(b)
	if err != nil {
		return nil, false, err
	}
	horizon := b.DeleteHorizonMs()
	if !b.HasDeleteHorizon() {
		horizon = -1
	}
	keepHorizon := horizon
	if b.Magic < 2 && !r.retainsLegacy() {
		keepHorizon = 0 // passed: the segment-time rule drops its tombstones
	}
	kept, nTomb := r.keepRecords(m, b, recs, keepHorizon, discardRecords)
	dropped := int64(len(recs) - len(kept))
	r.run.RecordsKept += int64(len(kept))
	r.run.RecordsDropped += dropped

	needsHorizon := b.Magic >= 2 && (nTomb > 0 || markerForEmptyTxn) && !b.HasDeleteHorizon()
	if needsHorizon {
		horizon = r.nowMs + r.cfg.DeleteRetentionMs
	}
	if markerForEmptyTxn && len(kept) > 0 {
		nTomb++
	}
	r.noteTombstones(nTomb, horizon)
	return r.emit(b, len(recs), kept, horizon, dropped == 0, needsHorizon, last)
}

// discardOf tells whether b's transaction state lets the cleaner discard
// the batch (canDiscard) and its records (discardRecords): a control
// batch's records only once its delete horizon passed.
func (r *cleanRound) discardOf(b *record.Batch, tr *txnTracker) (canDiscard, discardRecords bool) {
	if b.IsControl() {
		ctype, err := b.ControlType()
		if err != nil {
			ctype = -1
		}
		canDiscard = tr.onControlBatch(b.ProducerID, b.LastOffset(), b.RecordCount > 0, ctype)
		return canDiscard, canDiscard && b.HasDeleteHorizon() && b.DeleteHorizonMs() <= r.nowMs
	}
	canDiscard = tr.onDataBatch(b.ProducerID, b.LastOffset(), b.IsTransactional())
	return canDiscard, canDiscard
}

// noteTombstones counts the tombstones a batch keeps and the earliest
// delete horizon among them.
func (r *cleanRound) noteTombstones(nTomb, horizon int64) {
	if nTomb == 0 {
		return
	}
	r.run.TombstonesKept += nTomb
	if horizon >= 0 && (r.run.EarliestHorizonMs < 0 || horizon < r.run.EarliestHorizonMs) {
		r.run.EarliestHorizonMs = horizon
	}
}

// emit returns what filterBatch writes for b, whose n records were cut to
// kept: b's own bytes when nothing was dropped and no horizon is to be
// added, nothing for a batch left empty (unless last), else the batch
// rebuilt.
func (r *cleanRound) emit(b *record.Batch, n int, kept []record.Record, horizon int64, noneDropped, needsHorizon, last bool) ([]byte, bool, error) {
	if noneDropped && !needsHorizon && n > 0 {
		r.run.BatchesCopied++
		return b.Raw, true, nil
	}
	if noneDropped && n == 0 && b.Magic >= 2 {
		// An already-empty batch: keep it only where Kafka would.
		if !last {
			r.run.BatchesDropped++
			return nil, false, nil
		}
		r.run.BatchesCopied++
		return b.Raw, true, nil
	}
	if len(kept) == 0 && !last {
		r.run.BatchesDropped++
		return nil, false, nil
	}
	out, err := record.Encode(r.c.out[:0], rebuiltSpec(b, kept, horizon), kept)
	if err != nil {
		return nil, false, err
	}
	if len(kept) == 0 && b.Magic >= 2 {
		// Kafka's empty batch keeps the batch's max timestamp (an active
		// producer's last batch: the producer expires by it).
		record.SetMaxTimestamp(out, b.MaxTimestamp)
	}
	r.c.out = out
	r.run.BatchesRebuilt++
	return out, false, nil
}

// keepRecords applies record retention to recs, the records of b, and
// returns those to keep (in the cleaner's kept slice) and how many of them
// are tombstones. Control records are all kept (their batch is dropped or
// kept whole); with discardRecords none is.
func (r *cleanRound) keepRecords(m *OffsetMap, b *record.Batch, recs []record.Record, horizon int64, discardRecords bool) ([]record.Record, int64) {
	kept := r.c.kept[:0]
	nTomb := int64(0)
	if discardRecords {
		r.c.kept = kept
		return kept, 0
	}
	control := b.IsControl()
	if !control {
		r.c.touchKeys(m, recs)
	}
	for i := range recs {
		rec := &recs[i]
		if !control && !keepHashed(m, rec.Offset, rec.Key, r.c.hashes[i], rec.Value, horizon, r.nowMs) {
			continue
		}
		kept = append(kept, *rec)
		if rec.Value == nil && !control {
			nTomb++
		}
	}
	r.c.kept = kept
	return kept, nTomb
}

// rebuiltSpec is the header of the batch that replaces b with the records
// kept, its delete horizon horizon (-1 none). A legacy entry is rewritten as
// a v2 batch starting at its first kept record (Kafka keeps v0/v1 there;
// topicfs writes only v2).
func rebuiltSpec(b *record.Batch, kept []record.Record, horizon int64) record.BatchSpec {
	spec := record.BatchSpec{
		BaseOffset:           b.BaseOffset,
		Codec:                b.Codec(),
		LogAppendTime:        b.LogAppendTime(),
		Transactional:        b.IsTransactional(),
		Control:              b.IsControl(),
		ProducerID:           b.ProducerID,
		ProducerEpoch:        b.ProducerEpoch,
		BaseSequence:         b.BaseSequence,
		PartitionLeaderEpoch: b.PartitionLeaderEpoch,
		DeleteHorizonMs:      horizon,
		LastOffsetDelta:      int32(b.LastOffset() - b.BaseOffset),
	}
	if b.Magic < 2 {
		spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence, spec.PartitionLeaderEpoch = -1, -1, -1, -1
		if len(kept) > 0 {
			spec.BaseOffset = kept[0].Offset
		}
		spec.LastOffsetDelta = int32(b.LastOffset() - spec.BaseOffset)
	}
	return spec
}
