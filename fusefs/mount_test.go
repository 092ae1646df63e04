package fusefs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/topicfs/topicfs/backend/local"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
	"github.com/topicfs/topicfs/policies"
)

// testMount is a mounted tree over a LogDir in t.TempDir(), unmounted in
// t.Cleanup (also when the test fails).
type testMount struct {
	mnt  string
	data string
	d    *engine.LogDir
	// sched reports policy state (mountOpts.scheduler); tests drive it.
	sched *policies.Scheduler
	srv   *Server
	// unmount unmounts, waits for the server and closes d (newTestMountAt;
	// idempotent, also run at cleanup).
	unmount func()
}

// mountOpts configures newTestMount.
type mountOpts struct {
	config    map[string]string            // defaults changed from engine.DefaultConfig
	overrides map[string]map[string]string // [topics.NAME] tables
	scheduler bool                         // report policy state from a policies.Scheduler (not started)
	readOnly  bool
	opLatency func(op string, d time.Duration)
	indexes   int          // segment indexes kept (Options.indexEntries)
	noPass    bool         // Options.NoPassthrough
	logger    *slog.Logger // Options.Logger (nil: slog.Default)
}

func requireFUSE(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("no /dev/fuse (%v): mount tests skipped outside CI", err)
		}
		t.Fatalf("no /dev/fuse in CI: %v", err)
	}
}

func newTestMount(t *testing.T, o mountOpts) *testMount {
	t.Helper()
	requireFUSE(t)
	cfg := engine.DefaultConfig()
	cfg.LingerMs = 1
	for k, v := range o.config {
		require.NoError(t, cfg.Set(k, v))
	}
	data := t.TempDir()
	mnt := t.TempDir()
	d, err := engine.OpenLogDir(vfs.OS, data, engine.LogDirOptions{Defaults: cfg, Overrides: o.overrides, ReadOnly: o.readOnly})
	require.NoError(t, err)
	fopts := Options{ReadOnly: o.readOnly, OpLatency: o.opLatency, indexEntries: o.indexes, NoPassthrough: o.noPass, Logger: o.logger}
	var sched *policies.Scheduler
	if o.scheduler {
		sched = policies.NewScheduler(d, policies.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		fopts.State = sched.Lookup
	}
	srv, err := Mount(mnt, d, fopts)
	if err != nil {
		d.Close()
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		var err error
		for i := 0; i < 50; i++ {
			if err = srv.Unmount(); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Errorf("unmount %s: %v; detaching", mnt, err)
			_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
		srv.Wait()
		if sched != nil {
			sched.Stop()
		}
		assert.NoError(t, d.Close())
	})
	return &testMount{mnt: mnt, data: data, d: d, sched: sched, srv: srv}
}

func (m *testMount) path(parts ...string) string {
	return filepath.Join(append([]string{m.mnt}, parts...)...)
}

// shErr runs script with bash -euo pipefail, $MNT set to the mount point.
func (m *testMount) shErr(script string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Env = append(os.Environ(), "MNT="+m.mnt, "LC_ALL=C")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

func (m *testMount) sh(t *testing.T, script string) string {
	t.Helper()
	out, errOut, err := m.shErr(script)
	require.NoError(t, err, "script: %s\nstdout: %s\nstderr: %s", script, out, errOut)
	return out
}

func (m *testMount) partition(t *testing.T, topic string, id int) *engine.Partition {
	t.Helper()
	tp, err := m.d.Topic(topic)
	require.NoError(t, err)
	p, err := tp.Partition(id)
	require.NoError(t, err)
	return p
}

func TestEchoThenCat(t *testing.T) {
	m := newTestMount(t, mountOpts{})
	m.sh(t, `mkdir $MNT/t`)
	assert.Equal(t, "append\nappend.jsonl\nby-key\nconfig\ncursors\nstats\n0\n", m.sh(t, `ls -1 -U $MNT/t`))
	m.sh(t, `echo hello > $MNT/t/0/append`)
	m.sh(t, `echo world >> $MNT/t/0/append`)
	m.sh(t, `echo topic-level > $MNT/t/append`)
	assert.Equal(t, "hello\nworld\ntopic-level\n", m.sh(t, `cat $MNT/t/0/records`))
	assert.Equal(t, "3\n", m.sh(t, `wc -l < $MNT/t/0/records`))
	assert.Equal(t, fmt.Sprint(len("hello\nworld\ntopic-level\n"))+"\n", m.sh(t, `stat -c %s $MNT/t/0/records`))
	// A final line without '\n' becomes a record at close.
	m.sh(t, `printf 'no newline' >> $MNT/t/0/append`)
	assert.Equal(t, "no newline\n", m.sh(t, `tail -n 1 $MNT/t/0/records`))
}

func TestSeqTailHeadByOffset(t *testing.T) {
	m := newTestMount(t, mountOpts{config: map[string]string{"segment.bytes": "16384"}})
	m.sh(t, `mkdir $MNT/s && seq 1 20000 > $MNT/s/0/append`)
	assert.Equal(t, "20000\n", m.sh(t, `wc -l < $MNT/s/0/records`))
	assert.Equal(t, "19998\n19999\n20000\n", m.sh(t, `tail -n 3 $MNT/s/0/records`))
	assert.Equal(t, "12346\n", m.sh(t, `head -n1 $MNT/s/0/by-offset/12345`))
	assert.Equal(t, "1\n", m.sh(t, `head -n1 $MNT/s/0/by-offset/0`))
	assert.Equal(t, "5000\n", m.sh(t, `wc -l < $MNT/s/0/by-offset/15000`))
	assert.Equal(t, "", m.sh(t, `cat $MNT/s/0/by-offset/20000`), "by-offset/<end> is an empty view")
	assert.Equal(t, "{\"offset\":19999,\n", m.sh(t, `tail -n1 $MNT/s/0/records.jsonl | cut -c1-16`))
	// Whole-file comparisons through different read paths.
	want := m.sh(t, `seq 1 20000`)
	assertSameText(t, want, m.sh(t, `cat $MNT/s/0/records`))
	assertSameText(t, want, m.sh(t, `dd if=$MNT/s/0/records bs=777 status=none`))
	assertSameText(t, want[len(want)-5000:], m.sh(t, fmt.Sprintf(`dd if=$MNT/s/0/records bs=1 skip=%d status=none`, len(want)-5000)))
	assert.Equal(t, "10000\n", m.sh(t, `grep -c . $MNT/s/0/by-offset/10000`))
	_, _, err := m.shErr(`cat $MNT/s/0/by-offset/20001`)
	assert.Error(t, err, "an offset past the end is ENOENT")
}

func TestByTime(t *testing.T) {
	m := newTestMount(t, mountOpts{})
	m.sh(t, `mkdir $MNT/bt`)
	now := time.Now().UnixMilli()
	old := now - 3*3600*1000 // three hours ago
	var lines strings.Builder
	for i := 0; i < 10; i++ {
		fmt.Fprintf(&lines, `{"value":"old-%d","timestamp":%d}`+"\n", i, old+int64(i))
	}
	for i := 0; i < 5; i++ {
		fmt.Fprintf(&lines, `{"value":"new-%d","timestamp":%d}`+"\n", i, now-60_000+int64(i))
	}
	require.NoError(t, os.WriteFile(m.path("bt", "0", "append.jsonl"), []byte(lines.String()), 0))
	rfc := time.UnixMilli(old + 7).UTC().Format(time.RFC3339Nano)
	tests := []struct {
		name string
		want string
	}{
		{fmt.Sprint(old + 3), "old-3"},
		{fmt.Sprint(old+3) + ".jsonl", `{"offset":3,`},
		{rfc, "old-7"},
		{"-2h", "new-0"},
		{"-90m", "new-0"},
		{"-1d", "old-0"},
		{"0", "old-0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := m.sh(t, fmt.Sprintf(`head -n1 "$MNT/bt/0/by-time/%s"`, tt.name))
			assert.True(t, strings.HasPrefix(out, tt.want), "by-time/%s starts with %q", tt.name, out)
		})
	}
	assert.Equal(t, "", m.sh(t, fmt.Sprintf(`cat $MNT/bt/0/by-time/%d`, now+3_600_000)), "a future time is an empty view")
	assert.Equal(t, "5\n", m.sh(t, `wc -l < $MNT/bt/0/by-time/-2h`))
}

func TestKeyedLinesAndTombstones(t *testing.T) {
	m := newTestMount(t, mountOpts{})
	m.sh(t, `mkdir $MNT/k && printf 'parse.key=true\nprint.key=true\n' > $MNT/k/config`)
	assert.Contains(t, m.sh(t, `cat $MNT/k/config`), "parse.key=true\n")
	m.sh(t, `printf 'k1\tv1\nk2\tv2\twith tab\nk1\t\n' >> $MNT/k/0/append`)
	assert.Equal(t, "k1\tv1\nk2\tv2\twith tab\nk1\t\n", m.sh(t, `cat $MNT/k/0/records`))
	js := m.sh(t, `cat $MNT/k/0/records.jsonl`)
	assert.Contains(t, js, `"key":"k1","value":null`, "k1<TAB> is a tombstone")
	m.sh(t, `echo 'null.marker=NULL' > $MNT/k/config`)
	assert.Equal(t, "k1\tv1\nk2\tv2\twith tab\nk1\tNULL\n", m.sh(t, `cat $MNT/k/0/records`))
	m.sh(t, `printf 'k3\tNULL\n' >> $MNT/k/0/append`)
	assert.Contains(t, m.sh(t, `tail -n1 $MNT/k/0/records.jsonl`), `"key":"k3","value":null`)
	_, errOut, err := m.shErr(`echo 'no separator' >> $MNT/k/0/append`)
	require.Error(t, err)
	assert.Contains(t, errOut, "Invalid argument")
}

func TestTopicLevelPartitioning(t *testing.T) {
	m := newTestMount(t, mountOpts{config: map[string]string{"num.partitions": "3", "parse.key": "true"}})
	m.sh(t, `mkdir $MNT/p && ls $MNT/p/2 >/dev/null`)
	var in strings.Builder
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&in, "key-%d\tv%d\n", i%30, i)
	}
	require.NoError(t, os.WriteFile(m.path("p", "append"), []byte(in.String()), 0))
	total := 0
	for id := 0; id < 3; id++ {
		recs := m.sh(t, fmt.Sprintf(`cat $MNT/p/%d/records.jsonl`, id))
		for _, line := range strings.Split(strings.TrimSpace(recs), "\n") {
			if line == "" {
				continue
			}
			r, err := parseJSONLine([]byte(line))
			require.NoError(t, err)
			assert.Equal(t, id, partitionForKey(r.Key, 3), "key %q is in partition %d", r.Key, id)
			total++
		}
	}
	assert.Equal(t, 300, total)
	// Keyless records spread over the partitions, batch by batch.
	m.sh(t, `echo 'parse.key=false' > $MNT/p/config; for i in $(seq 1 30); do echo "free-$i" > $MNT/p/append; done`)
	used := 0
	for id := 0; id < 3; id++ {
		if strings.Contains(m.sh(t, fmt.Sprintf(`cat $MNT/p/%d/records`, id)), "free-") {
			used++
		}
	}
	assert.Equal(t, 3, used, "keyless records go round robin")
	// Growing the topic from the shell.
	m.sh(t, `mkdir $MNT/p/3 && echo 'num.partitions=5' > $MNT/p/config`)
	assert.Equal(t, "0\n1\n2\n3\n4\n", m.sh(t, `ls $MNT/p | grep -E '^[0-9]+$' | sort -n`))
	assert.Contains(t, m.sh(t, `cat $MNT/p/config`), "num.partitions=5\n")
	_, errOut, err := m.shErr(`mkdir $MNT/p/9`)
	require.Error(t, err)
	assert.Contains(t, errOut, "Invalid argument")
}

// TestMkdirUsesTopicPartitionCount: mkdir creates a topic with its
// effective num.partitions in one step, overrides included.
func TestMkdirUsesTopicPartitionCount(t *testing.T) {
	m := newTestMount(t, mountOpts{
		config:    map[string]string{"num.partitions": "2"},
		overrides: map[string]map[string]string{"wide": {"num.partitions": "3"}},
	})
	out := m.sh(t, `mkdir $MNT/wide $MNT/plain && ls $MNT/wide && echo -- && ls $MNT/plain`)
	assert.Equal(t, "0\n1\n2\nappend\nappend.jsonl\nby-key\nconfig\ncursors\nstats\n--\n0\n1\nappend\nappend.jsonl\nby-key\nconfig\ncursors\nstats\n", out)
	for name, n := range map[string]int{"wide": 3, "plain": 2} {
		tp, err := m.d.Topic(name)
		require.NoError(t, err)
		assert.Len(t, tp.Partitions(), n, name)
	}
	_, err := os.Stat(filepath.Join(m.data, engine.CreatingTopicFile))
	assert.ErrorIs(t, err, os.ErrNotExist, "no creation marker left behind")
}

// TestCompactedTopicNeedsKeys: like Kafka, a compacted topic refuses a
// record without a key, at write() with EINVAL, applying nothing of that
// write; keyed records (and keyed tombstones) still go in.
func TestCompactedTopicNeedsKeys(t *testing.T) {
	m := newTestMount(t, mountOpts{
		config:    map[string]string{"num.partitions": "2"},
		overrides: map[string]map[string]string{"compacted": {"cleanup.policy": "compact"}},
	})
	m.sh(t, `mkdir $MNT/compacted $MNT/plain`)
	refused := func(script string) {
		t.Helper()
		_, errOut, err := m.shErr(script)
		var ee *exec.ExitError
		require.ErrorAs(t, err, &ee, script)
		assert.Equal(t, 1, ee.ExitCode(), script)
		assert.Contains(t, errOut, "Invalid argument", script)
	}
	// Without parse.key a plain line is a value with a null key.
	refused(`echo novalue >> $MNT/compacted/0/append`)
	refused(`echo novalue >> $MNT/compacted/append`)
	refused(`echo '{"value":"v"}' >> $MNT/compacted/0/append.jsonl`)
	refused(`echo '{"key":null,"value":"v"}' >> $MNT/compacted/append.jsonl`)
	m.sh(t, `echo 'parse.key=true' > $MNT/compacted/config`)
	refused(`printf '\tv\n' >> $MNT/compacted/0/append`) // null.marker is empty: an empty key is null
	m.sh(t, `echo 'null.marker=NULLKEY' > $MNT/compacted/config`)
	refused(`echo 'NULLKEY	v' >> $MNT/compacted/1/append`)

	// One write with a keyed line and a keyless one: none of it is applied.
	writeOnce := func(path, data string) (werr, cerr error) {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		require.NoError(t, err)
		_, werr = f.WriteString(data)
		return werr, f.Close()
	}
	werr, cerr := writeOnce(m.path("compacted", "0", "append"), "k0\tok\nNULLKEY\tv\n")
	assert.ErrorIs(t, werr, syscall.EINVAL)
	assert.NoError(t, cerr)
	// A final unterminated keyless line is refused at close (bash ignores
	// close errors, so check close(2) itself).
	werr, cerr = writeOnce(m.path("compacted", "1", "append.jsonl"), `{"value":"v"}`)
	assert.NoError(t, werr, "a line is judged once complete")
	assert.ErrorIs(t, cerr, syscall.EINVAL)
	for id := range 2 {
		assert.EqualValues(t, 0, m.partition(t, "compacted", id).LogEndOffset(), "nothing of a refused write is applied: %s", m.sh(t, fmt.Sprintf("cat $MNT/compacted/%d/records.jsonl", id)))
	}

	// Keyed records, and keyed tombstones, go in.
	m.sh(t, `printf 'k1\tv1\nk2\tv2\nk1\tNULLKEY\n' >> $MNT/compacted/0/append`)
	m.sh(t, `echo '{"key":"k3","value":"v3"}' >> $MNT/compacted/append.jsonl`)
	m.sh(t, `printf 'k4\tv4' >> $MNT/compacted/1/append`)
	js := m.sh(t, `cat $MNT/compacted/0/records.jsonl`)
	assert.Contains(t, js, `"key":"k1","value":"v1"`)
	assert.Contains(t, js, `"key":"k1","value":null`, "a keyed tombstone is fine")
	total := m.partition(t, "compacted", 0).LogEndOffset() + m.partition(t, "compacted", 1).LogEndOffset()
	assert.EqualValues(t, 5, total)

	// Only compacted topics need keys: a delete topic takes keyless records,
	// and so does a compacted one switched to delete at run time;
	// compact,delete needs them again.
	m.sh(t, `echo novalue >> $MNT/plain/0/append`)
	m.sh(t, `printf 'parse.key=false\ncleanup.policy=delete\n' > $MNT/compacted/config && echo novalue >> $MNT/compacted/0/append`)
	refused(`echo 'cleanup.policy=compact,delete' > $MNT/compacted/config && echo novalue >> $MNT/compacted/0/append`)
	assert.EqualValues(t, 6, m.partition(t, "compacted", 0).LogEndOffset()+m.partition(t, "compacted", 1).LogEndOffset())
}

func TestJSONRoundTrip(t *testing.T) {
	m := newTestMount(t, mountOpts{})
	m.sh(t, `mkdir $MNT/a $MNT/b`)
	lines := strings.Join([]string{
		`{"key":"k","value":"plain","headers":{"h1":"x","h2":null}}`,
		`{"key":null,"value":"multi\nline\nvalue"}`,
		`{"key":"AP8=","key_encoding":"base64","value":"/w==","value_encoding":"base64","headers":[{"key":"d","value":"1"},{"key":"d","value":"AA==","value_encoding":"base64"}]}`,
		`{"key":"tomb","value":null,"timestamp":1700000000000}`,
		`{"key":"","value":"","timestamp":"2023-11-14T22:13:20Z"}`,
		`{"value":"unicode é ✓ \u0001"}`,
	}, "\n") + "\n"
	require.NoError(t, os.WriteFile(m.path("a", "0", "append.jsonl"), []byte(lines), 0))
	m.sh(t, `cat $MNT/a/0/records.jsonl > $MNT/b/0/append.jsonl`)
	a := m.sh(t, `cat $MNT/a/0/records.jsonl`)
	b := m.sh(t, `cat $MNT/b/0/records.jsonl`)
	assertSameText(t, a, b, "records.jsonl written to append.jsonl appends the same records")
	assert.Equal(t, 6, strings.Count(a, "\n"))
	assert.Contains(t, a, `"value":"multi\nline\nvalue"`)
	assert.Contains(t, a, `"key":"AP8=","key_encoding":"base64"`)
}

func TestErrnos(t *testing.T) {
	m := newTestMount(t, mountOpts{config: map[string]string{"max.message.bytes": "1024"}})
	m.sh(t, `mkdir $MNT/e && echo one > $MNT/e/0/append`)
	big := strings.Repeat("B", 2000)
	tests := []struct {
		name   string
		script string
		want   string
	}{
		{"unknown topic", `cat $MNT/nosuch/0/records`, "No such file or directory"},
		{"unknown partition", `cat $MNT/e/5/records`, "No such file or directory"},
		{"bad by-offset name", `cat $MNT/e/0/by-offset/x12`, "No such file or directory"},
		{"bad by-time name", `cat $MNT/e/0/by-time/noon`, "No such file or directory"},
		{"offset past the end", `cat $MNT/e/0/by-offset/99`, "No such file or directory"},
		{"write to a view", `echo x >> $MNT/e/0/records`, "Permission denied"},
		{"write to stats", `echo x > $MNT/e/0/stats`, "Permission denied"},
		{"read an append file", `cat $MNT/e/0/append`, "Permission denied"},
		{"record too large", `echo ` + big + ` >> $MNT/e/0/append`, "Message too long"},
		{"unterminated too large", `printf ` + big + ` >> $MNT/e/0/append`, "Message too long"},
		{"malformed json", `echo '{"value":' >> $MNT/e/0/append.jsonl`, "Invalid argument"},
		{"bad config value", `echo 'retention.ms=soon' > $MNT/e/config`, "Invalid argument"},
		{"unknown config", `echo 'no.such=1' > $MNT/e/config`, "Invalid argument"},
		{"bad topic name", `mkdir "$MNT/bad name"`, "Invalid argument"},
		{"topic exists", `mkdir $MNT/e`, "File exists"},
		{"rm a view", `rm -f $MNT/e/0/records`, "Operation not permitted"},
		{"rmdir a partition", `rmdir $MNT/e/0`, "Operation not permitted"},
		{"mv a view", `mv $MNT/e/0/records $MNT/e/0/r2`, "Operation not permitted"},
		{"create a file", `touch $MNT/e/0/newfile`, "Operation not permitted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errOut, err := m.shErr(tt.script)
			var ee *exec.ExitError
			require.True(t, errors.As(err, &ee), "the script must fail: %v", err)
			assert.NotEqual(t, 0, ee.ExitCode())
			assert.Contains(t, errOut, tt.want)
		})
	}
	assert.Equal(t, "one\n", m.sh(t, `cat $MNT/e/0/records`), "nothing of the refused writes was applied")
	assert.Equal(t, "append\nappend.jsonl\nby-offset\nby-time\ncursors\nrecords\nrecords.jsonl\nsegments\nstats\n", m.sh(t, `ls $MNT/e/0`))
	assert.NotContains(t, m.sh(t, `cat $MNT/e/config`), "retention.ms=soon")
}

func TestModes(t *testing.T) {
	m := newTestMount(t, mountOpts{})
	m.sh(t, `mkdir $MNT/m && echo x > $MNT/m/0/append`)
	out := m.sh(t, `cd $MNT/m && stat -c '%n %A' append config 0 0/records 0/append 0/stats 0/segments 0/by-offset/0`)
	assert.Equal(t, "append --w-------\nconfig -rw-r--r--\n0 drwxr-xr-x\n0/records -r--r--r--\n0/append --w-------\n0/stats -r--r--r--\n0/segments drwxr-xr-x\n0/by-offset/0 -r--r--r--\n", out)
}

func TestReadOnlyMount(t *testing.T) {
	requireFUSE(t)
	data := t.TempDir()
	cfg := engine.DefaultConfig()
	d, err := engine.OpenLogDir(vfs.OS, data, engine.LogDirOptions{Defaults: cfg})
	require.NoError(t, err)
	tp, err := d.CreateTopic("ro", 1)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	_, _, err = p.Append(testRecords("a", "b"))
	require.NoError(t, err)
	require.NoError(t, d.Close())

	m := newTestMountAt(t, data, true)
	assert.Equal(t, "a\nb\n", m.sh(t, `cat $MNT/ro/0/records`))
	for _, script := range []string{`echo x >> $MNT/ro/0/append`, `echo retention.ms=1 > $MNT/ro/config`, `mkdir $MNT/new`, `rmdir $MNT/ro`} {
		_, errOut, err := m.shErr(script)
		require.Error(t, err, script)
		assert.Contains(t, errOut, "Read-only file system", script)
	}
	assert.Equal(t, "append ---------- config -r--r--r-- 0/records -r--r--r--\n",
		m.sh(t, `cd $MNT/ro && echo $(stat -c '%n %A' append config 0/records)`))
}

func TestRmdirDeletesTopicAndRecreateGetsNewInodes(t *testing.T) {
	m := newTestMount(t, mountOpts{})
	m.sh(t, `mkdir $MNT/gone && echo x > $MNT/gone/0/append`)
	ino1 := m.sh(t, `stat -c %i $MNT/gone/0/records`)
	m.sh(t, `rmdir $MNT/gone`)
	assert.Equal(t, "", m.sh(t, `ls $MNT`))
	m.sh(t, `mkdir $MNT/gone`)
	assert.Equal(t, "", m.sh(t, `cat $MNT/gone/0/records`))
	assert.NotEqual(t, ino1, m.sh(t, `stat -c %i $MNT/gone/0/records`))
	// rmdir refuses while a writer is open.
	_, errOut, err := m.shErr(`exec 3>>$MNT/gone/0/append; echo a >&3; rmdir $MNT/gone; echo b >&3`)
	require.Error(t, err)
	assert.Contains(t, errOut, "Device or resource busy")
	assert.Equal(t, "a\n", m.sh(t, `cat $MNT/gone/0/records`))
}

func TestStableInodes(t *testing.T) {
	m := newTestMount(t, mountOpts{})
	m.sh(t, `mkdir $MNT/i && echo x > $MNT/i/0/append`)
	script := `stat -c %i $MNT/i $MNT/i/0 $MNT/i/0/records $MNT/i/0/records.jsonl $MNT/i/0/by-offset/0 $MNT/i/0/segments/00000000000000000000.log`
	before := m.sh(t, script)
	fields := strings.Fields(before)
	seen := map[string]bool{}
	for _, f := range fields {
		assert.False(t, seen[f], "inode %s used twice", f)
		assert.NotEqual(t, "0", f)
		seen[f] = true
	}
	dropCaches(t)
	assert.Equal(t, before, m.sh(t, script), "inode numbers survive the kernel forgetting the inodes")
}

// dropCaches makes the kernel forget cached dentries and inodes.
func dropCaches(t *testing.T) {
	t.Helper()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0); err != nil {
		t.Logf("drop_caches: %v (continuing)", err)
	}
}

func TestRefusalsChangeNothing(t *testing.T) {
	m := newTestMount(t, mountOpts{})
	m.sh(t, `mkdir $MNT/r && echo x > $MNT/r/0/append`)
	before := m.sh(t, `ls -R $MNT/r | grep -v '^$'`)
	for _, script := range []string{
		`rm $MNT/r/0/records`, `rm -f $MNT/r/append`, `rm $MNT/r/config`, `rmdir $MNT/r/0/segments`,
		`rmdir $MNT/r/0`, `rm -rf $MNT/r/0/by-offset`, `mv $MNT/r/0/records $MNT/r/0/x`,
		`mv $MNT/r/0 $MNT/r/9`, `mv $MNT/r $MNT/r2`, `rm $MNT/r/0/segments/00000000000000000000.log`,
		`ln -s x $MNT/r/0/link`, `mkdir $MNT/r/0/dir`,
	} {
		_, errOut, err := m.shErr(script)
		require.Error(t, err, script)
		assert.True(t, strings.Contains(errOut, "Operation not permitted") || strings.Contains(errOut, "Invalid argument"), "%s: %s", script, errOut)
	}
	assert.Equal(t, before, m.sh(t, `ls -R $MNT/r | grep -v '^$'`))
	assert.Equal(t, "x\n", m.sh(t, `cat $MNT/r/0/records`))
}

func TestStatsAndSegments(t *testing.T) {
	m := newTestMount(t, mountOpts{config: map[string]string{"segment.bytes": "4096"}})
	m.sh(t, `mkdir $MNT/st && seq 1 3000 > $MNT/st/0/append`)
	stats := m.sh(t, `cat $MNT/st/0/stats`)
	for _, field := range []string{`"topic": "st"`, `"partition": 0`, `"log_start_offset": 0`, `"log_end_offset": 3000`, `"segment_count"`, `"first_timestamp"`, `"last_timestamp"`, `"recovery_point"`, `"size_bytes"`} {
		assert.Contains(t, stats, field)
	}
	logs := m.sh(t, `ls $MNT/st/0/segments | grep -c '\.log$'`)
	assert.NotEqual(t, "1\n", logs, "several segments")
	// segments/ is the partition directory, byte for byte.
	p := m.partition(t, "st", 0)
	want, err := os.ReadFile(filepath.Join(p.Dir(), "00000000000000000000.log"))
	require.NoError(t, err)
	got, err := os.ReadFile(m.path("st", "0", "segments", "00000000000000000000.log"))
	require.NoError(t, err)
	assert.True(t, bytes.Equal(want, got), "segments/ serves the file's bytes (%d vs %d bytes)", len(want), len(got))
}

// snakeKeys collects every object key of a decoded JSON value, with its path.
func snakeKeys(v any, path string, out map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, c := range v {
			out[path+"."+k] = k
			snakeKeys(c, path+"."+k, out)
		}
	case []any:
		for _, c := range v {
			snakeKeys(c, path+"[]", out)
		}
	}
}

// TestStatsFields: stats has every field README.md names, snake_case keys
// at every depth, the same top-level keys whatever the state, and cleaner and
// retention state also when no scheduler runs (read-only mounts).
func TestStatsFields(t *testing.T) {
	top := []string{"topic", "partition", "log_start_offset", "log_end_offset", "last_stable_offset", "size_bytes", "segment_count",
		"first_timestamp", "last_timestamp", "recovery_point", "active_segment", "counters", "last_roll_reason", "last_roll_time",
		"policies", "explanations", "cursors", "key_index"}
	snake := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	check := func(t *testing.T, raw string) map[string]any {
		t.Helper()
		var st map[string]any
		require.NoError(t, json.Unmarshal([]byte(raw), &st), raw)
		var got []string
		for k := range st {
			got = append(got, k)
		}
		assert.ElementsMatch(t, top, got, "top-level keys")
		keys := map[string]string{}
		snakeKeys(st, "", keys)
		for path, k := range keys {
			assert.Regexp(t, snake, k, "key %s is snake_case", path)
		}
		pol, ok := st["policies"].(map[string]any)
		require.True(t, ok, "policies is an object: %s", raw)
		for _, k := range []string{"cleanup_policy", "dirty_ratio", "min_cleanable_dirty_ratio", "first_dirty_offset", "why_oldest_segment_kept", "why_cleaned_or_not", "explanations"} {
			assert.Contains(t, pol, k, "policies.%s", k)
		}
		assert.NotEmpty(t, st["explanations"], "plain-words answers")
		return st
	}

	t.Run("scheduler", func(t *testing.T) {
		m := newTestMount(t, mountOpts{scheduler: true, config: map[string]string{"segment.bytes": "1024"},
			overrides: map[string]map[string]string{"c": {"cleanup.policy": "compact", "parse.key": "true", "min.cleanable.dirty.ratio": "0.01"}}})
		m.sh(t, `mkdir $MNT/empty $MNT/c && for i in $(seq 1 200); do printf 'k%d\tv%d\n' $((i % 5)) $i; done > $MNT/c/0/append`)
		empty := check(t, m.sh(t, `cat $MNT/empty/0/stats`))
		assert.EqualValues(t, -1, empty["first_timestamp"])
		assert.EqualValues(t, 0, empty["log_end_offset"])
		assert.Equal(t, "", empty["last_roll_reason"], "no roll yet")
		assert.Nil(t, empty["last_roll_time"])
		runs, err := m.sched.RunCleaner()
		require.NoError(t, err)
		require.NotEmpty(t, runs, "the compacted partition was cleaned")
		st := check(t, m.sh(t, `cat $MNT/c/0/stats`))
		assert.EqualValues(t, 200, st["log_end_offset"])
		assert.Greater(t, st["segment_count"], 1.0)
		assert.Equal(t, "size", st["last_roll_reason"], "segment.bytes rolled the segments")
		assert.NotNil(t, st["last_roll_time"])
		assert.Greater(t, st["size_bytes"], 0.0)
		assert.Greater(t, st["first_timestamp"], 0.0)
		assert.GreaterOrEqual(t, st["last_timestamp"], st["first_timestamp"])
		pol := st["policies"].(map[string]any)
		assert.Equal(t, "compact", pol["cleanup_policy"])
		assert.Contains(t, pol, "last_cleaning", "the cleaning run is reported")
	})
	t.Run("read-only", func(t *testing.T) {
		data := t.TempDir()
		d, err := engine.OpenLogDir(vfs.OS, data, engine.LogDirOptions{})
		require.NoError(t, err)
		tp, err := d.CreateTopic("r", 1)
		require.NoError(t, err)
		p, err := tp.Partition(0)
		require.NoError(t, err)
		_, _, err = p.Append([]record.Record{{Timestamp: 1000, Value: []byte("a")}, {Timestamp: 2000, Value: []byte("b")}})
		require.NoError(t, err)
		require.NoError(t, d.Close())
		m := newTestMountAt(t, data, true)
		st := check(t, m.sh(t, `cat $MNT/r/0/stats`))
		assert.EqualValues(t, 1000, st["first_timestamp"])
		assert.EqualValues(t, 2000, st["last_timestamp"])
		assert.EqualValues(t, 2, st["log_end_offset"])
		assert.Contains(t, st["explanations"], "read-only mount: retention and log cleaning do not run, so no segment is deleted or compacted")
	})
}

// newTestMountAt mounts an existing data directory.
func newTestMountAt(t *testing.T, data string, readOnly bool) *testMount {
	t.Helper()
	return newTestMountWith(t, data, Options{ReadOnly: readOnly})
}

// newTestMountWith mounts data with opts.
func newTestMountWith(t *testing.T, data string, opts Options) *testMount {
	t.Helper()
	requireFUSE(t)
	d, err := engine.OpenLogDir(vfs.OS, data, engine.LogDirOptions{Defaults: engine.DefaultConfig(), ReadOnly: opts.ReadOnly})
	require.NoError(t, err)
	mnt := t.TempDir()
	srv, err := Mount(mnt, d, opts)
	require.NoError(t, err)
	var once sync.Once
	m := &testMount{mnt: mnt, data: data, d: d}
	m.unmount = func() {
		once.Do(func() {
			if err := srv.Unmount(); err != nil {
				_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
			}
			srv.Wait()
			d.Close()
		})
	}
	t.Cleanup(m.unmount)
	return m
}

// assertSameText compares long texts without printing them whole: on a
// mismatch it reports the lengths and a window around the first difference.
func assertSameText(t *testing.T, want, got string, msgAndArgs ...any) bool {
	t.Helper()
	if want == got {
		return true
	}
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	lo := max(i-80, 0)
	return assert.Fail(t, fmt.Sprintf("texts differ at byte %d (want %d bytes, got %d)\nwant …%q…\ngot  …%q…",
		i, len(want), len(got), want[lo:min(i+80, len(want))], got[lo:min(i+80, len(got))]), msgAndArgs...)
}

func TestOpLatencyHook(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	m := newTestMount(t, mountOpts{opLatency: func(op string, d time.Duration) {
		mu.Lock()
		seen[op]++
		mu.Unlock()
	}})
	m.sh(t, `mkdir $MNT/o && echo x > $MNT/o/0/append && cat $MNT/o/0/records >/dev/null && ls $MNT/o >/dev/null`)
	mu.Lock()
	defer mu.Unlock()
	for _, op := range []string{"mkdir", "lookup", "open", "write", "flush", "read", "readdir", "getattr"} {
		assert.Positive(t, seen[op], "op %s observed", op)
	}
}

// TestRmdirAfterCloseWaitsForRelease: the kernel sends RELEASE after
// close(2) returns, so a script's rmdir can arrive while the handle it just
// closed is still counted; rmdir waits for it instead of answering EBUSY.
func TestRmdirAfterCloseWaitsForRelease(t *testing.T) {
	m := newTestMount(t, mountOpts{})
	m.sh(t, `for i in $(seq 30); do mkdir $MNT/t && echo x > $MNT/t/0/append && echo retention.ms=86400000 > $MNT/t/config && rmdir $MNT/t || exit 1; done`)
	assert.Equal(t, "", m.sh(t, `ls $MNT`))
}

func TestDeleteTopicWaitsForWriters(t *testing.T) {
	d, err := engine.OpenLogDir(vfs.OS, t.TempDir(), engine.LogDirOptions{Defaults: engine.DefaultConfig()})
	require.NoError(t, err)
	defer d.Close()
	_, err = d.CreateTopic("w", 1)
	require.NoError(t, err)
	f := newFsys(local.New(d), Options{})

	// A handle released while rmdir waits: the topic is deleted.
	f.addWriter("w", 1)
	f.addWriter("other", 1)
	done := make(chan syscall.Errno)
	go func() { done <- f.deleteTopic(context.Background(), "w") }()
	f.addWriter("other", -1) // another topic's release wakes it, it waits on
	select {
	case errno := <-done:
		t.Fatalf("deleteTopic returned %v with a writer open", errno)
	case <-time.After(50 * time.Millisecond):
	}
	f.addWriter("w", -1)
	require.Equal(t, syscall.Errno(0), <-done)
	_, err = d.Topic("w")
	require.Error(t, err, "topic deleted")

	// A handle that stays open: EBUSY, and the topic is kept.
	_, err = d.CreateTopic("w", 1)
	require.NoError(t, err)
	f.addWriter("w", 1)
	assert.Equal(t, syscall.EBUSY, f.deleteTopic(context.Background(), "w"))
	_, err = d.Topic("w")
	require.NoError(t, err)

	// An interrupted rmdir: EINTR, the topic kept.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- f.deleteTopic(ctx, "w") }()
	cancel()
	assert.Equal(t, syscall.EINTR, <-done)
	_, err = d.Topic("w")
	require.NoError(t, err)
}

// TestTopicStats: a topic's stats file sums its partitions and lists each
// partition's bounds and size as the partition's own stats file has them.
func TestTopicStats(t *testing.T) {
	m := newTestMount(t, mountOpts{config: map[string]string{"num.partitions": "3"}})
	m.sh(t, `mkdir $MNT/s && seq 1 5 > $MNT/s/0/append && seq 1 7 > $MNT/s/2/append`)
	out := m.sh(t, `jq -c '[.topic, .partitions, .offsets, [.by_partition[] | .log_end_offset]]' $MNT/s/stats`)
	assert.Equal(t, `["s",3,12,[5,0,7]]`+"\n", out)
	sum := m.sh(t, `for p in 0 1 2; do jq .size_bytes $MNT/s/$p/stats; done | jq -s add; jq .size_bytes $MNT/s/stats`)
	lines := strings.Fields(sum)
	require.Len(t, lines, 2)
	assert.Equal(t, lines[0], lines[1], "the topic's size is its partitions' sizes summed")
	assert.NotEqual(t, "0", lines[1])
	assert.Contains(t, m.sh(t, `{ echo x > $MNT/s/stats; } 2>&1 || true`), "Permission denied")
}
