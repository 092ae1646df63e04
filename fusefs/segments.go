package fusefs

import (
	"context"
	"errors"
	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/engine/vfs"
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// segmentsDir shows the files of a partition's directory on disk under
// their own names (.log, .index, .timeindex, .txnindex, *.deleted, ...),
// read-only, raw bytes. It reads the data directory directly (never through
// the mount).
type segmentsDir struct {
	dirBase
	loc partLoc
}

var (
	_ fs.NodeLookuper  = (*segmentsDir)(nil)
	_ fs.NodeReaddirer = (*segmentsDir)(nil)
)

// dir returns the partition's directory and its file system.
func (d *segmentsDir) dir(ctx context.Context) (vfs.FS, string, error) {
	p, _, err := d.fsys.partition(ctx, d.loc)
	if err != nil {
		return nil, "", err
	}
	ep := localOf(p)
	if ep == nil {
		return nil, "", backend.ErrUnknownPartition // segments/ exists on local disk only
	}
	return ep.FS(), ep.Dir(), nil
}

// regularFiles lists the regular files of dir (not symlinks, not
// directories: only the partition's own files are shown).
func regularFiles(fsys vfs.FS, dir string) ([]string, error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

func (d *segmentsDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	fsys, dir, err := d.dir(ctx)
	if err != nil {
		return nil, d.fsys.errno("lookup", err)
	}
	names, err := regularFiles(fsys, dir)
	if err != nil {
		return nil, d.fsys.errno("lookup", err)
	}
	if !slices.Contains(names, name) {
		return nil, syscall.ENOENT
	}
	path := filepath.Join(dir, name)
	ch := d.childInode(ctx, name, fs.StableAttr{Mode: syscall.S_IFREG, Ino: d.loc.ino("segments", name), Gen: d.loc.gen + 1}, func() fs.InodeEmbedder {
		return &segFileNode{fsys: d.fsys, vfs: fsys, path: path}
	})
	return ch, entry(ctx, ch.Operations(), out)
}

func (d *segmentsDir) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	fsys, dir, err := d.dir(ctx)
	if err != nil {
		return nil, d.fsys.errno("readdir segments", err)
	}
	names, err := regularFiles(fsys, dir)
	if err != nil {
		return nil, d.fsys.errno("readdir segments", err)
	}
	entries := make([]fuse.DirEntry, 0, len(names))
	for _, name := range names {
		entries = append(entries, fuse.DirEntry{Name: name, Mode: syscall.S_IFREG, Ino: d.loc.ino("segments", name)})
	}
	return listDir(entries), 0
}

// segFileNode is one file of a partition directory, read-only.
type segFileNode struct {
	fs.Inode
	fsys *fsys
	vfs  vfs.FS
	path string
}

var (
	_ fs.NodeGetattrer = (*segFileNode)(nil)
	_ fs.NodeSetattrer = (*segFileNode)(nil)
	_ fs.NodeOpener    = (*segFileNode)(nil)
	_ fs.NodeReader    = (*segFileNode)(nil)
	_ fs.NodeReleaser  = (*segFileNode)(nil)
)

func (s *segFileNode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h, ok := f.(*segFileHandle); ok {
		// The file as the handle reads it, even if the engine has
		// deleted or renamed it since.
		size, err := h.f.Size()
		if err != nil {
			return s.fsys.errno("fstat segment", err)
		}
		setSegFileAttr(out, h.info, size)
		return 0
	}
	fi, err := s.vfs.Stat(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return syscall.ENOENT // deleted or renamed (.deleted) since the lookup
	}
	if err != nil {
		return s.fsys.errno("stat segment", err)
	}
	setSegFileAttr(out, fi, fi.Size())
	return 0
}

// setSegFileAttr sets out to a read-only file of fi's times and owner, of
// size bytes.
func setSegFileAttr(out *fuse.AttrOut, fi os.FileInfo, size int64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		out.FromStat(st)
	} else {
		mtime := fi.ModTime()
		out.SetTimes(&mtime, &mtime, &mtime)
	}
	out.Size = uint64(size)
	out.Mode = syscall.S_IFREG | 0444
	out.Nlink = 1
	out.Ino = 0 // go-fuse sets the stable inode number
}

func (s *segFileNode) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if s.fsys.opts.ReadOnly {
		return syscall.EROFS
	}
	return syscall.EACCES
}

type segFileHandle struct {
	f    vfs.File
	info os.FileInfo // at open
}

// Open opens the file on disk for reading; it stays readable through the
// handle if the engine deletes or renames it.
func (s *segFileNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		if s.fsys.opts.ReadOnly {
			return nil, 0, syscall.EROFS
		}
		return nil, 0, syscall.EACCES
	}
	fi, err := s.vfs.Stat(s.path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, 0, syscall.ENOENT
		}
		return nil, 0, s.fsys.errno("open segment", err)
	}
	f, err := s.vfs.OpenFile(s.path, os.O_RDONLY, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, 0, syscall.ENOENT
		}
		return nil, 0, s.fsys.errno("open segment", err)
	}
	return &segFileHandle{f: f, info: fi}, 0, 0
}

func (s *segFileNode) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h, ok := f.(*segFileHandle)
	if !ok {
		return nil, syscall.EBADF
	}
	n, err := h.f.ReadAt(dest, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, s.fsys.errno("read segment", err)
	}
	return fuse.ReadResultData(dest[:n]), 0
}

func (s *segFileNode) Release(ctx context.Context, f fs.FileHandle) syscall.Errno {
	if h, ok := f.(*segFileHandle); ok {
		h.f.Close()
	}
	return 0
}
