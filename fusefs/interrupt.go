package fusefs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/topicfs/topicfs/internal/panics"
)

// interruptible runs fn (in cluster mode a wait for acknowledgements,
// which a cluster that stopped answering makes last up to
// delivery.timeout.ms) and returns its errno, or EINTR once the caller is
// being killed: a writer killed in close(2) or fsync(2) is then gone at
// once, not after the delivery timeout. fn finishes in the background
// (its records are appended or fail, and the log says so). An interrupt
// for a signal the caller survives (Go's runtime preempts threads with
// SIGURG) is not answered: close(2) failing with EINTR would leave the
// writer unsure of its records.
func (f *fsys) interruptible(ctx context.Context, op string, fn func() syscall.Errno) syscall.Errno {
	if f.local != nil {
		return fn() // the engine's appends wait for no network: no goroutine per close
	}
	done := make(chan syscall.Errno, 1)
	go func() {
		errno := syscall.EIO
		defer func() {
			if v := recover(); v != nil {
				panics.Recovered(f.log, "fuse", op, v, debug.Stack())
			}
			done <- errno
		}()
		errno = fn()
	}()
	select {
	case errno := <-done:
		return errno
	case <-ctx.Done():
	}
	caller, ok := fuse.FromContext(ctx)
	if !ok {
		return <-done
	}
	// The kernel sends one INTERRUPT per request: a kill that comes after
	// a harmless signal is seen by looking.
	tick := time.NewTicker(dyingPoll)
	defer tick.Stop()
	for {
		if dying(caller.Pid) {
			f.log.Info("fusefs: the caller was killed while waiting for acknowledgements; they are still awaited",
				"op", op, "pid", caller.Pid)
			return syscall.EINTR
		}
		select {
		case errno := <-done:
			return errno
		case <-tick.C:
		}
	}
}

// dyingPoll is how often an interrupted wait looks whether its caller is
// being killed.
const dyingPoll = 50 * time.Millisecond

// dying reports whether thread tid has SIGKILL pending (a kill, or a
// fatal signal the kernel turned into one), from /proc.
func dying(tid uint32) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", tid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist) // gone already
	}
	const sigkill = 1 << (9 - 1)
	for line := range strings.Lines(string(data)) {
		name, value, ok := strings.Cut(line, ":")
		if !ok || (name != "SigPnd" && name != "ShdPnd") {
			continue
		}
		if mask, err := strconv.ParseUint(strings.TrimSpace(value), 16, 64); err == nil && mask&sigkill != 0 {
			return true
		}
	}
	return false
}
