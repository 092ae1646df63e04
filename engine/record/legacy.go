package record

import (
	"encoding/binary"
	"fmt"
)

// Legacy message format, magic 0 and 1 (read-only; kafka-formats.md §1.7):
//
//	LogEntry := offset int64 | size int32 | Message (size bytes)
//
//	Message v0:  0        4       5      6            10          10+k        14+k
//	            +--------+-------+------+------------+-----------+-----------+--------+
//	            | crc u32| magic | attr | keyLen i32 | key bytes | valLen i32| value  |
//	            +--------+-------+------+------------+-----------+-----------+--------+
//	Message v1:  crc u32 | magic | attr | timestamp i64 | keyLen i32 | key | valLen i32 | value
//
// The CRC is CRC-32 (IEEE) over [magic, end of message). Lengths of -1 mean
// null. attr bits 0-2 are the codec (zstd not allowed), bit 3 the timestamp
// type (v1 only). A compressed "wrapper" message has a null key and a value
// that is the compressed concatenation of inner LogEntries (not themselves
// compressed). Magic 1 inner offsets are relative (0..n-1) and the wrapper
// offset is the absolute offset of the last inner message; magic 0 inner
// offsets are absolute.
const (
	legacyMinV0 = 14 // crc + magic + attr + keyLen + valLen
	legacyMinV1 = 22 // plus timestamp
)

// legacyMessage is a decoded legacy Message.
type legacyMessage struct {
	magic     int8
	attrs     int8
	timestamp int64 // -1 for v0
	key       []byte
	value     []byte
}

// parseLegacyMessage decodes msg (one Message, without the 12-byte log
// overhead). Key and value alias msg.
func parseLegacyMessage(msg []byte) (legacyMessage, error) {
	if len(msg) < legacyMinV0 {
		return legacyMessage{}, fmt.Errorf("%w: legacy message of %d bytes", ErrCorrupt, len(msg))
	}
	m := legacyMessage{magic: int8(msg[4]), attrs: int8(msg[5]), timestamp: -1}
	p := 6
	switch m.magic {
	case 0:
	case 1:
		if len(msg) < legacyMinV1 {
			return legacyMessage{}, fmt.Errorf("%w: v1 message of %d bytes", ErrCorrupt, len(msg))
		}
		m.timestamp = int64(binary.BigEndian.Uint64(msg[p:]))
		p += 8
	default:
		return legacyMessage{}, fmt.Errorf("%w: legacy message magic %d", ErrCorrupt, m.magic)
	}
	var err error
	if m.key, p, err = legacyBytes(msg, p); err != nil {
		return legacyMessage{}, err
	}
	if m.value, p, err = legacyBytes(msg, p); err != nil {
		return legacyMessage{}, err
	}
	if p != len(msg) {
		return legacyMessage{}, fmt.Errorf("%w: %d bytes after the legacy message value", ErrCorrupt, len(msg)-p)
	}
	return m, nil
}

// legacyBytes reads an int32-length-prefixed byte string at msg[p:].
func legacyBytes(msg []byte, p int) ([]byte, int, error) {
	if len(msg)-p < 4 {
		return nil, p, fmt.Errorf("%w: legacy message length field past the end", ErrCorrupt)
	}
	n := int32(binary.BigEndian.Uint32(msg[p:]))
	p += 4
	if n < 0 {
		return nil, p, nil
	}
	if int64(n) > int64(len(msg)-p) {
		return nil, p, fmt.Errorf("%w: legacy field of %d bytes, %d left", ErrCorrupt, n, len(msg)-p)
	}
	return msg[p : p+int(n) : p+int(n)], p + int(n), nil
}

// parseLegacyHeader fills a Batch from a legacy entry (len(raw) = 12 + size).
func parseLegacyHeader(raw []byte) (Batch, error) {
	off := int64(binary.BigEndian.Uint64(raw))
	msg := raw[LogOverhead:]
	magic := int8(raw[offMagic])
	minSize := legacyMinV0
	if magic == 1 {
		minSize = legacyMinV1
	}
	if len(msg) < minSize {
		return Batch{}, fmt.Errorf("%w: offset %d: magic %d message of %d bytes < %d", ErrCorrupt, off, magic, len(msg), minSize)
	}
	b := Batch{
		BaseOffset:           off,
		Length:               int32(len(msg)),
		PartitionLeaderEpoch: -1,
		Magic:                magic,
		CRC:                  binary.BigEndian.Uint32(msg),
		Attributes:           int16(msg[5]),
		BaseTimestamp:        -1,
		MaxTimestamp:         -1,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		BaseSequence:         -1,
		RecordCount:          1,
		Raw:                  raw,
	}
	if magic == 1 {
		ts := int64(binary.BigEndian.Uint64(msg[6:]))
		b.BaseTimestamp, b.MaxTimestamp = ts, ts
	}
	if b.Codec() != None {
		b.RecordCount = -1
	}
	return b, nil
}

// legacyRecords decodes a legacy entry, unnesting a compressed wrapper.
func (b *Batch) legacyRecords(dst []Record) ([]Record, error) {
	if len(b.Raw) < LogOverhead {
		return dst, fmt.Errorf("%w: legacy entry of %d bytes", ErrCorrupt, len(b.Raw))
	}
	entryOffset := int64(binary.BigEndian.Uint64(b.Raw))
	m, err := parseLegacyMessage(b.Raw[LogOverhead:])
	if err != nil {
		return dst, fmt.Errorf("%w (offset %d)", err, entryOffset)
	}
	codec := Codec(m.attrs & attrCodecMask)
	logAppend := m.magic == 1 && m.attrs&attrLogAppendTime != 0
	if codec == None {
		return append(dst, Record{
			Offset:    entryOffset,
			Timestamp: m.timestamp,
			Key:       cloneBytes(m.key),
			Value:     cloneBytes(m.value),
		}), nil
	}
	if codec == Zstd || !codec.valid() {
		return dst, fmt.Errorf("%w: offset %d: legacy wrapper with codec %v", ErrCorrupt, entryOffset, codec)
	}
	if m.value == nil {
		return dst, fmt.Errorf("%w: offset %d: legacy wrapper with null value", ErrCorrupt, entryOffset)
	}
	inner, err := decompress(codec, m.value, int(m.magic))
	if err != nil {
		return dst, fmt.Errorf("%w (legacy wrapper at offset %d)", err, entryOffset)
	}
	// First pass: decode the inner entries; their key/value alias inner,
	// which is a fresh buffer, so the records may keep them.
	start := len(dst)
	for p := 0; p < len(inner); {
		if len(inner)-p < LogOverhead+legacyMinV0 {
			return dst[:start], fmt.Errorf("%w: offset %d: %d trailing bytes in legacy wrapper", ErrCorrupt, entryOffset, len(inner)-p)
		}
		innerOff := int64(binary.BigEndian.Uint64(inner[p:]))
		size := int64(int32(binary.BigEndian.Uint32(inner[p+8:])))
		if size < legacyMinV0 || size > int64(len(inner)-p-LogOverhead) {
			return dst[:start], fmt.Errorf("%w: offset %d: inner message size %d", ErrCorrupt, entryOffset, size)
		}
		im, err := parseLegacyMessage(inner[p+LogOverhead : p+LogOverhead+int(size)])
		if err != nil {
			return dst[:start], fmt.Errorf("%w (inner message of offset %d)", err, entryOffset)
		}
		if Codec(im.attrs&attrCodecMask) != None {
			return dst[:start], fmt.Errorf("%w: offset %d: nested compressed message", ErrCorrupt, entryOffset)
		}
		ts := im.timestamp
		if logAppend {
			ts = m.timestamp
		}
		dst = append(dst, Record{Offset: innerOff, Timestamp: ts, Key: im.key, Value: im.value})
		p += LogOverhead + int(size)
	}
	recs := dst[start:]
	if len(recs) == 0 {
		return dst, fmt.Errorf("%w: offset %d: empty legacy wrapper", ErrCorrupt, entryOffset)
	}
	if m.magic >= 1 {
		// Relative inner offsets: absolute = wrapper - lastInnerRel + innerRel,
		// except that a wrapper offset of 0 means base 0 (librdkafka quirk).
		base := int64(0)
		if entryOffset != 0 {
			base = entryOffset - recs[len(recs)-1].Offset
		}
		for i := range recs {
			recs[i].Offset += base
		}
	}
	b.BaseOffset = recs[0].Offset
	b.RecordCount = int32(len(recs))
	return dst, nil
}

// cloneBytes copies b, keeping nil as nil and empty as empty.
func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}
