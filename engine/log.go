package engine

import (
	"bytes"
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
		encBuf    []byte // encoded batches of the pending run
		run       appendRun
		params    appendParams // parsed config of the last append call
		recBuf    []record.Record
		lineRecs  []record.Record // AppendLines' records on compressed topics
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

// maxRunBytes is how many bytes of encoded batches an append call gathers
// before it writes them (one write call per run; a single larger batch is
// one run of its own).
const maxRunBytes = 1 << 20

// appendParams are what an append call needs of the configuration and the
// clock, derived once per call (Config's methods parse strings).
type appendParams struct {
	cfg       *Config
	codec     record.Codec
	logAppend bool
	maxBytes  int64 // min(max.message.bytes, segment.bytes)
	rollMs    int64 // segment.ms, capped by max.compaction.lag.ms on compacted topics
	now       time.Time
	nowMs     int64
	runLimit  int // write the run when it reaches this many bytes (maxRunBytes)
}

// appendParamsLocked derives the call's parameters; the parsed config
// values are cached per configuration (SetConfig installs a new pointer).
// Callers hold mu.
func (p *Partition) appendParamsLocked(cfg *Config, now time.Time) appendParams {
	c := &p.w.params
	if c.cfg != cfg {
		*c = appendParams{cfg: cfg, codec: configCodec(cfg), logAppend: cfg.LogAppendTime(),
			maxBytes: min(cfg.MaxMessageBytes, cfg.SegmentBytes), rollMs: rollAfterMs(cfg)}
	}
	ap := *c
	ap.now, ap.nowMs = now, now.UnixMilli()
	ap.runLimit = maxRunBytes
	return ap
}

// rollAfterMs is how old (by timestamps or wall clock) an active segment may
// grow: segment.ms, capped by max.compaction.lag.ms on compacted topics.
func rollAfterMs(cfg *Config) int64 {
	maxMs := cfg.SegmentMs
	if cfg.Compact() && cfg.MaxCompactionLagMs > 0 {
		maxMs = min(maxMs, cfg.MaxCompactionLagMs)
	}
	return maxMs
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
// splits its records (and a write error between two of its batches can leave
// the first ones appended, as for Append).
func (p *Partition) AppendEach(groups [][]record.Record) (first, last int64, err error) {
	return p.appendGroups(groups)
}

// appendGroups is Append and AppendEach: one lock, each group validated and
// encoded in turn into the pending run, which is written when it is full,
// before a roll and at the end.
func (p *Partition) appendGroups(groups [][]record.Record) (first, last int64, err error) {
	return p.appendWith(func(ap *appendParams) error {
		for _, recs := range groups {
			if len(recs) == 0 {
				continue
			}
			if err := p.appendGroupLocked(recs, ap); err != nil {
				return err
			}
		}
		return nil
	})
}

// AppendLines appends each '\n'-terminated line of lines as one record:
// the line without its '\n' is the value; no key, no headers, the
// timestamp is now (or LogAppendTime). Records are cut into batches of at
// most batchBytes (at most max.message.bytes; a line too long for
// batchBytes gets a batch of its own). It is the mount's append-file path:
// uncompressed topics encode the lines in one pass (record.EncodeLines),
// with no Record per line. lines must end with '\n'. A line too large for
// max.message.bytes fails with ErrRecordTooLarge; the lines before it may
// be appended (first/last say which), nothing after it is. flush.messages
// and flush.ms are checked once, after the call.
func (p *Partition) AppendLines(lines []byte, batchBytes int) (first, last int64, err error) {
	if len(lines) == 0 || lines[len(lines)-1] != '\n' {
		end := p.LogEndOffset()
		return end, end - 1, fmt.Errorf("engine: AppendLines: lines must end with a newline")
	}
	return p.appendWith(func(ap *appendParams) error {
		if ap.codec != record.None {
			return p.appendLineGroupsLocked(lines, batchBytes, ap)
		}
		return p.encodeLinesLocked(lines, batchBytes, ap)
	})
}

// encodeLinesLocked encodes lines batch by batch into the run.
func (p *Partition) encodeLinesLocked(lines []byte, batchBytes int, ap *appendParams) error {
	spec := appendSpec(record.None, ap.logAppend)
	for rest := lines; len(rest) > 0; {
		start := len(p.w.encBuf)
		spec.BaseOffset = p.nextOffsetLocked()
		buf, info, used, err := encodeLineBatch(p.w.encBuf, spec, rest, ap.nowMs, batchBytes, int(ap.maxBytes))
		if err != nil {
			return err
		}
		p.w.encBuf = buf
		rest = rest[used:]
		b := batchSpan{start: start, end: len(buf), first: spec.BaseOffset,
			last: spec.BaseOffset + int64(info.Records) - 1, maxTs: info.MaxTimestamp, count: info.Records}
		if err := p.placeLocked(b, ap); err != nil {
			return err
		}
	}
	return nil
}

// appendSpec is the spec of the batches an append call encodes: no
// producer, no sequence, leader epoch 0, offsets from BaseOffset on.
func appendSpec(codec record.Codec, logAppendTime bool) record.BatchSpec {
	return record.BatchSpec{
		Codec: codec, LogAppendTime: logAppendTime, ProducerID: -1, ProducerEpoch: -1,
		BaseSequence: -1, DeleteHorizonMs: -1, LastOffsetDelta: -1,
	}
}

// encodeLineBatch appends to buf the next batch of lines: as many whole
// lines as fit in batchBytes (capped by maxBytes), or the first line alone
// if it is longer (a batch of its own, up to maxBytes). It returns what
// record.EncodeLines does, its error as the append path reports it.
func encodeLineBatch(buf []byte, spec record.BatchSpec, lines []byte, nowMs int64, batchBytes, maxBytes int) ([]byte, record.SequentialInfo, int, error) {
	soft := min(max(batchBytes, 1), maxBytes)
	out, info, used, err := record.EncodeLines(buf, spec, lines, nowMs, soft)
	if err != nil && soft < maxBytes && errors.Is(err, record.ErrBatchTooLarge) {
		one := lines[:bytes.IndexByte(lines, '\n')+1]
		out, info, used, err = record.EncodeLines(buf, spec, one, nowMs, maxBytes)
	}
	return out, info, used, sequentialError(err)
}

// appendLineGroupsLocked is AppendLines for compressed topics: the lines
// become records, in groups of about batchBytes, appended as by AppendEach.
func (p *Partition) appendLineGroupsLocked(lines []byte, batchBytes int, ap *appendParams) error {
	recs := p.w.lineRecs[:0]
	defer func() {
		clear(recs)
		if cap(recs) <= 1<<14 {
			p.w.lineRecs = recs[:0]
		}
	}()
	size := 0
	for rest := lines; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		recs = append(recs, record.Record{Timestamp: -1, Value: rest[:i:i]})
		size += i + 8
		rest = rest[i+1:]
		if size >= batchBytes || len(rest) == 0 {
			if err := p.appendGroupLocked(recs, ap); err != nil {
				return err
			}
			clear(recs)
			recs, size = recs[:0], 0
		}
	}
	return nil
}

// appendWith runs encode, which places batches into the pending run, under
// the writer lock; then it writes the run and publishes it, counts the
// records for flush.messages and flush.ms and notifies subscribers.
func (p *Partition) appendWith(encode func(ap *appendParams) error) (first, last int64, err error) {
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
	ap := p.appendParamsLocked(cfg, now)
	err = encode(&ap)
	if werr := p.writeRunLocked(); err == nil {
		err = werr
	}
	p.trimBuffersLocked(cfg)
	last = p.logEnd.Load() - 1
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

// trimBuffersLocked drops writer buffers a huge append grew, so they do not
// stay pinned.
func (p *Partition) trimBuffersLocked(cfg *Config) {
	limit := max(4*int(min(cfg.MaxMessageBytes, cfg.SegmentBytes)), 2*maxRunBytes)
	if cap(p.w.encBuf) > limit {
		p.w.encBuf = nil
	}
	if cap(p.w.recBuf) > 1<<16 {
		p.w.recBuf = nil
	}
	if cap(p.w.run.batches) > 1<<14 {
		p.w.run.batches = nil
	}
}

// appendGroupLocked validates recs, encodes them into batches no larger
// than max.message.bytes and adds them to the run. If it fails before the
// run was written, the group's batches are taken out of the run again.
// Callers hold mu.
func (p *Partition) appendGroupLocked(recs []record.Record, ap *appendParams) error {
	spec := appendSpec(ap.codec, ap.logAppend)
	// A record that cannot fit a batch on its own fails the whole group
	// before anything of it is placed. Uncompressed groups that fit one
	// batch need no check: encoding the batch is the check.
	if ap.codec != record.None {
		if err := p.checkRecordSizesLocked(spec, recs, ap.nowMs, ap.maxBytes); err != nil {
			return err
		}
	}
	mark := p.w.run.mark(len(p.w.encBuf))
	err := p.encodeGroupLocked(recs, spec, ap)
	if err != nil {
		p.w.run.rewind(mark, &p.w.encBuf)
	}
	return err
}

// checkRecordSizesLocked fails with ErrRecordTooLarge if a record of recs
// cannot fit a batch of maxBytes on its own. recordSizeBound is exact enough
// that only records near the limit need a trial encode.
func (p *Partition) checkRecordSizesLocked(spec record.BatchSpec, recs []record.Record, nowMs, maxBytes int64) error {
	for i := range recs {
		if int64(record.HeaderSize)+recordSizeBound(&recs[i]) <= maxBytes {
			continue
		}
		if err := p.trialEncodeLocked(spec, &recs[i], nowMs, maxBytes); err != nil {
			return err
		}
	}
	return nil
}

// trialEncodeLocked encodes r alone (offset 0, timestamp resolved) past the
// end of the writer's buffer and fails with ErrRecordTooLarge if its batch
// exceeds maxBytes.
func (p *Partition) trialEncodeLocked(spec record.BatchSpec, r *record.Record, nowMs, maxBytes int64) error {
	tail := p.w.encBuf[len(p.w.encBuf):]
	if spec.Codec == record.None {
		_, _, err := record.EncodeSequential(tail, spec, []record.Record{*r}, nowMs, int(maxBytes))
		return sequentialError(err)
	}
	one := *r
	one.Offset = 0
	if spec.LogAppendTime || one.Timestamp < 0 {
		one.Timestamp = nowMs
	}
	_, _, err := encodeChunk(tail, p.w.spans[:0], spec, []record.Record{one}, maxBytes)
	return err
}

// sequentialError is an error of record.EncodeSequential as the append
// path reports it: ErrRecordTooLarge for a record that fits no batch.
func sequentialError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, record.ErrBatchTooLarge):
		return fmt.Errorf("%w: %v", ErrRecordTooLarge, err)
	default:
		return fmt.Errorf("engine: encode batch: %w", err)
	}
}

// appendBatchBytes is the size at which Append cuts an uncompressed group
// into batches (a soft limit: a larger record gets a batch of its own, up
// to max.message.bytes), so that a large Append is several batches rather
// than one of max.message.bytes: a reader or consumer fetches it piece by
// piece. Producers' batches are 16 KiB by default; nothing in Kafka depends
// on where records are cut into batches.
const appendBatchBytes = 256 << 10

// encodeGroupLocked encodes recs batch by batch into the run.
func (p *Partition) encodeGroupLocked(recs []record.Record, spec record.BatchSpec, ap *appendParams) error {
	nowMs, maxBytes := ap.nowMs, ap.maxBytes
	base := p.nextOffsetLocked()
	if spec.Codec == record.None {
		// Hot path: straight from the caller's records, no copies of them.
		for k := 0; k < len(recs); {
			start := len(p.w.encBuf)
			spec.BaseOffset = base + int64(k)
			buf, info, err := record.EncodeSequential(p.w.encBuf, spec, recs[k:], nowMs, int(min(maxBytes, appendBatchBytes)))
			if err != nil && maxBytes > appendBatchBytes && errors.Is(err, record.ErrBatchTooLarge) {
				// A record larger than the soft limit: a batch of its own.
				buf, info, err = record.EncodeSequential(p.w.encBuf, spec, recs[k:k+1], nowMs, int(maxBytes))
			}
			if err != nil {
				return sequentialError(err)
			}
			p.w.encBuf = buf
			if k == 0 && info.Records < len(recs) {
				// More batches follow: check the rest before placing any.
				if err := p.checkRecordSizesLocked(spec, recs[info.Records:], nowMs, maxBytes); err != nil {
					p.w.encBuf = p.w.encBuf[:start]
					return err
				}
			}
			b := batchSpan{start: start, end: len(buf), first: spec.BaseOffset,
				last: spec.BaseOffset + int64(info.Records) - 1, maxTs: info.MaxTimestamp, count: info.Records}
			if err := p.placeLocked(b, ap); err != nil {
				return err
			}
			k += info.Records
		}
		return nil
	}
	// Compressed: offsets and timestamps are set on a copy of the records,
	// then greedy chunks by an upper bound of the encoded size are encoded
	// (encodeChunk splits one further if its batch still exceeds the limit).
	rb := p.w.recBuf[:0]
	for i := range recs {
		r := recs[i]
		r.Offset = base + int64(i)
		if spec.LogAppendTime || r.Timestamp < 0 {
			r.Timestamp = nowMs
		}
		rb = append(rb, r)
	}
	p.w.recBuf = rb
	defer clear(rb) // drop references to the caller's byte slices
	start := 0
	sum := int64(record.HeaderSize)
	for i := 0; i <= len(rb); i++ {
		if i < len(rb) {
			sz := recordSizeBound(&rb[i])
			if i == start || sum+sz <= maxBytes {
				sum += sz
				continue
			}
		}
		var spans []batchSpan
		var err error
		p.w.encBuf, spans, err = encodeChunk(p.w.encBuf, p.w.spans[:0], spec, rb[start:i], maxBytes)
		p.w.spans = spans
		if err != nil {
			return err
		}
		// Placing may write the run and move a batch down to the new end of
		// the run; the spans after it stay where they are.
		for _, sp := range spans {
			if err := p.placeLocked(sp, ap); err != nil {
				return err
			}
		}
		if i < len(rb) {
			start, sum = i, int64(record.HeaderSize)+recordSizeBound(&rb[i])
		}
	}
	return nil
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
	ap := p.appendParamsLocked(cfg, now)
	err = p.placeLocked(batchSpan{start: 0, end: len(buf), first: first, last: last, maxTs: maxTs, count: int(b.RecordCount)}, &ap)
	if err == nil {
		err = p.writeRunLocked()
	}
	if err != nil {
		p.w.run.drop() // a failed place or write leaves nothing pending
		p.w.encBuf = p.w.encBuf[:0]
	}
	if err == nil && b.IsTransactional() {
		nb, perr := record.Parse(buf)
		if perr == nil {
			if t := p.w.producers.observe(&nb); t != nil {
				err = p.active().appendAbortedTxn(*t)
			}
		}
	}
	p.trimBuffersLocked(cfg)
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

// appendRun is the writer's pending run: encoded batches in p.w.encBuf[0:end]
// waiting to be written at pos0 of seg with one write call, then published.
// Batches are placed (roll decided, index entries planned) as they are
// encoded, exactly as if each had been written at once: Kafka's roll rule
// sees the pending bytes, and when it depends on something only a write
// makes exact (index fullness) the run is written first.
type appendRun struct {
	seg     *Segment
	pos0    int64        // segment size when the run started
	ib      indexBuilder // seg.w.ib when the run started (restored on failure)
	end     int          // bytes of encBuf in the run
	next    int64        // next offset after the run
	entries int          // index entries planned among batches
	batches []runBatch
	gen     int // bumped by every write or drop
}

// runBatch is one batch of a run (start and end in encBuf).
type runBatch struct {
	batchSpan
	entry   bool  // an index entry is due before this batch
	tidxTs  int64 // time index entry (index builder state after the batch)
	tidxOff int64
}

// runMark is a point in a run to rewind to.
type runMark struct {
	gen, end, batches, entries int
	next                       int64
	ib                         indexBuilder
	ok                         bool
}

func (r *appendRun) mark(bufLen int) runMark {
	if r.seg == nil {
		return runMark{gen: r.gen, end: bufLen}
	}
	return runMark{gen: r.gen, end: r.end, batches: len(r.batches), entries: r.entries, next: r.next, ib: r.seg.w.ib, ok: true}
}

// rewind takes the batches placed after m out of the run, if the run was
// not written since.
func (r *appendRun) rewind(m runMark, buf *[]byte) {
	if r.gen != m.gen {
		return
	}
	if !m.ok || r.seg == nil {
		r.drop()
		*buf = (*buf)[:0]
		return
	}
	r.end, r.entries, r.next = m.end, m.entries, m.next
	r.batches = r.batches[:m.batches]
	r.seg.w.ib = m.ib
	*buf = (*buf)[:m.end]
}

func (r *appendRun) drop() {
	r.seg = nil
	r.end, r.entries = 0, 0
	r.batches = r.batches[:0]
	r.gen++
}

// nextOffsetLocked is the offset the next record gets (pending run included).
func (p *Partition) nextOffsetLocked() int64 {
	if p.w.run.seg != nil {
		return p.w.run.next
	}
	return p.logEnd.Load()
}

// placeLocked adds the batch encoded at encBuf[sp.start:sp.end] to the run.
// Everything in the buffer from the end of the run on is batches not placed
// yet, in order; it is the first of them. If it belongs in a new segment,
// placeLocked writes the run and rolls first. If the run was written (then
// it is empty), it moves down to the run's end. Callers hold mu.
func (p *Partition) placeLocked(sp batchSpan, ap *appendParams) error {
	b := runBatch{batchSpan: sp}
	r := &p.w.run
	cfg := ap.cfg
	size := int64(b.end - b.start)
	for {
		s := p.active()
		if r.seg == nil {
			r.seg, r.pos0, r.ib, r.end = s, s.Size(), s.w.ib, 0
		}
		firstTs := int64(-1)
		if len(r.batches) > 0 {
			firstTs = r.batches[0].maxTs
		}
		roll, exact := p.rollDue(s, ap, int64(r.end), r.entries, firstTs, size, b.last, b.maxTs)
		if !exact {
			if err := p.writeRunLocked(); err != nil {
				return err
			}
			continue
		}
		if roll {
			if err := p.writeRunLocked(); err != nil {
				return err
			}
			if err := p.rollLocked(b.first, cfg); err != nil {
				return err
			}
			s = p.active()
			r.seg, r.pos0, r.ib, r.end = s, s.Size(), s.w.ib, 0
		}
		break
	}
	if b.start != r.end {
		// The run was written: move the batch down (later batches sit at or
		// after b.end, so they are not overwritten).
		n := copy(p.w.encBuf[r.end:b.end], p.w.encBuf[b.start:b.end])
		b.start, b.end = r.end, r.end+n
	}
	p.w.encBuf = p.w.encBuf[:b.end]
	s := r.seg
	b.entry = s.w.ib.add(b.last, b.maxTs, r.pos0+int64(b.start), size, cfg.IndexIntervalBytes)
	b.tidxTs, b.tidxOff = s.w.ib.maxTs, s.w.ib.offsetOfMax
	if b.entry {
		r.entries++
	}
	r.batches = append(r.batches, b)
	r.end = b.end
	r.next = b.last + 1
	if r.end >= ap.runLimit {
		return p.writeRunLocked()
	}
	return nil
}

// writeRunLocked writes the pending run with one write call and publishes
// it: bytes first, then the offsets that point into them, then the index
// entries. On failure nothing of the run is published and the bytes are
// truncated away (best effort: recovery truncates them anyway). The write
// empties the buffer. Callers hold mu.
func (p *Partition) writeRunLocked() error {
	r := &p.w.run
	if r.seg == nil {
		return nil
	}
	defer func() {
		r.drop()
		p.w.encBuf = p.w.encBuf[:0]
	}()
	var err error
	if r.end > 0 {
		p.reserveLocked(r.seg, r.pos0+int64(r.end))
		_, err = r.seg.log.WriteAt(p.w.encBuf[:r.end], r.pos0)
	}
	if len(r.batches) == 0 {
		return nil
	}
	s := r.seg
	if err != nil {
		s.w.ib = r.ib
		if terr := s.truncateLogLocked(r.pos0); terr != nil {
			p.logger.Warn("engine: cannot truncate after a failed write", "segment", s.LogPath(), "err", terr)
		}
		return fmt.Errorf("engine: append to %s: %w", s.LogPath(), err)
	}
	var records int64
	maxTs := s.maxTs.Load()
	for i := range r.batches {
		b := &r.batches[i]
		records += int64(b.count)
		maxTs = max(maxTs, b.maxTs)
	}
	if r.pos0 == 0 {
		s.firstBatchTs.Store(r.batches[0].maxTs)
	}
	// Publish: bytes first, then the offsets that point into them.
	s.size.Store(r.pos0 + int64(r.end))
	s.next.Store(r.next)
	if maxTs > s.maxTs.Load() {
		s.maxTs.Store(maxTs)
	}
	p.logEnd.Store(r.next)
	if r.entries > 0 {
		s.mu.Lock()
		var err error
		for i := range r.batches {
			b := &r.batches[i]
			if !b.entry {
				continue
			}
			if s.mu.oidx != nil {
				err = errors.Join(err, s.mu.oidx.Append(b.last, r.pos0+int64(b.start)))
			}
			if s.mu.tidx != nil && b.tidxTs >= 0 {
				err = errors.Join(err, s.mu.tidx.MaybeAppend(b.tidxTs, b.tidxOff, false))
			}
		}
		s.mu.Unlock()
		if err != nil {
			p.logger.Warn("engine: index append failed", "segment", s.LogPath(), "err", err)
		}
	}
	p.stats.bytesAppended.Add(int64(r.end))
	p.stats.recordsAppended.Add(records)
	p.stats.batchesAppended.Add(int64(len(r.batches)))
	return nil
}

// rollDue is Kafka's LogSegment.shouldRoll (docs/FORMATS.md §5.1) for a
// batch of size bytes that follows pending bytes not yet written to s
// (holding pendingEntries index entries; firstPendingTs is the max
// timestamp of the first pending batch). exact is false when the answer
// depends on the pending index entries: write them, then ask again.
func (p *Partition) rollDue(s *Segment, ap *appendParams, pending int64, pendingEntries int, firstPendingTs, size, last, maxTs int64) (roll, exact bool) {
	cur := s.Size() + pending
	if cur == 0 {
		return last-s.base > math.MaxInt32 || s.base > last, true
	}
	if cur > ap.cfg.SegmentBytes-size {
		return true, true
	}
	// timeToRoll: the segment waited longer than segment.ms minus its
	// jitter (measured between record timestamps when the first batch has
	// one).
	fb := firstPendingTs
	if s.Size() > 0 {
		fb = s.FirstBatchTime()
	}
	var waited int64
	if fb >= 0 && maxTs >= 0 {
		waited = maxTs - fb
	} else {
		waited = ap.nowMs - s.created.UnixMilli()
	}
	if waited > ap.rollMs-s.w.rollJitterMs {
		return true, true
	}
	s.mu.RLock()
	full := (s.mu.oidx != nil && s.mu.oidx.Entries()+pendingEntries >= s.mu.oidx.MaxEntries()) ||
		(s.mu.tidx != nil && s.mu.tidx.Entries()+pendingEntries >= s.mu.tidx.MaxEntries()-1)
	s.mu.RUnlock()
	if full && pendingEntries > 0 {
		return false, false
	}
	return full || last-s.base > math.MaxInt32, true
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
	maxMs := rollAfterMs(cfg)
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
	p.releaseReserved(old)
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
		errs = append(errs, finalTimeEntry(s.mu.tidx, s.w.ib.maxTs, s.w.ib.offsetOfMax))
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
			errs = append(errs, finalTimeEntry(a.mu.tidx, a.w.ib.maxTs, a.w.ib.offsetOfMax))
		}
		if a.mu.oidx != nil {
			errs = append(errs, a.mu.oidx.Trim(), a.mu.oidx.Sync())
		}
		if a.mu.tidx != nil {
			errs = append(errs, a.mu.tidx.Trim(), a.mu.tidx.Sync())
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
