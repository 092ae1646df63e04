package fusefs

import (
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// timedFS wraps the node file system's raw operations to report each one's
// latency to Options.OpLatency (the metrics server's histogram). Operations
// not listed pass through untimed.
type timedFS struct {
	fuse.RawFileSystem
	observe func(op string, d time.Duration)
}

func (t *timedFS) since(op string, start time.Time) { t.observe(op, time.Since(start)) }

func (t *timedFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	defer t.since("lookup", time.Now())
	return t.RawFileSystem.Lookup(cancel, h, name, out)
}

func (t *timedFS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	defer t.since("getattr", time.Now())
	return t.RawFileSystem.GetAttr(cancel, in, out)
}

func (t *timedFS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	defer t.since("setattr", time.Now())
	return t.RawFileSystem.SetAttr(cancel, in, out)
}

func (t *timedFS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	defer t.since("mkdir", time.Now())
	return t.RawFileSystem.Mkdir(cancel, in, name, out)
}

func (t *timedFS) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	defer t.since("rmdir", time.Now())
	return t.RawFileSystem.Rmdir(cancel, h, name)
}

func (t *timedFS) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	defer t.since("unlink", time.Now())
	return t.RawFileSystem.Unlink(cancel, h, name)
}

func (t *timedFS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	defer t.since("rename", time.Now())
	return t.RawFileSystem.Rename(cancel, in, oldName, newName)
}

func (t *timedFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	defer t.since("open", time.Now())
	return t.RawFileSystem.Open(cancel, in, out)
}

func (t *timedFS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	defer t.since("read", time.Now())
	return t.RawFileSystem.Read(cancel, in, buf)
}

func (t *timedFS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	defer t.since("write", time.Now())
	return t.RawFileSystem.Write(cancel, in, data)
}

func (t *timedFS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	defer t.since("flush", time.Now())
	return t.RawFileSystem.Flush(cancel, in)
}

func (t *timedFS) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	defer t.since("fsync", time.Now())
	return t.RawFileSystem.Fsync(cancel, in)
}

func (t *timedFS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	defer t.since("release", time.Now())
	t.RawFileSystem.Release(cancel, in)
}

func (t *timedFS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	defer t.since("readdir", time.Now())
	return t.RawFileSystem.ReadDir(cancel, in, out)
}

func (t *timedFS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	defer t.since("readdir", time.Now())
	return t.RawFileSystem.ReadDirPlus(cancel, in, out)
}

func (t *timedFS) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	start := time.Now()
	n, st := t.RawFileSystem.Writev(cancel, in, data)
	if st != fuse.ENOSYS { // else the server retries with Write, which is timed
		t.since("write", start)
	}
	return n, st
}
