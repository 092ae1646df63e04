package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// prepareMountpoint checks that path can be mounted on and returns it made
// absolute. A missing mountpoint is created when its parent exists. A stale FUSE mount left by a killed process ("Transport endpoint
// is not connected") is cleared with a lazy unmount; note is called to say so.
// Every error is one line that says what to do.
// created reports whether it made the directory (so a failed start can
// remove it again).
func prepareMountpoint(path string, note func(string)) (mnt string, created bool, err error) {
	mnt, created, err = prepareMountpointDir(path, note)
	if err != nil && created {
		_ = os.Remove(mnt)
		created = false
	}
	return mnt, created, err
}

func prepareMountpointDir(path string, note func(string)) (string, bool, error) {
	created := false
	abs, err := filepath.Abs(path)
	if err != nil {
		return abs, created, fmt.Errorf("mountpoint %s: %v", path, err)
	}
	_, err = os.Stat(abs)
	if isStale(err) {
		if uerr := unix.Unmount(abs, unix.MNT_DETACH); uerr != nil {
			return abs, created, fmt.Errorf("mountpoint %s holds a stale mount (%v) that could not be cleared: %v; run: umount -l %s", abs, unwrapErrno(err), uerr, abs)
		}
		note(fmt.Sprintf("topicfs: cleared a stale mount at %s (transport endpoint was not connected; lazy unmount)", abs))
		_, err = os.Stat(abs)
	}
	if errors.Is(err, os.ErrNotExist) {
		// Like mount --mkdir: create a missing mountpoint, but only in an
		// existing directory, so a mistyped path fails instead of growing
		// a tree of directories.
		parent := filepath.Dir(abs)
		if pfi, perr := os.Stat(parent); perr != nil || !pfi.IsDir() {
			return abs, created, fmt.Errorf("mountpoint %s does not exist, nor does its parent %s (create it with: mkdir -p %s)", abs, parent, abs)
		}
		merr := os.Mkdir(abs, 0o755)
		if merr != nil && !errors.Is(merr, os.ErrExist) {
			return abs, created, fmt.Errorf("mountpoint %s does not exist and cannot be created: %v", abs, unwrapErrno(merr))
		}
		created = merr == nil
		note(fmt.Sprintf("topicfs: created mountpoint %s", abs))
		_, err = os.Stat(abs)
	}
	switch {
	case errors.Is(err, os.ErrNotExist):
		return abs, created, fmt.Errorf("mountpoint %s does not exist (create it with: mkdir -p %s)", abs, abs)
	case errors.Is(err, os.ErrPermission):
		return abs, created, fmt.Errorf("mountpoint %s: permission denied", abs)
	case err != nil:
		return abs, created, fmt.Errorf("mountpoint %s: %v", abs, unwrapErrno(err))
	}
	// Resolve symlinks so the mountinfo comparison sees the real path.
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return abs, created, fmt.Errorf("mountpoint %s: %v", abs, unwrapErrno(err))
	}
	if !fi.IsDir() {
		return abs, created, fmt.Errorf("mountpoint %s is not a directory", abs)
	}
	fstype, ok := mountedAt(abs)
	if ok && strings.HasPrefix(fstype, "fuse") {
		// Stat may be answered from the kernel's attribute cache even when
		// the server is dead; statfs always asks the server.
		var st unix.Statfs_t
		if serr := unix.Statfs(abs, &st); isStale(serr) {
			if uerr := unix.Unmount(abs, unix.MNT_DETACH); uerr != nil {
				return abs, created, fmt.Errorf("mountpoint %s holds a stale mount (%v) that could not be cleared: %v; run: umount -l %s", abs, serr, uerr, abs)
			}
			note(fmt.Sprintf("topicfs: cleared a stale mount at %s (transport endpoint was not connected; lazy unmount)", abs))
			fstype, ok = mountedAt(abs)
		}
	}
	if ok {
		return abs, created, fmt.Errorf("mountpoint %s is busy: already mounted (%s); unmount it first (umount %s)", abs, fstype, abs)
	}
	return abs, created, nil
}

// isStale reports an error that a dead FUSE server's mount gives on access.
func isStale(err error) bool {
	return errors.Is(err, unix.ENOTCONN) || errors.Is(err, unix.ECONNABORTED)
}

func unwrapErrno(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// mountEntry is one line of /proc/self/mountinfo: where, and of what type.
type mountEntry struct{ dir, fstype string }

// mounts lists the mounts of /proc/self/mountinfo, in its order (a later
// mount over the same place shadows an earlier one).
func mounts() []mountEntry {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []mountEntry
	for _, line := range strings.Split(string(data), "\n") {
		// id parent maj:min root mountpoint opts [optional...] - fstype source superopts
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		e := mountEntry{dir: unescapeOctal(f[4]), fstype: "unknown type"}
		for i, x := range f {
			if x == "-" && i+1 < len(f) {
				e.fstype = f[i+1]
				break
			}
		}
		out = append(out, e)
	}
	return out
}

// mountedAt reports whether dir is itself a mountpoint, and of which type.
func mountedAt(dir string) (fstype string, ok bool) {
	for _, m := range mounts() {
		if m.dir == dir {
			return m.fstype, true
		}
	}
	return "", false
}

// unescapeOctal undoes mountinfo's \NNN escapes (\040 is a space).
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// detachWait lazily unmounts mnt (MNT_DETACH) and waits, up to deadline, for
// wait to return (the FUSE server loop ending after the last open file is
// closed). It reports whether wait returned in time.
func detachWait(mnt string, wait <-chan struct{}, deadline time.Duration) (bool, error) {
	err := unix.Unmount(mnt, unix.MNT_DETACH)
	if errors.Is(err, unix.EINVAL) { // already gone
		err = nil
	}
	select {
	case <-wait:
		return true, err
	case <-time.After(deadline):
		return false, err
	}
}

// within reports whether path is dir or lies below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	if err != nil {
		return false
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, "../"))
}

// fuseConnection returns the FUSE connection number of the mount at dir (the
// minor number of its device, as /sys/fs/fuse/connections names it), or 0.
func fuseConnection(dir string) int {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return 0
	}
	return int(unix.Minor(st.Dev))
}

// abortFUSE aborts FUSE connection n through fusectl, mounting fusectl on
// /sys/fs/fuse/connections first if needed. Every request waiting on the
// connection fails at once, which frees threads blocked in the kernel on it.
func abortFUSE(n int) error {
	if n <= 0 {
		return errors.New("connection number unknown")
	}
	const ctl = "/sys/fs/fuse/connections"
	if _, ok := mountedAt(ctl); !ok {
		if err := unix.Mount("none", ctl, "fusectl", 0, ""); err != nil {
			return fmt.Errorf("mount fusectl on %s: %w", ctl, err)
		}
	}
	return os.WriteFile(fmt.Sprintf("%s/%d/abort", ctl, n), []byte("1"), 0)
}
