package fusefs

import (
	"context"
	"errors"
	"github.com/topicfs/topicfs/backend"
	"io"
	"os"
	"path/filepath"
	"strings"
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

func (d *segmentsDir) dir(ctx context.Context) (string, error) {
	p, _, err := d.fsys.partition(ctx, d.loc)
	if err != nil {
		return "", err
	}
	ep := localOf(p)
	if ep == nil {
		return "", backend.ErrUnknownPartition // segments/ exists on local disk only
	}
	return ep.Dir(), nil
}

func (d *segmentsDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	dir, err := d.dir(ctx)
	if err != nil || strings.ContainsRune(name, '/') {
		return nil, syscall.ENOENT
	}
	path := filepath.Join(dir, name)
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return nil, syscall.ENOENT
	}
	ch := d.childInode(ctx, name, fs.StableAttr{Mode: syscall.S_IFREG, Ino: d.loc.ino("segments", name), Gen: d.loc.gen + 1}, func() fs.InodeEmbedder {
		return &segFileNode{fsys: d.fsys, path: path}
	})
	return ch, entry(ctx, ch.Operations(), out)
}

func (d *segmentsDir) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	dir, err := d.dir(ctx)
	if err != nil {
		return nil, syscall.ENOENT
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, d.fsys.errno("readdir segments", err)
	}
	entries := make([]fuse.DirEntry, 0, len(ents))
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		entries = append(entries, fuse.DirEntry{Name: e.Name(), Mode: syscall.S_IFREG, Ino: d.loc.ino("segments", e.Name())})
	}
	return listDir(entries), 0
}

// segFileNode is one file of a partition directory, read-only.
type segFileNode struct {
	fs.Inode
	fsys *fsys
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
	var st syscall.Stat_t
	if h, ok := f.(*segFileHandle); ok {
		if err := syscall.Fstat(int(h.f.Fd()), &st); err != nil {
			return s.fsys.errno("fstat segment", err)
		}
	} else if err := syscall.Stat(s.path, &st); err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return syscall.ENOENT // deleted or renamed (.deleted) since the lookup
		}
		return s.fsys.errno("stat segment", err)
	}
	out.FromStat(&st)
	out.Mode = syscall.S_IFREG | 0444
	out.Nlink = 1
	out.Ino = 0 // go-fuse sets the stable inode number
	return 0
}

func (s *segFileNode) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if s.fsys.opts.ReadOnly {
		return syscall.EROFS
	}
	return syscall.EACCES
}

type segFileHandle struct{ f *os.File }

// Open opens the file on disk for reading; it stays readable through the
// handle if the engine deletes or renames it.
func (s *segFileNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		if s.fsys.opts.ReadOnly {
			return nil, 0, syscall.EROFS
		}
		return nil, 0, syscall.EACCES
	}
	f, err := os.Open(s.path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, 0, syscall.ENOENT
		}
		return nil, 0, s.fsys.errno("open segment", err)
	}
	return &segFileHandle{f: f}, 0, 0
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
