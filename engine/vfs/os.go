package vfs

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// OS is the real file system.
var OS FS = osFS{}

type osFS struct{}

// OSFile is the File returned by OS. Besides File it implements Mmapper and
// exposes Fd for fallocate/fadvise.
type OSFile struct {
	*os.File
}

var (
	_ File    = (*OSFile)(nil)
	_ Mmapper = (*OSFile)(nil)
)

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &OSFile{File: f}, nil
}

func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) Rename(oldname, newname string) error         { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(name string, perm os.FileMode) error { return os.MkdirAll(name, perm) }
func (osFS) ReadDir(name string) ([]os.DirEntry, error)   { return os.ReadDir(name) }
func (osFS) Stat(name string) (os.FileInfo, error)        { return os.Stat(name) }
func (osFS) Lstat(name string) (os.FileInfo, error)       { return os.Lstat(name) }
func (osFS) RemoveAll(name string) error                  { return os.RemoveAll(name) }

// SyncDir opens the directory and fsyncs it, making its entries durable.
func (osFS) SyncDir(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		_ = d.Close()
		return fmt.Errorf("vfs: sync dir %s: %w", name, err)
	}
	return d.Close()
}

// Size returns the file's current size.
func (f *OSFile) Size() (int64, error) {
	st, err := f.File.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// Mmap maps the first size bytes of the file shared, read-write.
func (f *OSFile) Mmap(size int) ([]byte, error) {
	b, err := unix.Mmap(int(f.File.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, &os.PathError{Op: "mmap", Path: f.Name(), Err: err}
	}
	return b, nil
}

// MmapReadOnly maps the first size bytes of the file shared, read-only
// (size may run past the end of the file; those pages fault when read).
func (f *OSFile) MmapReadOnly(size int) ([]byte, error) {
	b, err := unix.Mmap(int(f.File.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, &os.PathError{Op: "mmap", Path: f.Name(), Err: err}
	}
	return b, nil
}

// Munmap unmaps a mapping returned by Mmap or MmapReadOnly.
func (f *OSFile) Munmap(b []byte) error {
	if err := unix.Munmap(b); err != nil {
		return &os.PathError{Op: "munmap", Path: f.Name(), Err: err}
	}
	return nil
}
