package vfs

import (
	"errors"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Allocate reserves disk blocks for [off, off+n) of f without changing its
// size (fallocate with FALLOC_FL_KEEP_SIZE), so that a later store through a
// memory mapping cannot die of SIGBUS on a full disk (the ENOSPC comes back
// here instead), and so that writes past the end land in blocks that exist
// (see Preallocate). Files without a descriptor (MemFS, ErrorFS) and file
// systems without fallocate succeed without doing anything.
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

// ReleaseBeyond frees the disk blocks f holds past size, its current size
// (blocks that Allocate reserved past the end and no write used), by
// truncating f to size; it does nothing when f holds no more blocks than
// size needs, and for files without a descriptor. The file's modification
// time is put back (best effort): no byte changed, and whatever identifies
// a file's contents by size and mtime (fusefs's saved view sizes, backup
// tools) must not see a change.
func ReleaseBeyond(f File, size int64) error {
	fd, ok := f.(interface{ Fd() uintptr })
	if !ok {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(fd.Fd()), &st); err != nil {
		return &os.PathError{Op: "fstat", Path: f.Name(), Err: err}
	}
	blk := max(int64(st.Blksize), 512)
	if st.Blocks*512 <= (size+blk-1)/blk*blk || st.Size != size {
		return nil
	}
	if err := f.Truncate(size); err != nil {
		return err
	}
	keep := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, st.Mtim}
	_ = unix.UtimesNanoAt(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(int(fd.Fd())), keep, 0)
	return nil
}
