package engine

import (
	"errors"
	"fmt"

	"github.com/topicfs/topicfs/engine/record"
)

// ErrNotEncodable is returned by Partition.EncodeLines when the topic's
// batches cannot be encoded ahead of the append (a compressed topic): use
// AppendLines.
var ErrNotEncodable = errors.New("engine: lines of this topic are encoded at append time")

// EncodedLines are whole lines encoded into uncompressed batches by
// Partition.EncodeLines, waiting for AppendEncoded to give them offsets and
// write them. Encoding needs no lock, so a caller can encode the next lines
// while the partition writes the last ones (the mount encodes a WRITE's
// lines in its handler, straight from the request, while earlier ones are
// written). It holds copies: the lines may change once EncodeLines
// returned. Reuse an EncodedLines to keep its buffer.
type EncodedLines struct {
	p       *Partition
	lat     bool   // the topic's timestamp type when encoded (its codec was none)
	buf     []byte // the batches, base offset 0 each
	batches []encodedBatch
}

type encodedBatch struct {
	start, end int
	count      int
	maxTs      int64
}

// Reset empties e, keeping its buffer.
func (e *EncodedLines) Reset() {
	e.p = nil
	e.buf, e.batches = e.buf[:0], e.batches[:0]
}

// EncodeLines encodes each '\n'-terminated line of lines as a value-only
// record (as AppendLines does) and adds them to e's batches, in batches of
// at most batchBytes (a longer line alone, up to max.message.bytes),
// stamped now. It holds no lock. A line too large for max.message.bytes
// fails with ErrRecordTooLarge, and e is as before the call. On a
// compressed topic it returns ErrNotEncodable. e must be empty or hold
// lines of this partition encoded under the same configuration.
func (p *Partition) EncodeLines(e *EncodedLines, lines []byte, batchBytes int) error {
	if len(lines) == 0 || lines[len(lines)-1] != '\n' {
		return fmt.Errorf("engine: EncodeLines: lines must end with a newline")
	}
	cfg := p.cfg.Load()
	if configCodec(cfg) != record.None {
		return ErrNotEncodable
	}
	if e.p != nil && (e.p != p || e.lat != cfg.LogAppendTime()) {
		return fmt.Errorf("engine: EncodeLines: e holds lines of another partition or configuration")
	}
	maxBytes := int(cfg.MaxRecordBytes())
	spec := appendSpec(record.None, cfg.LogAppendTime(), 0) // the epoch is stamped when placed
	nowMs := p.now().UnixMilli()
	buf, nb := e.buf, len(e.batches)
	for rest := lines; len(rest) > 0; {
		start := len(buf)
		out, info, used, err := encodeLineBatch(buf, spec, rest, nowMs, batchBytes, maxBytes)
		if err != nil {
			e.batches = e.batches[:nb] // e.buf keeps its length: the new bytes went past it
			return err
		}
		buf = out
		e.batches = append(e.batches, encodedBatch{start: start, end: len(buf), count: info.Records, maxTs: info.MaxTimestamp})
		rest = rest[used:]
	}
	e.p, e.lat, e.buf = p, spec.LogAppendTime, buf
	return nil
}

// AppendEncoded appends e's batches as AppendLines would have appended its
// lines: offsets assigned in place (e's buffer is written to the log
// without a copy), rolling and flushing as configured. If the topic's
// compression or timestamp type changed since e was encoded, its records
// are appended by the new rules instead (batch by batch, as AppendEach
// groups). e must come from EncodeLines of this partition; it is empty
// afterwards.
func (p *Partition) AppendEncoded(e *EncodedLines) (first, last int64, err error) {
	defer e.Reset()
	if e.p != p || len(e.batches) == 0 {
		end := p.LogEndOffset()
		return end, end - 1, fmt.Errorf("engine: AppendEncoded: nothing encoded for this partition")
	}
	return p.appendWith(func(ap *appendParams) error {
		if ap.codec != record.None || ap.logAppend != e.lat {
			return p.reencodeLocked(e, ap)
		}
		// The run takes e's buffer as its encode buffer for this call
		// (placing moves batches down inside it after a mid-call write),
		// and is written before the buffer is given back.
		own := p.w.encBuf
		p.w.encBuf = e.buf[:0]
		ap.runLimit = len(e.buf) // one write for all of it
		err := p.placeEncodedLocked(e, ap)
		if werr := p.writeRunLocked(); err == nil {
			err = werr
		}
		p.w.encBuf = own[:0]
		return err
	})
}

// reencodeLocked appends e's records under the configuration of ap, one
// group per batch of e (a rare path: the topic changed between encoding
// and appending).
func (p *Partition) reencodeLocked(e *EncodedLines, ap *appendParams) error {
	var recs []record.Record
	for _, b := range e.batches {
		rb, err := record.Parse(e.buf[b.start:b.end])
		if err != nil {
			return fmt.Errorf("engine: re-encode: %w", err)
		}
		if recs, err = rb.Records(recs[:0]); err != nil {
			return fmt.Errorf("engine: re-encode: %w", err)
		}
		if err := p.appendGroupLocked(recs, ap); err != nil {
			return err
		}
	}
	return nil
}

// placeEncodedLocked gives e's batches their offsets and places them.
func (p *Partition) placeEncodedLocked(e *EncodedLines, ap *appendParams) error {
	for _, b := range e.batches {
		if int64(b.end-b.start) > ap.maxBytes {
			return fmt.Errorf("%w: a %d-byte batch, limit %d", ErrRecordTooLarge, b.end-b.start, ap.maxBytes)
		}
		base := p.nextOffsetLocked()
		record.SetBaseOffset(e.buf[b.start:b.end], base)
		record.SetPartitionLeaderEpoch(e.buf[b.start:b.end], ap.epoch)
		sp := batchSpan{start: b.start, end: b.end, first: base, last: base + int64(b.count) - 1, maxTs: b.maxTs, count: b.count}
		if err := p.placeLocked(sp, ap); err != nil {
			return err
		}
	}
	return nil
}
