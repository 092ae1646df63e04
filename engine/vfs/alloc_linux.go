package vfs

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// Allocate reserves disk blocks for [off, off+n) of f without changing its
// size (fallocate mode 0 on a range inside the file), so that a later store
// through a memory mapping cannot die of SIGBUS on a full disk: the ENOSPC
// comes back here instead. Files without a descriptor (MemFS, ErrorFS) and
// file systems without fallocate succeed without doing anything.
func Allocate(f File, off, n int64) error {
	fd, ok := f.(interface{ Fd() uintptr })
	if !ok || n <= 0 {
		return nil
	}
	err := unix.Fallocate(int(fd.Fd()), unix.FALLOC_FL_KEEP_SIZE, off, n)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return nil
	}
	if err != nil {
		return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
	}
	return nil
}
