package fusefs

import (
	"bytes"
	"fmt"
	"math"
	"math/rand"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/record"
)

func TestRenderPlain(t *testing.T) {
	keyed := viewFormat{printKey: true, separator: "\t", nullMarker: ""}
	tests := []struct {
		name string
		f    viewFormat
		r    record.Record
		want string
	}{
		{"value", viewFormat{}, record.Record{Value: []byte("hello")}, "hello\n"},
		{"empty value", viewFormat{}, record.Record{Value: []byte{}}, "\n"},
		{"tombstone default marker", viewFormat{}, record.Record{Key: []byte("k")}, "\n"},
		{"tombstone marker", viewFormat{nullMarker: "NULL"}, record.Record{Key: []byte("k")}, "NULL\n"},
		{"keyed", keyed, record.Record{Key: []byte("k"), Value: []byte("v")}, "k\tv\n"},
		{"keyed null key", viewFormat{printKey: true, separator: ":", nullMarker: "null"}, record.Record{Value: []byte("v")}, "null:v\n"},
		{"keyed tombstone", keyed, record.Record{Key: []byte("k")}, "k\t\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, string(tt.f.appendRecord(nil, &tt.r)))
		})
	}
}

func TestRenderJSON(t *testing.T) {
	tests := []struct {
		name string
		r    record.Record
		want string
	}{
		{"plain", record.Record{Offset: 5, Timestamp: 1700000000000, Key: []byte("k"), Value: []byte("v")},
			`{"offset":5,"timestamp":1700000000000,"key":"k","value":"v","headers":{}}`},
		{"nulls", record.Record{Offset: 0, Timestamp: -1},
			`{"offset":0,"timestamp":-1,"key":null,"value":null,"headers":{}}`},
		{"escapes", record.Record{Value: []byte("a\"b\\c\nd\te\x01<>&é")},
			`{"offset":0,"timestamp":0,"key":null,"value":"a\"b\\c\nd\te\u0001<>&é","headers":{}}`},
		{"binary", record.Record{Key: []byte{0xff}, Value: []byte{0, 0xfe}},
			`{"offset":0,"timestamp":0,"key":"/w==","key_encoding":"base64","value":"AP4=","value_encoding":"base64","headers":{}}`},
		{"headers object", record.Record{Value: []byte("v"), Headers: []record.Header{{Key: "b", Value: []byte("1")}, {Key: "a", Value: nil}}},
			`{"offset":0,"timestamp":0,"key":null,"value":"v","headers":{"b":"1","a":null}}`},
		{"headers array", record.Record{Value: []byte("v"), Headers: []record.Header{{Key: "a", Value: []byte("1")}, {Key: "a", Value: []byte{0xff}}, {Key: "\xfe", Value: nil}}},
			`{"offset":0,"timestamp":0,"key":null,"value":"v","headers":[{"key":"a","value":"1"},{"key":"a","value":"/w==","value_encoding":"base64"},{"key":"/g==","key_encoding":"base64","value":null}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := appendJSONRecord(nil, &tt.r)
			assert.Equal(t, tt.want+"\n", string(got))
			back, err := parseJSONLine(got[:len(got)-1])
			require.NoError(t, err)
			assertSameRecord(t, tt.r, back)
		})
	}
}

// assertSameRecord compares what an append must preserve: key, value (null
// vs empty included), headers, timestamp.
func assertSameRecord(t *testing.T, want, got record.Record) {
	t.Helper()
	assert.Equal(t, want.Key == nil, got.Key == nil, "key nullness")
	assert.Equal(t, string(want.Key), string(got.Key))
	assert.Equal(t, want.Value == nil, got.Value == nil, "value nullness")
	assert.Equal(t, string(want.Value), string(got.Value))
	assert.Equal(t, want.Timestamp, got.Timestamp)
	require.Len(t, got.Headers, len(want.Headers))
	for i := range want.Headers {
		assert.Equal(t, want.Headers[i].Key, got.Headers[i].Key)
		assert.Equal(t, want.Headers[i].Value == nil, got.Headers[i].Value == nil)
		assert.Equal(t, string(want.Headers[i].Value), string(got.Headers[i].Value))
	}
}

func TestParseJSONLine(t *testing.T) {
	tests := []struct {
		name    string
		line    string
		want    record.Record
		wantErr bool
	}{
		{"value only", `{"value":"v"}`, record.Record{Timestamp: -1, Value: []byte("v")}, false},
		{"tombstone", `{"key":"k","value":null}`, record.Record{Timestamp: -1, Key: []byte("k")}, false},
		{"empty", `{"key":"","value":""}`, record.Record{Timestamp: -1, Key: []byte{}, Value: []byte{}}, false},
		{"object value", `{"value":{"a": 1}}`, record.Record{}, true},
		{"number value", `{"value":1}`, record.Record{}, true},
		{"bool key", `{"key":true,"value":"v"}`, record.Record{}, true},
		{"array header value", `{"value":"v","headers":{"h":[1]}}`, record.Record{}, true},
		{"timestamp -1 is now", `{"value":"v","timestamp":-1}`, record.Record{Timestamp: -1, Value: []byte("v")}, false},
		{"timestamp 0", `{"value":"v","timestamp":0}`, record.Record{Timestamp: 0, Value: []byte("v")}, false},
		{"negative timestamp", `{"value":"v","timestamp":-5}`, record.Record{}, true},
		{"min int64 timestamp", `{"value":"v","timestamp":-9223372036854775808}`, record.Record{}, true},
		{"rfc3339 before 1970", `{"value":"v","timestamp":"1969-12-31T23:59:59Z"}`, record.Record{}, true},
		{"timestamp", `{"value":"v","timestamp":1700000000000}`, record.Record{Timestamp: 1700000000000, Value: []byte("v")}, false},
		{"rfc3339 timestamp", `{"value":"v","timestamp":"2023-11-14T22:13:20Z"}`, record.Record{Timestamp: 1700000000000, Value: []byte("v")}, false},
		{"offset ignored", `{"offset":99,"value":"v"}`, record.Record{Timestamp: -1, Value: []byte("v")}, false},
		{"base64", `{"value":"AP4=","value_encoding":"base64"}`, record.Record{Timestamp: -1, Value: []byte{0, 0xfe}}, false},
		{"headers", `{"value":"v","headers":{"z":"1","a":"2"}}`, record.Record{Timestamp: -1, Value: []byte("v"), Headers: []record.Header{{Key: "z", Value: []byte("1")}, {Key: "a", Value: []byte("2")}}}, false},
		{"crlf tolerated", "{\"value\":\"v\"}\r", record.Record{Timestamp: -1, Value: []byte("v")}, false},
		{"not json", `hello`, record.Record{}, true},
		{"truncated", `{"value":"v"`, record.Record{}, true},
		{"trailing", `{"value":"v"} x`, record.Record{}, true},
		{"two objects", `{"value":"v"}{"value":"w"}`, record.Record{}, true},
		{"unknown field", `{"vaule":"v"}`, record.Record{}, true},
		{"absent value is not a tombstone", `{"key":"k"}`, record.Record{}, true},
		{"empty object", `{}`, record.Record{}, true},
		{"only a timestamp", `{"timestamp":5}`, record.Record{}, true},
		{"bad base64", `{"value":"!!","value_encoding":"base64"}`, record.Record{}, true},
		{"bad encoding", `{"value":"v","value_encoding":"hex"}`, record.Record{}, true},
		{"bad timestamp", `{"value":"v","timestamp":1.5}`, record.Record{}, true},
		{"bad headers", `{"value":"v","headers":"x"}`, record.Record{}, true},
		{"array", `["v"]`, record.Record{}, true},
		{"empty line", ``, record.Record{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseJSONLine([]byte(tt.line))
			if tt.wantErr {
				require.ErrorIs(t, err, errParse)
				return
			}
			require.NoError(t, err)
			assertSameRecord(t, tt.want, got)
		})
	}
}

func TestParsePlainLine(t *testing.T) {
	keyed := lineConfig{parseKey: true, separator: "\t"}
	tests := []struct {
		name    string
		c       lineConfig
		line    string
		key     []byte
		value   []byte
		wantErr bool
	}{
		{"value", lineConfig{}, "hello", nil, []byte("hello"), false},
		{"empty unkeyed is empty, not null", lineConfig{}, "", nil, []byte{}, false},
		{"keyed", keyed, "k\tv", []byte("k"), []byte("v"), false},
		{"first separator", keyed, "k\tv\tw", []byte("k"), []byte("v\tw"), false},
		{"tombstone", keyed, "k\t", []byte("k"), nil, false},
		{"null key", keyed, "\tv", nil, []byte("v"), false},
		{"marker", lineConfig{parseKey: true, separator: ":", nullMarker: "NULL"}, "k:NULL", []byte("k"), nil, false},
		{"marker empty value kept", lineConfig{parseKey: true, separator: ":", nullMarker: "NULL"}, "k:", []byte("k"), []byte{}, false},
		{"no separator", keyed, "kv", nil, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := parsePlainLine([]byte(tt.line), tt.c)
			if tt.wantErr {
				require.ErrorIs(t, err, errParse)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.key == nil, r.Key == nil)
			assert.Equal(t, string(tt.key), string(r.Key))
			assert.Equal(t, tt.value == nil, r.Value == nil)
			assert.Equal(t, string(tt.value), string(r.Value))
		})
	}
}

func TestLineSplitter(t *testing.T) {
	input := "alpha\nbeta\ngam" + "ma\n\ndelta"
	for _, chunk := range []int{1, 2, 3, 5, 7, 100} {
		var s lineSplitter
		var got []string
		for i := 0; i < len(input); i += chunk {
			lines, tail := s.split([]byte(input[i:min(i+chunk, len(input))]))
			for _, l := range lines {
				got = append(got, string(l))
			}
			s.set(tail)
		}
		assert.Equal(t, []string{"alpha", "beta", "gamma", "", "delta"}, append(got, string(s.take())), "chunk %d", chunk)
		assert.Empty(t, s.take())
	}
}

func TestLineSplitterRejectedWriteLeavesNoTrace(t *testing.T) {
	var s lineSplitter
	_, tail := s.split([]byte("par"))
	s.set(tail)
	lines, _ := s.split([]byte("tial\nnext"))
	require.Equal(t, []string{"partial"}, []string{string(lines[0])})
	// Not committed: the next write starts from "par" again.
	lines, tail = s.split([]byte("t\n"))
	assert.Equal(t, "part", string(lines[0]))
	assert.Empty(t, tail)
}

func FuzzJSONLine(f *testing.F) {
	for _, s := range []string{
		`{"value":"v"}`, `{"key":"k","value":null,"headers":{"a":"b"}}`,
		`{"offset":1,"timestamp":2,"key":"/w==","key_encoding":"base64","value":"x","headers":[{"key":"a","value":null}]}`,
		`{"value":{"nested":[1,2]}}`, `{"value":"\u0000\n"}`, `{`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := parseJSONLine(line)
		if err != nil {
			return
		}
		out := appendJSONRecord(nil, &r)
		if bytes.Count(out, []byte("\n")) != 1 || out[len(out)-1] != '\n' {
			t.Fatalf("rendering is not one line: %q", out)
		}
		back, err := parseJSONLine(out[:len(out)-1])
		if err != nil {
			t.Fatalf("%q renders as %q which does not parse: %v", line, out, err)
		}
		again := appendJSONRecord(nil, &back)
		if !bytes.Equal(out, again) {
			t.Fatalf("not a fixed point: %q -> %q", out, again)
		}
		if (r.Key == nil) != (back.Key == nil) || (r.Value == nil) != (back.Value == nil) {
			t.Fatalf("nullness changed: %q", line)
		}
	})
}

func FuzzKeyedLine(f *testing.F) {
	f.Add([]byte("k\tv"), "\t", "", true)
	f.Add([]byte("k:NULL"), ":", "NULL", true)
	f.Add([]byte("plain value"), "\t", "", false)
	f.Add([]byte("\t"), "\t", "", true)
	f.Fuzz(func(t *testing.T, line []byte, sep, marker string, parseKey bool) {
		if bytes.IndexByte(line, '\n') >= 0 || sep == "" {
			return
		}
		r, err := parsePlainLine(line, lineConfig{parseKey: parseKey, separator: sep, nullMarker: marker})
		if err != nil {
			return
		}
		out := appendPlainRecord(nil, &r, viewFormat{printKey: parseKey, separator: sep, nullMarker: marker})
		if string(out) != string(line)+"\n" {
			t.Fatalf("%q (sep %q marker %q) renders as %q", line, sep, marker, out)
		}
	})
}

// TestJSONStringWordAtATime: the 8-bytes-at-a-time scan finds every byte
// to escape wherever it falls in a word (and in the tail after the last
// whole word) among ASCII and multi-byte UTF-8, as a byte-by-byte reading
// of the rules would; jsonStringLen agrees.
func TestJSONStringWordAtATime(t *testing.T) {
	reference := func(s []byte) []byte {
		out := []byte{'"'}
		for _, c := range s {
			switch {
			case c == '"' || c == '\\':
				out = append(out, '\\', c)
			case c == '\n':
				out = append(out, `\n`...)
			case c == '\r':
				out = append(out, `\r`...)
			case c == '\t':
				out = append(out, `\t`...)
			case c < 0x20:
				out = append(out, fmt.Sprintf(`\u%04x`, c)...)
			default:
				out = append(out, c)
			}
		}
		return append(out, '"')
	}
	fillers := []string{"abcdefghijklmnopqrstuvwxyz0123456789", "é€𝄞ü~\x7f", " =,:;[]{}<>&"}
	specials := []byte{'"', '\\', '\n', '\r', '\t', 0, 0x01, 0x1f, 0x1b}
	check := func(s []byte) {
		t.Helper()
		got := appendJSONString(nil, s)
		require.Equal(t, string(reference(s)), string(got), "%q", s)
		require.Equal(t, len(got), jsonStringLen(s), "%q", s)
	}
	for _, fill := range fillers {
		for n := 0; n <= 25; n++ {
			base := []byte(strings.Repeat(fill, 4))[:n]
			check(base)
			for pos := 0; pos < n; pos++ {
				for _, c := range specials {
					s := append([]byte(nil), base...)
					s[pos] = c
					check(s)
					if pos+9 < n {
						s[pos+9] = '"' // a second one in the next word
						check(s)
					}
				}
			}
		}
	}
	for _, c := range []byte{0x20, 0x21, '"' - 1, '"' + 1, '\\' - 1, '\\' + 1, 0x7f, 0x80, 0xff} {
		s := bytes.Repeat([]byte{c}, 17)
		assert.Equal(t, 17, nextJSONSpecial(s, 0), "byte %#x needs no escape", c)
	}
}

func TestDecimalLen(t *testing.T) {
	xs := []int64{0, 1, -1, 9, 10, -9, -10, 99, 100, math.MaxInt64, math.MinInt64, math.MinInt64 + 1, 1700000000000}
	for p := int64(1); p <= math.MaxInt64/10; p *= 10 {
		xs = append(xs, p-1, p, p+1, -p+1, -p, -p-1, 10*p-1)
	}
	rng := rand.New(rand.NewSource(5))
	for range 1000 {
		xs = append(xs, rng.Int63()>>rng.Intn(63), -rng.Int63()>>rng.Intn(63))
	}
	for _, x := range xs {
		require.Equal(t, len(strconv.FormatInt(x, 10)), decimalLen(x), "%d", x)
	}
}
