package bench

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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// readyPrefix starts the line `topicfs mount` prints on stderr once the file
// system answers.
const readyPrefix = "topicfs: mounted "

// Deadlines that keep a broken mount from hanging the benchmark forever.
const (
	readyDeadline = 10 * time.Minute // recovery of many GiB after kill -9 is slow
	stopDeadline  = 60 * time.Second
)

// mountProc is one running `topicfs mount` process.
type mountProc struct {
	cmd   *exec.Cmd
	mnt   string
	data  string        // the data directory ("" in cluster mode)
	env   []string      // added to the environment (cluster mode: XDG_STATE_HOME, XDG_CACHE_HOME)
	ready time.Duration // from exec to the ready line

	done    chan struct{} // closed when the process has exited
	waitErr error         // set before done is closed

	mu   sync.Mutex
	tail []string // last stderr lines, for error messages
}

var mountSeq int

// startMount runs `BIN mount --data data [--config cfg] MNT` on a fresh
// mountpoint and waits until it is ready. The caller must call stop (or
// kill) on every path; stop is safe to call twice.
func (r *runner) startMount(ctx context.Context, data string, config map[string]string) (*mountProc, error) {
	return r.launch(ctx, data, nil, []string{"--data", data}, config)
}

// launch runs `BIN mount FLAGS [--config cfg] [$TOPICFS_BENCH_MOUNT_ARGS]
// MNT` with env added to the environment, as startMount does. config maps
// mount.toml's keys to TOML values as written.
func (r *runner) launch(ctx context.Context, data string, env, flags []string, config map[string]string) (*mountProc, error) {
	mountSeq++
	mnt := r.path(fmt.Sprintf("mnt-%d", mountSeq))
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return nil, err
	}
	args := append([]string{"mount"}, flags...)
	if len(config) > 0 {
		path := r.path(fmt.Sprintf("mount-%d.toml", mountSeq))
		var b strings.Builder
		for k, v := range config {
			fmt.Fprintf(&b, "%q = %s\n", k, v)
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			return nil, err
		}
		args = append(args, "--config", path)
	}
	args = append(args, extraMountArgs()...)
	args = append(args, mnt)
	return r.execMount(ctx, mnt, data, env, args)
}

// mountArgsEnv names an environment variable whose white-space separated
// words are added to every `topicfs mount` the benchmarks start, e.g.
// "--metrics-addr 127.0.0.1:6061 --pprof" to profile the mount of a workload with
// go tool pprof http://127.0.0.1:6061/debug/pprof/profile while it runs.
const mountArgsEnv = "TOPICFS_BENCH_MOUNT_ARGS"

func extraMountArgs() []string { return strings.Fields(os.Getenv(mountArgsEnv)) }

// remount starts a new process on m's mountpoint and data directory with the
// same arguments.
func (r *runner) remount(ctx context.Context, m *mountProc) (*mountProc, error) {
	return r.execMount(ctx, m.mnt, m.data, m.env, m.cmd.Args[1:])
}

// execMount runs BIN args (which end with mnt) with env added to the
// environment and waits until it is ready.
func (r *runner) execMount(ctx context.Context, mnt, data string, env, args []string) (*mountProc, error) {
	cmd := exec.Command(r.opts.Binary, args...)
	cmd.Env = append(append(os.Environ(), "GOTRACEBACK=all"), env...)
	// Its own process group: a ^C at the terminal reaches bench, which
	// then unmounts in order, rather than the mount directly.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A pipe of our own rather than StderrPipe: Wait must not close the
	// read end before drain has read the last lines.
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = pw
	m := &mountProc{cmd: cmd, mnt: mnt, data: data, env: env, done: make(chan struct{})}
	start := time.Now()
	err = cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		return nil, fmt.Errorf("start %s: %w", r.opts.Binary, err)
	}
	readyc := make(chan struct{})
	go func() {
		m.drain(pr, readyc)
		pr.Close()
	}()
	go func() {
		m.waitErr = cmd.Wait()
		close(m.done)
	}()
	select {
	case <-readyc:
		m.ready = time.Since(start)
		return m, nil
	case <-m.done:
		detach(mnt)
		return nil, fmt.Errorf("topicfs mount exited before it was ready (%v): %s", m.waitErr, m.stderrTail())
	case <-ctx.Done():
		m.kill()
		return nil, ctx.Err()
	case <-time.After(readyDeadline):
		m.kill()
		return nil, fmt.Errorf("topicfs mount not ready after %v: %s", readyDeadline, m.stderrTail())
	}
}

// drain reads the mount's stderr to the end (so it never blocks on a full
// pipe), keeps the last lines and signals the ready line.
func (m *mountProc) drain(r io.Reader, readyc chan struct{}) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	signalled := false
	for sc.Scan() {
		line := sc.Text()
		m.mu.Lock()
		m.tail = append(m.tail, line)
		if len(m.tail) > 20 {
			m.tail = m.tail[len(m.tail)-20:]
		}
		m.mu.Unlock()
		if !signalled && strings.HasPrefix(line, readyPrefix) {
			signalled = true
			close(readyc)
		}
	}
	io.Copy(io.Discard, r)
}

func (m *mountProc) stderrTail() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return strings.Join(m.tail, "; ")
}

func (m *mountProc) pid() int { return m.cmd.Process.Pid }

// path returns a path inside the mount.
func (m *mountProc) path(elem ...string) string {
	return filepath.Join(append([]string{m.mnt}, elem...)...)
}

// stop unmounts the way a user does (SIGTERM: topicfs unmounts, flushes,
// checkpoints and exits 0). If it does not exit within stopDeadline it is
// killed and the mount detached lazily.
func (m *mountProc) stop() error {
	select {
	case <-m.done:
		detach(m.mnt)
		return m.exitErr()
	default:
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
		detach(m.mnt) // harmless when already unmounted
		return m.exitErr()
	case <-time.After(stopDeadline):
		m.kill()
		return fmt.Errorf("topicfs mount did not exit within %v of SIGTERM (killed): %s", stopDeadline, m.stderrTail())
	}
}

func (m *mountProc) exitErr() error {
	if m.waitErr != nil {
		return fmt.Errorf("topicfs mount: %w: %s", m.waitErr, m.stderrTail())
	}
	return nil
}

// kill is a crash: SIGKILL, wait, then detach the stale mount.
func (m *mountProc) kill() {
	select {
	case <-m.done:
	default:
		_ = m.cmd.Process.Kill()
		<-m.done
	}
	detach(m.mnt)
}

// detach lazily unmounts mnt if something is mounted there.
func detach(mnt string) {
	for range 3 {
		err := unix.Unmount(mnt, unix.MNT_DETACH)
		if err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// procStatus returns a field of /proc/PID/status in KiB (VmRSS, VmHWM).
func procStatus(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok || name != field {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			break
		}
		return strconv.ParseInt(f[0], 10, 64)
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// procCPU returns the user+system CPU time the process has used so far
// (/proc/PID/stat utime and stime, in USER_HZ = 100 ticks per second on
// Linux).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces and parentheses: fields start
	// after the last ')', with the state (field 3) first.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	var ticks int64
	for _, s := range f[11:13] { // utime, stime
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / 100), nil
}

// cpuDuring runs fn and returns the CPU time the mount process used
// meanwhile; 0 when /proc could not tell (the figure is informative only).
func (m *mountProc) cpuDuring(fn func() error) (time.Duration, error) {
	c0, err0 := procCPU(m.pid())
	if err := fn(); err != nil {
		return 0, err
	}
	c1, err1 := procCPU(m.pid())
	if err0 != nil || err1 != nil {
		return 0, nil
	}
	return c1 - c0, nil
}

// leastCPU keeps the least non-zero CPU figure of a workload's runs (the
// one a busy machine inflated least).
func leastCPU(least, c time.Duration) time.Duration {
	if c > 0 && (least == 0 || c < least) {
		return c
	}
	return least
}
