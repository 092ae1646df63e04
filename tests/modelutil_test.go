package tests

// The in-memory model of one topic that TestModel compares a real mount
// with: the records the log must hold, how append framing turns written
// bytes into records, and how each view renders them. See model_test.go.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand"
	"unicode/utf8"
)

// modelMaxMessage is the test topic's max.message.bytes: small, so lines
// above it are cheap to write.
const modelMaxMessage = 200000

// mrec is one record of the model. Null key or value: the flag is false.
type mrec struct {
	Key, Value       []byte
	HasKey, HasValue bool
	// Headers is the JSON text the views print for the headers ("{}" for
	// none); the model only writes headers of [a-z0-9] names and values.
	Headers string
	hdrs    [][2]string
}

// viewFmt is how plain views render records (the topic config when the
// view was opened).
type viewFmt struct {
	PrintKey  bool
	Sep, Null string
}

func (f viewFmt) render(dst []byte, r *mrec) []byte {
	if f.PrintKey {
		if r.HasKey {
			dst = append(dst, r.Key...)
		} else {
			dst = append(dst, f.Null...)
		}
		dst = append(dst, f.Sep...)
	}
	if r.HasValue {
		dst = append(dst, r.Value...)
	} else {
		dst = append(dst, f.Null...)
	}
	return append(dst, '\n')
}

func (f viewFmt) renderAll(recs []mrec) []byte {
	var b []byte
	for i := range recs {
		b = f.render(b, &recs[i])
	}
	return b
}

// lineCfg is how an append file frames plain lines (the topic config when
// the file was opened).
type lineCfg struct {
	ParseKey  bool
	Sep, Null string
	JSONL     bool
}

// parse turns one line (without '\n') into a record, as the README says
// append and append.jsonl do; ok=false: the line is refused (EINVAL).
func (c lineCfg) parse(line []byte) (mrec, bool) {
	if c.JSONL {
		return parseModelJSON(line)
	}
	v := append([]byte{}, line...)
	if !c.ParseKey {
		return mrec{Value: v, HasValue: true, Headers: "{}"}, true
	}
	i := bytes.Index(v, []byte(c.Sep))
	if i < 0 {
		return mrec{}, false
	}
	r := mrec{Headers: "{}"}
	if k := v[:i]; string(k) != c.Null {
		r.Key, r.HasKey = k, true
	}
	if val := v[i+len(c.Sep):]; string(val) != c.Null {
		r.Value, r.HasValue = val, true
	}
	return r, true
}

// modelJSON is the shape of the JSON lines the model writes and reads.
type modelJSON struct {
	Offset        *int64          `json:"offset"`
	Timestamp     *int64          `json:"timestamp"`
	Key           json.RawMessage `json:"key"`
	KeyEncoding   string          `json:"key_encoding"`
	Value         json.RawMessage `json:"value"`
	ValueEncoding string          `json:"value_encoding"`
	Headers       json.RawMessage `json:"headers"`
}

// jsonField decodes a key or value: null, a UTF-8 string, or base64.
func jsonField(raw json.RawMessage, enc string) (b []byte, present, ok bool) {
	if raw == nil || string(raw) == "null" {
		return nil, false, true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, false, false
	}
	if enc == "base64" {
		d, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, false, false
		}
		return d, true, true
	}
	return []byte(s), true, true
}

// parseModelJSON parses the JSON lines the model itself writes (a subset of
// what append.jsonl takes): a line without "value" is refused (EINVAL), an
// explicit null value is a tombstone.
func parseModelJSON(line []byte) (mrec, bool) {
	var j modelJSON
	if err := json.Unmarshal(line, &j); err != nil || j.Value == nil {
		return mrec{}, false
	}
	r := mrec{Headers: "{}"}
	var ok bool
	if r.Key, r.HasKey, ok = jsonField(j.Key, j.KeyEncoding); !ok {
		return mrec{}, false
	}
	if r.Value, r.HasValue, ok = jsonField(j.Value, j.ValueEncoding); !ok {
		return mrec{}, false
	}
	if j.Headers != nil {
		var hb bytes.Buffer
		if err := json.Compact(&hb, j.Headers); err != nil {
			return mrec{}, false
		}
		r.Headers = hb.String()
	}
	return r, true
}

// recordSize is the size of r alone in an uncompressed v2 record batch
// (kafka-formats.md §1.4): the 61-byte batch header, then the record's
// varint length, attributes, timestamp and offset deltas, key, value and
// headers.
func (r *mrec) recordSize() int {
	bl := func(b []byte, present bool) int {
		if !present {
			return 1
		}
		return varintSize(len(b)) + len(b)
	}
	body := 3 + bl(r.Key, r.HasKey) + bl(r.Value, r.HasValue) + varintSize(len(r.hdrs))
	for _, h := range r.hdrs {
		body += varintSize(len(h[0])) + len(h[0]) + varintSize(len(h[1])) + len(h[1])
	}
	return 61 + varintSize(body) + body
}

// varintSize is the length of n as a zig-zag varint.
func varintSize(n int) int {
	u := uint64(n) << 1
	s := 1
	for u >= 0x80 {
		u >>= 7
		s++
	}
	return s
}

// maxPlainValue is the longest line of a plain (no parse.key) append whose
// record fits in modelMaxMessage.
func maxPlainValue() int {
	n := modelMaxMessage
	for {
		r := mrec{Value: make([]byte, n), HasValue: true}
		if r.recordSize() <= modelMaxMessage {
			return n
		}
		n--
	}
}

// genBytes returns n random bytes, none of them '\n' (nor any byte of
// avoid, when given).
func genBytes(rng *rand.Rand, n int, avoid string) []byte {
	b := make([]byte, n)
	for i := range b {
		for {
			c := byte(rng.Intn(256))
			if c != '\n' && bytes.IndexByte([]byte(avoid), c) < 0 {
				b[i] = c
				break
			}
		}
	}
	return b
}

// genText returns random valid UTF-8 of about n bytes, with characters JSON
// must escape ('"', '\\', '\n', '\t', control bytes) among plain ones.
func genText(rng *rand.Rand, n int) []byte {
	alphabet := []rune{'a', 'b', 'z', '0', ' ', '"', '\\', '\n', '\t', 0x01, 0x1f, '<', '&', 'é', '€', '😀', '\u2028'}
	var b []byte
	for len(b) < n {
		if rng.Intn(3) == 0 {
			b = utf8.AppendRune(b, alphabet[rng.Intn(len(alphabet))])
		} else {
			b = append(b, byte('a'+rng.Intn(26)))
		}
	}
	return b
}

// genJSONLine makes one append.jsonl line (without '\n') whose value has
// about n bytes, and its record. Values are UTF-8 text or binary as base64;
// some records have keys, headers, or a null value (a tombstone).
func genJSONLine(rng *rand.Rand, n int) ([]byte, mrec) {
	r := mrec{Headers: "{}"}
	var b bytes.Buffer
	b.WriteByte('{')
	str := func(s []byte) {
		q, _ := json.Marshal(string(s))
		b.Write(q)
	}
	switch rng.Intn(4) {
	case 0:
		r.Key, r.HasKey = genText(rng, 1+rng.Intn(8)), true
		b.WriteString(`"key":`)
		str(r.Key)
		b.WriteByte(',')
	case 1:
		r.Key, r.HasKey = genBytes(rng, rng.Intn(8), ""), true
		fmt.Fprintf(&b, `"key":"%s","key_encoding":"base64",`, base64.StdEncoding.EncodeToString(r.Key))
	case 2:
		b.WriteString(`"key":null,`)
	}
	switch k := rng.Intn(10); {
	case k == 0:
		b.WriteString(`"value":null`)
	case k < 5:
		r.Value, r.HasValue = genText(rng, n), true
		b.WriteString(`"value":`)
		str(r.Value)
	default:
		r.Value, r.HasValue = genBytes(rng, n, ""), true
		// Binary bytes may include '\n' here: base64 carries it.
		if n > 0 {
			r.Value[rng.Intn(n)] = '\n'
		}
		fmt.Fprintf(&b, `"value":"%s","value_encoding":"base64"`, base64.StdEncoding.EncodeToString(r.Value))
	}
	if rng.Intn(4) == 0 {
		var h bytes.Buffer
		h.WriteByte('{')
		for i := 0; i < 1+rng.Intn(3); i++ {
			if i > 0 {
				h.WriteByte(',')
			}
			k, v := fmt.Sprintf("h%d", i), fmt.Sprintf("v%d", rng.Intn(1000))
			r.hdrs = append(r.hdrs, [2]string{k, v})
			fmt.Fprintf(&h, `"%s":"%s"`, k, v)
		}
		h.WriteByte('}')
		r.Headers = h.String()
		b.WriteString(`,"headers":`)
		b.Write(h.Bytes())
	}
	b.WriteByte('}')
	return b.Bytes(), r
}

// splitLines cuts b into its '\n'-terminated lines (without '\n') and the
// unterminated rest.
func splitLines(b []byte) (lines [][]byte, rest []byte) {
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return lines, b
		}
		lines = append(lines, b[:i])
		b = b[i+1:]
	}
}

// tailLines is what `tail -n k` prints of b.
func tailLines(b []byte, k int) []byte {
	if k == 0 {
		return nil
	}
	i := len(b)
	if i > 0 && b[i-1] == '\n' {
		i--
	}
	for n := 0; i > 0; i-- {
		if b[i-1] == '\n' {
			if n++; n == k {
				break
			}
		}
	}
	return b[i:]
}

// matchPlain checks that got is want followed by the renderings of some
// prefix of floating (records that may or may not be visible yet). It
// returns how many floating records it saw.
func matchPlain(got, want []byte, f viewFmt, floating []mrec) (int, error) {
	if !bytes.HasPrefix(got, want) {
		return 0, fmt.Errorf("differs from the model at byte %d of %d (model %d bytes)%s",
			diffAt(got, want), len(got), len(want), excerpt(got, want))
	}
	rest := got[len(want):]
	n := 0
	for len(rest) > 0 {
		if n == len(floating) {
			return n, fmt.Errorf("%d bytes after the model's %d: %q", len(rest), len(want), clip(rest))
		}
		r := f.render(nil, &floating[n])
		if !bytes.HasPrefix(rest, r) {
			return n, fmt.Errorf("after the model's %d bytes and %d pending records: %q is not the next pending record %q", len(want), n, clip(rest), clip(r))
		}
		rest = rest[len(r):]
		n++
	}
	return n, nil
}

// matchJSON checks a JSON view starting at offset start against the
// model's committed records, then a prefix of floating ones.
func matchJSON(got []byte, start int, committed, floating []mrec) (int, error) {
	lines, rest := splitLines(got)
	if len(rest) > 0 {
		return 0, fmt.Errorf("ends inside a line: %q", clip(rest))
	}
	all := committed
	if len(floating) > 0 {
		all = append(append([]mrec{}, committed...), floating...)
	}
	want := len(committed) - start
	if len(lines) < want || len(lines) > len(all)-start {
		return 0, fmt.Errorf("%d lines, the model has %d (and %d pending)", len(lines), want, len(floating))
	}
	for i, l := range lines {
		off := start + i
		var j modelJSON
		if err := json.Unmarshal(l, &j); err != nil {
			return 0, fmt.Errorf("line %d: %v: %q", i, err, clip(l))
		}
		r := &all[off]
		k, hasK, ok1 := jsonField(j.Key, j.KeyEncoding)
		v, hasV, ok2 := jsonField(j.Value, j.ValueEncoding)
		var hb bytes.Buffer
		_ = json.Compact(&hb, j.Headers)
		switch {
		case !ok1 || !ok2 || j.Offset == nil || j.Timestamp == nil:
			return 0, fmt.Errorf("line %d malformed: %q", i, clip(l))
		case *j.Offset != int64(off):
			return 0, fmt.Errorf("line %d: offset %d, want %d", i, *j.Offset, off)
		case hasK != r.HasKey || !bytes.Equal(k, r.Key):
			return 0, fmt.Errorf("offset %d: key %q (present %v), model %q (present %v)", off, clip(k), hasK, clip(r.Key), r.HasKey)
		case hasV != r.HasValue || !bytes.Equal(v, r.Value):
			return 0, fmt.Errorf("offset %d: value %q (%d bytes, present %v), model %q (%d bytes, present %v)", off, clip(v), len(v), hasV, clip(r.Value), len(r.Value), r.HasValue)
		case hb.String() != r.Headers:
			return 0, fmt.Errorf("offset %d: headers %s, model %s", off, hb.String(), r.Headers)
		}
	}
	return len(lines) - want, nil
}

func diffAt(a, b []byte) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

func excerpt(got, want []byte) string {
	i := diffAt(got, want)
	lo := max(i-40, 0)
	return fmt.Sprintf(": got %q, model %q", clip(got[lo:min(len(got), i+40)]), clip(want[lo:min(len(want), i+40)]))
}

// clip shortens b for a message.
func clip(b []byte) []byte {
	if len(b) > 80 {
		return append(append(append([]byte{}, b[:40]...), "…"...), b[len(b)-40:]...)
	}
	return b
}
