package tools

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"hash/crc32"
	"io"

	"github.com/klauspost/compress/snappy"
	"github.com/pierrec/lz4/v4"

	"github.com/topicfs/topicfs/engine/record"
)

// legacyInner is what DumpLogSegments prints for a record of a legacy (magic
// 0/1) batch that engine/record does not expose: the record's own CRC and
// whether it matches.
type legacyInner struct {
	crc   uint32
	valid bool
}

// Legacy message (Kafka's LegacyRecord), inside a 12-byte log overhead:
//
//	+---------+-------+-------+----------------------+-------------+-----+---------------+-------+
//	| crc u32 | magic | attrs | timestamp i64 (v1)   | keyLen i32  | key | valueLen i32  | value |
//	+---------+-------+-------+----------------------+-------------+-----+---------------+-------+
//
// A compressed wrapper's value is the compressed concatenation of inner
// entries (offset i64, size i32, message).

// legacyInnerMessages returns the CRC and validity of each of the n records
// of legacy batch b. A plain message is its own record. A wrapper is
// decompressed here (gzip, xerial snappy, lz4 frame) only to read the inner
// CRCs; if that fails, or yields a different count than engine/record
// decoded, every record reports the wrapper's CRC and validity.
func legacyInnerMessages(b *record.Batch, n int) []legacyInner {
	out := make([]legacyInner, n)
	outer := legacyInner{crc: b.CRC, valid: b.Verify() == nil}
	for i := range out {
		out[i] = outer
	}
	if b.Codec() == record.None || len(b.Raw) < record.LogOverhead {
		return out
	}
	value, ok := legacyValue(b.Raw[record.LogOverhead:])
	if !ok {
		return out
	}
	inner, err := decompressLegacy(b.Codec(), value)
	if err != nil {
		return out
	}
	var got []legacyInner
	for p := 0; p+record.LogOverhead <= len(inner); {
		size := int(int32(binary.BigEndian.Uint32(inner[p+8:])))
		if size < 4 || size > len(inner)-p-record.LogOverhead {
			return out
		}
		msg := inner[p+record.LogOverhead : p+record.LogOverhead+size]
		crc := binary.BigEndian.Uint32(msg)
		got = append(got, legacyInner{crc: crc, valid: crc32.ChecksumIEEE(msg[4:]) == crc})
		p += record.LogOverhead + size
	}
	if len(got) != n {
		return out
	}
	return got
}

// legacyValue returns the value field of a legacy message.
func legacyValue(msg []byte) ([]byte, bool) {
	if len(msg) < 6 {
		return nil, false
	}
	p := 6
	if msg[4] == 1 {
		p += 8
	}
	for field := 0; field < 2; field++ {
		if p+4 > len(msg) {
			return nil, false
		}
		l := int(int32(binary.BigEndian.Uint32(msg[p:])))
		p += 4
		if l < 0 {
			if field == 1 {
				return nil, false
			}
			continue
		}
		if l > len(msg)-p {
			return nil, false
		}
		if field == 1 {
			return msg[p : p+l], true
		}
		p += l
	}
	return nil, false
}

var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

func decompressLegacy(c record.Codec, src []byte) ([]byte, error) {
	switch c {
	case record.Gzip:
		r, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, err
		}
		return io.ReadAll(io.LimitReader(r, 64<<20))
	case record.Snappy:
		if !bytes.HasPrefix(src, xerialMagic) || len(src) < 16 {
			return snappy.Decode(nil, src)
		}
		var out []byte
		for p := 16; p < len(src); {
			if p+4 > len(src) {
				return nil, io.ErrUnexpectedEOF
			}
			n := int(binary.BigEndian.Uint32(src[p:]))
			p += 4
			if n > len(src)-p {
				return nil, io.ErrUnexpectedEOF
			}
			blk, err := snappy.Decode(nil, src[p:p+n])
			if err != nil {
				return nil, err
			}
			out = append(out, blk...)
			p += n
		}
		return out, nil
	case record.LZ4:
		return io.ReadAll(io.LimitReader(lz4.NewReader(bytes.NewReader(src)), 64<<20))
	}
	return nil, io.ErrUnexpectedEOF
}
