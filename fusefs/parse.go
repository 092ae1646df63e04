package fusefs

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/topicfs/topicfs/engine/record"
)

// lineConfig is how an append file parses plain lines (from the topic config
// at open time).
type lineConfig struct {
	parseKey   bool
	separator  string
	nullMarker string
}

// parsePlainLine turns one line (without its '\n') into a record. Without
// parse.key the whole line is the value. With parse.key the line is
// key separator value (split at the first separator; no separator is
// errParse), and a key or value equal to null.marker is null — a null value
// is a tombstone. The record does not alias line.
func parsePlainLine(line []byte, c lineConfig) (record.Record, error) {
	return parsePlainLineAliased(append(make([]byte, 0, len(line)), line...), c)
}

// parsePlainLineAliased is parsePlainLine for a line the caller owns: the
// record's key and value alias it (capacity-limited, so appends to them
// never spill into the rest of the line).
func parsePlainLineAliased(line []byte, c lineConfig) (record.Record, error) {
	r := record.Record{Timestamp: -1}
	if !c.parseKey || c.separator == "" {
		r.Value = line[:len(line):len(line)]
		return r, nil
	}
	i := bytes.Index(line, []byte(c.separator))
	if i < 0 {
		return r, fmt.Errorf("%w: no key separator %q in line", errParse, c.separator)
	}
	key, value := line[:i:i], line[i+len(c.separator):len(line):len(line)]
	if string(key) != c.nullMarker {
		r.Key = key
	}
	if string(value) != c.nullMarker {
		r.Value = value
	}
	return r, nil
}

// jsonLine is the shape append.jsonl accepts; it is what JSON views print.
type jsonLine struct {
	Offset        json.RawMessage `json:"offset"` // ignored: appends always go to the end
	Timestamp     json.RawMessage `json:"timestamp"`
	Key           json.RawMessage `json:"key"`
	KeyEncoding   string          `json:"key_encoding"`
	Value         json.RawMessage `json:"value"`
	ValueEncoding string          `json:"value_encoding"`
	Headers       json.RawMessage `json:"headers"`
}

// parseJSONLine parses one append.jsonl line:
//
//	{"key":…,"value":…,"headers":{…},"timestamp":…}
//
// key and value are strings (UTF-8 bytes, or base64 with
// "key_encoding"/"value_encoding":"base64") or null; any other JSON value
// is errParse (the views print it back as a string). "value" is required: only an explicit
// "value":null is a tombstone, so a line that forgot its value ({} or
// {"key":"k"}) is errParse rather than a record that deletes its key. An
// absent key is null. headers is an object (order kept) or an array of
// {"key","value"[,"key_encoding","value_encoding"]} objects; timestamp is
// epoch ms (>= 0; -1 means now) or an RFC 3339 string from 1970 on,
// absent or null meaning now: Kafka refuses other negative timestamps. "offset" is
// accepted and ignored; any other field is errParse (a typo must not turn a
// record into a tombstone).
func parseJSONLine(line []byte) (record.Record, error) {
	r := record.Record{Timestamp: -1}
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return r, fmt.Errorf("%w: a JSON line must be an object", errParse)
	}
	var jl jsonLine
	if err := json.Unmarshal(line, &jl); err != nil { // also refuses trailing data
		return r, fmt.Errorf("%w: %v", errParse, err)
	}
	if err := checkKeys(line, jsonLineKeys); err != nil {
		return r, err
	}
	if jl.Value == nil {
		return r, fmt.Errorf(`%w: no "value" field (write "value":null for a tombstone)`, errParse)
	}
	var err error
	if r.Key, err = jsonBytes(jl.Key, jl.KeyEncoding, "key"); err != nil {
		return r, err
	}
	if r.Value, err = jsonBytes(jl.Value, jl.ValueEncoding, "value"); err != nil {
		return r, err
	}
	if r.Timestamp, err = jsonTimestamp(jl.Timestamp); err != nil {
		return r, err
	}
	if r.Headers, err = jsonHeaders(jl.Headers); err != nil {
		return r, err
	}
	return r, nil
}

func isNull(raw json.RawMessage) bool {
	return raw == nil || string(bytes.TrimSpace(raw)) == "null"
}

// jsonLineKeys are the fields an append.jsonl object may have, spelled
// exactly (encoding/json alone would also take "VALUE" for "value").
var jsonLineKeys = map[string]bool{
	"offset": true, "timestamp": true, "key": true, "key_encoding": true,
	"value": true, "value_encoding": true, "headers": true,
}

// checkKeys refuses a key of the top-level object of obj (syntactically
// valid JSON) that is not in allowed.
func checkKeys(obj []byte, allowed map[string]bool) error {
	depth := 0
	expectKey := false
	for i := 0; i < len(obj); i++ {
		switch c := obj[i]; c {
		case '{', '[':
			depth++
			expectKey = depth == 1 && c == '{'
		case '}', ']':
			depth--
		case ',':
			expectKey = depth == 1
		case '"':
			j := i + 1
			escaped := false
			for ; j < len(obj) && obj[j] != '"'; j++ {
				if obj[j] == '\\' {
					escaped = true
					j++
				}
			}
			if expectKey {
				key := obj[i+1 : j]
				if escaped {
					var s string
					if err := json.Unmarshal(obj[i:j+1], &s); err != nil {
						return fmt.Errorf("%w: %v", errParse, err)
					}
					key = []byte(s)
				}
				if !allowed[string(key)] { // no allocation
					return fmt.Errorf("%w: unknown field %q", errParse, key)
				}
				expectKey = false
			}
			i = j
		}
	}
	return nil
}

// jsonString decodes a JSON string literal; literals without escapes and
// with valid UTF-8 (the usual case) are taken as they are.
func jsonString(raw []byte) (string, error) {
	body := raw[1 : len(raw)-1]
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body), nil
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}

// jsonBytes decodes a key, value or header value.
func jsonBytes(raw json.RawMessage, encoding, what string) ([]byte, error) {
	switch encoding {
	case "", "utf8", "utf-8", "base64":
	default:
		return nil, fmt.Errorf("%w: unknown %s_encoding %q", errParse, what, encoding)
	}
	if isNull(raw) {
		return nil, nil
	}
	raw = bytes.TrimSpace(raw)
	if raw[0] != '"' {
		// A number, object or array is refused rather than stored as its
		// JSON text: the JSON views print every value as a string, so
		// {"value":1} would come back as "1" and not round-trip.
		shown := raw
		if len(shown) > 40 {
			shown = shown[:40]
		}
		return nil, fmt.Errorf("%w: %s must be a JSON string or null, not %s", errParse, what, shown)
	}
	s, err := jsonString(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", errParse, what, err)
	}
	if encoding == "base64" {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("%w: %s is not base64: %v", errParse, what, err)
		}
		return append(make([]byte, 0, len(b)), b...), nil
	}
	return append(make([]byte, 0, len(s)), s...), nil
}

func jsonTimestamp(raw json.RawMessage) (int64, error) {
	if isNull(raw) {
		return -1, nil
	}
	raw = bytes.TrimSpace(raw)
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, fmt.Errorf("%w: timestamp: %v", errParse, err)
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return 0, fmt.Errorf("%w: timestamp %q is not RFC 3339", errParse, s)
		}
		if ms := t.UnixMilli(); ms >= 0 {
			return ms, nil
		}
		return 0, fmt.Errorf("%w: timestamp %q is before 1970 (Kafka refuses negative timestamps)", errParse, s)
	}
	ts, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: timestamp %s is not an integer of milliseconds", errParse, raw)
	}
	if ts < -1 {
		// Kafka's producer refuses these ("Invalid timestamp"); -1 is its
		// "no timestamp", which the append stamps with the time it runs.
		return 0, fmt.Errorf("%w: timestamp %d is negative (Kafka refuses it; -1 or no timestamp means now)", errParse, ts)
	}
	return ts, nil
}

// jsonHeaderEntry is one element of the array form of headers.
type jsonHeaderEntry struct {
	Key           json.RawMessage `json:"key"`
	KeyEncoding   string          `json:"key_encoding"`
	Value         json.RawMessage `json:"value"`
	ValueEncoding string          `json:"value_encoding"`
}

func jsonHeaders(raw json.RawMessage) ([]record.Header, error) {
	if isNull(raw) {
		return nil, nil
	}
	raw = bytes.TrimSpace(raw)
	switch raw[0] {
	case '[':
		var entries []json.RawMessage
		if err := json.Unmarshal(raw, &entries); err != nil {
			return nil, fmt.Errorf("%w: headers: %v", errParse, err)
		}
		hs := make([]record.Header, 0, len(entries))
		for _, e := range entries {
			dec := json.NewDecoder(bytes.NewReader(e))
			dec.DisallowUnknownFields()
			var he jsonHeaderEntry
			if err := dec.Decode(&he); err != nil {
				return nil, fmt.Errorf("%w: header: %v", errParse, err)
			}
			if isNull(he.Key) || bytes.TrimSpace(he.Key)[0] != '"' {
				return nil, fmt.Errorf("%w: a header key must be a string", errParse)
			}
			k, err := jsonBytes(he.Key, he.KeyEncoding, "header key")
			if err != nil {
				return nil, err
			}
			v, err := jsonBytes(he.Value, he.ValueEncoding, "header value")
			if err != nil {
				return nil, err
			}
			hs = append(hs, record.Header{Key: string(k), Value: v})
		}
		return hs, nil
	case '{':
		// Walk the tokens so the header order is kept (a map would lose it).
		dec := json.NewDecoder(bytes.NewReader(raw))
		if _, err := dec.Token(); err != nil {
			return nil, fmt.Errorf("%w: headers: %v", errParse, err)
		}
		var hs []record.Header
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return nil, fmt.Errorf("%w: headers: %v", errParse, err)
			}
			k, _ := tok.(string)
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return nil, fmt.Errorf("%w: header %q: %v", errParse, k, err)
			}
			b, err := jsonBytes(v, "", "header value")
			if err != nil {
				return nil, err
			}
			hs = append(hs, record.Header{Key: k, Value: b})
		}
		if hs == nil {
			hs = []record.Header{}
		}
		return hs, nil
	default:
		return nil, fmt.Errorf("%w: headers must be an object or an array", errParse)
	}
}

// lineSplitter frames a byte stream written in arbitrary pieces into lines.
// It is not safe for concurrent use (each append handle owns one).
type lineSplitter struct {
	partial []byte // bytes after the last '\n' seen
}

// split returns the complete lines that data completes (without their
// '\n') and the new unterminated tail, without changing the splitter:
// the caller commits with set(tail) only when every line was accepted, so
// a rejected write leaves no trace.
func (s *lineSplitter) split(data []byte) (lines [][]byte, tail []byte) {
	buf := data
	if len(s.partial) > 0 {
		if bytes.IndexByte(data, '\n') < 0 {
			return nil, append(append(make([]byte, 0, len(s.partial)+len(data)), s.partial...), data...)
		}
		buf = append(append(make([]byte, 0, len(s.partial)+len(data)), s.partial...), data...)
	}
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			break
		}
		lines = append(lines, buf[:i])
		buf = buf[i+1:]
	}
	return lines, append([]byte(nil), buf...)
}

// set makes tail the unterminated rest.
func (s *lineSplitter) set(tail []byte) { s.partial = tail }

// take returns and clears the unterminated rest (committed on close).
func (s *lineSplitter) take() []byte {
	p := s.partial
	s.partial = nil
	return p
}
