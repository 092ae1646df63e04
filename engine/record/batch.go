package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
)

// RecordBatch v2 (magic 2) header, 61 bytes, big-endian (Kafka's DefaultRecordBatch):
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

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

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
		if got := crc32.Checksum(b.Raw[offAttributes:], castagnoli); got != b.CRC {
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
// size bytes). Only header checks are made (see ReadAt); call Verify for the
// CRC and Records for the contents. The Batch aliases raw.
func Parse(raw []byte) (Batch, error) {
	if len(raw) < headerUpToMagic {
		return Batch{}, fmt.Errorf("%w: %d bytes, need %d", ErrTruncated, len(raw), headerUpToMagic)
	}
	size := int64(int32(binary.BigEndian.Uint32(raw[offLength:])))
	if size < minEntrySize {
		return Batch{}, fmt.Errorf("%w: entry size %d < %d", ErrCorrupt, size, minEntrySize)
	}
	if want := LogOverhead + size; int64(len(raw)) < want {
		return Batch{}, fmt.Errorf("%w: entry of %d bytes, have %d", ErrTruncated, want, len(raw))
	} else if int64(len(raw)) > want {
		return Batch{}, fmt.Errorf("%w: %d bytes after the entry", ErrCorrupt, int64(len(raw))-want)
	}
	return parseHeader(raw)
}

// parseHeader decodes the header of raw, whose length equals 12 + size and
// size >= 14.
func parseHeader(raw []byte) (Batch, error) {
	magic := int8(raw[offMagic])
	off := int64(binary.BigEndian.Uint64(raw))
	switch {
	case magic == 2:
	case magic == 0 || magic == 1:
		return parseLegacyHeader(raw)
	default:
		return Batch{}, fmt.Errorf("%w: offset %d: unknown magic %d", ErrCorrupt, off, magic)
	}
	if len(raw) < HeaderSize {
		return Batch{}, fmt.Errorf("%w: offset %d: v2 batch of %d bytes < %d", ErrCorrupt, off, len(raw), HeaderSize)
	}
	be := binary.BigEndian
	return Batch{
		BaseOffset:           off,
		Length:               int32(be.Uint32(raw[offLength:])),
		PartitionLeaderEpoch: int32(be.Uint32(raw[offLeaderEpoch:])),
		Magic:                magic,
		CRC:                  be.Uint32(raw[offCRC:]),
		Attributes:           int16(be.Uint16(raw[offAttributes:])),
		LastOffsetDelta:      int32(be.Uint32(raw[offLastOffsetDelta:])),
		BaseTimestamp:        int64(be.Uint64(raw[offBaseTimestamp:])),
		MaxTimestamp:         int64(be.Uint64(raw[offMaxTimestamp:])),
		ProducerID:           int64(be.Uint64(raw[offProducerID:])),
		ProducerEpoch:        int16(be.Uint16(raw[offProducerEpoch:])),
		BaseSequence:         int32(be.Uint32(raw[offBaseSequence:])),
		RecordCount:          int32(be.Uint32(raw[offRecordCount:])),
		Raw:                  raw,
	}, nil
}

// ReadAt reads the entry starting at pos of a file whose valid data ends at
// end, following Kafka's FileLogInputStream:
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
	size := int64(int32(binary.BigEndian.Uint32(hdr[offLength:])))
	if size < minEntrySize {
		return Batch{}, fmt.Errorf("%w: position %d: entry size %d < %d", ErrCorrupt, pos, size, minEntrySize)
	}
	total := LogOverhead + size
	if total > end-pos || size > math.MaxInt32 {
		return Batch{}, fmt.Errorf("%w: position %d: entry of %d bytes, %d available", ErrTruncated, pos, total, end-pos)
	}
	if m := int8(hdr[offMagic]); m < 0 || m > 2 {
		return Batch{}, fmt.Errorf("%w: position %d offset %d: unknown magic %d", ErrCorrupt, pos,
			int64(binary.BigEndian.Uint64(hdr)), m)
	}
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
	b, err := parseHeader(raw)
	if err != nil {
		return Batch{}, fmt.Errorf("%w (position %d)", err, pos)
	}
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
	binary.BigEndian.PutUint32(raw[offCRC:], crc32.Checksum(raw[offAttributes:n], castagnoli))
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
