// Package vfs is the file-system seam of the engine. The engine makes no os
// calls of its own: it opens, writes, syncs, renames and removes through an
// FS, so tests can swap the real file system for an in-memory one that
// forgets unsynced data on Crash, or for a wrapper that injects faults.
//
// Three implementations:
//
//   - OS: the real file system (os.OpenFile, fsync of a directory via SyncDir);
//     its Files also implement Mmapper.
//   - MemFS (NewMem): an in-memory tree. (*MemFS).Crash returns a copy holding
//     only durable state: file bytes as of each file's last Sync, directory
//     entries as of their parent's last SyncDir.
//   - ErrorFS (NewErrorFS): wraps an FS and asks an Injector before every
//     operation whether to fail it (ENOSPC, EIO, a short write, a crash).
//
// Typical crash test:
//
//	mem := vfs.NewMem()
//	counter := vfs.NewCounter()
//	run(vfs.NewErrorFS(mem, counter))          // dry run: count operations
//	for i := int64(0); i < counter.Count(); i++ {
//		mem := vfs.NewMem()
//		run(vfs.NewErrorFS(mem, vfs.CrashAt(i))) // every op from i on fails
//		check(mem.Crash())                       // reopen what survived
//	}
package vfs

import (
	"io"
	"os"
)

// File is an open file. Write appends at the current file offset (at the end
// for files opened with O_APPEND); WriteAt writes at an absolute position.
// On the OS implementation WriteAt is refused for O_APPEND files, as os.File
// does. A File may be used by one writer and concurrent ReadAt callers.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Writer
	// Sync makes the file's bytes (and size) durable.
	Sync() error
	// Truncate changes the size; like a write it is durable after Sync.
	Truncate(size int64) error
	// Size returns the current size in bytes.
	Size() (int64, error)
	Close() error
	// Name returns the name the file was opened with.
	Name() string
}

// FS is a file system. Paths are ordinary slash-separated paths. Every
// implementation is safe for concurrent use.
type FS interface {
	// OpenFile opens a file with os.OpenFile's flags (O_RDONLY, O_RDWR,
	// O_CREATE, O_EXCL, O_TRUNC, O_APPEND).
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// Rename renames (moves) a file or directory, replacing a file at newname.
	Rename(oldname, newname string) error
	// MkdirAll creates a directory and any missing parents.
	MkdirAll(name string, perm os.FileMode) error
	// ReadDir lists a directory, sorted by name.
	ReadDir(name string) ([]os.DirEntry, error)
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes the directory's entries (creates, renames, removes) durable.
	SyncDir(name string) error
	// RemoveAll removes a path and everything below it; a missing path is no error.
	RemoveAll(name string) error
}

// Lstater is implemented by file systems that have symbolic links (OS):
// Lstat describes a link itself instead of what it points to.
type Lstater interface {
	Lstat(name string) (os.FileInfo, error)
}

// Lstat describes name without following a final symbolic link: fsys's
// Lstat where it has one, else its Stat (a file system without links).
func Lstat(fsys FS, name string) (os.FileInfo, error) {
	if l, ok := fsys.(Lstater); ok {
		return l.Lstat(name)
	}
	return fsys.Stat(name)
}

// Mmapper is implemented by Files that can be memory-mapped (the OS files
// do; MemFS and ErrorFS files do not, so callers need a heap fallback).
// Mmap maps the first size bytes of the file MAP_SHARED, readable and
// writable; the file must be open O_RDWR and at least size bytes long before
// any byte past its end is touched.
type Mmapper interface {
	Mmap(size int) ([]byte, error)
	Munmap(b []byte) error
}

// ReadMmapper is implemented by Files that can be mapped read-only (the
// OS files). MmapReadOnly maps the first size bytes MAP_SHARED; pages past
// the file's end fault when read.
type ReadMmapper interface {
	MmapReadOnly(size int) ([]byte, error)
	Munmap(b []byte) error
}
