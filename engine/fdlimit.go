package engine

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

const (
	// filesPerPartition is how many descriptors an open partition keeps:
	// its active segment's .log, .index and .timeindex.
	filesPerPartition = 3
	// fdMargin is kept free for everything else the process opens (FUSE
	// requests opening files, segments being read, checkpoints, the cleaner).
	fdMargin = 64
)

// checkFileHeadroom fails fast with EMFILE when opening n more partitions
// would run the process out of file descriptors (RLIMIT_NOFILE), instead of
// failing part-way after creating thousands of directories. The count of
// open descriptors comes from /proc/self/fd; where that cannot be read it is
// taken as 0.
func (d *LogDir) checkFileHeadroom(n int) error {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil || lim.Cur == unix.RLIM_INFINITY {
		return nil
	}
	open := 0
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		open = len(ents)
	}
	need := uint64(open) + uint64(n)*filesPerPartition + fdMargin
	if need <= lim.Cur {
		return nil
	}
	d.log.Warn("too many partitions for the open-file limit; raise it with ulimit -n (or LimitNOFILE= in a systemd unit)",
		"partitions", n, "filesNeeded", uint64(n)*filesPerPartition, "filesOpen", open, "limit", lim.Cur)
	return fmt.Errorf("engine: %d partitions need %d more open files, but %d of the limit %d are open (ulimit -n): %w",
		n, uint64(n)*filesPerPartition, open, lim.Cur, syscall.EMFILE)
}
