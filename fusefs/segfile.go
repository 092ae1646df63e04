package fusefs

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/vfs"
)

// segFileNode is one file of a partition directory, read-only. The node
// stands for one file on disk (id): a new file under the same name is a new
// node (segIno).
//
// A sealed segment's .log, .index and .timeindex are served by FUSE
// passthrough where the mount has it (passthrough.go): the handle hands
// the kernel its descriptor of the file, and the kernel reads the file
// itself, without a READ request. Every other file (the active segment's,
// *.deleted, .txnindex, checkpoints) is read by Read here. Either way a
// handle reads the very file it opened, also after retention renamed or
// unlinked it (docs/FUSE.md §6).
type segFileNode struct {
	fs.Inode
	fsys *fsys
	vfs  vfs.FS
	loc  partLoc
	path string
	id   diskFile // the file at path when it was looked up

	// The kernel refuses (EIO) an open that mixes the two modes on one
	// inode: an open without passthrough while a backing file is
	// attached, or a passthrough open while the inode is in page-cache
	// mode (which an mmap of a direct-I/O handle enters). So the first
	// open of a node decides, and later opens follow while any handle of
	// that mode is open (a file sealed while it was open as the active
	// segment's stays on the normal path until every such handle is
	// closed).
	mu     sync.Mutex
	served int // open handles read through Read
	passed int // open handles offered for passthrough
}

var (
	_ fs.NodeGetattrer = (*segFileNode)(nil)
	_ fs.NodeSetattrer = (*segFileNode)(nil)
	_ fs.NodeOpener    = (*segFileNode)(nil)
	_ fs.NodeReader    = (*segFileNode)(nil)
	_ fs.NodeReleaser  = (*segFileNode)(nil)
)

// segFileHandle is an open file of segments/, read through Read.
type segFileHandle struct {
	f    vfs.File
	info os.FileInfo // at open
}

// segPassHandle is an open file of segments/ offered to the kernel for
// passthrough (go-fuse registers fd as the inode's backing file at the
// first such open and reuses it for later ones while any is open).
type segPassHandle struct {
	segFileHandle
	fd int
}

var _ fs.FilePassthroughFder = (*segPassHandle)(nil)

func (h *segPassHandle) PassthroughFd() (int, bool) { return h.fd, true }

// handleOf returns the file of a handle of either kind.
func handleOf(f fs.FileHandle) (*segFileHandle, bool) {
	switch h := f.(type) {
	case *segFileHandle:
		return h, true
	case *segPassHandle:
		return &h.segFileHandle, true
	}
	return nil, false
}

func (s *segFileNode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h, ok := handleOf(f); ok {
		// The file as the handle reads it, even if the engine has
		// deleted or renamed it since.
		size, err := h.f.Size()
		if err != nil {
			return s.fsys.errno("fstat segment", err)
		}
		setSegFileAttr(out, h.info, size)
		return 0
	}
	fi, err := vfs.Lstat(s.vfs, s.path)
	if errors.Is(err, os.ErrNotExist) {
		return syscall.ENOENT // deleted or renamed (.deleted) since the lookup
	}
	if err != nil {
		return s.fsys.errno("stat segment", err)
	}
	if s.id != (diskFile{}) && diskFileOf(fi) != s.id {
		// Another file under the name now: ESTALE makes the kernel look
		// the name up again (and find that file's node).
		return syscall.ESTALE
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
	// Tools read st_blksize at a time: 1 MiB per read(2), as for views
	// (docs/FUSE.md §3), whichever way the file is served.
	out.Blksize = viewBlksize
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

// Open opens the file on disk for reading; it stays readable through the
// handle if the engine deletes or renames it.
func (s *segFileNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY {
		if s.fsys.opts.ReadOnly {
			return nil, 0, syscall.EROFS
		}
		return nil, 0, syscall.EACCES
	}
	f, err := s.vfs.OpenFile(s.path, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, syscall.ENOENT
	}
	if err != nil {
		return nil, 0, s.fsys.errno("open segment", err)
	}
	fi, err := fileInfo(s.vfs, f, s.path)
	if err != nil {
		f.Close()
		if errors.Is(err, os.ErrNotExist) {
			return nil, 0, syscall.ENOENT
		}
		return nil, 0, s.fsys.errno("open segment", err)
	}
	if s.id != (diskFile{}) && diskFileOf(fi) != s.id {
		// The name holds another file since this node was looked up
		// (the cleaner swapped the segment, an index was rebuilt): this
		// node's backing file, if any, is the old one. On ESTALE the
		// kernel looks the name up again and opens the new file's node.
		f.Close()
		return nil, 0, syscall.ESTALE
	}
	// Every handle is opened with FOPEN_NOFLUSH: a read-only file has
	// nothing to flush, and the FLUSH round trip on every close(2) is a
	// good part of what a small cat pays (docs/PERFORMANCE.md §6.11).
	h := segFileHandle{f: f, info: fi}
	sealed := s.fsys.passthrough.Load() && s.sealed(ctx)
	if fd, ok := s.admit(f, sealed); ok {
		return &segPassHandle{segFileHandle: h, fd: fd}, fuse.FOPEN_NOFLUSH, 0
	}
	// Direct I/O, like a view (docs/FUSE.md §1): in page-cache mode the
	// kernel stops every read at the size it cached last, so a handle
	// would miss what was appended to the active segment, or what sealed
	// it, after it looked. It also costs one copy less than the page
	// cache (docs/PERFORMANCE.md §6.11); mmap still works (the mount
	// negotiates CAP_DIRECT_IO_ALLOW_MMAP).
	return &h, fuse.FOPEN_DIRECT_IO | fuse.FOPEN_NOFLUSH, 0
}

// fileInfo describes the open file f: fstat where f has it (the file the
// handle reads, even if the name changed since), else a stat of path.
func fileInfo(fsys vfs.FS, f vfs.File, path string) (os.FileInfo, error) {
	if st, ok := f.(interface{ Stat() (os.FileInfo, error) }); ok {
		return st.Stat()
	}
	return fsys.Stat(path)
}

// admit decides whether a new handle of f is offered for passthrough and
// counts it; see segFileNode.mu for why earlier handles decide.
func (s *segFileNode) admit(f vfs.File, sealed bool) (fd int, pass bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fdf, hasFd := f.(interface{ Fd() uintptr })
	switch {
	case !hasFd:
		pass = false
	case s.passed > 0:
		pass = true
	case s.served > 0:
		pass = false
	default:
		pass = sealed
	}
	if !pass {
		s.served++
		return -1, false
	}
	s.passed++
	return int(fdf.Fd()), true
}

// sealed reports whether the node's file is a .log, .index or .timeindex
// of a sealed segment of the partition, a file the engine no longer
// writes in place.
func (s *segFileNode) sealed(ctx context.Context) bool {
	base, ext, ok := engine.ParseSegmentName(filepath.Base(s.path))
	if !ok || (ext != "log" && ext != "index" && ext != "timeindex") {
		return false
	}
	p, err := s.fsys.enginePart(ctx, s.loc)
	if err != nil {
		return false
	}
	active, ok := p.ActiveBaseOffset()
	return ok && base < active
}

func (s *segFileNode) Read(ctx context.Context, f fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if _, ok := f.(*segPassHandle); ok {
		s.fsys.passthroughRefused(s.path)
	}
	h, ok := handleOf(f)
	if !ok {
		return nil, syscall.EBADF
	}
	n, err := h.f.ReadAt(dest, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, s.fsys.errno("read segment", err)
	}
	return destResult(dest[:n]), 0
}

func (s *segFileNode) Release(ctx context.Context, f fs.FileHandle) syscall.Errno {
	h, ok := handleOf(f)
	if !ok {
		return 0
	}
	h.f.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, pass := f.(*segPassHandle); pass {
		s.passed--
	} else {
		s.served--
	}
	return 0
}
