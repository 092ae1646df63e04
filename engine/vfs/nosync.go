package vfs

import "os"

// NoSync returns fsys without durability: files' Sync and SyncDir return
// at once, everything else is fsys's. It is for caches whose every crash is
// detected and discarded (a copy without its clean-close mark): they need
// no fsync while they are written, only once before they are marked.
// Files of the OS file system keep Mmap and Fd.
func NoSync(fsys FS) FS { return noSyncFS{fsys} }

type noSyncFS struct{ FS }

func (n noSyncFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := n.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	if of, ok := f.(*OSFile); ok {
		return noSyncOSFile{of}, nil
	}
	return noSyncFile{f}, nil
}

func (noSyncFS) SyncDir(string) error { return nil }

type noSyncFile struct{ File }

func (noSyncFile) Sync() error { return nil }

// noSyncOSFile keeps OSFile's Mmap, Munmap and Fd.
type noSyncOSFile struct{ *OSFile }

func (noSyncOSFile) Sync() error { return nil }
