package record

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Legacy message format, magic 0 and 1 (read-only; docs/FORMATS.md §2.8):
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

// peekLegacy is peekHeader for a legacy (magic 0/1) entry whose offset,
// size and magic h holds: it adds the message's CRC, attributes and (v1)
// timestamp, as far as b holds them.
func peekLegacy(b []byte, h *Batch) error {
	minSize := legacyMinV0
	if h.Magic == 1 {
		minSize = legacyMinV1
	}
	if int(h.Length) < minSize {
		return fmt.Errorf("%w: offset %d: magic %d message of %d bytes < %d", ErrCorrupt, h.BaseOffset, h.Magic, h.Length, minSize)
	}
	h.PartitionLeaderEpoch, h.ProducerID, h.ProducerEpoch, h.BaseSequence = -1, -1, -1, -1
	if h.Magic == 0 {
		h.BaseTimestamp, h.MaxTimestamp = -1, -1
	}
	msg := b[LogOverhead:] // crc 4 | magic 1 | attributes 1 | [timestamp 8, v1]
	h.CRC = binary.BigEndian.Uint32(msg)
	if len(msg) > 5 {
		h.Attributes = int16(msg[5])
		h.RecordCount = 1
		if h.Codec() != None {
			h.RecordCount = -1
		}
	}
	if h.Magic == 1 && len(msg) >= 14 {
		ts := int64(binary.BigEndian.Uint64(msg[6:]))
		h.BaseTimestamp, h.MaxTimestamp = ts, ts
	}
	return nil
}

// LegacyMessage is one message of a legacy (magic 0/1) entry, as
// DumpLogSegments' deep iteration shows it: a plain message yields itself, a
// compressed wrapper yields its inner messages.
type LegacyMessage struct {
	Offset     int64 // absolute
	Timestamp  int64 // resolved: the wrapper's for LogAppendTime; -1 for v0
	Magic      int8
	Attributes int8
	CRC        uint32 // stored CRC-32 of the message
	Valid      bool   // CRC matches
	Key        []byte // nil = null
	Value      []byte // nil = null
}

// LegacyMessages decodes a legacy entry, unnesting a compressed wrapper, and
// appends its messages to dst (keys and values do not alias Raw). Like
// Records it updates BaseOffset and RecordCount of a wrapper. It fails with
// ErrCorrupt for a v2 batch.
func (b *Batch) LegacyMessages(dst []LegacyMessage) ([]LegacyMessage, error) {
	if b.Magic >= 2 {
		return dst, fmt.Errorf("%w: offset %d: not a legacy message", ErrCorrupt, b.BaseOffset)
	}
	if len(b.Raw) < LogOverhead {
		return dst, fmt.Errorf("%w: legacy entry of %d bytes", ErrCorrupt, len(b.Raw))
	}
	entryOffset := int64(binary.BigEndian.Uint64(b.Raw))
	msg := b.Raw[LogOverhead:]
	m, err := parseLegacyMessage(msg)
	if err != nil {
		return dst, fmt.Errorf("%w (offset %d)", err, entryOffset)
	}
	codec := Codec(m.attrs & attrCodecMask)
	logAppend := m.magic == 1 && m.attrs&attrLogAppendTime != 0
	if codec == None {
		crc := binary.BigEndian.Uint32(msg)
		return append(dst, LegacyMessage{
			Offset: entryOffset, Timestamp: m.timestamp, Magic: m.magic, Attributes: m.attrs,
			CRC: crc, Valid: crc32.ChecksumIEEE(msg[4:]) == crc,
			Key: cloneBytes(m.key), Value: cloneBytes(m.value),
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
	start := len(dst)
	if dst, err = appendInnerMessages(dst, inner, entryOffset, m.timestamp, logAppend); err != nil {
		return dst, err
	}
	msgs := dst[start:]
	if len(msgs) == 0 {
		return dst, fmt.Errorf("%w: offset %d: empty legacy wrapper", ErrCorrupt, entryOffset)
	}
	if m.magic >= 1 {
		// Relative inner offsets: absolute = wrapper - lastInnerRel + innerRel,
		// except that a wrapper offset of 0 means base 0 (librdkafka quirk).
		base := int64(0)
		if entryOffset != 0 {
			base = entryOffset - msgs[len(msgs)-1].Offset
		}
		for i := range msgs {
			msgs[i].Offset += base
		}
	}
	b.BaseOffset = msgs[0].Offset
	b.RecordCount = int32(len(msgs))
	return dst, nil
}

// appendInnerMessages appends the messages of inner, the decompressed value
// of the legacy wrapper at entryOffset, to dst; with logAppend their
// timestamp is the wrapper's, wrapperTs. Their offsets are as stored
// (relative for v1). Keys and values alias inner, a fresh buffer, so the
// messages may keep them. On error dst is returned with its original length.
func appendInnerMessages(dst []LegacyMessage, inner []byte, entryOffset, wrapperTs int64, logAppend bool) ([]LegacyMessage, error) {
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
		imsg := inner[p+LogOverhead : p+LogOverhead+int(size)]
		im, err := parseLegacyMessage(imsg)
		if err != nil {
			return dst[:start], fmt.Errorf("%w (inner message of offset %d)", err, entryOffset)
		}
		if Codec(im.attrs&attrCodecMask) != None {
			return dst[:start], fmt.Errorf("%w: offset %d: nested compressed message", ErrCorrupt, entryOffset)
		}
		ts := im.timestamp
		if logAppend {
			ts = wrapperTs
		}
		crc := binary.BigEndian.Uint32(imsg)
		dst = append(dst, LegacyMessage{
			Offset: innerOff, Timestamp: ts, Magic: im.magic, Attributes: im.attrs,
			CRC: crc, Valid: crc32.ChecksumIEEE(imsg[4:]) == crc, Key: im.key, Value: im.value,
		})
		p += LogOverhead + int(size)
	}
	return dst, nil
}

// legacyRecords is Records for a legacy entry.
func (b *Batch) legacyRecords(dst []Record) ([]Record, error) {
	msgs, err := b.LegacyMessages(nil)
	if err != nil {
		return dst, err
	}
	for _, m := range msgs {
		dst = append(dst, Record{Offset: m.Offset, Timestamp: m.Timestamp, Key: m.Key, Value: m.Value})
	}
	return dst, nil
}

// cloneBytes copies b, keeping nil as nil and empty as empty.
func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}
