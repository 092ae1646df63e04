package fusefs

import (
	"log/slog"
	"runtime/debug"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/topicfs/topicfs/internal/panics"
)

// safeFS is the request boundary of the mount: it wraps the node file
// system's raw operations (every method of fuse.RawFileSystem) so that a
// panic while serving one request is recovered there, logged with its
// stack, counted (topicfs_panics_total{where="fuse",op}) and answered with
// EIO, instead of ending the process and with it the mount. Operations
// that have no reply (FORGET, RELEASE, RELEASEDIR) are recovered the same
// way and just logged. (go-fuse recovers panics of a request's handling
// too, but logs them through the log package without the operation and
// counts nothing; its handler, fsys.requestPanic, now sees only panics in
// go-fuse's own code around these operations.)
//
// A recovered panic leaves behind whatever the panicking code left: the
// code paths that hold a lock or a cursor while they render or append
// release it with defer (viewHandle.render, the append handle's methods),
// so later requests of the same file are served.
//
// It holds the wrapped file system in a field instead of embedding it, so
// that the compiler insists on every method: a method go-fuse adds later
// cannot pass through unprotected.
type safeFS struct {
	fs  fuse.RawFileSystem
	log *slog.Logger
}

var _ fuse.RawFileSystem = (*safeFS)(nil)

func (s *safeFS) String() string           { return s.fs.String() }
func (s *safeFS) SetDebug(debug bool)      { s.fs.SetDebug(debug) }
func (s *safeFS) Init(server *fuse.Server) { s.fs.Init(server) }

// catch is deferred by every wrapped operation: it recovers a panic of the
// operation, reports it and sets *st (nil for operations without a
// status) to EIO. name is the entry name of LOOKUP, MKDIR and the like.
func (s *safeFS) catch(op string, h *fuse.InHeader, name string, st *fuse.Status) {
	v := recover()
	if v == nil {
		return
	}
	var attrs []any
	if h != nil {
		attrs = append(attrs, "nodeid", h.NodeId, "pid", h.Caller.Pid)
	}
	if name != "" {
		attrs = append(attrs, "name", name)
	}
	panics.Recovered(s.log, "fuse", op, v, debug.Stack(), attrs...)
	if st != nil {
		*st = fuse.EIO
	}
}

func (s *safeFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) (st fuse.Status) {
	defer s.catch("lookup", h, name, &st)
	return s.fs.Lookup(cancel, h, name, out)
}

func (s *safeFS) Forget(nodeid, nlookup uint64) {
	defer s.catch("forget", &fuse.InHeader{NodeId: nodeid}, "", nil)
	s.fs.Forget(nodeid, nlookup)
}

func (s *safeFS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) (st fuse.Status) {
	defer s.catch("getattr", &in.InHeader, "", &st)
	return s.fs.GetAttr(cancel, in, out)
}

func (s *safeFS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) (st fuse.Status) {
	defer s.catch("setattr", &in.InHeader, "", &st)
	return s.fs.SetAttr(cancel, in, out)
}

func (s *safeFS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) (st fuse.Status) {
	defer s.catch("mknod", &in.InHeader, name, &st)
	return s.fs.Mknod(cancel, in, name, out)
}

func (s *safeFS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) (st fuse.Status) {
	defer s.catch("mkdir", &in.InHeader, name, &st)
	return s.fs.Mkdir(cancel, in, name, out)
}

func (s *safeFS) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) (st fuse.Status) {
	defer s.catch("unlink", h, name, &st)
	return s.fs.Unlink(cancel, h, name)
}

func (s *safeFS) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) (st fuse.Status) {
	defer s.catch("rmdir", h, name, &st)
	return s.fs.Rmdir(cancel, h, name)
}

func (s *safeFS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) (st fuse.Status) {
	defer s.catch("rename", &in.InHeader, oldName, &st)
	return s.fs.Rename(cancel, in, oldName, newName)
}

func (s *safeFS) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) (st fuse.Status) {
	defer s.catch("link", &in.InHeader, name, &st)
	return s.fs.Link(cancel, in, name, out)
}

func (s *safeFS) Symlink(cancel <-chan struct{}, h *fuse.InHeader, pointedTo, linkName string, out *fuse.EntryOut) (st fuse.Status) {
	defer s.catch("symlink", h, linkName, &st)
	return s.fs.Symlink(cancel, h, pointedTo, linkName, out)
}

func (s *safeFS) Readlink(cancel <-chan struct{}, h *fuse.InHeader) (out []byte, st fuse.Status) {
	defer s.catch("readlink", h, "", &st)
	return s.fs.Readlink(cancel, h)
}

func (s *safeFS) Access(cancel <-chan struct{}, in *fuse.AccessIn) (st fuse.Status) {
	defer s.catch("access", &in.InHeader, "", &st)
	return s.fs.Access(cancel, in)
}

func (s *safeFS) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (n uint32, st fuse.Status) {
	defer s.catch("getxattr", h, attr, &st)
	return s.fs.GetXAttr(cancel, h, attr, dest)
}

func (s *safeFS) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (n uint32, st fuse.Status) {
	defer s.catch("listxattr", h, "", &st)
	return s.fs.ListXAttr(cancel, h, dest)
}

func (s *safeFS) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) (st fuse.Status) {
	defer s.catch("setxattr", &in.InHeader, attr, &st)
	return s.fs.SetXAttr(cancel, in, attr, data)
}

func (s *safeFS) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) (st fuse.Status) {
	defer s.catch("removexattr", h, attr, &st)
	return s.fs.RemoveXAttr(cancel, h, attr)
}

func (s *safeFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) (st fuse.Status) {
	defer s.catch("create", &in.InHeader, name, &st)
	return s.fs.Create(cancel, in, name, out)
}

func (s *safeFS) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) (st fuse.Status) {
	defer s.catch("tmpfile", &in.InHeader, "", &st)
	return s.fs.Tmpfile(cancel, in, out)
}

func (s *safeFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) (st fuse.Status) {
	defer s.catch("open", &in.InHeader, "", &st)
	return s.fs.Open(cancel, in, out)
}

func (s *safeFS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (res fuse.ReadResult, st fuse.Status) {
	defer s.catch("read", &in.InHeader, "", &st)
	return s.fs.Read(cancel, in, buf)
}

func (s *safeFS) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) (st fuse.Status) {
	defer s.catch("lseek", &in.InHeader, "", &st)
	return s.fs.Lseek(cancel, in, out)
}

func (s *safeFS) GetLk(cancel <-chan struct{}, in *fuse.LkIn, out *fuse.LkOut) (st fuse.Status) {
	defer s.catch("getlk", &in.InHeader, "", &st)
	return s.fs.GetLk(cancel, in, out)
}

func (s *safeFS) SetLk(cancel <-chan struct{}, in *fuse.LkIn) (st fuse.Status) {
	defer s.catch("setlk", &in.InHeader, "", &st)
	return s.fs.SetLk(cancel, in)
}

func (s *safeFS) SetLkw(cancel <-chan struct{}, in *fuse.LkIn) (st fuse.Status) {
	defer s.catch("setlkw", &in.InHeader, "", &st)
	return s.fs.SetLkw(cancel, in)
}

func (s *safeFS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	defer s.catch("release", &in.InHeader, "", nil)
	s.fs.Release(cancel, in)
}

func (s *safeFS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (n uint32, st fuse.Status) {
	defer s.catch("write", &in.InHeader, "", &st)
	return s.fs.Write(cancel, in, data)
}

func (s *safeFS) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (n uint32, st fuse.Status) {
	defer s.catch("write", &in.InHeader, "", &st)
	return s.fs.Writev(cancel, in, data)
}

func (s *safeFS) CopyFileRange(cancel <-chan struct{}, in *fuse.CopyFileRangeIn) (n uint32, st fuse.Status) {
	defer s.catch("copyfilerange", &in.InHeader, "", &st)
	return s.fs.CopyFileRange(cancel, in)
}

func (s *safeFS) Ioctl(cancel <-chan struct{}, in *fuse.IoctlIn, inbuf []byte, out *fuse.IoctlOut, outbuf []byte) (st fuse.Status) {
	defer s.catch("ioctl", &in.InHeader, "", &st)
	return s.fs.Ioctl(cancel, in, inbuf, out, outbuf)
}

func (s *safeFS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) (st fuse.Status) {
	defer s.catch("flush", &in.InHeader, "", &st)
	return s.fs.Flush(cancel, in)
}

func (s *safeFS) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) (st fuse.Status) {
	defer s.catch("fsync", &in.InHeader, "", &st)
	return s.fs.Fsync(cancel, in)
}

func (s *safeFS) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) (st fuse.Status) {
	defer s.catch("fallocate", &in.InHeader, "", &st)
	return s.fs.Fallocate(cancel, in)
}

func (s *safeFS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) (st fuse.Status) {
	defer s.catch("opendir", &in.InHeader, "", &st)
	return s.fs.OpenDir(cancel, in, out)
}

func (s *safeFS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) (st fuse.Status) {
	defer s.catch("readdir", &in.InHeader, "", &st)
	return s.fs.ReadDir(cancel, in, out)
}

func (s *safeFS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) (st fuse.Status) {
	defer s.catch("readdir", &in.InHeader, "", &st)
	return s.fs.ReadDirPlus(cancel, in, out)
}

func (s *safeFS) ReleaseDir(in *fuse.ReleaseIn) {
	defer s.catch("releasedir", &in.InHeader, "", nil)
	s.fs.ReleaseDir(in)
}

func (s *safeFS) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) (st fuse.Status) {
	defer s.catch("fsyncdir", &in.InHeader, "", &st)
	return s.fs.FsyncDir(cancel, in)
}

func (s *safeFS) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) (st fuse.Status) {
	defer s.catch("statfs", h, "", &st)
	return s.fs.StatFs(cancel, h, out)
}

func (s *safeFS) Statx(cancel <-chan struct{}, in *fuse.StatxIn, out *fuse.StatxOut) (st fuse.Status) {
	defer s.catch("statx", &in.InHeader, "", &st)
	return s.fs.Statx(cancel, in, out)
}

func (s *safeFS) OnUnmount() {
	defer s.catch("unmount", nil, "", nil)
	s.fs.OnUnmount()
}
