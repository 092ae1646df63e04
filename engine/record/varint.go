package record

import "math/bits"

// Varints (part of the format; see docs/FORMATS.md §2.4).
//
// A v2 record encodes its integers as zig-zag LEB128 varints, like protobuf's
// sint32/sint64:
//
//	zigzag32(n) = uint32(n<<1) ^ uint32(n>>31)    decode: int32(v>>1) ^ -int32(v&1)
//	zigzag64(n) = uint64(n<<1) ^ uint64(n>>63)
//
// The unsigned value is written 7 bits per byte, least significant group
// first; the top bit (0x80) of a byte means "more bytes follow":
//
//	0 -> 00    -1 -> 01    1 -> 02    -64 -> 7f    64 -> 80 01    300 -> d8 04
//
// An int32 varint is at most 5 bytes and an int64 varlong at most 10; Kafka
// (ByteUtils.readVarint/readVarlong) rejects longer encodings, and so do we.
const (
	maxVarintLen  = 5
	maxVarlongLen = 10
)

// appendVarint appends the zig-zag varint encoding of v.
func appendVarint(dst []byte, v int32) []byte {
	u := uint32(v<<1) ^ uint32(v>>31)
	for u >= 0x80 {
		dst = append(dst, byte(u)|0x80)
		u >>= 7
	}
	return append(dst, byte(u))
}

// appendVarlong appends the zig-zag varlong encoding of v.
func appendVarlong(dst []byte, v int64) []byte {
	u := uint64(v<<1) ^ uint64(v>>63)
	for u >= 0x80 {
		dst = append(dst, byte(u)|0x80)
		u >>= 7
	}
	return append(dst, byte(u))
}

// varintSize is the encoded size of appendVarint(v).
func varintSize(v int32) int {
	u := uint32(v<<1) ^ uint32(v>>31)
	return (bits.Len32(u|1) + 6) / 7
}

// varlongSize is the encoded size of appendVarlong(v).
func varlongSize(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	return (bits.Len64(u|1) + 6) / 7
}

// readVarint decodes a zig-zag varint from the start of b. It returns the
// value and the number of bytes read; n == 0 means b ended too early and
// n < 0 means the encoding is longer than 5 bytes (both are corrupt data).
func readVarint(b []byte) (int32, int) {
	if len(b) > 0 && b[0] < 0x80 { // fast path: one byte
		u := uint32(b[0])
		return int32(u>>1) ^ -int32(u&1), 1
	}
	var u uint32
	for i := 0; i < maxVarintLen; i++ {
		if i >= len(b) {
			return 0, 0
		}
		c := b[i]
		u |= uint32(c&0x7f) << (7 * uint(i))
		if c < 0x80 {
			return int32(u>>1) ^ -int32(u&1), i + 1
		}
	}
	return 0, -1
}

// readVarlong is readVarint for int64 varlongs (at most 10 bytes).
func readVarlong(b []byte) (int64, int) {
	if len(b) > 0 && b[0] < 0x80 {
		u := uint64(b[0])
		return int64(u>>1) ^ -int64(u&1), 1
	}
	var u uint64
	for i := 0; i < maxVarlongLen; i++ {
		if i >= len(b) {
			return 0, 0
		}
		c := b[i]
		u |= uint64(c&0x7f) << (7 * uint(i))
		if c < 0x80 {
			return int64(u>>1) ^ -int64(u&1), i + 1
		}
	}
	return 0, -1
}

// varint12 decodes a one- or two-byte zig-zag varint at b[p:] (values
// -8192..8191: the lengths, deltas and counts of records up to 8 KiB) when
// at least two bytes are left; ok is false otherwise (call varintAt). It is
// small enough to be inlined into the record decoder's loop.
func varint12(b []byte, p int) (v int32, next int, ok bool) {
	if uint(p+1) < uint(len(b)) {
		u := uint32(b[p])
		if u >= 0x80 {
			c1 := b[p+1]
			if c1 >= 0x80 {
				return 0, p, false
			}
			u = u&0x7f | uint32(c1)<<7
			p++
		}
		return int32(u>>1) ^ -int32(u&1), p + 1, true
	}
	return 0, p, false
}

// varintAt decodes the zig-zag varint at b[p:] and returns it with the
// position after it; the position is < 0 when b ends too early or the
// encoding is longer than 5 bytes. Hot loops read one- and two-byte varints
// with the inlined varint12 and call varintAt for the rest.
func varintAt(b []byte, p int) (int32, int) {
	if p < 0 || p >= len(b) {
		return 0, -1
	}
	v, n := readVarint(b[p:])
	if n <= 0 {
		return 0, -1
	}
	return v, p + n
}

// varlongAt is varintAt for int64 varlongs (at most 10 bytes).
func varlongAt(b []byte, p int) (int64, int) {
	if p < 0 || p >= len(b) {
		return 0, -1
	}
	v, n := readVarlong(b[p:])
	if n <= 0 {
		return 0, -1
	}
	return v, p + n
}

// VarintLen is the encoded length of v as a zig-zag varint (the size of a
// record's length and key/value/header length fields).
func VarintLen(v int64) int { return uvarintLen(zigzag64(v)) }
