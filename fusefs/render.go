package fusefs

import (
	"encoding/base64"
	"strconv"
	"unicode/utf8"

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

// appendJSONString appends s, which must be valid UTF-8, as a JSON string.
// Only '"', '\\' and control characters are escaped, so the output stays
// readable (no \u003c for '<' as encoding/json writes).
func appendJSONString(dst []byte, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
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
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
