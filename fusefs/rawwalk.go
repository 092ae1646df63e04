package fusefs

import (
	"math"
	"unsafe"
)

// walkPlainRaw moves over records of data (an uncompressed v2 records
// section) from data[p:] the way putPlainRaw renders them, without
// rendering: at most left records, stopping before the first whose offset
// delta is hiDelta or more (math.MaxInt64: none) or whose rendering would
// take the rendered length past budget (math.MaxInt64: none). It returns
// the new p, the records passed and their rendered length. ok is false when
// it stopped at a record putPlainRaw does not take (a varint longer than
// two bytes for a length, headers, anything malformed): the caller decodes that one.
//
// Seeks use it to reach a record inside a batch (a by-offset view's first
// record, a position between two checkpoints) without decoding the
// records before it.
func walkPlainRaw(data []byte, p, left int, null string, hiDelta, budget int64) (np, done int, n int64, ok bool) {
	base := unsafe.Pointer(unsafe.SliceData(data))
	size := len(data)
	for done < left {
		if p < 0 || p+2 > size {
			return p, done, n, false
		}
		u := uint32(byteAt(base, p))
		q := p + 1
		if u >= 0x80 {
			c := uint32(byteAt(base, q))
			if c >= 0x80 {
				return p, done, n, false
			}
			u, q = u&0x7f|c<<7, q+1
		}
		if u&1 != 0 { // a negative length
			return p, done, n, false
		}
		end := q + int(u>>1)
		if end-q < minPlainRecord || end > size || byteAt(base, end-1) != 0 {
			return p, done, n, false
		}
		re := end - 1 // the record's fields: data[q:re], headersCount 0 at re
		q++           // attributes
		var delta, kl, vl int
		if q, ok = skipVarintAt(base, re, q); !ok { // timestampDelta
			return p, done, n, false
		}
		if delta, q, ok = deltaVarintAt(base, re, q); !ok {
			return p, done, n, false
		}
		if kl, q, ok = plainVarintAt(base, re, q); !ok || kl < -1 || kl > re-q {
			return p, done, n, false
		}
		q += max(kl, 0)
		if vl, q, ok = plainVarintAt(base, re, q); !ok || vl < -1 || q+max(vl, 0) != re {
			return p, done, n, false
		}
		if int64(delta) >= hiDelta {
			return p, done, n, true
		}
		k := int64(vl) + 1
		if vl < 0 {
			k = int64(len(null)) + 1
		}
		if budget != math.MaxInt64 && n+k > budget {
			return p, done, n, true
		}
		n += k
		p = end
		done++
	}
	return p, done, n, true
}

// deltaVarintAt reads the zig-zag varint of at most five bytes (an int32:
// a record's offset delta) at p of data[:limit] addressed from base; ok is
// false for a longer one or one that runs to limit.
func deltaVarintAt(base unsafe.Pointer, limit, p int) (v, next int, ok bool) {
	var u uint32
	for shift, end := uint(0), min(p+5, limit); p < end; shift += 7 {
		c := byteAt(base, p)
		p++
		u |= uint32(c&0x7f) << shift
		if c < 0x80 {
			return int(int32(u>>1) ^ -int32(u&1)), p, true
		}
	}
	return 0, p, false
}
