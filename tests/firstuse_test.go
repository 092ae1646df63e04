package tests

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
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
	"golang.org/x/sys/unix"

	"github.com/topicfs/topicfs/engine"
)

// End-to-end tests of what a first-time user and an operator meet: the
// settings a mount refuses, a closed stderr, go run, the data directory's
// modes, the metrics address, --version, make install and the systemd unit.

// TestMountRefusesSettingsItCannotSurvive: cleaner settings that used to
// crash the mount at the first compaction (a makeslice panic, out of
// memory) or stall its start (a million threads) stop it at startup with
// one line naming the setting.
func TestMountRefusesSettingsItCannotSurvive(t *testing.T) {
	requireFUSE(t)
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	require.NoError(t, os.Mkdir(mnt, 0o755))
	// A topicfs that accepts a row mounts and runs until killed: bound it,
	// and leave no mount behind.
	t.Cleanup(func() { lazyUnmount(mnt) })
	run := func(args ...string) (string, int) {
		ctx, cancel := context.WithTimeout(context.Background(), harnessDeadline)
		defer cancel()
		cmd := exec.CommandContext(ctx, topicfsBinary(t), args...)
		var e bytes.Buffer
		cmd.Stderr = &e
		err := cmd.Run()
		lazyUnmount(mnt)
		return e.String(), exitCode(err)
	}
	rows := []struct{ name, toml, want string }{
		{"dedupe max int64", `"log.cleaner.dedupe.buffer.size" = 9223372036854775807`, "log.cleaner.dedupe.buffer.size"},
		{"dedupe 64 GiB", `"log.cleaner.dedupe.buffer.size" = 68719476736`, "must be at most 68719476704"},
		{"dedupe 4 GiB on one thread", `"log.cleaner.dedupe.buffer.size" = 4294967296`, "2 GiB - 1"},
		{"a million cleaner threads", `"log.cleaner.threads" = 1000000`, "must be at most 32"},
		{"num.partitions", `"num.partitions" = 10001`, "must be at most 10000"},
		{"batch.size", `"batch.size" = 67108865`, "must be at most 67108864"},
		{"linger.ms", `"linger.ms" = 9223372036855`, "must be at most 9223372036854"},
		{"topic delete.retention.ms", "[topics.t]\n\"delete.retention.ms\" = 9223372036855", "[topics.t]"},
	}
	var si unix.Sysinfo_t
	require.NoError(t, unix.Sysinfo(&si))
	half := uint64(si.Totalram) * uint64(si.Unit) / 2
	if half+1 <= 32*(1<<31-1) {
		// Within range and per thread, but more than half of this
		// machine's memory.
		rows = append(rows, struct{ name, toml, want string }{"dedupe over half the memory",
			"\"log.cleaner.threads\" = 32\n\"log.cleaner.dedupe.buffer.size\" = " + strconv.FormatUint(half+1, 10), "half of this machine's"})
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			cfg := filepath.Join(dir, "mount.toml")
			require.NoError(t, os.WriteFile(cfg, []byte(r.toml+"\n"), 0o644))
			errOut, code := run("mount", "--config", cfg, "--data", filepath.Join(dir, "data"), mnt)
			assert.Equal(t, 1, code, errOut)
			requireOneLineError(t, errOut, "topicfs mount: ", r.want)
			assert.False(t, isMounted(mnt))
		})
	}
}

// TestConfigWriteOutOfRange: a topic's config file refuses a value one past
// a bound with EINVAL and keeps the old value; the bound itself is taken.
func TestConfigWriteOutOfRange(t *testing.T) {
	m := startMount(t, mountOpts{})
	m.Sh(t, `mkdir "$MNT/t"`)
	for _, bad := range []string{"batch.size=67108865", "linger.ms=9223372036855", "file.delete.delay.ms=9223372036855",
		"delete.retention.ms=-1", "num.partitions=10001", "segment.bytes=2147483648", "min.cleanable.dirty.ratio=1.01"} {
		_, errOut, err := m.ShErr(`echo '` + bad + `' > "$MNT/t/config"`)
		require.Error(t, err, bad)
		assert.Contains(t, errOut, msgEINVAL, bad)
	}
	cfg := m.Sh(t, `cat "$MNT/t/config"`)
	assert.Contains(t, cfg, "batch.size=16384\n")
	assert.Contains(t, cfg, "linger.ms=5\n")
	m.Sh(t, `echo 'batch.size=67108864' > "$MNT/t/config"`)
	assert.Contains(t, m.Sh(t, `cat "$MNT/t/config"`), "batch.size=67108864\n")
}

// TestMountSurvivesClosedStderr: `topicfs mount … 2>&1 | head -4` — once
// the reader of stderr exits, the next log line used to kill the mount with
// SIGPIPE. The mount keeps serving and still shuts down cleanly.
func TestMountSurvivesClosedStderr(t *testing.T) {
	requireFUSE(t)
	bin := topicfsBinary(t)
	data, mnt := t.TempDir(), t.TempDir()
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	cmd := exec.Command(bin, "mount", "--log-level", "debug", "--data", data, mnt)
	cmd.Stdout, cmd.Stderr = pw, pw
	require.NoError(t, cmd.Start())
	pw.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		lazyUnmount(mnt)
	})

	// Read like head -4 would, until the ready line, then go away.
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
			if strings.HasPrefix(sc.Text(), readyPrefix) {
				break
			}
		}
		close(lines)
	}()
	ready := false
	timeout := time.After(harnessDeadline)
	for !ready {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "stderr ended before the ready line")
			ready = strings.HasPrefix(l, readyPrefix)
		case <-timeout:
			t.Fatal("no ready line")
		}
	}
	require.NoError(t, pr.Close())

	sh := func(script string) string {
		out, err := exec.Command("bash", "-euo", "pipefail", "-c", script).CombinedOutput()
		require.NoError(t, err, "%s: %s", script, out)
		return string(out)
	}
	// Every one of these logs (mkdir, config, appends at debug level).
	sh(`mkdir ` + mnt + `/piped && echo segment.ms=100000 > ` + mnt + `/piped/config`)
	for i := 0; i < 20; i++ {
		sh(`echo line-` + strconv.Itoa(i) + ` >> ` + mnt + `/piped/append`)
	}
	assert.Equal(t, "20\n", sh(`wc -l < `+mnt+`/piped/0/records`))
	select {
	case err := <-done:
		t.Fatalf("topicfs died after its stderr closed: %v", err)
	default:
	}

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-done:
		assert.NoError(t, err, "a clean shutdown with nowhere to log")
	case <-time.After(harnessDeadline):
		t.Fatal("no exit after SIGTERM")
	}
	assert.False(t, isMounted(mnt))
}

// TestMountFollowsGoRun: started by go run (a parent process named go), the
// mount unmounts cleanly when that parent is killed, also when the parent
// first forwards a SIGTERM (as go run does) and then dies, which sends the
// parent-death signal on top; started by anything else (a shell, the mount
// helper, which exits once the mount is ready) it outlives its parent.
func TestMountFollowsGoRun(t *testing.T) {
	requireFUSE(t)
	bin := topicfsBinary(t)
	sh, err := exec.LookPath("sh")
	require.NoError(t, err)
	shBytes, err := os.ReadFile(sh)
	require.NoError(t, err)
	for _, name := range []string{"go", "go-forwards-SIGTERM", "launcher"} {
		t.Run(name, func(t *testing.T) {
			parent, forwards := strings.CutSuffix(name, "-forwards-SIGTERM")
			dir := t.TempDir()
			fake := filepath.Join(dir, parent)
			require.NoError(t, os.WriteFile(fake, shBytes, 0o755))
			data, mnt := filepath.Join(dir, "data"), filepath.Join(dir, "mnt")
			logf, pidf := filepath.Join(dir, "log"), filepath.Join(dir, "pid")
			script := `"$0" mount --data "$1" "$2" 2>"$3" & echo $! >"$4"; wait`
			if forwards {
				// Like go run: pass the SIGTERM on, and die while the
				// mount's shutdown waits for a file still open on it.
				script = `"$0" mount --data "$1" "$2" 2>"$3" & pid=$!; echo $pid >"$4"; trap 'kill -TERM $pid; until grep -q "detaching lazily" "$3"; do sleep 0.01; done; exit 0' TERM; wait`
			}
			cmd := exec.Command(fake, "-c", script, bin, data, mnt, logf, pidf)
			require.NoError(t, cmd.Start())
			mountPid := 0
			t.Cleanup(func() {
				if mountPid > 0 {
					_ = syscall.Kill(mountPid, syscall.SIGKILL)
				}
				lazyUnmount(mnt)
			})
			readLog := func() string { b, _ := os.ReadFile(logf); return string(b) }
			require.Eventually(t, func() bool { return strings.Contains(readLog(), readyPrefix) }, harnessDeadline, 20*time.Millisecond)
			b, err := os.ReadFile(pidf)
			require.NoError(t, err)
			mountPid, err = strconv.Atoi(strings.TrimSpace(string(b)))
			require.NoError(t, err)

			if forwards {
				busy, err := os.Open(mnt)
				require.NoError(t, err)
				require.NoError(t, cmd.Process.Signal(syscall.SIGTERM)) // as kill of go run
				_ = cmd.Wait()
				require.NoError(t, busy.Close())
			} else {
				require.NoError(t, cmd.Process.Kill()) // as kill -9 of go run
				_ = cmd.Wait()
			}
			if parent == "go" {
				require.Eventually(t, func() bool { return strings.Contains(readLog(), "topicfs: unmounted ") }, harnessDeadline, 20*time.Millisecond,
					"the mount follows its go run parent; log:\n%s", readLog())
				if forwards {
					assert.Contains(t, readLog(), "signal=terminated")
				} else {
					assert.Contains(t, readLog(), "signal=hangup")
				}
				require.Eventually(t, func() bool { return syscall.Kill(mountPid, 0) != nil }, harnessDeadline, 20*time.Millisecond)
				assert.NotContains(t, readLog(), "without a clean shutdown")
				assert.FileExists(t, filepath.Join(data, engine.CleanShutdownFile), "clean shutdown")
				assert.False(t, isMounted(mnt))
				return
			}
			require.NoError(t, os.Mkdir(filepath.Join(mnt, "still"), 0o755), "the mount outlives a parent that is not go")
			require.NoError(t, syscall.Kill(mountPid, syscall.SIGTERM))
			require.Eventually(t, func() bool { return strings.Contains(readLog(), "topicfs: unmounted ") }, harnessDeadline, 20*time.Millisecond)
		})
	}
}

// TestDataDirModes: a new data directory and everything in it belong to the
// user who mounts (directories 0700, files 0600); --umask 022 opens them to
// every local user to read.
func TestDataDirModes(t *testing.T) {
	for _, tc := range []struct {
		args            []string
		dirMode, logMod fs.FileMode
	}{
		{nil, 0o700, 0o600},
		{[]string{"--umask", "022"}, 0o755, 0o644},
	} {
		t.Run(strings.Join(append([]string{"umask"}, tc.args...), " "), func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "new", "data")
			m := startMount(t, mountOpts{Data: data, Args: tc.args})
			m.Sh(t, `mkdir "$MNT/private" && echo secret > "$MNT/private/append" && echo retention.ms=-1 > "$MNT/private/config"`)
			m.Stop()
			fi, err := os.Stat(data)
			require.NoError(t, err)
			assert.Equal(t, tc.dirMode, fi.Mode().Perm(), "data directory")
			fi, err = os.Stat(filepath.Join(data, "private-0", "00000000000000000000.log"))
			require.NoError(t, err)
			assert.Equal(t, tc.logMod, fi.Mode().Perm(), "segment")
			n := 0
			require.NoError(t, filepath.WalkDir(data, func(path string, d fs.DirEntry, err error) error {
				require.NoError(t, err)
				fi, err := d.Info()
				require.NoError(t, err)
				n++
				if tc.args == nil {
					assert.Zero(t, fi.Mode().Perm()&0o077, "%s is %v: readable by others", path, fi.Mode())
				}
				return nil
			}))
			assert.Greater(t, n, 6, "walked the directory, its partition and files")
		})
	}
}

// TestMetricsLoopbackAndPprof: --metrics-addr :0 listens on 127.0.0.1 only,
// and the profiler is served only with --pprof.
func TestMetricsLoopbackAndPprof(t *testing.T) {
	addr := regexp.MustCompile(`topicfs: metrics on http://(\S+)/metrics`)
	m := startMount(t, mountOpts{Args: []string{"--metrics-addr", ":0"}})
	match := addr.FindStringSubmatch(m.Stderr())
	require.NotNil(t, match, m.Stderr())
	assert.True(t, strings.HasPrefix(match[1], "127.0.0.1:"), "listens on loopback: %s", match[1])
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, _ := get("http://" + match[1] + "/metrics")
	assert.Equal(t, http.StatusOK, code)
	code, _ = get("http://" + match[1] + "/debug/pprof/")
	assert.Equal(t, http.StatusNotFound, code, "no profiler without --pprof")
	_, body := get("http://" + match[1] + "/")
	assert.NotContains(t, body, "pprof")
	m.Stop()

	p := startMount(t, mountOpts{Args: []string{"--metrics-addr", "127.0.0.1:0", "--pprof"}})
	match = addr.FindStringSubmatch(p.Stderr())
	require.NotNil(t, match, p.Stderr())
	code, body = get("http://" + match[1] + "/debug/pprof/")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "goroutine")

	_, errOut, code := runTopicfs(t, nil, "mount", "--pprof", "--data", t.TempDir(), t.TempDir())
	assert.Equal(t, 2, code)
	requireOneLineError(t, errOut, "topicfs mount: ", "--pprof needs --metrics-addr")
}

// TestReadOnlyMountSaysSnapshot: the ready line and the log say that a
// read-only mount shows the data as it was when mounted.
func TestReadOnlyMountSaysSnapshot(t *testing.T) {
	m := startMount(t, mountOpts{ReadOnly: true})
	assert.Contains(t, m.Stderr(), "topicfs: mounted "+m.Dir+" (data "+m.Data+", read-only snapshot)")
	assert.Contains(t, m.Stderr(), "frozen snapshot")
}

// TestVersionCommand: topicfs --version and topicfs version print one line.
func TestVersionCommand(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		out, errOut, code := runTopicfs(t, nil, args...)
		require.Equal(t, 0, code, errOut)
		assert.Regexp(t, `^topicfs \S+.* go1\.\d+\S*\n$`, out)
	}
}

// TestMakeInstall: the README's way to get a topicfs binary puts it in
// PREFIX/bin, where the unit and the mount helper look (/usr/local/bin).
func TestMakeInstall(t *testing.T) {
	prefix := t.TempDir()
	if _, err := os.Stat("../bin"); errors.Is(err, fs.ErrNotExist) {
		// make build's bin/ is removed again only if this test made it.
		t.Cleanup(func() { _ = os.RemoveAll("../bin") })
	}
	out, err := exec.Command("make", "-C", "..", "install", "PREFIX="+prefix).CombinedOutput()
	require.NoError(t, err, "%s", out)
	bin := filepath.Join(prefix, "bin", "topicfs")
	fi, err := os.Stat(bin)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o755), fi.Mode().Perm())
	v, err := exec.Command(bin, "--version").Output()
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(v), "topicfs "))
}

// TestServiceUnitStartsWithoutHome runs the systemd unit's ExecStart as the
// README installs it (mount.toml.example as the instance's config, no
// $HOME, as for a system service), with its paths moved under a temporary
// directory: it mounts, the data goes to /var/lib/topicfs/INSTANCE, which
// is what RequiresMountsFor names.
func TestServiceUnitStartsWithoutHome(t *testing.T) {
	unit, err := os.ReadFile("../contrib/topicfs@.service")
	require.NoError(t, err)
	field := func(key string) string {
		m := regexp.MustCompile(`(?m)^` + key + `=(.*)$`).FindStringSubmatch(string(unit))
		require.NotNil(t, m, "unit has %s", key)
		return m[1]
	}
	execStart := strings.Fields(field("ExecStart"))
	require.Equal(t, "/usr/local/bin/topicfs", execStart[0])
	root := t.TempDir()
	move := func(s string) string {
		s = strings.ReplaceAll(s, "%i", "events")
		for _, dir := range []string{"/etc/topicfs", "/var/lib/topicfs", "/mnt"} {
			if strings.HasPrefix(s, dir) {
				return filepath.Join(root, s)
			}
		}
		return s
	}
	args := make([]string, 0, len(execStart)-1)
	for _, a := range execStart[1:] {
		args = append(args, move(a))
	}
	assert.Contains(t, args, move("/var/lib/topicfs/%i"), "the unit names the data directory")
	assert.Contains(t, strings.Fields(field("RequiresMountsFor")), "/var/lib/topicfs/%i", "the data directory's file system is mounted first")
	assert.Equal(t, "topicfs/%i", field("StateDirectory"))

	example, err := os.ReadFile("../mount.toml.example")
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "etc", "topicfs"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "etc", "topicfs", "events.toml"), example, 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "mnt"), 0o755))

	data := move("/var/lib/topicfs/%i")
	m := startMount(t, mountOpts{Dir: move("/mnt/%i"), Data: data, NoDataFlag: true, RawArgs: args,
		Unset: []string{"HOME", "XDG_DATA_HOME"}})
	m.Sh(t, `mkdir "$MNT/service" && echo up > "$MNT/service/append"`)
	assert.DirExists(t, filepath.Join(data, "service-0"))
}
