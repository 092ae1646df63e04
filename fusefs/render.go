package fusefs

import (
	"encoding/base64"
	"encoding/binary"
	"math/bits"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/topicfs/topicfs/engine/record"
)

// viewFormat is how a view renders records. It is fixed when a view's state is
// created (from the topic config of that moment), so the bytes a reader has
// seen never change when the config changes later; later opens pick up the
// new config. It is comparable and used as a cache key.
type viewFormat struct {
	json       bool
	printKey   bool
	separator  string
	nullMarker string
}

// appendRecord renders one record in format f, including its trailing '\n'.
func (f viewFormat) appendRecord(dst []byte, r *record.Record) []byte {
	if f.json {
		return appendJSONRecord(dst, r)
	}
	return appendPlainRecord(dst, r, f)
}

// renderedLen is the exact length of f.appendRecord(nil, r) for a plain
// format, computed without rendering; ok is false for JSON.
func (f viewFormat) renderedLen(r *record.Record) (n int, ok bool) {
	if f.json {
		return 0, false
	}
	if f.printKey {
		if r.Key == nil {
			n += len(f.nullMarker)
		} else {
			n += len(r.Key)
		}
		n += len(f.separator)
	}
	if r.Value == nil {
		n += len(f.nullMarker)
	} else {
		n += len(r.Value)
	}
	return n + 1, true
}

// JSON rendering bounds: the fixed part of a record (field names, two
// 20-character integers, braces, '\n', the base64 markers) and of a header
// in the array form stay below these; a string byte renders as at most 6
// bytes (\u00XX), base64 as 4/3.
const (
	jsonRecordOverhead = 192
	jsonHeaderOverhead = 96
	jsonByteMax        = 6
)

// recordBound is an upper bound of len(f.appendRecord(nil, r)): exact for
// plain formats. Rendering straight into a caller's buffer is safe (no
// reallocation) when the bound fits in its spare capacity.
func (f viewFormat) recordBound(r *record.Record) int {
	if n, ok := f.renderedLen(r); ok {
		return n
	}
	n := jsonRecordOverhead + jsonByteMax*(len(r.Key)+len(r.Value))
	for i := range r.Headers {
		n += jsonHeaderOverhead + jsonByteMax*(len(r.Headers[i].Key)+len(r.Headers[i].Value))
	}
	return n
}

// putPlain renders recs in a plain format f into dst[n:], stopping before
// the first record that does not fit entirely. It returns the new n and
// the number of records rendered. It is the sequential read's hot loop:
// one copy per value, no per-record calls.
func (f viewFormat) putPlain(dst []byte, n int, recs []record.Record) (int, int) {
	if !f.printKey {
		for i := range recs {
			v := recs[i].Value
			if v == nil {
				if len(f.nullMarker) >= len(dst)-n {
					return n, i
				}
				n += copy(dst[n:], f.nullMarker)
			} else {
				if len(v) >= len(dst)-n {
					return n, i
				}
				n += copy(dst[n:], v)
			}
			dst[n] = '\n'
			n++
		}
		return n, len(recs)
	}
	for i := range recs {
		k, _ := f.renderedLen(&recs[i])
		if k > len(dst)-n {
			return n, i
		}
		n += len(appendPlainRecord(dst[n:n:len(dst)], &recs[i], f))
	}
	return n, len(recs)
}

// appendPlainRecord renders r as a plain line: value, or key separator value
// with print.key; a null key or value prints null.marker.
func appendPlainRecord(dst []byte, r *record.Record, f viewFormat) []byte {
	if f.printKey {
		if r.Key == nil {
			dst = append(dst, f.nullMarker...)
		} else {
			dst = append(dst, r.Key...)
		}
		dst = append(dst, f.separator...)
	}
	if r.Value == nil {
		dst = append(dst, f.nullMarker...)
	} else {
		dst = append(dst, r.Value...)
	}
	return append(dst, '\n')
}

// appendJSONRecord renders r as one JSON object and '\n':
//
//	{"offset":5,"timestamp":1700000000000,"key":"k","value":"v","headers":{"h":"x"}}
//
// A null key or value is JSON null. A key or value that is not valid UTF-8 is
// base64 (standard, padded) and followed by "key_encoding":"base64" or
// "value_encoding":"base64". Headers are an object in record order when their
// keys are unique and valid UTF-8 and their values valid UTF-8 or null;
// otherwise an array of {"key":…,"value":…} objects with the same
// *_encoding markers. parseJSONLine accepts all of it, so a JSON view line
// written to append.jsonl appends the same record (its offset is ignored).
func appendJSONRecord(dst []byte, r *record.Record) []byte {
	dst = append(dst, `{"offset":`...)
	dst = strconv.AppendInt(dst, r.Offset, 10)
	dst = append(dst, `,"timestamp":`...)
	dst = strconv.AppendInt(dst, r.Timestamp, 10)
	dst = appendJSONBytesField(dst, "key", r.Key)
	dst = appendJSONBytesField(dst, "value", r.Value)
	dst = append(dst, `,"headers":`...)
	dst = appendJSONHeaders(dst, r.Headers)
	return append(dst, "}\n"...)
}

// appendJSONBytesField appends ,"name":<value>[,"name_encoding":"base64"].
func appendJSONBytesField(dst []byte, name string, v []byte) []byte {
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	dst = append(dst, '"', ':')
	switch {
	case v == nil:
		return append(dst, "null"...)
	case utf8.Valid(v):
		return appendJSONString(dst, v)
	default:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, v)
		dst = append(dst, `","`...)
		dst = append(dst, name...)
		return append(dst, `_encoding":"base64"`...)
	}
}

// headersAsObject reports whether hs can be rendered as a JSON object that
// parses back to the same headers in the same order.
func headersAsObject(hs []record.Header) bool {
	for i := range hs {
		if !utf8.ValidString(hs[i].Key) || (hs[i].Value != nil && !utf8.Valid(hs[i].Value)) {
			return false
		}
		for j := 0; j < i; j++ {
			if hs[j].Key == hs[i].Key {
				return false
			}
		}
	}
	return true
}

func appendJSONHeaders(dst []byte, hs []record.Header) []byte {
	if headersAsObject(hs) {
		dst = append(dst, '{')
		for i := range hs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, []byte(hs[i].Key))
			dst = append(dst, ':')
			if hs[i].Value == nil {
				dst = append(dst, "null"...)
			} else {
				dst = appendJSONString(dst, hs[i].Value)
			}
		}
		return append(dst, '}')
	}
	dst = append(dst, '[')
	for i := range hs {
		if i > 0 {
			dst = append(dst, ',')
		}
		if utf8.ValidString(hs[i].Key) {
			dst = append(dst, `{"key":`...)
			dst = appendJSONString(dst, []byte(hs[i].Key))
		} else {
			dst = append(dst, `{"key":"`...)
			dst = base64.StdEncoding.AppendEncode(dst, []byte(hs[i].Key))
			dst = append(dst, `","key_encoding":"base64"`...)
		}
		dst = appendJSONBytesField(dst, "value", hs[i].Value)
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

const hexDigits = "0123456789abcdef"

// nextJSONSpecial returns the index of the first byte at or after i of s
// that a JSON string escapes (a control byte < 0x20, '"' or '\\'), or
// len(s). It tests 8 bytes at a time: jsonSpecial8's lowest set bit is
// the first such byte of the word.
func nextJSONSpecial(s []byte, i int) int {
	for ; len(s)-i >= 8; i += 8 {
		if m := jsonSpecial8(binary.LittleEndian.Uint64(s[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' {
			return i
		}
	}
	return len(s)
}

// jsonSpecial8 flags (high bit of the byte) the bytes of the 8 packed in w
// that a JSON string escapes, by the word-at-a-time tests "byte less than
// 0x20" and "byte equal to c" (a zero byte of w xor c). A flag above the
// lowest one may be spurious (a borrow); the lowest is exact, and no flag
// means no such byte. Bytes >= 0x80 are never flagged.
func jsonSpecial8(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	ctl := (w - ones*0x20) &^ w
	q := w ^ (ones * '"')
	bs := w ^ (ones * '\\')
	return (ctl | (q-ones)&^q | (bs-ones)&^bs) & highs
}

// jsonStringLen is len(appendJSONString(nil, s)).
func jsonStringLen(s []byte) int {
	n := 2 + len(s)
	for i := nextJSONSpecial(s, 0); i < len(s); i = nextJSONSpecial(s, i+1) {
		switch s[i] {
		case '"', '\\', '\n', '\r', '\t':
			n++
		default:
			n += 5 // \u00XX
		}
	}
	return n
}

// jsonBytesFieldLen is len(appendJSONBytesField(nil, name, v)).
func jsonBytesFieldLen(name string, v []byte) int {
	n := len(`,"":`) + len(name)
	switch {
	case v == nil:
		return n + len("null")
	case utf8.Valid(v):
		return n + jsonStringLen(v)
	default:
		return n + len(`""`) + base64.StdEncoding.EncodedLen(len(v)) + len(`,"`) + len(name) + len(`_encoding":"base64"`)
	}
}

// decimalLen is len(strconv.AppendInt(nil, x, 10)).
func decimalLen(x int64) int {
	if x < 0 {
		return 1 + uintLen(uint64(-(x+1))+1) // math.MinInt64 too
	}
	return uintLen(uint64(x))
}

// uintLen is the number of decimal digits of u: log10 estimated from its
// bit length (1233/4096 ~ log10(2)), corrected by one comparison.
func uintLen(u uint64) int {
	t := bits.Len64(u|1) * 1233 >> 12
	if u < pow10[t] {
		return max(t, 1)
	}
	return t + 1
}

var pow10 = [20]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19}

// jsonRecordLen is len(appendJSONRecord(nil, r)) for a record without
// headers, computed without rendering (one pass over key and value, most
// of it 8 bytes at a time); ok is false when r has headers.
func jsonRecordLen(r *record.Record) (int, bool) {
	if len(r.Headers) > 0 {
		return 0, false
	}
	return len(`{"offset":,"timestamp":,"headers":{}}`+"\n") + decimalLen(r.Offset) + decimalLen(r.Timestamp) +
		jsonBytesFieldLen("key", r.Key) + jsonBytesFieldLen("value", r.Value), true
}

// measure is the exact rendered length of r in format f: renderedLen, or
// jsonRecordLen, or (JSON with headers) a rendering into scratch.
func (f viewFormat) measure(r *record.Record, scratch *[]byte) int {
	if n, ok := f.renderedLen(r); ok {
		return n
	}
	if n, ok := jsonRecordLen(r); ok {
		return n
	}
	*scratch = appendJSONRecord((*scratch)[:0], r)
	return len(*scratch)
}

// appendJSONString appends s, which must be valid UTF-8, as a JSON string.
// Only '"', '\\' and control characters are escaped, so the output stays
// readable (no \u003c for '<' as encoding/json writes).
func appendJSONString(dst []byte, s []byte) []byte {
	dst = append(dst, '"')
	for i := 0; ; i++ {
		j := nextJSONSpecial(s, i)
		dst = append(dst, s[i:j]...)
		if j == len(s) {
			return append(dst, '"')
		}
		switch c := s[j]; c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i = j
	}
}

// putPlainRaw renders records of a plain format without print.key (value
// or null.marker, then '\n') into dst[n:] straight from data, the
// uncompressed records section of a v2 batch, starting with the record at
// data[p:] and rendering at most left records. It is putPlain fused with
// the decoding: no record.Record is built. Record layout (docs/FORMATS.md
// §2.4, zig-zag varints):
//
//	length | attributes int8 | timestampDelta | offsetDelta |
//	keyLength | key | valueLength | value | headersCount (0 here)
//
// It stops before the first record that does not fit entirely in dst and
// before the first that is not of the simple shape it handles (a length
// varint longer than two bytes, headers, anything malformed); the caller decodes
// that one with record.Batch.RecordsInto, which renders it the same way or
// says what is wrong. It returns the new n and p and the records
// rendered.
func putPlainRaw(dst []byte, n int, data []byte, p, left int, null string) (int, int, int) {
	done := 0
	size := len(data)
	base := unsafe.Pointer(unsafe.SliceData(data))
	for done < left && p+2 <= size {
		// length
		u := uint32(byteAt(base, p))
		q := p + 1
		if u >= 0x80 {
			c := uint32(byteAt(base, q))
			if c >= 0x80 {
				break
			}
			u, q = u&0x7f|c<<7, q+1
		}
		if u&1 != 0 { // a negative length
			break
		}
		end := q + int(u>>1)
		if end-q < minPlainRecord || end > size || byteAt(base, end-1) != 0 {
			break
		}
		// The record's fields are data[q:re]: attributes up to the
		// headers count (0), 5 bytes or more, all within data.
		re := end - 1
		// attributes, then timestampDelta and offsetDelta, skipped.
		i, ok := skipVarintAt(base, re, q+1)
		if !ok {
			break
		}
		if i, ok = skipVarintAt(base, re, i); !ok {
			break
		}
		if i < re && byteAt(base, i) == 1 { // keyLength -1: no key (the usual case)
			i++
		} else {
			kl, i2, ok := plainVarintAt(base, re, i)
			if !ok || kl < -1 || kl > re-i2 {
				break
			}
			i = i2 + max(kl, 0)
		}
		v, i, ok := plainVarintAt(base, re, i) // valueLength
		if !ok {
			break
		}
		if v >= 0 {
			if i+v != re || v >= len(dst)-n {
				break
			}
			n += copy(dst[n:], unsafe.Slice((*byte)(unsafe.Add(base, i)), v))
		} else {
			if v < -1 || i != re || len(null) >= len(dst)-n {
				break
			}
			n += copy(dst[n:], null)
		}
		dst[n] = '\n'
		n++
		p = end
		done++
	}
	return n, p, done
}

// skipVarintAt returns the position after the varint at p of data[:limit]
// (addressed from base): timestamp and offset deltas, which putPlainRaw
// and measurePlainRaw skip whatever their length (a batch of more than
// 8192 records has 3-byte offset deltas). ok is false for a varint longer
// than a varlong's ten bytes or that runs to limit.
func skipVarintAt(base unsafe.Pointer, limit, p int) (next int, ok bool) {
	for end := min(p+10, limit); p < end; p++ {
		if byteAt(base, p) < 0x80 {
			return p + 1, true
		}
	}
	return p, false
}

// byteAt is data[i] for putPlainRaw, which checks i against the end of
// data (or of a record within it) itself.
func byteAt(base unsafe.Pointer, i int) byte { return *(*byte)(unsafe.Add(base, i)) }

// plainVarintAt is plainVarint over data[:limit] addressed from base (its
// start), for putPlainRaw: a zig-zag varint of one or two bytes at p; ok
// is false for anything longer or at or past limit (v and next are then
// meaningless).
func plainVarintAt(base unsafe.Pointer, limit, p int) (v, next int, ok bool) {
	if p >= limit {
		return 0, p, false
	}
	u := uint32(*(*byte)(unsafe.Add(base, p)))
	if u >= 0x80 {
		p++
		if p >= limit {
			return 0, p, false
		}
		c := uint32(*(*byte)(unsafe.Add(base, p)))
		u = u&0x7f | c<<7
		ok = c < 0x80
	} else {
		ok = true
	}
	return int(int32(u>>1) ^ -int32(u&1)), p + 1, ok
}

// measurePlainRaw is the rendered length of all count records of data (an
// uncompressed v2 records section) in a plain format without print.key:
// putPlainRaw's output length, computed without rendering. ok is false
// unless every record is of the shape putPlainRaw takes and they end
// exactly at the end of data; the caller then measures the decoded
// records (and gets any decoding error).
func measurePlainRaw(data []byte, count int, null string) (n int64, ok bool) {
	base := unsafe.Pointer(unsafe.SliceData(data))
	p := 0
	for range count {
		if p+2 > len(data) {
			return 0, false
		}
		u := uint32(data[p])
		q := p + 1
		if u >= 0x80 {
			c := uint32(data[q])
			if c >= 0x80 {
				return 0, false
			}
			u, q = u&0x7f|c<<7, q+1
		}
		end := q + int(int32(u>>1)^-int32(u&1))
		if end-q < minPlainRecord || end > len(data) || data[end-1] != 0 {
			return 0, false
		}
		rec := data[:end-1]
		q++ // attributes
		// timestampDelta and offsetDelta, skipped.
		if q, ok = skipVarintAt(base, len(rec), q); !ok {
			return 0, false
		}
		if q, ok = skipVarintAt(base, len(rec), q); !ok {
			return 0, false
		}
		kl, q2, ok := plainVarintAt(base, len(rec), q)
		if !ok || kl < -1 || (kl > 0 && kl > len(rec)-q2) {
			return 0, false
		}
		q = q2 + max(kl, 0)
		vl, q2, ok := plainVarintAt(base, len(rec), q)
		if !ok || vl < -1 || q2+max(vl, 0) != len(rec) {
			return 0, false
		}
		if vl < 0 {
			n += int64(len(null)) + 1
		} else {
			n += int64(vl) + 1
		}
		p = end
	}
	return n, p == len(data)
}

// minPlainRecord is the smallest record length field (the bytes after it):
// every field one byte.
const minPlainRecord = 6

// plainVarint reads a zig-zag varint of one or two bytes at b[p:]; ok is
// false for anything longer or past the end.
func plainVarint(b []byte, p int) (v, next int, ok bool) {
	return plainVarintAt(unsafe.Pointer(unsafe.SliceData(b)), len(b), p)
}
