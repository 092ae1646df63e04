package tests

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireOneLineError checks that a failed command said what went wrong in
// one line, prefixed by the command, and printed no stack trace.
func requireOneLineError(t *testing.T, stderr, prefix string, contains ...string) {
	t.Helper()
	msg := strings.TrimRight(stderr, "\n")
	assert.NotContains(t, msg, "goroutine ", "stack trace in stderr")
	assert.NotContains(t, msg, "panic", "panic in stderr")
	require.Equal(t, 0, strings.Count(msg, "\n"), "want exactly one line on stderr, got:\n%s", stderr)
	assert.True(t, strings.HasPrefix(msg, prefix), "stderr %q should start with %q", msg, prefix)
	for _, c := range contains {
		assert.Contains(t, msg, c)
	}
}

func TestCLIHelp(t *testing.T) {
	out, errOut, code := runTopicfs(t, nil, "help")
	require.Equal(t, 0, code, errOut)
	for _, c := range []string{"mount", "dump", "check", "help"} {
		assert.Regexp(t, `(?m)^  `+c+` `, out, "help lists %s", c)
	}

	for _, args := range [][]string{{"help", "mount"}, {"mount", "--help"}, {"mount", "-h"}} {
		out, errOut, code := runTopicfs(t, nil, args...)
		require.Equal(t, 0, code, "%v: %s", args, errOut)
		assert.Contains(t, out, "Usage: topicfs mount")
		for _, f := range []string{"--config FILE", "--data DIR", "--read-only", "--log-level LEVEL", "--log-format FORMAT", "--metrics-addr ADDR", "--pprof", "--umask MASK"} {
			assert.Contains(t, out, "\n  "+f+"\n      ", "%v explains %s", args, f)
		}
	}

	_, errOut, code = runTopicfs(t, nil, "frobnicate")
	assert.Equal(t, 2, code)
	requireOneLineError(t, errOut, "topicfs: unknown command", `"frobnicate"`)

	_, errOut, code = runTopicfs(t, nil, "mount", "--no-such-flag", "x")
	assert.Equal(t, 2, code)
	requireOneLineError(t, errOut, "topicfs mount:", "no-such-flag")
}

// TestMountStartupErrors covers failures found before anything is mounted:
// each is one clear line and exit code 1 (2 for usage errors).
func TestMountStartupErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plain-file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	mnt := filepath.Join(dir, "mnt")
	require.NoError(t, os.Mkdir(mnt, 0o755))
	data := filepath.Join(dir, "data")
	writeConfig := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
		return p
	}

	tests := []struct {
		name     string
		args     []string
		code     int
		contains []string
	}{
		{"no mountpoint", []string{"mount", "--data", data}, 2, []string{"missing MOUNTPOINT"}},
		{"two mountpoints", []string{"mount", "--data", data, mnt, mnt}, 2, []string{"one MOUNTPOINT"}},
		{"missing mountpoint and parent", []string{"mount", "--data", data, filepath.Join(dir, "nope", "deeper")}, 1, []string{"does not exist, nor does its parent", "mkdir -p"}},
		{"mountpoint is a file", []string{"mount", "--data", data, file}, 1, []string{"is not a directory"}},
		{"missing config", []string{"mount", "--config", filepath.Join(dir, "nope.toml"), "--data", data, mnt}, 1, []string{"cannot read config", "no such file"}},
		{"config syntax", []string{"mount", "--config", writeConfig("syntax.toml", "\"segment.bytes\" = \n"), "--data", data, mnt}, 1, []string{"syntax.toml", "line 1"}},
		{"unknown key", []string{"mount", "--config", writeConfig("unknown.toml", "\"segment.bites\" = 1\n"), "--data", data, mnt}, 1, []string{"unknown.toml", `unknown setting "segment.bites"`}},
		{"invalid value", []string{"mount", "--config", writeConfig("value.toml", "[segment]\nbytes = \"lots\"\n"), "--data", data, mnt}, 1, []string{"value.toml", `segment.bytes="lots"`, "not an integer"}},
		{"invalid topic override", []string{"mount", "--config", writeConfig("topic.toml", "[topics.orders]\n\"retention.ms\" = \"soon\"\n"), "--data", data, mnt}, 1, []string{"[topics.orders]", `retention.ms="soon"`}},
		{"mount-wide key in a topic", []string{"mount", "--config", writeConfig("wide.toml", "[topics.orders]\n\"log.cleaner.threads\" = 2\n"), "--data", data, mnt}, 1, []string{"mount-wide"}},
		{"invalid topic name", []string{"mount", "--config", writeConfig("name.toml", "[topics.\"a b\"]\n\"retention.ms\" = 1\n"), "--data", data, mnt}, 1, []string{"[topics.a b]"}},
		{"bad log level", []string{"mount", "--log-level", "loud", "--data", data, mnt}, 2, []string{"--log-level"}},
		{"data inside mountpoint", []string{"mount", "--data", filepath.Join(mnt, "data"), mnt}, 1, []string{"inside the mountpoint"}},
		{"read-only without data", []string{"mount", "--read-only", "--data", filepath.Join(dir, "none"), mnt}, 1, []string{"does not exist"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errOut, code := runTopicfs(t, nil, tt.args...)
			assert.Equal(t, tt.code, code, "stderr: %s", errOut)
			requireOneLineError(t, errOut, "topicfs mount: ", tt.contains...)
			assert.False(t, isMounted(mnt))
		})
	}
}

// TestMountFailureRemovesCreatedMountpoint: a mountpoint created by a start
// that then fails is removed again.
func TestMountFailureRemovesCreatedMountpoint(t *testing.T) {
	dir := t.TempDir()
	mnt := filepath.Join(dir, "new-mnt")
	_, errOut, code := runTopicfs(t, nil, "mount", "--read-only", "--data", filepath.Join(dir, "no-data"), mnt)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "topicfs: created mountpoint "+mnt+"\n")
	assert.Contains(t, errOut, "topicfs mount: data directory")
	assert.NoDirExists(t, mnt)
}

// TestMountDataInsideAnotherMount: --data inside a running topicfs mount
// is refused with a message naming that mount (it used to fail with "open
// .../.lock: operation not permitted"), and the mountpoint this start
// created is removed again.
func TestMountDataInsideAnotherMount(t *testing.T) {
	a := startMount(t, mountOpts{})
	mnt := filepath.Join(t.TempDir(), "new-mnt")
	data := filepath.Join(a.Dir, "data")
	_, errOut, code := runTopicfs(t, nil, "mount", "--data", data, mnt)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "topicfs mount: data directory "+data+" is inside the topicfs mount at "+a.Dir+";")
	assert.NoDirExists(t, mnt)
	assert.False(t, isMounted(mnt))
	a.Sh(t, `mkdir "$MNT/still-works"`)
}

func TestMountStopAndRemountKeepsRecords(t *testing.T) {
	m := startMount(t, mountOpts{})
	assert.Contains(t, m.Stderr(), "topicfs: mounted "+m.Dir+" (data "+m.Data+")")
	m.Sh(t, `mkdir "$MNT/orders" && printf 'one\ntwo\nthree\n' > "$MNT/orders/append"`)
	require.Equal(t, "one\ntwo\nthree\n", m.Sh(t, `cat "$MNT/orders/0/records"`))
	m.Stop()
	assert.Contains(t, m.Stderr(), "topicfs: unmounted "+m.Dir)
	assert.False(t, isMounted(m.Dir))
	assert.DirExists(t, filepath.Join(m.Data, "orders-0"), "Kafka layout: <topic>-<partition>")
	sizes, err := os.ReadFile(filepath.Join(m.Data, "topicfs-view-sizes"))
	require.NoError(t, err, "the measured view sizes are saved at unmount")
	assert.Contains(t, string(sizes), "orders-0/00000000000000000000.log")

	m.Remount()
	assert.Equal(t, "one\ntwo\nthree\n", m.Sh(t, `cat "$MNT/orders/0/records"`))
	assert.Equal(t, "14\n", m.Sh(t, `stat -c %s "$MNT/orders/0/records"`))
}

// TestMountCreatesMountpoint: `topicfs mount ./topics` works in a fresh
// checkout (the README's first command), creating ./topics like mount --mkdir.
func TestMountCreatesMountpoint(t *testing.T) {
	mnt := filepath.Join(t.TempDir(), "topics")
	m := startMount(t, mountOpts{Dir: mnt})
	assert.Contains(t, m.Stderr(), "topicfs: created mountpoint "+mnt)
	assert.True(t, isMounted(mnt))
}

func TestMountDataDirLocked(t *testing.T) {
	a := startMount(t, mountOpts{})
	other := t.TempDir()
	_, errOut, code := runTopicfs(t, nil, "mount", "--data", a.Data, other)
	assert.Equal(t, 1, code)
	requireOneLineError(t, errOut, "topicfs mount: ", "data directory "+a.Data, "in use")
	assert.False(t, isMounted(other))
	assert.True(t, a.Running())
}

func TestMountAlreadyMounted(t *testing.T) {
	a := startMount(t, mountOpts{})
	_, errOut, code := runTopicfs(t, nil, "mount", "--data", t.TempDir(), a.Dir)
	assert.Equal(t, 1, code)
	requireOneLineError(t, errOut, "topicfs mount: ", "busy", "already mounted")
	a.Sh(t, `mkdir "$MNT/still-works"`)
}

func TestMountClearsStaleMount(t *testing.T) {
	m := startMount(t, mountOpts{})
	m.Sh(t, `mkdir "$MNT/t" && echo kept > "$MNT/t/append"`)
	m.KillKeepMount()
	_, err := os.ReadDir(m.Dir)
	require.ErrorIs(t, err, syscall.ENOTCONN, "a killed FUSE server leaves a dead mount")

	m.Remount()
	assert.Contains(t, m.Stderr(), "topicfs: cleared a stale mount at "+m.Dir)
	assert.Equal(t, "kept\n", m.Sh(t, `cat "$MNT/t/0/records"`))
}

// TestMountSigtermWithOpenFiles: a reader holding a view open (tail -f) must
// not keep SIGTERM from unmounting and exiting 0 (the mount is detached
// lazily).
func TestMountSigtermWithOpenFiles(t *testing.T) {
	m := startMount(t, mountOpts{})
	m.Sh(t, `mkdir "$MNT/busy" && echo first > "$MNT/busy/append"`)
	tail := exec.Command("tail", "-f", m.Path("busy", "0", "records"))
	out, err := tail.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, tail.Start())
	t.Cleanup(func() { _ = tail.Process.Kill(); _ = tail.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "first\n", line)

	m.Stop() // fails the test unless exit 0 and nothing left mounted
	assert.Contains(t, m.Stderr(), "topicfs: unmounted")
}

// TestMountSecondSignalForcesExit: while a clean shutdown waits for an open
// file, a second SIGTERM exits at once (1), leaves no mount behind, and the
// next mount recovers every record.
func TestMountSecondSignalForcesExit(t *testing.T) {
	m := startMount(t, mountOpts{})
	m.Sh(t, `mkdir "$MNT/hurry" && seq 1 50 > "$MNT/hurry/append"`)
	tail := exec.Command("tail", "-f", m.Path("hurry", "0", "records"))
	out, err := tail.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, tail.Start())
	t.Cleanup(func() { _ = tail.Process.Kill(); _ = tail.Wait() })
	_, err = bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)

	require.NoError(t, m.Cmd.Process.Signal(syscall.SIGTERM))
	require.Eventually(t, func() bool { return strings.Contains(m.Stderr(), "unmounting") }, harnessDeadline, 10*time.Millisecond)
	require.NoError(t, m.Cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 1, m.Wait())
	assert.Contains(t, m.Stderr(), "terminated again: exiting without a clean shutdown")
	assert.False(t, isMounted(m.Dir), "the forced exit detaches the mount")

	m.Remount()
	assert.Equal(t, "50\n", m.Sh(t, `wc -l < "$MNT/hurry/0/records"`))
}

func TestMountExitsOnExternalUmount(t *testing.T) {
	m := startMount(t, mountOpts{})
	m.Sh(t, `mkdir "$MNT/x"`)
	require.NoError(t, exec.Command("umount", m.Dir).Run())
	assert.Equal(t, 0, m.Wait())
	assert.Contains(t, m.Stderr(), "topicfs: unmounted")
}

func TestMountReadOnly(t *testing.T) {
	m := startMount(t, mountOpts{})
	m.Sh(t, `mkdir "$MNT/ro" && echo before > "$MNT/ro/append"`)
	m.Stop()

	r := startMount(t, mountOpts{Data: m.Data, ReadOnly: true})
	assert.Equal(t, "before\n", r.Sh(t, `cat "$MNT/ro/0/records"`))
	_, errOut, err := r.ShErr(`echo after > "$MNT/ro/append"`)
	require.Error(t, err)
	assert.Regexp(t, "Read-only file system|Permission denied", errOut)
	_, _, err = r.ShErr(`mkdir "$MNT/new"`)
	require.Error(t, err)
}

func TestMountDefaultDataDir(t *testing.T) {
	xdg := t.TempDir()
	m := startMount(t, mountOpts{NoDataFlag: true, Data: filepath.Join(xdg, "topicfs"), Env: []string{"XDG_DATA_HOME=" + xdg}})
	assert.Contains(t, m.Stderr(), "(data "+filepath.Join(xdg, "topicfs")+")")
	m.Sh(t, `mkdir "$MNT/home"`)
	assert.DirExists(t, filepath.Join(xdg, "topicfs", "home-0"))
}

func TestMountConfigFile(t *testing.T) {
	data := filepath.Join(t.TempDir(), "from-config")
	cfg := `
"log.dirs" = "` + data + `"
"num.partitions" = 3
[segment]
bytes = 1048576
[topics.users]
"cleanup.policy" = "compact"
"print.key" = true
`
	m := startMount(t, mountOpts{Config: cfg, NoDataFlag: true, Data: data})
	assert.Contains(t, m.Stderr(), "(data "+data+")")
	m.Sh(t, `mkdir "$MNT/orders" "$MNT/users"`)
	assert.Equal(t, "0\n1\n2\n", m.Sh(t, `ls "$MNT/orders" | grep -E '^[0-9]+$' | sort -n`))
	orders := m.Sh(t, `cat "$MNT/orders/config"`)
	assert.Contains(t, orders, "segment.bytes=1048576\n")
	assert.Contains(t, orders, "cleanup.policy=delete\n")
	users := m.Sh(t, `cat "$MNT/users/config"`)
	assert.Contains(t, users, "cleanup.policy=compact\n")
	assert.Contains(t, users, "print.key=true\n")
	assert.DirExists(t, filepath.Join(data, "orders-2"))
}

// TestMountDataFlagOverridesLogDirs: --data wins over log.dirs.
func TestMountDataFlagOverridesLogDirs(t *testing.T) {
	fromConfig := filepath.Join(t.TempDir(), "from-config")
	m := startMount(t, mountOpts{Config: `"log.dirs" = "` + fromConfig + `"`})
	assert.Contains(t, m.Stderr(), "(data "+m.Data+")")
	m.Sh(t, `mkdir "$MNT/flag"`)
	assert.DirExists(t, filepath.Join(m.Data, "flag-0"))
	assert.NoDirExists(t, fromConfig)
}

// TestMountHelper drives contrib/mount.topicfs as mount(8) would for the
// fstab line `DATA MNT fuse.topicfs defaults,_netdev 0 0`.
func TestMountHelper(t *testing.T) {
	requireFUSE(t)
	bin := topicfsBinary(t)
	data, mnt := t.TempDir(), t.TempDir()
	logfile := filepath.Join(t.TempDir(), "topicfs.log")
	t.Cleanup(func() {
		if isMounted(mnt) {
			_ = exec.Command("umount", mnt).Run()
			lazyUnmount(mnt)
		}
	})
	helper, err := filepath.Abs("../contrib/mount.topicfs")
	require.NoError(t, err)
	cmd := exec.Command(helper, data, mnt, "-o", "defaults,_netdev,no_passthrough,logfile="+logfile)
	cmd.Env = append(os.Environ(), "TOPICFS="+bin)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "mount.topicfs: %s", out)
	require.True(t, isMounted(mnt), "mounted when the helper returns")

	require.NoError(t, os.Mkdir(filepath.Join(mnt, "fstab"), 0o755))
	assert.DirExists(t, filepath.Join(data, "fstab-0"))
	b, err := os.ReadFile(logfile)
	require.NoError(t, err)
	assert.Contains(t, string(b), "turned off (--no-passthrough)", "no_passthrough reaches topicfs")

	// umount(8) stops the background topicfs cleanly.
	require.NoError(t, exec.Command("umount", mnt).Run())
	deadline := time.Now().Add(harnessDeadline)
	for {
		b, _ := os.ReadFile(logfile)
		if strings.Contains(string(b), "topicfs: unmounted "+mnt) {
			break
		}
		require.True(t, time.Now().Before(deadline), "topicfs did not exit after umount; log:\n%s", b)
		time.Sleep(50 * time.Millisecond)
	}

	// A failing mount makes the helper exit 32 with topicfs's message.
	missing := filepath.Join(mnt, "missing", "deeper")
	t.Cleanup(func() { lazyUnmount(missing) })
	cmd = exec.Command(helper, data, missing, "-o", "ro,logfile="+logfile)
	cmd.Env = append(os.Environ(), "TOPICFS="+bin)
	out, err = cmd.CombinedOutput()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "helper should fail: %s", out)
	assert.Equal(t, 32, ee.ExitCode())
	assert.Contains(t, string(out), "does not exist")
}

// TestMountNotifiesSystemd: under systemd (Type=notify) topicfs sends
// READY=1 once mounted and STOPPING=1 when it shuts down.
func TestMountNotifiesSystemd(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	require.NoError(t, err)
	defer conn.Close()
	got := make(chan string, 4)
	go func() {
		buf := make([]byte, 256)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			got <- string(buf[:n])
		}
	}()
	m := startMount(t, mountOpts{Env: []string{"NOTIFY_SOCKET=" + sock}})
	select {
	case msg := <-got:
		assert.Equal(t, "READY=1", msg)
	case <-time.After(harnessDeadline):
		t.Fatal("no READY=1 on NOTIFY_SOCKET")
	}
	m.Stop()
	select {
	case msg := <-got:
		assert.Equal(t, "STOPPING=1", msg)
	case <-time.After(harnessDeadline):
		t.Fatal("no STOPPING=1 on NOTIFY_SOCKET")
	}
}

var metricsLine = regexp.MustCompile(`topicfs: metrics on (http://\S+/metrics)`)

type sample struct {
	labels string
	value  float64
}

// scrape fetches a Prometheus text exposition and returns samples by name.
func scrape(t *testing.T, url string) map[string][]sample {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := map[string][]sample{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		labels := ""
		if strings.HasPrefix(rest, "{") {
			j := strings.LastIndex(rest, "}")
			labels, rest = rest[1:j], rest[j+1:]
		}
		f := strings.Fields(rest)
		require.NotEmpty(t, f, "metric line %q", line)
		v, err := strconv.ParseFloat(f[0], 64)
		require.NoError(t, err, "metric line %q", line)
		out[name] = append(out[name], sample{labels, v})
	}
	return out
}

// value returns the sample of name whose labels contain every want label.
func value(t *testing.T, m map[string][]sample, name string, want ...string) float64 {
	t.Helper()
	for _, s := range m[name] {
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(s.labels, w)
		}
		if ok {
			return s.value
		}
	}
	require.Failf(t, "metric missing", "%s{%s} not exported; have %v", name, strings.Join(want, ","), m[name])
	return 0
}

func TestMetrics(t *testing.T) {
	m := startMount(t, mountOpts{Args: []string{"--metrics-addr", "127.0.0.1:0", "--pprof"}})
	match := metricsLine.FindStringSubmatch(m.Stderr())
	require.NotNil(t, match, "stderr names the metrics address:\n%s", m.Stderr())
	url := match[1]

	m.Sh(t, `mkdir "$MNT/metered" && seq 1 100 > "$MNT/metered/append" && cat "$MNT/metered/0/records" > /dev/null`)
	got := scrape(t, url)
	tp := []string{`topic="metered"`, `partition="0"`}

	assert.Equal(t, 100.0, value(t, got, "topicfs_log_end_offset", tp...))
	assert.Equal(t, 0.0, value(t, got, "topicfs_log_start_offset", tp...))
	assert.Greater(t, value(t, got, "topicfs_log_size_bytes", tp...), 292.0, "100 records of at least 3 bytes each")
	assert.GreaterOrEqual(t, value(t, got, "topicfs_log_segments", tp...), 1.0)
	assert.Equal(t, 100.0, value(t, got, "topicfs_append_records_total", tp...))
	assert.Greater(t, value(t, got, "topicfs_append_bytes_total", tp...), 292.0)
	assert.Greater(t, value(t, got, "topicfs_read_bytes_total", tp...), 0.0)
	dirty := value(t, got, "topicfs_cleaner_dirty_ratio", tp...)
	assert.True(t, dirty >= 0 && dirty <= 1, "dirty ratio %v in [0,1]", dirty)
	assert.Equal(t, 0.0, value(t, got, "topicfs_cleaner_runs_total", tp...))
	assert.Equal(t, 0.0, value(t, got, "topicfs_retention_deleted_segments_total", tp...))
	assert.Equal(t, 0.0, value(t, got, "topicfs_retention_deleted_bytes_total", tp...))
	assert.Equal(t, 1.0, value(t, got, "topicfs_topics"))
	assert.Greater(t, value(t, got, "topicfs_fuse_op_duration_seconds_count", `op="mkdir"`), 0.0)
	assert.Greater(t, value(t, got, "topicfs_fuse_op_duration_seconds_count", `op="write"`), 0.0)
	assert.Greater(t, value(t, got, "topicfs_fuse_op_duration_seconds_count", `op="read"`), 0.0)

	// With --pprof the same address serves Go's profiler for a running mount.
	resp, err := http.Get(strings.TrimSuffix(url, "/metrics") + "/debug/pprof/goroutine?debug=1")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Contains(t, string(body), "goroutine profile:")
}

// TestMountAllowOther: without --allow-other only the mounting user may use
// the mount (FUSE refuses everyone else); with it other users may read, and
// the kernel enforces the modes shown (default_permissions), so they still
// cannot append to a 0200 file owned by the mounting user.
func TestMountAllowOther(t *testing.T) {
	const asNobody = `setpriv --reuid=65534 --regid=65534 --clear-groups `
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow_other=%v", allow), func(t *testing.T) {
			var args []string
			if allow {
				args = []string{"--allow-other"}
			}
			m := startMount(t, mountOpts{Args: args})
			m.Sh(t, `chmod 0711 "$(dirname "$MNT")" && mkdir "$MNT/pub" && echo hello > "$MNT/pub/0/append"`)

			out, errOut, err := m.ShErr(asNobody + `cat "$MNT/pub/0/records"`)
			if allow {
				require.NoError(t, err, errOut)
				assert.Equal(t, "hello\n", out)
			} else {
				require.Error(t, err)
				assert.Contains(t, errOut, "Permission denied")
			}

			_, errOut, err = m.ShErr(asNobody + `bash -c 'echo intruder >> "$MNT/pub/0/append"'`)
			require.Error(t, err, "another user must not append")
			assert.Contains(t, errOut, "Permission denied")

			m.Sh(t, `echo again >> "$MNT/pub/0/append"`)
			assert.Equal(t, "hello\nagain\n", m.Sh(t, `cat "$MNT/pub/0/records"`))
		})
	}
}

// TestMkdirTooManyPartitionsForFileLimit: mkdir of a topic whose partitions
// cannot all be held open under the mount's open-file limit fails at once
// with EMFILE and a log line naming ulimit -n, and leaves no topic; it used
// to create partitions for a long time and then fail with nothing logged.
func TestMkdirTooManyPartitionsForFileLimit(t *testing.T) {
	m := startMount(t, mountOpts{Config: `"num.partitions" = 2000`})
	pid := m.Cmd.Process.Pid
	soft := strings.TrimSpace(m.Sh(t, fmt.Sprintf(`prlimit --pid %d --nofile --output SOFT --noheadings`, pid)))
	m.Sh(t, fmt.Sprintf(`prlimit --pid %d --nofile=1000:`, pid))
	_, errOut, err := m.ShErr(`mkdir "$MNT/wide"`)
	m.Sh(t, fmt.Sprintf(`prlimit --pid %d --nofile=%s:`, pid, soft))
	require.Error(t, err)
	assert.Contains(t, errOut, "Too many open files")
	assert.Contains(t, m.Stderr(), "ulimit -n")
	assert.NoDirExists(t, filepath.Join(m.Data, "wide-0"))
	m.Sh(t, `mkdir "$MNT/wide"`) // fits under the restored limit
	assert.DirExists(t, filepath.Join(m.Data, "wide-1999"))
}
