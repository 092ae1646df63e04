package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
)

// RecordBatch v2 (magic 2) header, 61 bytes, big-endian (docs/FORMATS.md §2.2):
//
//	 0                   8           12          16  17          21    23          27
//	+-------------------+-----------+-----------+---+-----------+-----+-----------+
//	| baseOffset int64  | length i32| PLE int32 | m | crc u32   |attr | lastOffDelta|
//	+-------------------+-----------+-----------+---+-----------+-----+-----------+
//	 27                  35                  43                  51    53          57          61
//	+-------------------+-------------------+-------------------+-----+-----------+-----------+
//	| baseTimestamp i64 | maxTimestamp i64  | producerId i64    |epoch| baseSeq i32| count i32 |
//	+-------------------+-------------------+-------------------+-----+-----------+-----------+
//	| records (count × Record, compressed as one stream when codec != none) ...
//
// length counts the bytes after itself (whole batch = 12 + length). The CRC is
// CRC-32C (Castagnoli) over [21, 12+length): attributes to the end. baseOffset,
// length, partitionLeaderEpoch (PLE) and magic are outside the CRC, which is
// why SetBaseOffset and SetPartitionLeaderEpoch need not recompute it.
//
// Attributes (int16, low byte used):
//
//	bits 0-2 codec | bit 3 LogAppendTime | bit 4 transactional | bit 5 control |
//	bit 6 hasDeleteHorizonMs (baseTimestamp then holds the horizon) | 7-15 zero
const (
	offBaseOffset      = 0
	offLength          = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordCount     = 57

	// headerUpToMagic is FileLogInputStream's HEADER_SIZE_UP_TO_MAGIC.
	headerUpToMagic = 17
	// minEntrySize is LegacyRecord.RECORD_OVERHEAD_V0: the smallest size field.
	minEntrySize = 14
	// v2MinLength is the smallest length of a v2 batch (HeaderSize - 12).
	v2MinLength = HeaderSize - LogOverhead
)

// Attribute bits.
const (
	attrCodecMask     = 0x07
	attrLogAppendTime = 0x08
	attrTransactional = 0x10
	attrControl       = 0x20
	attrDeleteHorizon = 0x40
)

// Batch is one top-level entry of a .log file: a v2 RecordBatch or a legacy
// (magic 0/1) message, possibly a compressed wrapper. Raw aliases the bytes
// it was parsed from (12 + Length bytes).
//
// For legacy entries: BaseOffset == LastOffset() == the entry's offset field
// (a wrapper's offset is that of its last inner message) until Records()
// decodes the wrapper, which then sets BaseOffset to the first inner offset and
// RecordCount to the number of inner messages. LastOffset() keeps returning
// the entry offset. PartitionLeaderEpoch, ProducerID, ProducerEpoch and
// BaseSequence are -1; BaseTimestamp and MaxTimestamp are the v1 timestamp (-1
// for v0); Attributes is the message's attribute byte.
//
// A Batch is a value; its methods may be called concurrently except Records on
// a legacy wrapper (which updates BaseOffset and RecordCount).
type Batch struct {
	BaseOffset           int64
	Length               int32
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	BaseTimestamp        int64
	MaxTimestamp         int64 // legacy v1: the message timestamp; v0: -1
	ProducerID           int64 // legacy: -1
	ProducerEpoch        int16
	BaseSequence         int32
	RecordCount          int32 // legacy: 1 for a plain message; -1 for a wrapper until Records()
	Raw                  []byte
}

// Size is the number of bytes of the entry in the file: 12 + Length.
func (b *Batch) Size() int { return LogOverhead + int(b.Length) }

// LastOffset is the offset of the last record (v2: BaseOffset +
// LastOffsetDelta; legacy: the entry's offset field).
func (b *Batch) LastOffset() int64 {
	if b.Magic < 2 {
		if len(b.Raw) >= 8 {
			return int64(binary.BigEndian.Uint64(b.Raw))
		}
		return b.BaseOffset
	}
	return b.BaseOffset + int64(b.LastOffsetDelta)
}

// NextOffset is LastOffset() + 1.
func (b *Batch) NextOffset() int64 { return b.LastOffset() + 1 }

// Codec is the compression codec of the batch (attribute bits 0-2).
func (b *Batch) Codec() Codec { return Codec(b.Attributes & attrCodecMask) }

// LogAppendTime reports the LogAppendTime timestamp type (attribute bit 3;
// magic 1 and 2 only).
func (b *Batch) LogAppendTime() bool {
	return b.Magic >= 1 && b.Attributes&attrLogAppendTime != 0
}

// IsTransactional reports attribute bit 4 (v2 only).
func (b *Batch) IsTransactional() bool { return b.Magic >= 2 && b.Attributes&attrTransactional != 0 }

// IsControl reports attribute bit 5 (v2 only).
func (b *Batch) IsControl() bool { return b.Magic >= 2 && b.Attributes&attrControl != 0 }

// HasDeleteHorizon reports attribute bit 6 (v2 only, KIP-534).
func (b *Batch) HasDeleteHorizon() bool { return b.Magic >= 2 && b.Attributes&attrDeleteHorizon != 0 }

// DeleteHorizonMs is the delete horizon stored in BaseTimestamp, or -1.
func (b *Batch) DeleteHorizonMs() int64 {
	if b.HasDeleteHorizon() {
		return b.BaseTimestamp
	}
	return -1
}

// Verify checks the batch's CRC and structural sizes: for v2, Length >= 49
// and the CRC-32C over [21, end) equals CRC; for legacy messages, the CRC-32
// (IEEE) over [magic, end) equals CRC and the key/value lengths fit. Errors
// wrap ErrCorrupt and name the offset.
func (b *Batch) Verify() error {
	if len(b.Raw) != b.Size() || len(b.Raw) < headerUpToMagic {
		return fmt.Errorf("%w: offset %d: raw is %d bytes, size %d", ErrCorrupt, b.BaseOffset, len(b.Raw), b.Size())
	}
	if b.Magic >= 2 {
		if b.Length < v2MinLength {
			return fmt.Errorf("%w: offset %d: batch length %d < %d", ErrCorrupt, b.BaseOffset, b.Length, v2MinLength)
		}
		if got := checksumCastagnoli(b.Raw[offAttributes:]); got != b.CRC {
			return fmt.Errorf("%w: offset %d: crc32c %d, stored %d", ErrCorrupt, b.BaseOffset, got, b.CRC)
		}
		return nil
	}
	if got := crc32.ChecksumIEEE(b.Raw[offMagic:]); got != b.CRC {
		return fmt.Errorf("%w: offset %d: crc32 %d, stored %d", ErrCorrupt, b.LastOffset(), got, b.CRC)
	}
	if _, err := parseLegacyMessage(b.Raw[LogOverhead:]); err != nil {
		return fmt.Errorf("%w: offset %d", err, b.LastOffset())
	}
	return nil
}

// Parse decodes the header of raw, which must be exactly one entry (12 +
// size bytes). Only header checks are made (PeekHeader's); call Verify for
// the CRC and Records for the contents. The Batch aliases raw.
func Parse(raw []byte) (Batch, error) {
	var b Batch
	if err := peekHeader(raw, int64(len(raw)), &b); err != nil {
		return Batch{}, err
	}
	if extra := len(raw) - b.Size(); extra > 0 {
		return Batch{}, fmt.Errorf("%w: %d bytes after the entry", ErrCorrupt, extra)
	}
	b.Raw = raw
	return b, nil
}

// PeekHeader decodes the header of the entry that starts at b[0] from its
// first bytes alone; b need not hold the records. Every field that lies
// wholly within b is set and the others are left zero: HeaderSize bytes
// hold every field of a v2 batch, 26 every field of a legacy message (whose
// PartitionLeaderEpoch, producer fields and v0 timestamps are -1, as Parse
// sets them). Raw is nil. avail is how many bytes the file holds from the
// entry's start. The checks are ReadAt's, in Kafka's order
// (FileLogInputStream):
//
//   - fewer than 17 bytes in b: ErrTruncated;
//   - size < 14: ErrCorrupt (e.g. a zero-filled tail);
//   - 12 + size > avail: ErrTruncated (a torn tail);
//   - an unknown magic, or a size too small for its magic: ErrCorrupt.
//
// On an error after the first, the Batch still holds BaseOffset, Length
// and Magic, so a caller can say what it saw.
func PeekHeader(b []byte, avail int64) (Batch, error) {
	var h Batch
	err := peekHeader(b, avail, &h)
	return h, err
}

// peekHeader is PeekHeader into *h, which it overwrites (ReadAt calls it
// twice on the same Batch without copying one).
func peekHeader(b []byte, avail int64, h *Batch) error {
	if len(b) < headerUpToMagic {
		*h = Batch{}
		return fmt.Errorf("%w: %d bytes, need %d", ErrTruncated, len(b), headerUpToMagic)
	}
	be := binary.BigEndian
	*h = Batch{
		BaseOffset: int64(be.Uint64(b[offBaseOffset:])),
		Length:     int32(be.Uint32(b[offLength:])),
		Magic:      int8(b[offMagic]),
	}
	switch {
	case h.Length < minEntrySize:
		return fmt.Errorf("%w: entry size %d < %d", ErrCorrupt, h.Length, minEntrySize)
	case LogOverhead+int64(h.Length) > avail:
		return fmt.Errorf("%w: entry of %d bytes, %d available", ErrTruncated, LogOverhead+int64(h.Length), avail)
	case h.Magic == 0 || h.Magic == 1:
		return peekLegacy(b, h)
	case h.Magic != 2:
		return fmt.Errorf("%w: offset %d: unknown magic %d", ErrCorrupt, h.BaseOffset, h.Magic)
	case h.Length < v2MinLength:
		return fmt.Errorf("%w: offset %d: v2 batch of %d bytes < %d", ErrCorrupt, h.BaseOffset, LogOverhead+int(h.Length), HeaderSize)
	}
	h.PartitionLeaderEpoch = int32(be.Uint32(b[offLeaderEpoch:]))
	// Each later field only if b reaches its end (HeaderSize bytes reach all).
	n := len(b)
	if n >= offCRC+4 {
		h.CRC = be.Uint32(b[offCRC:])
	}
	if n >= offAttributes+2 {
		h.Attributes = int16(be.Uint16(b[offAttributes:]))
	}
	if n >= offLastOffsetDelta+4 {
		h.LastOffsetDelta = int32(be.Uint32(b[offLastOffsetDelta:]))
	}
	if n >= offBaseTimestamp+8 {
		h.BaseTimestamp = int64(be.Uint64(b[offBaseTimestamp:]))
	}
	if n >= offMaxTimestamp+8 {
		h.MaxTimestamp = int64(be.Uint64(b[offMaxTimestamp:]))
	}
	if n >= offProducerID+8 {
		h.ProducerID = int64(be.Uint64(b[offProducerID:]))
	}
	if n >= offProducerEpoch+2 {
		h.ProducerEpoch = int16(be.Uint16(b[offProducerEpoch:]))
	}
	if n >= offBaseSequence+4 {
		h.BaseSequence = int32(be.Uint32(b[offBaseSequence:]))
	}
	if n >= offRecordCount+4 {
		h.RecordCount = int32(be.Uint32(b[offRecordCount:]))
	}
	return nil
}

// ReadAt reads the entry starting at pos of a file whose valid data ends at
// end, following FileLogInputStream (docs/FORMATS.md §2.1):
//
//   - pos >= end: io.EOF (clean end);
//   - fewer than 17 bytes between pos and end: ErrTruncated;
//   - size < 14: ErrCorrupt (e.g. a zero-filled tail);
//   - 12 + size past end (or size absurd): ErrTruncated;
//   - unknown magic, or a body too small for its magic: ErrCorrupt.
//
// buf is reused for Raw when its capacity is large enough; otherwise a new
// buffer of exactly the entry's size is allocated (never more than end-pos).
// Errors from r other than a short read are returned wrapped.
func ReadAt(r io.ReaderAt, pos, end int64, buf []byte) (Batch, error) {
	if pos >= end {
		return Batch{}, io.EOF
	}
	if end-pos < headerUpToMagic {
		return Batch{}, fmt.Errorf("%w: %d bytes at position %d, need %d", ErrTruncated, end-pos, pos, headerUpToMagic)
	}
	// The header is read into buf when it can hold it (no allocation).
	var hdr []byte
	if cap(buf) >= headerUpToMagic {
		hdr = buf[:headerUpToMagic]
	} else {
		hdr = make([]byte, headerUpToMagic)
	}
	if err := readFull(r, hdr, pos); err != nil {
		return Batch{}, err
	}
	var b Batch
	if err := peekHeader(hdr, end-pos, &b); err != nil {
		return Batch{}, fmt.Errorf("%w (position %d)", err, pos)
	}
	total := int64(b.Size())
	var raw []byte
	if int64(cap(buf)) >= total {
		raw = buf[:total] // the header is already in place
	} else {
		raw = make([]byte, total)
		copy(raw, hdr)
	}
	if err := readFull(r, raw[headerUpToMagic:], pos+headerUpToMagic); err != nil {
		return Batch{}, err
	}
	if err := peekHeader(raw, total, &b); err != nil {
		return Batch{}, fmt.Errorf("%w (position %d)", err, pos)
	}
	b.Raw = raw
	return b, nil
}

// readFull reads len(p) bytes at off; a short read means the file ended
// before the caller's end and is reported as ErrTruncated.
func readFull(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: short read of %d/%d bytes at position %d", ErrTruncated, n, len(p), off)
	}
	return fmt.Errorf("record: read at position %d: %w", off, err)
}

// SetBaseOffset stores base in the baseOffset field of the v2 batch at the
// start of raw. The field is outside the CRC.
func SetBaseOffset(raw []byte, base int64) {
	binary.BigEndian.PutUint64(raw[offBaseOffset:], uint64(base))
}

// SetPartitionLeaderEpoch stores epoch in the partitionLeaderEpoch field of
// the v2 batch at the start of raw. The field is outside the CRC.
func SetPartitionLeaderEpoch(raw []byte, epoch int32) {
	binary.BigEndian.PutUint32(raw[offLeaderEpoch:], uint32(epoch))
}

// SetLogAppendTime marks the v2 batch at the start of raw as LogAppendTime
// (attribute bit 3), stores ts as its maxTimestamp and recomputes the CRC,
// as the broker does on append. raw must hold the whole batch.
func SetLogAppendTime(raw []byte, ts int64) {
	attrs := binary.BigEndian.Uint16(raw[offAttributes:])
	binary.BigEndian.PutUint16(raw[offAttributes:], attrs|attrLogAppendTime)
	binary.BigEndian.PutUint64(raw[offMaxTimestamp:], uint64(ts))
	updateCRC(raw)
}

// SetMaxTimestamp stores ts as the maxTimestamp of the v2 batch at the start
// of raw and recomputes the CRC (the cleaner keeps the old maxTimestamp when
// it writes an empty batch). raw must hold the whole batch.
func SetMaxTimestamp(raw []byte, ts int64) {
	binary.BigEndian.PutUint64(raw[offMaxTimestamp:], uint64(ts))
	updateCRC(raw)
}

// updateCRC recomputes the CRC-32C of the v2 batch at the start of raw.
func updateCRC(raw []byte) {
	n := LogOverhead + int(int32(binary.BigEndian.Uint32(raw[offLength:])))
	if n < HeaderSize || n > len(raw) {
		n = len(raw)
	}
	binary.BigEndian.PutUint32(raw[offCRC:], checksumCastagnoli(raw[offAttributes:n]))
}

// IncrementSequence adds inc to a producer sequence number, wrapping past
// MaxInt32 back to 0 as Kafka's DefaultRecordBatch.incrementSequence does.
func IncrementSequence(seq, inc int32) int32 {
	if seq > math.MaxInt32-inc {
		return inc - (math.MaxInt32 - seq) - 1
	}
	return seq + inc
}

// LastSequence is the sequence of the batch's last offset: BaseSequence +
// LastOffsetDelta (wrapping), or -1 when BaseSequence is -1 or for legacy
// entries.
func (b *Batch) LastSequence() int32 {
	if b.Magic < 2 || b.BaseSequence == -1 {
		return -1
	}
	return IncrementSequence(b.BaseSequence, b.LastOffsetDelta)
}
