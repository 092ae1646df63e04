package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
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
	closed        atomic.Bool
	stats         counters

	// mu is the writer mutex. It protects appends to the active segment,
	// changes of the segment list and the fields of w.
	mu sync.Mutex
	w  struct {
		encBuf    []byte
		recBuf    []record.Record
		spans     []batchSpan
		unflushed int64 // records appended since the last flush
		lastFlush time.Time
		dirDirty  bool // directory entries changed since the last SyncDir
		producers producerState
		deleted   []deletedFile
	}
	flushMu sync.Mutex // serialises Flush
	indexes indexCache // sealed segments whose indexes are loaded

	subMu sync.Mutex                      // serialises Subscribe/cancel
	subs  atomic.Pointer[[]chan struct{}] // copy on write
}

// deletedFile is a file renamed .deleted, waiting for file.delete.delay.ms.
type deletedFile struct {
	path string
	at   time.Time
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
	p.w.lastFlush = p.now()
	p.indexes.max = maxLoadedIndexes
	p.w.producers = producerState{ongoing: map[int64]int64{}}
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
	return PartitionStats{
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

func (p *Partition) active() *Segment {
	l := p.list()
	return l[len(l)-1]
}

// publish installs a new segment list; callers hold mu.
func (p *Partition) publish(l []*Segment) { p.segs.Store(&l) }

// recordSizeBound is an upper bound of a record's encoded size in a v2 batch.
func recordSizeBound(r *record.Record) int64 {
	n := int64(5+1+10+5+5+5+5) + int64(len(r.Key)) + int64(len(r.Value))
	for _, h := range r.Headers {
		n += 10 + int64(len(h.Key)) + int64(len(h.Value))
	}
	return n
}

// Append encodes recs (Offset ignored; Timestamp < 0 means now; LogAppendTime
// overrides) with the topic's compression.type into one or more batches no
// larger than max.message.bytes, assigns offsets and appends them, rolling
// and flushing as configured. A record too large for max.message.bytes on
// its own fails with ErrRecordTooLarge and nothing is appended.
func (p *Partition) Append(recs []record.Record) (first, last int64, err error) {
	groups := [1][]record.Record{recs}
	return p.appendGroups(groups[:])
}

// AppendEach appends each group of records as its own batch (same
// validation, offsets, timestamps and roll rules as Append of each group in
// turn) under one lock, writing all of them with as few write calls as
// possible. It returns the first and last offsets assigned overall. On
// error, the groups before the failing one may be appended (report how many
// via first/last) and nothing of a failing group is. flush.messages and
// flush.ms are checked once, after the call (as for one Append of all the
// records). A group larger than max.message.bytes is split like Append
// splits its records.
func (p *Partition) AppendEach(groups [][]record.Record) (first, last int64, err error) {
	return p.appendGroups(groups)
}

// appendGroups is Append and AppendEach: one lock, each group validated and
// appended in turn.
func (p *Partition) appendGroups(groups [][]record.Record) (first, last int64, err error) {
	if p.opts.ReadOnly {
		return 0, 0, ErrReadOnly
	}
	cfg := p.cfg.Load()
	now := p.now()

	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		return 0, 0, ErrClosed
	}
	first = p.logEnd.Load()
	last = first - 1
	for _, recs := range groups {
		if len(recs) == 0 {
			continue
		}
		var l int64
		_, l, err = p.appendRecsLocked(recs, cfg, now)
		if l >= first {
			last = max(last, l)
		}
		if err != nil {
			break
		}
	}
	flush := false
	if last >= first {
		flush = p.afterAppendLocked(last-first+1, cfg, now)
	}
	p.mu.Unlock()
	if last >= first {
		p.notify()
	}
	if err != nil {
		return first, last, err
	}
	if flush {
		if err := p.Flush(); err != nil {
			return first, last, err
		}
	}
	return first, last, nil
}

// appendRecsLocked validates recs, encodes them into batches no larger than
// max.message.bytes and appends them. It returns the offsets appended
// (last < first if none). Callers hold mu.
func (p *Partition) appendRecsLocked(recs []record.Record, cfg *Config, now time.Time) (first, last int64, err error) {
	codec := configCodec(cfg)
	nowMs := now.UnixMilli()
	logAppend := cfg.LogAppendTime()
	maxBytes := min(cfg.MaxMessageBytes, cfg.SegmentBytes)
	base := p.logEnd.Load()
	rb := p.w.recBuf[:0]
	for i := range recs {
		r := recs[i]
		r.Offset = base + int64(i)
		if logAppend || r.Timestamp < 0 {
			r.Timestamp = nowMs
		}
		rb = append(rb, r)
	}
	p.w.recBuf = rb
	defer func() {
		clear(rb) // drop references to the caller's byte slices
		if cap(rb) > 1<<16 {
			p.w.recBuf = nil
		}
		if cap(p.w.encBuf) > 4*int(maxBytes) {
			p.w.encBuf = nil // a huge append must not pin its buffer
		}
	}()
	spec := record.BatchSpec{
		Codec: codec, LogAppendTime: logAppend, ProducerID: -1, ProducerEpoch: -1,
		BaseSequence: -1, PartitionLeaderEpoch: 0, DeleteHorizonMs: -1, LastOffsetDelta: -1,
	}
	// A record that cannot fit a batch on its own fails the whole group
	// before anything is written. recordSizeBound is exact enough that only
	// records near the limit need a trial encode.
	for i := range rb {
		if int64(record.HeaderSize)+recordSizeBound(&rb[i]) > maxBytes {
			if _, _, err := encodeChunk(p.w.encBuf[:0], p.w.spans[:0], spec, rb[i:i+1], maxBytes); err != nil {
				return base, base - 1, err
			}
		}
	}
	// Greedy chunks by an upper bound of the encoded size, each encoded
	// (encodeChunk splits one further if its batch still exceeds the limit)
	// and written before the next, so memory stays one chunk's worth.
	first, last = base, base-1
	start := 0
	sum := int64(record.HeaderSize)
	for i := 0; i <= len(rb) && err == nil; i++ {
		if i < len(rb) {
			sz := recordSizeBound(&rb[i])
			if i == start || sum+sz <= maxBytes {
				sum += sz
				continue
			}
		}
		var spans []batchSpan
		p.w.encBuf, spans, err = encodeChunk(p.w.encBuf[:0], p.w.spans[:0], spec, rb[start:i], maxBytes)
		p.w.spans = spans
		for _, sp := range spans {
			if err != nil {
				break
			}
			if err = p.appendLocked(p.w.encBuf[sp.start:sp.end], sp.first, sp.last, sp.maxTs, sp.count, cfg, now); err == nil {
				last = sp.last
			}
		}
		if i < len(rb) {
			start, sum = i, int64(record.HeaderSize)+recordSizeBound(&rb[i])
		}
	}
	return first, last, err
}

// encodeChunk appends chunk as one batch, or as several if the batch would
// exceed maxBytes.
func encodeChunk(buf []byte, spans []batchSpan, spec record.BatchSpec, chunk []record.Record, maxBytes int64) ([]byte, []batchSpan, error) {
	start := len(buf)
	spec.BaseOffset = chunk[0].Offset
	out, err := record.Encode(buf, spec, chunk)
	if err != nil {
		return buf[:start], spans, fmt.Errorf("engine: encode batch: %w", err)
	}
	if int64(len(out)-start) > maxBytes {
		if len(chunk) == 1 {
			return out[:start], spans, fmt.Errorf("%w: record at offset %d encodes to a %d-byte batch, limit %d",
				ErrRecordTooLarge, chunk[0].Offset, len(out)-start, maxBytes)
		}
		half := len(chunk) / 2
		buf, spans, err = encodeChunk(out[:start], spans, spec, chunk[:half], maxBytes)
		if err != nil {
			return buf, spans, err
		}
		return encodeChunk(buf, spans, spec, chunk[half:], maxBytes)
	}
	maxTs := int64(-1)
	if spec.LogAppendTime {
		maxTs = chunk[0].Timestamp
	} else {
		for i := range chunk {
			maxTs = max(maxTs, chunk[i].Timestamp)
		}
	}
	spans = append(spans, batchSpan{start: start, end: len(out), first: chunk[0].Offset,
		last: chunk[len(chunk)-1].Offset, maxTs: maxTs, count: len(chunk)})
	return out, spans, nil
}

// AppendBatch appends a raw v2 batch as a producer sent it: it verifies the
// CRC and the size, assigns offsets (SetBaseOffset), stamps the leader epoch
// and applies LogAppendTime if configured. raw is not modified.
func (p *Partition) AppendBatch(raw []byte) (first, last int64, err error) {
	if p.opts.ReadOnly {
		return 0, 0, ErrReadOnly
	}
	cfg := p.cfg.Load()
	b, err := record.Parse(raw)
	if err != nil {
		return 0, 0, err
	}
	if b.Magic != 2 {
		return 0, 0, fmt.Errorf("%w: magic %d batch (only v2 is appended)", record.ErrUnsupported, b.Magic)
	}
	if err := b.Verify(); err != nil {
		return 0, 0, err
	}
	if int64(len(raw)) > min(cfg.MaxMessageBytes, cfg.SegmentBytes) {
		return 0, 0, fmt.Errorf("%w: batch of %d bytes, limit %d", ErrRecordTooLarge, len(raw), cfg.MaxMessageBytes)
	}
	if b.LastOffsetDelta < 0 || b.RecordCount < 0 {
		return 0, 0, fmt.Errorf("%w: lastOffsetDelta %d, recordCount %d", ErrCorrupt, b.LastOffsetDelta, b.RecordCount)
	}
	now := p.now()
	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		return 0, 0, ErrClosed
	}
	var buf []byte
	if !cfg.KeepsProducerCodec() && b.Codec() != cfg.Codec() && !b.IsControl() {
		if buf, err = recompress(p.w.encBuf[:0], &b, cfg.Codec()); err != nil {
			p.mu.Unlock()
			return 0, 0, fmt.Errorf("engine: recompress batch: %w", err)
		}
		if int64(len(buf)) > min(cfg.MaxMessageBytes, cfg.SegmentBytes) {
			p.mu.Unlock()
			return 0, 0, fmt.Errorf("%w: recompressed batch of %d bytes, limit %d", ErrRecordTooLarge, len(buf), cfg.MaxMessageBytes)
		}
	} else {
		buf = append(p.w.encBuf[:0], raw...)
	}
	p.w.encBuf = buf
	first = p.logEnd.Load()
	last = first + int64(b.LastOffsetDelta)
	record.SetBaseOffset(buf, first)
	record.SetPartitionLeaderEpoch(buf, 0)
	maxTs := b.MaxTimestamp
	if cfg.LogAppendTime() {
		maxTs = now.UnixMilli()
		record.SetLogAppendTime(buf, maxTs)
	}
	err = p.appendLocked(buf, first, last, maxTs, int(b.RecordCount), cfg, now)
	if err == nil && b.IsTransactional() {
		nb, perr := record.Parse(buf)
		if perr == nil {
			if t := p.w.producers.observe(&nb); t != nil {
				err = p.active().appendAbortedTxn(*t)
			}
		}
	}
	var flush bool
	if err == nil {
		flush = p.afterAppendLocked(int64(b.RecordCount), cfg, now)
	}
	p.mu.Unlock()
	if err != nil {
		return 0, 0, err
	}
	p.notify()
	if flush {
		if err := p.Flush(); err != nil {
			return first, last, err
		}
	}
	return first, last, nil
}

// afterAppendLocked counts unflushed records and says whether flush.messages
// or flush.ms ask for a flush now.
func (p *Partition) afterAppendLocked(n int64, cfg *Config, now time.Time) bool {
	p.w.unflushed += n
	if p.w.unflushed >= cfg.FlushMessages {
		return true
	}
	return cfg.FlushMs != math.MaxInt64 && now.Sub(p.w.lastFlush).Milliseconds() >= cfg.FlushMs
}

// appendLocked writes one encoded batch (offsets first..last) to the active
// segment, rolling first if needed, then publishes it. Callers hold mu.
func (p *Partition) appendLocked(raw []byte, first, last, maxTs int64, count int, cfg *Config, now time.Time) error {
	s := p.active()
	if p.shouldRoll(s, cfg, int64(len(raw)), last, maxTs, now.UnixMilli()) {
		if err := p.rollLocked(first, cfg); err != nil {
			return err
		}
		s = p.active()
	}
	pos := s.size.Load()
	if _, err := s.log.WriteAt(raw, pos); err != nil {
		// Leave no partial batch behind (best effort: recovery truncates it anyway).
		if terr := s.log.Truncate(pos); terr != nil {
			p.logger.Warn("engine: cannot truncate after a failed write", "segment", s.LogPath(), "err", terr)
		}
		return fmt.Errorf("engine: append to %s: %w", s.LogPath(), err)
	}
	size := int64(len(raw))
	if pos == 0 {
		s.firstBatchTs.Store(maxTs)
	}
	entry := s.w.ib.add(last, maxTs, pos, size, cfg.IndexIntervalBytes)
	// Publish: bytes first, then the offsets that point into them.
	s.size.Store(pos + size)
	s.next.Store(last + 1)
	if maxTs > s.maxTs.Load() {
		s.maxTs.Store(maxTs)
	}
	p.logEnd.Store(last + 1)
	if entry {
		s.mu.Lock()
		var err error
		if s.mu.oidx != nil {
			err = s.mu.oidx.Append(last, pos)
		}
		if err == nil && s.mu.tidx != nil && s.w.ib.maxTs >= 0 {
			err = s.mu.tidx.MaybeAppend(s.w.ib.maxTs, s.w.ib.offsetOfMax, false)
		}
		s.mu.Unlock()
		if err != nil {
			p.logger.Warn("engine: index append failed", "segment", s.LogPath(), "err", err)
		}
	}
	p.stats.bytesAppended.Add(size)
	p.stats.recordsAppended.Add(int64(count))
	p.stats.batchesAppended.Add(1)
	return nil
}

// shouldRoll is Kafka's LogSegment.shouldRoll (kafka-formats.md §7.1).
func (p *Partition) shouldRoll(s *Segment, cfg *Config, size, last, maxTs, nowMs int64) bool {
	cur := s.Size()
	if cur == 0 {
		return last-s.base > math.MaxInt32 || s.base > last
	}
	if cur > cfg.SegmentBytes-size {
		return true
	}
	if p.timeToRoll(s, cfg, maxTs, nowMs) {
		return true
	}
	s.mu.RLock()
	full := (s.mu.oidx != nil && s.mu.oidx.IsFull()) || (s.mu.tidx != nil && s.mu.tidx.IsFull())
	s.mu.RUnlock()
	return full || last-s.base > math.MaxInt32
}

// timeToRoll: the segment waited longer than segment.ms minus its jitter
// (measured between record timestamps when the first batch has one).
func (p *Partition) timeToRoll(s *Segment, cfg *Config, maxTs, nowMs int64) bool {
	maxMs := cfg.SegmentMs
	if cfg.Compact() && cfg.MaxCompactionLagMs > 0 {
		maxMs = min(maxMs, cfg.MaxCompactionLagMs)
	}
	var waited int64
	if fb := s.FirstBatchTime(); fb >= 0 && maxTs >= 0 {
		waited = maxTs - fb
	} else {
		waited = nowMs - s.created.UnixMilli()
	}
	return waited > maxMs-s.w.rollJitterMs
}

// MaybeRoll rolls a non-empty active segment older than segment.ms (minus
// its jitter; max.compaction.lag.ms caps it on compacted topics), so that
// quiet topics still roll and retention can delete them. Age is wall-clock
// time since the segment was created (for a segment found on disk at open,
// since its .log was last modified). Callers run it from a ticker.
func (p *Partition) MaybeRoll() (bool, error) {
	if p.opts.ReadOnly {
		return false, nil
	}
	cfg := p.cfg.Load()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return false, ErrClosed
	}
	s := p.active()
	if s.Size() == 0 {
		return false, nil
	}
	// By wall-clock age, not record timestamps: a quiet topic fed with
	// historical timestamps must not roll at every call.
	maxMs := cfg.SegmentMs
	if cfg.Compact() && cfg.MaxCompactionLagMs > 0 {
		maxMs = min(maxMs, cfg.MaxCompactionLagMs)
	}
	if p.now().Sub(s.created).Milliseconds() <= maxMs-s.w.rollJitterMs {
		return false, nil
	}
	if err := p.rollLocked(p.logEnd.Load(), cfg); err != nil {
		return false, err
	}
	return true, nil
}

// Roll starts a new active segment at the log end offset (no-op when the
// active segment is empty).
func (p *Partition) Roll() error {
	if p.opts.ReadOnly {
		return ErrReadOnly
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return ErrClosed
	}
	return p.rollLocked(p.logEnd.Load(), p.cfg.Load())
}

// rollLocked seals the active segment and starts a new one at
// max(newBase, LEO). An empty active segment is replaced (or kept if it
// already has that base). Callers hold mu.
func (p *Partition) rollLocked(newBase int64, cfg *Config) error {
	newBase = max(newBase, p.logEnd.Load())
	l := p.list()
	old := l[len(l)-1]
	if old.Size() == 0 {
		if old.base == newBase {
			return nil
		}
		// Replace the empty active segment.
		s, err := p.createSegment(newBase, cfg)
		if err != nil {
			return err
		}
		nl := append(l[:len(l)-1:len(l)-1], s)
		p.publish(nl)
		p.removeSegmentFiles(old)
		old.Release()
		return nil
	}
	s, err := p.createSegment(newBase, cfg)
	if err != nil {
		return err
	}
	if err := old.seal(); err != nil {
		p.logger.Warn("engine: sealing segment", "segment", old.LogPath(), "err", err)
	}
	old.cache.add(old)
	nl := make([]*Segment, len(l), len(l)+1)
	copy(nl, l)
	p.publish(append(nl, s))
	p.stats.rolls.Add(1)
	p.logger.Debug("engine: rolled segment", "base", newBase, "previous", old.base, "previousSize", old.Size())
	return nil
}

// seal turns the active segment into a sealed one: final time-index entry
// (max timestamp so far), indexes trimmed to their entries.
func (s *Segment) seal() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sealed.Store(true)
	var errs []error
	if s.mu.tidx != nil && s.w.ib.maxTs >= 0 {
		errs = append(errs, s.mu.tidx.MaybeAppend(s.w.ib.maxTs, s.w.ib.offsetOfMax, true))
	}
	if s.mu.oidx != nil {
		errs = append(errs, s.mu.oidx.Trim())
	}
	if s.mu.tidx != nil {
		errs = append(errs, s.mu.tidx.Trim())
	}
	return errors.Join(errs...)
}

// newSegment builds a Segment object around an open log file.
func (p *Partition) newSegment(base int64, log vfs.File, files segFiles, size int64, cfg *Config) *Segment {
	s := &Segment{
		fs: p.fs, base: base, logger: p.logger, stats: &p.stats,
		indexMax: int(cfg.SegmentIndexBytes), interval: cfg.IndexIntervalBytes,
		readOnly: p.opts.ReadOnly, log: log, created: p.now(), cache: &p.indexes,
	}
	s.refs.Store(1)
	s.size.Store(size)
	s.next.Store(-1)
	s.maxTs.Store(unknownTs)
	s.firstBatchTs.Store(unknownTs)
	s.w.ib = newIndexBuilder()
	if cfg.SegmentJitterMs > 0 && cfg.SegmentMs > 0 {
		s.w.rollJitterMs = rand.Int64N(min(cfg.SegmentJitterMs, cfg.SegmentMs))
	}
	s.mu.files = files
	s.mu.idxFS = p.fs
	return s
}

// segmentPaths returns the normal paths of the segment at base.
func (p *Partition) segmentPaths(base int64) segFiles {
	b := filepath.Join(p.dir, segmentName(base))
	return segFiles{log: b + logSuffix, index: b + indexSuffix, timeIndex: b + timeIndexSuffix}
}

// createSegment creates a new empty active segment at base, replacing any
// files already there. On a read-only partition it makes a virtual one.
func (p *Partition) createSegment(base int64, cfg *Config) (*Segment, error) {
	if p.opts.ReadOnly {
		s := p.newSegment(base, nil, segFiles{log: p.segmentPaths(base).log}, 0, cfg)
		s.next.Store(base)
		s.maxTs.Store(-1)
		s.mu.loaded = true
		return s, nil
	}
	files := p.segmentPaths(base)
	for _, f := range append(files.all(), strings.TrimSuffix(files.log, logSuffix)+txnIndexSuffix) {
		if err := p.fs.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("engine: remove stale %s: %w", f, err)
		}
	}
	log, err := p.fs.OpenFile(files.log, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("engine: create segment: %w", err)
	}
	s := p.newSegment(base, log, files, 0, cfg)
	s.next.Store(base)
	s.maxTs.Store(-1)
	s.mu.Lock()
	err = s.openIndexesLocked(true)
	s.mu.Unlock()
	if err != nil {
		log.Close()
		return nil, fmt.Errorf("engine: create segment indexes: %w", err)
	}
	p.w.dirDirty = true
	return s, nil
}

// removeSegmentFiles unlinks a segment's files (used for empty segments
// that are replaced; their files are not worth a .deleted delay).
func (p *Partition) removeSegmentFiles(s *Segment) {
	if p.opts.ReadOnly || s.log == nil {
		return
	}
	s.mu.RLock()
	files := s.mu.files
	s.mu.RUnlock()
	for _, f := range files.all() {
		if err := p.fs.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			p.logger.Warn("engine: remove segment file", "file", f, "err", err)
		}
	}
	p.w.dirDirty = true
}

// Flush fsyncs everything appended so far (log files, sealed indexes, the
// directory) and advances the recovery point to the log end offset.
func (p *Partition) Flush() error {
	if p.opts.ReadOnly {
		return nil
	}
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	p.mu.Lock()
	leo := p.logEnd.Load()
	dirty := p.w.dirDirty
	p.w.dirDirty = false
	p.w.unflushed = 0
	p.w.lastFlush = p.now()
	segs := p.list()
	for _, s := range segs {
		s.Retain() // safe: the list's references cannot go while we hold mu
	}
	p.mu.Unlock()
	defer func() {
		for _, s := range segs {
			s.Release()
		}
	}()
	if leo <= p.recoveryPoint.Load() && !dirty {
		return nil
	}
	fail := func(err error) error {
		p.mu.Lock()
		p.w.dirDirty = p.w.dirDirty || dirty
		p.mu.Unlock()
		return err
	}
	for _, s := range segs {
		if err := s.flush(); err != nil {
			return fail(fmt.Errorf("engine: flush %s: %w", s.LogPath(), err))
		}
	}
	if dirty {
		if err := p.fs.SyncDir(p.dir); err != nil {
			return fail(fmt.Errorf("engine: sync dir %s: %w", p.dir, err))
		}
	}
	for {
		rp := p.recoveryPoint.Load()
		if leo <= rp || p.recoveryPoint.CompareAndSwap(rp, leo) {
			break
		}
	}
	p.stats.flushes.Add(1)
	return nil
}

// flush fsyncs the segment's unsynced bytes, and its indexes once sealed.
func (s *Segment) flush() error {
	if s.log == nil {
		return nil
	}
	size := s.Size()
	sealed := s.Sealed()
	if size > s.syncedSize.Load() {
		if err := s.log.Sync(); err != nil {
			return err
		}
		s.syncedSize.Store(size)
	}
	if sealed && !s.idxSynced.Load() {
		s.mu.RLock()
		var errs []error
		if s.mu.oidx != nil {
			errs = append(errs, s.mu.oidx.Sync())
		}
		if s.mu.tidx != nil {
			errs = append(errs, s.mu.tidx.Sync())
		}
		if s.mu.txn != nil {
			errs = append(errs, s.mu.txn.Sync())
		}
		s.mu.RUnlock()
		if err := errors.Join(errs...); err != nil {
			return err
		}
		s.idxSynced.Store(true)
	}
	return nil
}

// DeleteOldestSegments removes the n oldest segments (never the active one;
// if asked to remove all, it rolls first), renaming their files .deleted
// and advancing the log start offset. It returns the bytes removed.
func (p *Partition) DeleteOldestSegments(n int, reason string) (int64, error) {
	if p.opts.ReadOnly {
		return 0, ErrReadOnly
	}
	if n <= 0 {
		return 0, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return 0, ErrClosed
	}
	l := p.list()
	if n >= len(l) && l[len(l)-1].Size() > 0 {
		if err := p.rollLocked(p.logEnd.Load(), p.cfg.Load()); err != nil {
			return 0, err
		}
		l = p.list()
	}
	n = min(n, len(l)-1)
	var bytes int64
	var err error
	i := 0
	now := p.now()
	for ; i < n; i++ {
		if err = p.markDeleted(l[i], now); err != nil {
			break
		}
		bytes += l[i].Size()
	}
	if i == 0 {
		return 0, err
	}
	gone := l[:i]
	p.publish(append([]*Segment(nil), l[i:]...))
	if nb := l[i].base; nb > p.logStart.Load() {
		p.logStart.Store(nb)
	}
	for _, s := range gone {
		s.Release()
	}
	p.stats.segmentsDeleted.Add(int64(i))
	p.logger.Info("engine: deleted segments", "count", i, "bytes", bytes, "reason", reason,
		"logStartOffset", p.logStart.Load())
	return bytes, err
}

// markDeleted renames every file of s with the .deleted suffix and queues
// them for PurgeDeleted. Callers hold mu.
func (p *Partition) markDeleted(s *Segment, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := &s.mu.files
	for _, path := range []*string{&f.log, &f.index, &f.timeIndex, &f.txnIndex} {
		if *path == "" || strings.HasSuffix(*path, deletedSuffix) {
			continue
		}
		if s.mu.idxFS != p.fs && path != &f.log {
			continue // in-memory index: nothing on disk
		}
		np := *path + deletedSuffix
		if err := p.fs.Rename(*path, np); err != nil {
			if path == &f.log {
				return fmt.Errorf("engine: delete segment %s: %w", *path, err)
			}
			p.logger.Warn("engine: rename to .deleted", "file", *path, "err", err)
			continue
		}
		*path = np
		p.w.deleted = append(p.w.deleted, deletedFile{path: np, at: now})
	}
	p.w.dirDirty = true
	return nil
}

// PurgeDeleted unlinks .deleted files older than file.delete.delay.ms.
// Readers that still hold such a segment keep reading their open files.
func (p *Partition) PurgeDeleted(now time.Time) error {
	if p.opts.ReadOnly {
		return nil
	}
	delay := time.Duration(p.cfg.Load().FileDeleteDelayMs) * time.Millisecond
	p.mu.Lock()
	var due []string
	keep := p.w.deleted[:0]
	for _, d := range p.w.deleted {
		if !now.Before(d.at.Add(delay)) {
			due = append(due, d.path)
		} else {
			keep = append(keep, d)
		}
	}
	clear(p.w.deleted[len(keep):])
	p.w.deleted = keep
	if len(due) > 0 {
		p.w.dirDirty = true
	}
	p.mu.Unlock()
	var errs []error
	for _, f := range due {
		if err := p.fs.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

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
	p.closed.Store(true)
	l := p.list()
	if !p.opts.ReadOnly && len(l) > 0 {
		a := l[len(l)-1]
		a.mu.Lock()
		if a.mu.tidx != nil && a.w.ib.maxTs >= 0 {
			errs = append(errs, a.mu.tidx.MaybeAppend(a.w.ib.maxTs, a.w.ib.offsetOfMax, true))
		}
		if a.mu.oidx != nil {
			errs = append(errs, a.mu.oidx.Trim(), a.mu.oidx.Sync())
		}
		if a.mu.tidx != nil {
			errs = append(errs, a.mu.tidx.Trim(), a.mu.tidx.Sync())
		}
		a.mu.Unlock()
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

// configCodec is the codec the topic's compression.type asks for appends.
func configCodec(cfg *Config) record.Codec { return cfg.Codec() }

// recompress re-encodes a producer's v2 batch with the topic's codec (when
// compression.type is not "producer"), keeping every header field.
func recompress(dst []byte, b *record.Batch, codec record.Codec) ([]byte, error) {
	recs, err := b.Records(nil)
	if err != nil {
		return dst, err
	}
	spec := record.BatchSpec{
		BaseOffset: b.BaseOffset, Codec: codec, LogAppendTime: b.LogAppendTime(),
		Transactional: b.IsTransactional(), Control: b.IsControl(), ProducerID: b.ProducerID,
		ProducerEpoch: b.ProducerEpoch, BaseSequence: b.BaseSequence,
		PartitionLeaderEpoch: b.PartitionLeaderEpoch, DeleteHorizonMs: -1, LastOffsetDelta: b.LastOffsetDelta,
	}
	if b.HasDeleteHorizon() {
		spec.DeleteHorizonMs = b.DeleteHorizonMs()
	}
	if b.LogAppendTime() {
		for i := range recs {
			recs[i].Timestamp = b.MaxTimestamp
		}
	}
	return record.Encode(dst, spec, recs)
}
