package tests

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
)

// The README cannot drift: these tests run its tour against a real mount,
// check its set-up commands against .ci/run, and regenerate its config table
// from the engine (go test ./tests -run TestReadmeConfigTable -update-readme).

var updateReadme = flag.Bool("update-readme", false, "rewrite README.md's generated config reference table")

const readmePath = "../README.md"

func readReadme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(readmePath)
	require.NoError(t, err)
	return string(b)
}

// mdSection returns the text under the "## title" heading up to the next
// heading of level 2.
func mdSection(t *testing.T, md, title string) string {
	t.Helper()
	start := strings.Index(md, "\n## "+title+"\n")
	require.GreaterOrEqual(t, start, 0, "README has no section %q", title)
	rest := md[start+len("\n## "+title+"\n"):]
	if end := strings.Index(rest, "\n## "); end >= 0 {
		rest = rest[:end]
	}
	return rest
}

type mdFence struct {
	lang string
	body string
}

var fenceRE = regexp.MustCompile("(?ms)^```([a-z]*)\n(.*?)^```\n")

// mdFences returns the fenced code blocks of md in order.
func mdFences(md string) []mdFence {
	var out []mdFence
	for _, m := range fenceRE.FindAllStringSubmatch(md, -1) {
		out = append(out, mdFence{lang: m[1], body: m[2]})
	}
	return out
}

// TestReadmeSetup: the two set-up commands are there, and the test command
// is the one .ci/run runs.
func TestReadmeSetup(t *testing.T) {
	md := readReadme(t)
	sec := mdSection(t, md, "Set up")
	var sh []string
	for _, f := range mdFences(sec) {
		if f.lang == "sh" {
			sh = append(sh, strings.TrimSpace(f.body))
		}
	}
	require.Equal(t, []string{"make install && topicfs mount ~/topics", "go test -race -count=1 -timeout 20m ./..."}, sh)

	ci, err := os.ReadFile("../.ci/run")
	require.NoError(t, err)
	assert.Contains(t, string(ci), "\nTEST_CMD='"+sh[1]+"'\n", ".ci/run runs exactly the README's test command")
}

// TestReadmeTour runs every ```sh block of the tour, in order, in one bash
// against a real mount at ~/topics (HOME is a temporary directory), and
// compares each block's output with the ```text block right after it, when
// there is one.
func TestReadmeTour(t *testing.T) {
	md := readReadme(t)
	blocks := mdFences(mdSection(t, md, "A five-minute tour"))
	type step struct{ script, want string }
	var steps []step
	for i, b := range blocks {
		switch b.lang {
		case "sh":
			steps = append(steps, step{script: b.body, want: "\x00"})
		case "text":
			require.NotEmpty(t, steps, "text block %d follows no sh block", i)
			require.Equal(t, "\x00", steps[len(steps)-1].want, "two text blocks after one sh block")
			steps[len(steps)-1].want = b.body
		}
	}
	require.NotEmpty(t, steps)

	dir := t.TempDir()
	m := startMount(t, mountOpts{Dir: dir + "/topics"})
	var script strings.Builder
	fmt.Fprintf(&script, "export HOME=%q\n", dir)
	for i, s := range steps {
		fmt.Fprintf(&script, "printf '\\n@@block %d@@\\n'\n%s\n", i, s.script)
	}
	stdout, stderr, err := m.ShErr(script.String())
	parts := regexp.MustCompile(`\n?@@block (\d+)@@\n`).Split(stdout, -1)
	last := len(parts) - 2
	require.NoError(t, err, "tour block %d failed:\n%s\nstdout:\n%s\nstderr:\n%s", last, steps[max(last, 0)].script, stdout, stderr)
	require.Len(t, parts, len(steps)+1)
	for i, s := range steps {
		if s.want == "\x00" {
			continue
		}
		assert.Equal(t, s.want, parts[i+1], "output of tour block %d:\n%s", i, s.script)
	}
}

// configDoc is the README's description of one setting.
type configDoc struct {
	meaning string
	// origin says where a setting without broker-wide names comes from;
	// the column lists engine.BrokerNames otherwise.
	origin string
}

// configDocs describes every engine.ConfigNames() entry. A new setting
// without a line here fails TestReadmeConfigTable.
var configDocs = map[string]configDoc{
	"segment.bytes":                     {"an append rolls the active segment when the batch would take it past this size", ""},
	"segment.ms":                        {"an append rolls the active segment once it is this old, even if small", ""},
	"segment.jitter.ms":                 {"random amount subtracted from segment.ms per segment, so partitions do not roll together", ""},
	"segment.index.bytes":               {"largest .index/.timeindex file; a full index rolls the segment", ""},
	"index.interval.bytes":              {"bytes of log between index entries: the most a seek scans", ""},
	"retention.ms":                      {"delete a segment (the active one too) once its newest record is older than this; -1 = forever", ""},
	"retention.bytes":                   {"delete the oldest segments while what remains stays at or above this; -1 = no limit", ""},
	"retention.check.interval.ms":       {"how often retention is checked (per topic here, broker-wide in Kafka)", ""},
	"cleanup.policy":                    {"`delete` (retention), `compact` (latest record per key), or `compact,delete`", ""},
	"min.cleanable.dirty.ratio":         {"clean a log only when its dirty ratio is above this", ""},
	"delete.retention.ms":               {"keep tombstones this long after the cleaner reached them", ""},
	"min.compaction.lag.ms":             {"never compact records younger than this", ""},
	"max.compaction.lag.ms":             {"compact a log whose oldest dirty record is this old, whatever the dirty ratio", ""},
	"file.delete.delay.ms":              {"how long deleted segments (`*.deleted`) stay before they are unlinked; the mount-wide value also for deleted topics (`*-delete`)", ""},
	"flush.messages":                    {"fsync after this many appended records (default: never forced)", ""},
	"flush.ms":                          {"fsync when this long passed since the last fsync (default: never forced)", ""},
	"compression.type":                  {"codec of batches appended through the mount: `producer` (= none here), `none`, `gzip`, `snappy`, `lz4`, `zstd`", "same name"},
	"max.message.bytes":                 {"largest record batch accepted; a larger record fails with EMSGSIZE", ""},
	"message.timestamp.type":            {"`CreateTime` keeps the writer's timestamp; `LogAppendTime` stamps the append time", ""},
	"num.partitions":                    {"partitions of a topic created with mkdir", "same name (broker only)"},
	"log.cleaner.threads":               {"mount-wide: cleaner threads (partitions compacted at once); 0 = no cleaner, as in Kafka", "same name"},
	"log.cleaner.dedupe.buffer.size":    {"mount-wide: the cleaner's key → offset map, 24 bytes a key as in Kafka (+1 for a probe tag), shared by its threads; at most 2 GiB - 1 per thread", "same name"},
	"log.cleaner.io.buffer.load.factor": {"mount-wide: share of the map a cleaning fills", "same name"},
	"log.index.mapped.max.segments":     {"mount-wide: sealed segments with mapped indexes (LRU)", "topicfs"},
	"batch.size":                        {"bytes of records from one open file grouped into one batch", "producer config"},
	"linger.ms":                         {"longest wait for more records before a batch is appended (and visible)", "producer config"},
	"parse.key":                         {"split each appended line into key, key.separator, value", "kafka-console-producer property"},
	"key.separator":                     {"between key and value when parsing (parse.key) and printing (print.key)", "kafka-console-producer/consumer property"},
	"null.marker":                       {"text that stands for a null value: appended with parse.key it is a tombstone; views print it for tombstones", "null.literal (kafka-console-consumer)"},
	"print.key":                         {"views print key, key.separator, value", "kafka-console-consumer property"},
	"cursor.start":                      {"where a cursor read for the first time starts: `earliest` or `latest`", "auto.offset.reset (consumer)"},
	"key.index.memory.bytes":            {"mount-wide: heap of the `by-key/` indexes, then spill files", "topicfs"},
}

const (
	tableBegin = "<!-- config-table:begin (generated by go test ./tests -run TestReadmeConfigTable -update-readme) -->\n"
	tableEnd   = "<!-- config-table:end -->\n"
)

// configTable renders the README's config reference from the engine.
func configTable(t *testing.T) string {
	t.Helper()
	def := engine.DefaultConfig()
	var b strings.Builder
	b.WriteString("| name | default | accepted | meaning | broker-wide name, or origin |\n")
	b.WriteString("| --- | --- | --- | --- | --- |\n")
	for _, name := range engine.ConfigNames() {
		doc, ok := configDocs[name]
		require.True(t, ok, "setting %s has no description in tests/readme_test.go configDocs", name)
		v, err := def.Get(name)
		require.NoError(t, err)
		accepted := "see meaning"
		if rng, ok := engine.SettingRange(name); ok {
			accepted = strings.ReplaceAll(rng, " to ", " … ")
		}
		origin := doc.origin
		if names := engine.BrokerNames(name); len(names) > 0 {
			require.Empty(t, origin, "%s has broker-wide names; configDocs gives no origin", name)
			origin = strings.Join(names, ", ")
		}
		require.NotEmpty(t, origin, "setting %s has neither broker-wide names nor an origin", name)
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", name, mdValue(v), accepted, doc.meaning, origin)
	}
	return b.String()
}

// mdValue shows a default in a table cell: quoted when empty or blank.
func mdValue(v string) string {
	if strings.TrimSpace(v) == "" || strings.ContainsAny(v, "\t|`") {
		return "`" + strings.ReplaceAll(strconv.Quote(v), "|", `\|`) + "`"
	}
	return "`" + v + "`"
}

func TestReadmeConfigTable(t *testing.T) {
	md := readReadme(t)
	want := configTable(t)
	i := strings.Index(md, tableBegin)
	j := strings.Index(md, tableEnd)
	require.True(t, i >= 0 && j > i, "README lacks the config-table markers")
	got := md[i+len(tableBegin) : j]
	if *updateReadme && got != want {
		md = md[:i+len(tableBegin)] + want + md[j:]
		require.NoError(t, os.WriteFile(readmePath, []byte(md), 0o644))
		t.Logf("rewrote the config table in %s", readmePath)
		return
	}
	assert.Equal(t, want, got, "README config table is stale: run go test ./tests -run TestReadmeConfigTable -update-readme")
	for _, name := range engine.ConfigNames() {
		assert.Contains(t, got, "| `"+name+"` |")
	}
	for name := range configDocs {
		assert.Contains(t, engine.ConfigNames(), name, "configDocs describes %s, which is not a setting", name)
	}
}

// TestReadmeCluster runs the "Mount a Kafka cluster" section against a
// kfake cluster: its first ```sh block must be the mount command (run here
// with the cluster's address for localhost:9092), the others run in order
// in one bash and each output must match the ```text block after it.
func TestReadmeCluster(t *testing.T) {
	md := readReadme(t)
	blocks := mdFences(mdSection(t, md, "Mount a Kafka cluster"))
	require.NotEmpty(t, blocks)
	require.Equal(t, "sh", blocks[0].lang)
	const mountCmd = "topicfs mount --bootstrap-server localhost:9092 ~/kafka"
	require.Equal(t, mountCmd, strings.TrimSpace(blocks[0].body), "the section starts with the mount command")
	type step struct{ script, want string }
	var steps []step
	for _, b := range blocks[1:] {
		switch b.lang {
		case "sh":
			steps = append(steps, step{script: b.body, want: "\x00"})
		case "text":
			require.NotEmpty(t, steps)
			steps[len(steps)-1].want = b.body
		}
	}
	kc := startKfake(t)
	dir := t.TempDir()
	opts := clusterMountOpts(t, kc, "")
	opts.Dir = dir + "/kafka"
	m := startMount(t, opts)
	for i, s := range steps {
		out, errOut, err := m.ShErr(fmt.Sprintf("export HOME=%q\nexport K=~/kafka\n%s", dir, s.script))
		require.NoError(t, err, "block %d:\n%s\nstderr:\n%s", i, s.script, errOut)
		if s.want != "\x00" {
			assert.Equal(t, s.want, out, "output of block %d:\n%s", i, s.script)
		}
	}
}
