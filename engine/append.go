// The append paths of a Partition: Append, AppendEach, AppendLines and
// AppendBatch, the parameters an append call derives from the config, and
// the encoding of records into batches (uncompressed ones straight from the
// caller's slices, compressed ones through a copy). Encoded batches are
// placed in the pending run (appendrun.go), which is written and published
// as one piece.

package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/topicfs/topicfs/engine/record"
)

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
	runLimit  int   // write the run when it reaches this many bytes (maxRunBytes)
	epoch     int32 // partitionLeaderEpoch stamped on the batches (LatestEpoch)
	// verified: the call's batches were CRC-checked before they were
	// placed (AppendAsFollower); the segment then marks their bytes
	// (verifiedspan.go).
	verified bool
}

// appendParamsLocked derives the call's parameters; the parsed config
// values are cached per configuration (SetConfig installs a new pointer).
// Callers hold mu.
func (p *Partition) appendParamsLocked(cfg *Config, now time.Time) appendParams {
	c := &p.w.params
	if c.cfg != cfg {
		*c = appendParams{cfg: cfg, codec: configCodec(cfg), logAppend: cfg.LogAppendTime(),
			maxBytes: cfg.MaxRecordBytes(), rollMs: rollAfterMs(cfg)}
	}
	ap := *c
	ap.now, ap.nowMs = now, now.UnixMilli()
	ap.runLimit = maxRunBytes
	ap.epoch = p.epochs.latest.Load()
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
	spec := appendSpec(record.None, ap.logAppend, ap.epoch)
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
// producer, no sequence, the partition's current leader epoch (as a
// leader stamps it), offsets from BaseOffset on.
func appendSpec(codec record.Codec, logAppendTime bool, epoch int32) record.BatchSpec {
	return record.BatchSpec{
		Codec: codec, LogAppendTime: logAppendTime, ProducerID: -1, ProducerEpoch: -1,
		BaseSequence: -1, DeleteHorizonMs: -1, LastOffsetDelta: -1, PartitionLeaderEpoch: epoch,
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
	limit := max(4*int(cfg.MaxRecordBytes()), 2*maxRunBytes)
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
	spec := appendSpec(ap.codec, ap.logAppend, ap.epoch)
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
//
// A batch with a producer id is checked against the producer's state first,
// with Kafka's rules: a retry of one of the producer's last 5 batches (same
// epoch, same sequence range) is not stored again, and AppendBatch returns
// the offsets the original got; a sequence that does not follow the
// producer's last one fails with ErrOutOfOrderSequence, an epoch below the
// producer's with ErrInvalidProducerEpoch, a non-transactional batch during
// the producer's transaction with ErrInvalidTxnState, a marker of a fenced
// coordinator with ErrCoordinatorFenced. A transactional batch holds the
// last stable offset at its transaction's first offset until the
// transaction's COMMIT or ABORT marker is appended.
func (p *Partition) AppendBatch(raw []byte) (first, last int64, err error) {
	if p.opts.ReadOnly {
		return 0, 0, ErrReadOnly
	}
	cfg := p.cfg.Load()
	b, err := checkProducerBatch(raw, cfg)
	if err != nil {
		return 0, 0, err
	}
	now := p.now()
	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		return 0, 0, ErrClosed
	}
	orig, dup, err := p.w.producers.check(&b)
	if err != nil || dup {
		p.mu.Unlock()
		if dup {
			return orig.firstOffset(), orig.lastOffset, nil
		}
		return 0, 0, err
	}
	if p.w.producers.startsTxn(&b) {
		p.holdLSOLocked(p.logEnd.Load())
	}
	first, last, flush, err := p.appendBatchLocked(raw, &b, cfg, now)
	p.publishLSOLocked()
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

// checkProducerBatch parses raw and checks what AppendBatch takes: a v2
// batch with a valid CRC, within max.message.bytes, with sane counts.
func checkProducerBatch(raw []byte, cfg *Config) (record.Batch, error) {
	b, err := record.Parse(raw)
	if err != nil {
		return b, err
	}
	if b.Magic != 2 {
		return b, fmt.Errorf("%w: magic %d batch (only v2 is appended)", record.ErrUnsupported, b.Magic)
	}
	if err := b.Verify(); err != nil {
		return b, err
	}
	if int64(len(raw)) > cfg.MaxRecordBytes() {
		return b, fmt.Errorf("%w: batch of %d bytes, limit %d", ErrRecordTooLarge, len(raw), cfg.MaxRecordBytes())
	}
	if b.LastOffsetDelta < 0 || b.RecordCount < 0 {
		return b, fmt.Errorf("%w: lastOffsetDelta %d, recordCount %d", ErrCorrupt, b.LastOffsetDelta, b.RecordCount)
	}
	return b, nil
}

// appendBatchLocked copies (or recompresses) the checked batch b of raw
// into the encode buffer, stamps it and writes it at the log end. flush
// says whether flush.messages or flush.ms ask for a flush now. Callers
// hold p.mu.
func (p *Partition) appendBatchLocked(raw []byte, b *record.Batch, cfg *Config, now time.Time) (first, last int64, flush bool, err error) {
	var buf []byte
	if !cfg.KeepsProducerCodec() && b.Codec() != cfg.Codec() && !b.IsControl() {
		if buf, err = recompress(p.w.encBuf[:0], b, cfg.Codec()); err != nil {
			return 0, 0, false, fmt.Errorf("engine: recompress batch: %w", err)
		}
		if int64(len(buf)) > cfg.MaxRecordBytes() {
			return 0, 0, false, fmt.Errorf("%w: recompressed batch of %d bytes, limit %d", ErrRecordTooLarge, len(buf), cfg.MaxRecordBytes())
		}
	} else {
		buf = append(p.w.encBuf[:0], raw...)
	}
	p.w.encBuf = buf
	first = p.logEnd.Load()
	last = first + int64(b.LastOffsetDelta)
	ap := p.appendParamsLocked(cfg, now)
	record.SetBaseOffset(buf, first)
	record.SetPartitionLeaderEpoch(buf, ap.epoch)
	maxTs := b.MaxTimestamp
	if cfg.LogAppendTime() {
		maxTs = now.UnixMilli()
		record.SetLogAppendTime(buf, maxTs)
	}
	err = p.placeLocked(batchSpan{start: 0, end: len(buf), first: first, last: last, maxTs: maxTs, count: int(b.RecordCount)}, &ap)
	if err == nil {
		err = p.writeRunLocked()
	}
	if err != nil {
		p.w.run.drop() // a failed place or write leaves nothing pending
		p.w.encBuf = p.w.encBuf[:0]
	}
	if err == nil && b.ProducerID >= 0 {
		nb, perr := record.Parse(buf)
		if perr == nil {
			if t := p.w.producers.observe(&nb); t != nil {
				err = p.active().appendAbortedTxn(*t)
			}
		}
	}
	p.trimBuffersLocked(cfg)
	if err == nil {
		flush = p.afterAppendLocked(int64(b.RecordCount), cfg, now)
	}
	return first, last, flush, err
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
