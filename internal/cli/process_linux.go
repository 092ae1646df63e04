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

// followGoRun makes the mount follow a `go run` that started it: when the
// parent process is the go command, the kernel sends SIGTERM to topicfs
// when that parent dies (PR_SET_PDEATHSIG), and topicfs then unmounts as on
// any SIGTERM. `go run` dies of a SIGTERM without passing it on, which
// used to leave the real mount running after `kill` of the go run process.
// Any other parent (a shell, systemd, the mount helper, which exits as soon
// as the mount is ready) is left alone: there the mount outlives it by
// design. It reports whether it armed the signal.
func followGoRun() bool {
	ppid := os.Getppid()
	comm, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(ppid), "comm"))
	if err != nil || strings.TrimSpace(string(comm)) != "go" {
		return false
	}
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0, 0, 0); err != nil {
		return false
	}
	if os.Getppid() != ppid {
		// The parent died before the signal was armed.
		_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
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

// defaultUmask keeps a data directory private to the user who mounts it:
// directories 0700, files 0600.
const defaultUmask = 0o077

// parseUmask reads --umask: an octal mode of at most 0777 ("077", "0022").
func parseUmask(s string) (int, error) {
	v, err := strconv.ParseUint(strings.TrimSpace(s), 8, 32)
	if err != nil || v > 0o777 {
		return 0, fmt.Errorf("--umask %q: want an octal mask such as 077 or 022", s)
	}
	return int(v), nil
}
