// Package tests holds topicfs's end-to-end tests: they build the topicfs
// binary, mount it on a temporary directory and drive it with real shell
// tools, as a user would.
//
// The shared harness lives in this file:
//
//	m := startMount(t, mountOpts{})          // builds topicfs once, mounts, waits for "ready"
//	out := m.Sh(t, `mkdir $MNT/orders && echo hi > $MNT/orders/append && cat $MNT/orders/0/records`)
//	m.Kill()                                 // SIGKILL + lazy unmount (a crash)
//	m.Remount()                              // same mountpoint, same data dir
//
// Every mount is unmounted in t.Cleanup, also when the test fails: SIGTERM,
// wait, then SIGKILL and a lazy unmount (MNT_DETACH) if anything is left, so a
// failing test never leaves a stale mount behind.
//
// This file owns TestMain for the package (it removes the built binary);
// other test files in package tests must not declare another TestMain.
package tests

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// readyPrefix starts the line topicfs mount prints on stderr once the file
// system answers requests.
const readyPrefix = "topicfs: mounted "

// harnessDeadline bounds waits that would otherwise hang a broken run forever
// (a mount that never gets ready, an unmount that never returns). It is a
// safety net, not a performance assertion.
const harnessDeadline = 60 * time.Second

var (
	buildOnce sync.Once
	buildDir  string
	buildBin  string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// topicfsBinary builds the topicfs command once per test run (with -race when
// the tests run with -race, so the real mount is race-checked too) and returns
// its path. TOPICFS_TEST_BIN names a prebuilt binary instead.
func topicfsBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("TOPICFS_TEST_BIN"); p != "" {
		return p
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "topicfs-bin-")
		if buildErr != nil {
			return
		}
		buildBin = filepath.Join(buildDir, "topicfs")
		args := []string{"build", "-o", buildBin}
		if raceEnabled {
			args = append(args, "-race")
		}
		args = append(args, "..")
		cmd := exec.Command("go", args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			buildErr = fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out.String())
		}
	})
	require.NoError(t, buildErr, "building topicfs")
	return buildBin
}

// requireFUSE skips when /dev/fuse is missing on a developer machine, but
// fails under CI, where a skipped mount test would hide a gap.
func requireFUSE(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("no /dev/fuse (%v): end-to-end mount tests need FUSE; set CI=1 to make this a failure", err)
		}
		t.Fatalf("no /dev/fuse under CI: %v", err)
	}
}

// mountOpts says how to start topicfs mount. The zero value mounts on a new
// temporary mountpoint with a new temporary data directory and no config.
type mountOpts struct {
	Dir  string // mountpoint; "" = a new t.TempDir()
	Data string // data directory; "" = a new t.TempDir()
	// NoDataFlag leaves out --data, so log.dirs or the default data home
	// applies; Data then only records where the test expects the data.
	NoDataFlag bool
	Config     string   // mount.toml contents; "" = no --config
	ReadOnly   bool     // --read-only
	Args       []string // extra flags, placed before the mountpoint
	Env        []string // extra environment, KEY=VALUE
	Unset      []string // environment variables removed (HOME, ...)
	// RawArgs, when set, are the whole command line after the binary (a
	// unit file's ExecStart): the fields above that make flags are unused.
	RawArgs []string
	// NoWait returns as soon as the process started, without waiting for the
	// ready line (for tests of startup failures; use Wait).
	NoWait bool
}

// mountProc is one running (or stopped) topicfs mount process.
type mountProc struct {
	t    testing.TB
	opts mountOpts

	Dir  string    // mountpoint
	Data string    // data directory
	Cmd  *exec.Cmd // the current process; replaced by Remount

	fuseConn int // /sys/fs/fuse/connections/N of the current mount; 0 unknown

	stderr *lockedBuffer
	done   chan struct{} // closed when Cmd has been waited for
	err    error         // Cmd.Wait's result, valid after done
	ready  chan struct{} // closed when the ready line was seen
}

// startMount starts `topicfs mount` and waits until it prints its ready line.
// The mount is stopped and unmounted in t.Cleanup.
func startMount(t testing.TB, opts mountOpts) *mountProc {
	t.Helper()
	requireFUSE(t)
	bin := topicfsBinary(t)
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.Data == "" && !opts.NoDataFlag {
		opts.Data = t.TempDir()
	}
	m := &mountProc{t: t, opts: opts, Dir: opts.Dir, Data: opts.Data}
	t.Cleanup(m.cleanup)
	m.start(bin)
	return m
}

func (m *mountProc) args() []string {
	args := []string{"mount", "--log-level", "debug"}
	if !m.opts.NoDataFlag {
		args = append(args, "--data", m.Data)
	}
	if m.opts.Config != "" {
		cfg := filepath.Join(m.t.TempDir(), "mount.toml")
		require.NoError(m.t, os.WriteFile(cfg, []byte(m.opts.Config), 0o644))
		args = append(args, "--config", cfg)
	}
	if m.opts.ReadOnly {
		args = append(args, "--read-only")
	}
	args = append(args, m.opts.Args...)
	return append(args, m.Dir)
}

func (m *mountProc) start(bin string) {
	t := m.t
	t.Helper()
	args := m.args()
	if m.opts.RawArgs != nil {
		args = m.opts.RawArgs
	}
	cmd := exec.Command(bin, args...)
	env := os.Environ()
	for _, name := range m.opts.Unset {
		env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
	}
	cmd.Env = append(env, m.opts.Env...)
	cmd.Stdout = io.Discard
	pr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	m.Cmd = cmd
	m.stderr = &lockedBuffer{}
	m.done = make(chan struct{})
	m.ready = make(chan struct{})
	var scanned sync.WaitGroup
	scanned.Add(1)
	go func(stderr *lockedBuffer, ready chan struct{}) {
		defer scanned.Done()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		seen := false
		for sc.Scan() {
			line := sc.Text()
			stderr.WriteLine(line)
			if !seen && strings.HasPrefix(line, readyPrefix) {
				seen = true
				close(ready)
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}(m.stderr, m.ready)
	go func(done chan struct{}) {
		scanned.Wait() // Wait closes the pipe: read it to the end first
		m.err = cmd.Wait()
		close(done)
	}(m.done)
	if m.opts.NoWait {
		return
	}
	select {
	case <-m.ready:
		m.fuseConn = fuseConnection(m.Dir)
	case <-m.done:
		t.Fatalf("topicfs mount exited before it was ready: %v\nstderr:\n%s", m.err, m.Stderr())
	case <-time.After(harnessDeadline):
		stacks := m.forceExit()
		t.Fatalf("topicfs mount not ready after %v; its threads were in:\n%s\nstderr:\n%s", harnessDeadline, stacks, m.Stderr())
	}
}

// Stderr returns everything the current process printed on stderr so far.
func (m *mountProc) Stderr() string { return m.stderr.String() }

// Path joins elem onto the mountpoint.
func (m *mountProc) Path(elem ...string) string {
	return filepath.Join(append([]string{m.Dir}, elem...)...)
}

// Running reports whether the current process has not exited yet.
func (m *mountProc) Running() bool {
	select {
	case <-m.done:
		return false
	default:
		return true
	}
}

// Wait waits for the current process to exit and returns its exit code. A
// process that does not exit within harnessDeadline is a hang: Wait records
// its threads' kernel stacks, SIGKILLs it, aborts its FUSE connection if a
// thread is stuck in the kernel (a killed process cannot exit while one of
// its threads waits on FUSE), fails the test and returns -1.
func (m *mountProc) Wait() int {
	m.t.Helper()
	select {
	case <-m.done:
		return exitCode(m.err)
	case <-time.After(harnessDeadline):
	}
	stacks := m.forceExit()
	m.t.Errorf("topicfs mount did not exit within %v; its threads were in:\n%s\nstderr:\n%s", harnessDeadline, stacks, m.Stderr())
	return -1
}

// forceExit ends a hung process: SIGKILL, then, if it still has not exited
// (threads in uninterruptible FUSE waits), an abort of its FUSE connection.
// It returns the kernel stacks its threads were in before.
func (m *mountProc) forceExit() string {
	stacks := kernelStacks(m.Cmd.Process.Pid)
	_ = m.Cmd.Process.Kill()
	select {
	case <-m.done:
		return stacks
	case <-time.After(5 * time.Second):
	}
	if err := abortFUSEConnection(m.fuseConn); err != nil {
		m.t.Logf("aborting FUSE connection %d: %v", m.fuseConn, err)
	}
	select {
	case <-m.done:
	case <-time.After(harnessDeadline):
		m.t.Errorf("topicfs mount (pid %d) survives SIGKILL and a FUSE abort", m.Cmd.Process.Pid)
	}
	return stacks
}

// Stop sends SIGTERM, waits for the process and fails the test unless it
// exited 0 and left no mount behind.
func (m *mountProc) Stop() {
	m.t.Helper()
	if m.Running() {
		_ = m.Cmd.Process.Signal(syscall.SIGTERM)
	}
	code := m.Wait()
	if code != 0 {
		m.t.Errorf("topicfs mount exited %d after SIGTERM\nstderr:\n%s", code, m.Stderr())
	}
	if isMounted(m.Dir) {
		m.t.Errorf("%s still mounted after topicfs mount exited", m.Dir)
		lazyUnmount(m.Dir)
	}
}

// Kill simulates a crash: SIGKILL, then a lazy unmount of what the dead
// process left behind.
func (m *mountProc) Kill() {
	m.t.Helper()
	m.KillKeepMount()
	lazyUnmount(m.Dir)
}

// KillKeepMount sends SIGKILL and leaves the dead mount in place, so every
// access to m.Dir fails with ENOTCONN ("Transport endpoint is not connected").
func (m *mountProc) KillKeepMount() {
	m.t.Helper()
	if m.Running() {
		_ = m.Cmd.Process.Kill()
	}
	m.Wait()
}

// Remount starts topicfs again on the same mountpoint and data directory with
// the same options. A still running process is stopped first with Stop.
func (m *mountProc) Remount() {
	m.t.Helper()
	if m.Running() {
		m.Stop()
	}
	m.start(topicfsBinary(m.t))
}

func (m *mountProc) cleanup() {
	if m.Cmd == nil {
		return
	}
	if m.Running() {
		_ = m.Cmd.Process.Signal(syscall.SIGTERM)
		m.Wait()
	}
	if isMounted(m.Dir) {
		lazyUnmount(m.Dir)
	}
	if m.t.Failed() {
		m.t.Logf("topicfs mount stderr:\n%s", m.Stderr())
	}
}

// Sh runs script with bash -euo pipefail in the mount's parent directory,
// with MNT set to the mountpoint and DATA to the data directory, and returns
// its stdout. It fails the test (showing stderr) if the script fails.
func (m *mountProc) Sh(t testing.TB, script string) string {
	t.Helper()
	out, errOut, err := m.ShErr(script)
	require.NoError(t, err, "script:\n%s\nstdout:\n%s\nstderr:\n%s", script, out, errOut)
	return out
}

// ShErr is Sh without the failure: it returns stdout, stderr and the error.
func (m *mountProc) ShErr(script string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*harnessDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = filepath.Dir(m.Dir)
	cmd.Env = append(os.Environ(), "MNT="+m.Dir, "DATA="+m.Data, "LC_ALL=C")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	return o.String(), e.String(), err
}

// isMounted reports whether dir is a mountpoint (per /proc/self/mountinfo).
func isMounted(dir string) bool {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && unescapeMountinfo(f[4]) == abs {
			return true
		}
	}
	return false
}

// unescapeMountinfo undoes the octal escapes (\040 for space, ...) of
// /proc/self/mountinfo paths.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// lazyUnmount detaches whatever is mounted on dir (MNT_DETACH), falling back
// to umount -l; both are harmless when nothing is mounted.
func lazyUnmount(dir string) {
	for i := 0; i < 10 && isMounted(dir); i++ {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			_ = exec.Command("umount", "-l", dir).Run()
		}
	}
}

// fuseConnection returns the FUSE connection number of the mount at dir:
// the minor number of its device, as /sys/fs/fuse/connections names it.
func fuseConnection(dir string) int {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return 0
	}
	return int(unix.Minor(st.Dev))
}

// abortFUSEConnection aborts FUSE connection n through fusectl (mounting
// fusectl on /sys/fs/fuse/connections if needed): every request waiting on
// it fails at once, so a process stuck in the kernel on it can exit.
func abortFUSEConnection(n int) error {
	if n <= 0 {
		return errors.New("connection unknown")
	}
	const ctl = "/sys/fs/fuse/connections"
	if !isMounted(ctl) {
		if err := syscall.Mount("none", ctl, "fusectl", 0, ""); err != nil {
			return fmt.Errorf("mount fusectl: %w", err)
		}
	}
	return os.WriteFile(filepath.Join(ctl, strconv.Itoa(n), "abort"), []byte("1"), 0)
}

// kernelStacks describes where each thread of pid is blocked: state, wait
// channel and kernel stack (the stack needs root; it is empty otherwise).
func kernelStacks(pid int) string {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, task := range tasks {
		dir := fmt.Sprintf("/proc/%d/task/%s", pid, task.Name())
		stat, _ := os.ReadFile(dir + "/stat")
		wchan, _ := os.ReadFile(dir + "/wchan")
		state := "?"
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
			state = string(stat[i+2])
		}
		if state == "S" && string(wchan) != "request_wait_answer" {
			continue // ordinary sleepers (futex, epoll) say nothing
		}
		fmt.Fprintf(&b, "thread %s state %s wchan %s\n", task.Name(), state, wchan)
		if stack, err := os.ReadFile(dir + "/stack"); err == nil {
			b.Write(stack)
		}
	}
	if b.Len() == 0 {
		return "(no thread blocked in the kernel)"
	}
	return b.String()
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ee.ExitCode() >= 0 {
			return ee.ExitCode()
		}
		return 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
	}
	return -1
}

// lockedBuffer collects lines from the stderr reader goroutine.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) WriteLine(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(s)
	b.buf.WriteByte('\n')
}

// Write makes the buffer an io.Writer (a child process's stdout).
func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// runTopicfs runs the topicfs binary with args (not a mount) and returns its
// stdout, stderr and exit code.
func runTopicfs(t testing.TB, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*harnessDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, topicfsBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if err != nil {
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "running topicfs %v: %v", args, err)
	}
	return o.String(), e.String(), exitCode(err)
}
