package record

import (
	"bytes"
	"fmt"
	"math"
)

// EncodeLines appends to dst one uncompressed v2 batch of the longest
// prefix of lines' '\n'-terminated lines that fits in maxBytes, and returns
// how many bytes of lines it took. Each line without its '\n' is the value
// of one record: null key, no headers, offset spec.BaseOffset+i, timestamp
// nowMs. The bytes are exactly EncodeSequential's for the same records
// (Record{Timestamp: -1, Value: line}); lines are framed and encoded in one
// pass, with no Record per line, which is what the mount's append files
// feed the engine. lines must be non-empty and end with '\n';
// spec.DeleteHorizonMs must be -1 (appends carry no delete horizon). If the
// first line alone does not fit in maxBytes nothing is written and the
// error wraps ErrBatchTooLarge.
//
// It is one function over 80 lines for the reason EncodeSequential is: the
// loop's state stays in registers, and a line writer split out of it does
// not inline and makes BenchmarkEncodeLines slower (docs/PERFORMANCE.md
// §6.1, tried and dropped).
func EncodeLines(dst []byte, spec BatchSpec, lines []byte, nowMs int64, maxBytes int) ([]byte, SequentialInfo, int, error) {
	switch {
	case spec.Codec != None:
		return dst, SequentialInfo{}, 0, fmt.Errorf("%w: EncodeLines writes uncompressed batches, not %v", errEncode, spec.Codec)
	case len(lines) == 0 || lines[len(lines)-1] != '\n':
		return dst, SequentialInfo{}, 0, fmt.Errorf("%w: lines must end with a newline", errEncode)
	case spec.DeleteHorizonMs >= 0:
		return dst, SequentialInfo{}, 0, fmt.Errorf("%w: EncodeLines takes no delete horizon", errEncode)
	}
	// As EncodeSequential: each record written once at its place, the
	// body's CRC folded in strides while hot. Every timestamp delta is 0.
	orig, buf, start, body0, limit := beginSequential(dst, maxBytes)
	w, mark := body0, body0
	crc := uint32(0)
	n := 0
	rest := lines
	for len(rest) > 0 && n < math.MaxInt32 {
		i := bytes.IndexByte(rest, '\n')
		v := rest[:i]
		offDelta := uint64(zigzag32(int32(n)))
		if len(v) < 1<<12 && offDelta < 1<<14 {
			// EncodeSequential's fast path, timestamp delta 0.
			vz := uint64(len(v)) << 1
			sz := 4 + varint14Len(offDelta) + varint14Len(vz) + len(v)
			szz := uint64(sz) << 1 // < 1<<14
			tot := varint14Len(szz) + sz
			if w-body0+tot > limit {
				break
			}
			if w+tot+16 > len(buf) {
				buf = grow(buf[:w], max(tot+16, w-start))
				buf = buf[:cap(buf)]
			}
			b := buf[w : w+16 : w+16]
			k := putUvarint14(b, 0, szz)
			b[k&15] = 0     // attributes
			b[(k+1)&15] = 0 // timestamp delta
			k = putUvarint14(b, k+2, offDelta)
			b[k&15] = 1 // null key
			w += putUvarint14(b, k+1, vz)
			w += copy(buf[w:], v)
			buf[w] = 0 // no headers
			w++
		} else {
			vz := uint64(zigzag32(int32(min(len(v), math.MaxInt32))))
			sz := 1 + 1 + uvarintLen(offDelta) + 1 + uvarintLen(vz) + len(v) + 1
			if sz < 0 || sz > limit {
				break
			}
			szz := uint64(zigzag32(int32(sz)))
			tot := uvarintLen(szz) + sz
			if w-body0+tot > limit {
				break
			}
			if w+tot > len(buf) {
				buf = grow(buf[:w], max(tot, w-start))
				buf = buf[:cap(buf)]
			}
			w = putUvarint(buf, w, szz)
			buf[w] = 0   // attributes
			buf[w+1] = 0 // timestamp delta
			w = putUvarint(buf, w+2, offDelta)
			buf[w] = 1 // null key
			w = putUvarint(buf, w+1, vz)
			w += copy(buf[w:], v)
			buf[w] = 0 // no headers
			w++
		}
		n++
		rest = rest[i+1:]
		if w-mark >= crcStride {
			crc = updateCastagnoli(crc, buf[mark:w])
			mark = w
		}
	}
	if n == 0 {
		v := lines[:bytes.IndexByte(lines, '\n')]
		sz := 5 + varintSize(int32(min(len(v), math.MaxInt32))) + len(v)
		return orig, SequentialInfo{}, 0, fmt.Errorf("%w: a %d-byte batch, limit %d", ErrBatchTooLarge,
			HeaderSize+varintSize(int32(min(sz, math.MaxInt32)))+sz, maxBytes)
	}
	out, info, err := finishSequential(orig, buf, start, w, mark, crc, spec, false, n, nowMs, nowMs)
	return out, info, len(lines) - len(rest), err
}
