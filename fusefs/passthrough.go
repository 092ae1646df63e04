package fusefs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/topicfs/topicfs/engine/vfs"
)

// FUSE passthrough (Linux 6.9 and later): a file opened with a backing
// file is read by the kernel from that file, with no READ request to the
// server. topicfs uses it for the files of sealed segments under segments/
// (segfile.go); everything else is served as before. It needs the kernel
// to offer it at INIT, and CAP_SYS_ADMIN for each backing file the server
// registers; a data directory on a stacked file system (overlayfs) is
// refused as well. Whether it works is tried once per mount, on a file of
// the data directory, and the outcome is logged.

// setupPassthrough decides, once per mount and right after mounting,
// whether segments/ offers sealed segments' files for passthrough, and
// logs which way segments/ is read. Cluster mounts have no segments/.
func (f *fsys) setupPassthrough(srv *fuse.Server) {
	if f.local == nil {
		return
	}
	if why := f.passthroughRefusal(srv); why != "" {
		f.log.Info("segments/: files are read through topicfs (no FUSE passthrough)", "reason", why)
		return
	}
	f.passthrough.Store(true)
	f.log.Info("segments/: sealed segments' .log, .index and .timeindex are read by the kernel from the files on disk (FUSE passthrough); other files through topicfs")
}

// passthroughRefusal returns why the mount cannot use passthrough, or ""
// when a backing file registered and unregistered fine.
func (f *fsys) passthroughRefusal(srv *fuse.Server) string {
	if f.opts.NoPassthrough {
		return "turned off (--no-passthrough)"
	}
	if srv.KernelSettings().Flags64()&fuse.CAP_PASSTHROUGH == 0 {
		return "the kernel does not offer FUSE passthrough (Linux 6.9 or later with CONFIG_FUSE_PASSTHROUGH)"
	}
	file, err := probeFile(f.local.FS(), f.local.Path())
	if err != nil {
		return fmt.Sprintf("no file of the data directory to try it on: %v", err)
	}
	defer file.Close()
	fdf, ok := file.(interface{ Fd() uintptr })
	if !ok {
		return "the data directory is not on an operating-system file system"
	}
	id, errno := srv.RegisterBackingFd(&fuse.BackingMap{Fd: int32(fdf.Fd())})
	if errno != 0 {
		return "the kernel refused a backing file: " + backingRefusal(errno)
	}
	if errno := srv.UnregisterBackingFd(id); errno != 0 {
		f.log.Warn("segments/: cannot unregister the backing file tried at mount", "err", errno)
	}
	return ""
}

// backingRefusal says in words why FUSE_DEV_IOC_BACKING_OPEN failed.
func backingRefusal(errno syscall.Errno) string {
	switch errno {
	case syscall.EPERM:
		return "operation not permitted (it needs CAP_SYS_ADMIN)"
	case syscall.ELOOP:
		return "the data directory is on a stacked file system (overlayfs, another FUSE mount)"
	case syscall.ENOTTY, syscall.EINVAL:
		return errno.Error() + " (the kernel lacks FUSE passthrough)"
	}
	return errno.Error()
}

// probeFile opens a regular file of the data directory at root (its .lock
// on a writable mount), else of the first partition directory holding
// one, for reading.
func probeFile(fsys vfs.FS, root string) (vfs.File, error) {
	ents, err := fsys.ReadDir(root)
	if err != nil {
		return nil, err
	}
	if file := openRegular(fsys, root, ents); file != nil {
		return file, nil
	}
	var dirs []string
	for _, e := range ents {
		if e.IsDir() {
			dirs = append(dirs, filepath.Join(root, e.Name()))
		}
	}
	for _, dir := range dirs {
		ents, err := fsys.ReadDir(dir)
		if err != nil {
			continue // a directory removed meanwhile
		}
		if file := openRegular(fsys, dir, ents); file != nil {
			return file, nil
		}
	}
	return nil, errors.New("it holds no regular file")
}

// openRegular opens the first regular file of ents, the entries of dir,
// that opens for reading; nil if none does.
func openRegular(fsys vfs.FS, dir string, ents []os.DirEntry) vfs.File {
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		if file, err := fsys.OpenFile(filepath.Join(dir, e.Name()), os.O_RDONLY, 0); err == nil {
			return file
		}
	}
	return nil
}

// passthroughRefused is called when a handle offered for passthrough is
// read through the server after all: the kernel (or go-fuse, which stops
// offering backing files after the first refusal) did not take it. Reads
// stay correct; the log says so once per mount.
func (f *fsys) passthroughRefused(path string) {
	f.refusedOnce.Do(func() {
		f.log.Warn("segments/: the kernel did not take a file for FUSE passthrough; such files are read through topicfs", "file", path)
	})
}
