package cli

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ignoreSIGPIPE keeps a closed stderr from killing the mount. Go ends a
// program that writes to a broken pipe on fd 1 or 2 with SIGPIPE unless the
// signal is ignored; ignored, the write fails with EPIPE instead, which the
// loggers drop. (`topicfs mount … 2>&1 | head -4` used to take the mount
// down with the first log line after head exited.)
func ignoreSIGPIPE() { signal.Ignore(syscall.SIGPIPE) }

// parentDeathSignal is what the kernel sends when a go run parent dies. It
// is not SIGTERM: go run forwards a SIGTERM to topicfs and then dies, so the
// parent-death signal follows a shutdown already under way and must not
// count as the second signal that exits without a clean shutdown.
const parentDeathSignal = syscall.SIGHUP

// followGoRun makes the mount follow a `go run` that started it: when the
// parent process is the go command, the kernel sends parentDeathSignal to
// topicfs when that parent dies (PR_SET_PDEATHSIG), and topicfs then
// unmounts cleanly as on SIGTERM. A `go run` killed with SIGKILL passes
// nothing on, which used to leave the real mount running. Any other parent
// (a shell, systemd, the mount helper, which exits as soon as the mount is
// ready) is left alone: there the mount outlives it by design. sigs gets
// the signal; followGoRun reports whether it armed it.
func followGoRun(sigs chan<- os.Signal) bool {
	ppid := os.Getppid()
	comm, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(ppid), "comm"))
	if err != nil || strings.TrimSpace(string(comm)) != "go" {
		return false
	}
	signal.Notify(sigs, parentDeathSignal)
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(parentDeathSignal), 0, 0, 0); err != nil {
		return false
	}
	if os.Getppid() != ppid {
		// The parent died before the signal was armed.
		_ = syscall.Kill(os.Getpid(), parentDeathSignal)
	}
	return true
}

// physicalMemory returns the machine's RAM in bytes, 0 if unknown.
func physicalMemory() uint64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0
	}
	return uint64(si.Totalram) * uint64(si.Unit)
}

// parseUmask reads --umask: an octal mode of at most 0777 ("077", "0022").
func parseUmask(s string) (int, error) {
	v, err := strconv.ParseUint(strings.TrimSpace(s), 8, 32)
	if err != nil || v > 0o777 {
		return 0, fmt.Errorf("--umask %q: want an octal mask such as 077 or 022", s)
	}
	return int(v), nil
}
