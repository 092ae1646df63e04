package tests

// Helpers shared by the reliability suites (crash, corruption, bad input,
// load, policies): unique self-checking payloads, records.jsonl and stats
// parsing, the offline checker, polling and env knobs. The mount process
// itself is driven through the shared harness in harness_test.go.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/internal/testutil"
)

// Payloads are unique per (writer, seq) and carry a filler derived from both,
// so a reader can tell a written record from any other bytes:
//
//	w03-0000123-kqzb...   writer 3, sequence 123, 8..47 filler letters
//
// Nothing but relPayload(w, seq) for some attempted seq may ever be read back.
func relPayload(w, seq int) string {
	n := 8 + (seq*7+w)%40
	var b strings.Builder
	fmt.Fprintf(&b, "w%02d-%07d-", w, seq)
	for i := 0; i < n; i++ {
		b.WriteByte(byte('a' + (w*31+seq*17+i*13)%26))
	}
	return b.String()
}

// relParsePayload returns the writer and sequence of a payload made by
// relPayload, or ok=false if s is anything else (a torn, shifted or
// corrupted line).
func relParsePayload(s string) (w, seq int, ok bool) {
	if len(s) < 13 || s[0] != 'w' || s[3] != '-' || s[11] != '-' {
		return 0, 0, false
	}
	w, err1 := strconv.Atoi(s[1:3])
	seq, err2 := strconv.Atoi(s[4:11])
	if err1 != nil || err2 != nil || w < 0 || seq < 0 {
		return 0, 0, false
	}
	if relPayload(w, seq) != s {
		return 0, 0, false
	}
	return w, seq, true
}

// jsonRec is one line of a records.jsonl view. Key and value stay raw so a
// base64-marked or null value is kept apart from a plain string.
type jsonRec struct {
	Offset    int64           `json:"offset"`
	Timestamp int64           `json:"timestamp"`
	Key       json.RawMessage `json:"key"`
	Value     json.RawMessage `json:"value"`

	// plain holds the value when the record came from a plain view (see
	// plainRecs), which is cheaper to read and parse than JSON.
	plain    string
	hasPlain bool
}

// plainRecs turns the lines of a plain view of a log without deletions
// into records whose offsets are their line numbers.
func plainRecs(data []byte) ([]jsonRec, error) {
	if len(data) > 0 && data[len(data)-1] != '\n' {
		return nil, fmt.Errorf("view does not end with a newline: last bytes %q", tailBytes(data, 80))
	}
	lines := linesOf(string(data))
	out := make([]jsonRec, len(lines))
	for i, l := range lines {
		out[i] = jsonRec{Offset: int64(i), plain: l, hasPlain: true}
	}
	return out, nil
}

// str decodes a raw JSON string; null and non-strings give ok=false.
func rawString(r json.RawMessage) (string, bool) {
	if len(r) == 0 || string(r) == "null" {
		return "", false
	}
	var s string
	if err := json.Unmarshal(r, &s); err != nil {
		return "", false
	}
	return s, true
}

func (r jsonRec) IsTombstone() bool {
	return !r.hasPlain && (len(r.Value) == 0 || string(r.Value) == "null")
}
func (r jsonRec) ValueString() (string, bool) {
	if r.hasPlain {
		return r.plain, true
	}
	return rawString(r.Value)
}
func (r jsonRec) KeyString() (string, bool) { return rawString(r.Key) }

// readJSONL reads a .jsonl view through the mount and decodes every line.
func readJSONL(path string) ([]jsonRec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseJSONL(data)
}

func parseJSONL(data []byte) ([]jsonRec, error) {
	var out []jsonRec
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	n := 0
	for sc.Scan() {
		n++
		var r jsonRec
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return out, fmt.Errorf("line %d %q: %w", n, sc.Text(), err)
		}
		out = append(out, r)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		return out, fmt.Errorf("view does not end with a newline: last bytes %q", tailBytes(data, 80))
	}
	return out, sc.Err()
}

func tailBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// readStats reads and decodes a partition's stats file.
func readStats(path string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("stats %s is not JSON: %w\n%s", path, err, data)
	}
	return m, nil
}

// normKey makes "log_start_offset", "logStartOffset" and "log-start-offset" equal.
func normKey(s string) string {
	s = strings.ToLower(s)
	return strings.NewReplacer("_", "", "-", "", ".", "", " ", "").Replace(s)
}

// statsNumber finds the first numeric field (searching nested objects, top
// level first) whose normalized name is one of names.
func statsNumber(m map[string]any, names ...string) (float64, bool) {
	want := map[string]bool{}
	for _, n := range names {
		want[normKey(n)] = true
	}
	var walk func(m map[string]any, depth int) (float64, bool)
	walk = func(m map[string]any, depth int) (float64, bool) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if want[normKey(k)] {
				if f, ok := m[k].(float64); ok {
					return f, true
				}
			}
		}
		if depth > 3 {
			return 0, false
		}
		for _, k := range keys {
			if sub, ok := m[k].(map[string]any); ok {
				if f, ok := walk(sub, depth+1); ok {
					return f, true
				}
			}
		}
		return 0, false
	}
	return walk(m, 0)
}

// logStartFromStats returns the log start offset stats reports.
func logStartFromStats(t testing.TB, path string) int64 {
	t.Helper()
	st, err := readStats(path)
	require.NoError(t, err)
	v, ok := statsNumber(st, "log_start_offset", "logStartOffset", "log_start", "start_offset")
	require.True(t, ok, "stats has no log start offset field: %v", st)
	return int64(v)
}

// checkResult is what `topicfs check` said about a data directory.
type checkResult struct {
	Stdout, Stderr string
	Code           int
	Missing        bool // the check subcommand is not implemented in this binary
}

func (c checkResult) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", c.Code, c.Stdout, c.Stderr)
}

// runCheck runs `topicfs check [args] DIR` offline.
func runCheck(t testing.TB, args ...string) checkResult {
	t.Helper()
	out, errOut, code := runTopicfs(t, nil, append([]string{"check"}, args...)...)
	res := checkResult{Stdout: out, Stderr: errOut, Code: code}
	low := strings.ToLower(out + errOut)
	if code != 0 && (strings.Contains(low, "unknown command") || strings.Contains(low, "unknown subcommand") ||
		strings.Contains(low, "not implemented")) {
		res.Missing = true
	}
	return res
}

// requireCheckPasses asserts the offline checker accepts dir. A binary
// without the check subcommand is logged loudly, not silently passed.
func requireCheckPasses(t testing.TB, dir string) bool {
	t.Helper()
	res := runCheck(t, dir)
	if res.Missing {
		t.Logf("NOT CHECKED: `topicfs check` is not available in this binary (%s)", strings.TrimSpace(res.Stderr))
		return false
	}
	require.Equal(t, 0, res.Code, "topicfs check %s must pass: %s", dir, res)
	return true
}

// envInt reads an integer knob from the environment.
func envInt(name string, def int) int {
	if v := os.Getenv(name); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return def
}

// eventually polls cond every 20ms until it returns nil or the (generous)
// deadline passes; it then fails with the last error. It asserts an outcome,
// never a speed.
func eventually(t testing.TB, deadline time.Duration, what string, cond func() error) {
	t.Helper()
	end := time.Now().Add(deadline)
	var err error
	for {
		if err = cond(); err == nil {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%s: still not true after %v: %v", what, deadline, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// segmentFiles lists a partition directory of the data dir (not the mount)
// by suffix, sorted.
func segmentFiles(t testing.TB, partDir, suffix string) []string {
	t.Helper()
	ents, err := os.ReadDir(partDir)
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), suffix) {
			out = append(out, filepath.Join(partDir, e.Name()))
		}
	}
	sort.Strings(out)
	return out
}

// linesOf splits text into lines, dropping the final empty string after a
// trailing newline.
func linesOf(s string) []string {
	if s == "" {
		return nil
	}
	s = strings.TrimSuffix(s, "\n")
	return strings.Split(s, "\n")
}

// isConnErr says whether err is what a FUSE client sees after the server died.
func isConnErr(err error) bool {
	return err != nil && (errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ECONNABORTED))
}

// TestReliabilityHelpers checks the checkers: payloads round-trip and reject
// any tampering, logBatches walks a real Kafka broker's .log, parseJSONL
// refuses a torn last line, statsNumber finds fields however they are spelled.
func TestReliabilityHelpers(t *testing.T) {
	for _, c := range [][2]int{{0, 0}, {3, 123}, {41, 9999999}} {
		p := relPayload(c[0], c[1])
		w, seq, ok := relParsePayload(p)
		require.True(t, ok, p)
		require.Equal(t, c, [2]int{w, seq})
		for i := range p {
			b := []byte(p)
			b[i] ^= 0x04
			_, _, ok := relParsePayload(string(b))
			require.False(t, ok, "flipped byte %d of %q still parses", i, p)
		}
		_, _, ok = relParsePayload(p[:len(p)-1])
		require.False(t, ok, "a torn payload parses")
	}

	// test0-0 of Kafka 0.11.0: 11 one-record batches, offsets 0..10
	// (testdata/kafka-real/PROVENANCE.md).
	log := testutil.KafkaFixture(t, "kafka0110-zk-sharaweil/data/test0-0/00000000000000000000.log")
	batches := logBatches(t, log)
	require.Len(t, batches, 11)
	for i, b := range batches {
		require.Equal(t, int64(i), b.Base)
	}
	last := batches[len(batches)-1]
	st, err := os.Stat(log)
	require.NoError(t, err)
	require.Equal(t, st.Size(), last.Pos+last.Size, "the walk ends exactly at the end of the file")

	recs, err := parseJSONL([]byte(`{"offset":3,"timestamp":5,"key":null,"value":"v"}` + "\n" + `{"offset":4,"key":"k","value":null}` + "\n"))
	require.NoError(t, err)
	require.Len(t, recs, 2)
	v, ok := recs[0].ValueString()
	require.True(t, ok)
	require.Equal(t, "v", v)
	require.True(t, recs[1].IsTombstone())
	_, ok = recs[0].KeyString()
	require.False(t, ok)
	_, err = parseJSONL([]byte(`{"offset":3,"value":"v"}`))
	require.Error(t, err, "a view must end with a newline")

	n, ok := statsNumber(map[string]any{"partition": map[string]any{"logStartOffset": 42.0}}, "log_start_offset")
	require.True(t, ok)
	require.Equal(t, 42.0, n)
}

// smallTmpfs mounts a tmpfs of size (mount(8)'s size=, e.g. "4m") on a
// temporary directory, unmounted at cleanup, and returns it with an empty
// data directory inside, for tests that fill the disk.
func smallTmpfs(t *testing.T, size string) (root, data string) {
	t.Helper()
	root = t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", root).CombinedOutput()
	require.NoError(t, err, "mount tmpfs: %s", out)
	t.Cleanup(func() {
		if err := syscall.Unmount(root, 0); err != nil {
			_ = syscall.Unmount(root, syscall.MNT_DETACH)
		}
	})
	data = filepath.Join(root, "data")
	require.NoError(t, os.Mkdir(data, 0o755))
	return root, data
}
