package record

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/klauspost/compress/snappy"
)

// Snappy as Kafka writes it: xerial snappy-java SnappyOutputStream framing
// (not the Snappy framing format), big-endian:
//
//	+------------------------------+-------------+----------------+
//	| magic 82 53 4E 41 50 50 59 00| version i32 | compatible i32 |   16-byte header
//	+------------------------------+-------------+----------------+   (1, 1)
//	| length i32 | raw snappy block (length bytes) |  ...  repeated, no end mark
//	+------------+---------------------------------+
//
// Each block holds at most xerialChunk (32 KiB) of input; its uncompressed
// size is the block's own varint preamble. On read, a payload that does not
// start with the magic is one whole raw snappy block (SnappyInputStream's
// fallback), and a repeated header (concatenated streams) is skipped.
var xerialHeader = [16]byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}

const (
	xerialMagicLen = 8
	xerialChunk    = 32 << 10
)

// appendSnappy appends the xerial-framed snappy form of src.
func appendSnappy(dst, src []byte) []byte {
	dst = append(dst, xerialHeader[:]...)
	for len(src) > 0 {
		chunk := src[:min(len(src), xerialChunk)]
		src = src[len(chunk):]
		max := snappy.MaxEncodedLen(len(chunk))
		dst = grow(dst, 4+max)
		n := len(dst)
		dst = dst[:n+4]
		enc := snappy.Encode(dst[n+4:n+4+max], chunk)
		binary.BigEndian.PutUint32(dst[n:], uint32(len(enc)))
		dst = dst[:n+4+len(enc)]
	}
	return dst
}

// unsnappy decodes xerial-framed or raw snappy data.
func unsnappy(out, src []byte, limit int) ([]byte, error) {
	if len(src) < xerialMagicLen || !bytes.Equal(src[:xerialMagicLen], xerialHeader[:xerialMagicLen]) {
		return snappyBlock(out, src, limit)
	}
	if len(src) < len(xerialHeader) {
		return nil, fmt.Errorf("%w: snappy: xerial header of %d bytes", ErrCorrupt, len(src))
	}
	p := len(xerialHeader)
	if cap(out) == 0 {
		out = make([]byte, 0, min(4*len(src), limit))
	}
	for p < len(src) {
		if len(src)-p >= len(xerialHeader) && bytes.Equal(src[p:p+xerialMagicLen], xerialHeader[:xerialMagicLen]) {
			p += len(xerialHeader) // concatenated stream
			continue
		}
		if len(src)-p < 4 {
			return nil, fmt.Errorf("%w: snappy: %d trailing bytes", ErrCorrupt, len(src)-p)
		}
		n := int64(int32(binary.BigEndian.Uint32(src[p:])))
		p += 4
		if n < 0 || n > int64(len(src)-p) {
			return nil, fmt.Errorf("%w: snappy: chunk of %d bytes, %d left", ErrCorrupt, n, len(src)-p)
		}
		var err error
		if out, err = snappyBlock(out, src[p:p+int(n)], limit); err != nil {
			return nil, err
		}
		p += int(n)
	}
	return out, nil
}

// snappyBlock appends the decoding of one raw snappy block to out.
func snappyBlock(out, block []byte, limit int) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %w", ErrCorrupt, err)
	}
	if n > limit-len(out) {
		return nil, errTooLarge(Snappy, len(block), limit)
	}
	out = grow(out, n)
	l := len(out)
	if _, err := snappy.Decode(out[l:l+n], block); err != nil {
		return nil, fmt.Errorf("%w: snappy: %w", ErrCorrupt, err)
	}
	return out[:l+n], nil
}
