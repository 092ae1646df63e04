package fusefs

import (
	"context"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// dirBase is embedded in every directory. It refuses every change of the
// namespace (EPERM, EROFS on a read-only mount): without these methods
// go-fuse would let rm, rmdir and mv "succeed" by dropping the child from
// its tree (docs/FUSE.md §4). The root and topic directories override
// Mkdir/Rmdir with the changes they do allow.
type dirBase struct {
	fs.Inode
	fsys *fsys
}

var (
	_ fs.NodeUnlinker  = (*dirBase)(nil)
	_ fs.NodeRmdirer   = (*dirBase)(nil)
	_ fs.NodeRenamer   = (*dirBase)(nil)
	_ fs.NodeCreater   = (*dirBase)(nil)
	_ fs.NodeMkdirer   = (*dirBase)(nil)
	_ fs.NodeMknoder   = (*dirBase)(nil)
	_ fs.NodeSymlinker = (*dirBase)(nil)
	_ fs.NodeLinker    = (*dirBase)(nil)
	_ fs.NodeGetattrer = (*dirBase)(nil)
	_ fs.NodeSetattrer = (*dirBase)(nil)
)

func (d *dirBase) Unlink(ctx context.Context, name string) syscall.Errno { return d.fsys.refuse() }
func (d *dirBase) Rmdir(ctx context.Context, name string) syscall.Errno  { return d.fsys.refuse() }
func (d *dirBase) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return d.fsys.refuse()
}
func (d *dirBase) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, d.fsys.refuse()
}
func (d *dirBase) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, d.fsys.refuse()
}
func (d *dirBase) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, d.fsys.refuse()
}
func (d *dirBase) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, d.fsys.refuse()
}
func (d *dirBase) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, d.fsys.refuse()
}

// Getattr reports a directory: 0755, or 0555 on a read-only mount.
func (d *dirBase) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.fsys.dirAttr(&out.Attr)
	return 0
}

// Setattr refuses chmod, chown and utimes on directories.
func (d *dirBase) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return d.fsys.refuse()
}

func (f *fsys) dirAttr(a *fuse.Attr) {
	a.Mode = syscall.S_IFDIR | f.perm(0755)
	a.Nlink = 2
	f.setTimes(a, f.mounted)
}

// perm drops the write bits on a read-only mount.
func (f *fsys) perm(mode uint32) uint32 {
	if f.opts.ReadOnly {
		return mode &^ 0222
	}
	return mode
}

func (f *fsys) setTimes(a *fuse.Attr, t time.Time) {
	a.SetTimes(&t, &t, &t)
}

// entry fills out for a child that was just resolved, from its Getattr.
func entry(ctx context.Context, ch fs.InodeEmbedder, out *fuse.EntryOut) syscall.Errno {
	if g, ok := ch.(fs.NodeGetattrer); ok {
		var ao fuse.AttrOut
		if errno := g.Getattr(ctx, nil, &ao); errno != 0 {
			return errno
		}
		out.Attr = ao.Attr
		if ao.AttrValid != 0 || ao.AttrValidNsec != 0 {
			out.AttrValid, out.AttrValidNsec = ao.AttrValid, ao.AttrValidNsec
		}
	}
	return 0
}

// childInode returns the child called name if the tree already holds it
// with attr, else a new inode of mk(). Reusing the existing child matters:
// a discarded duplicate would have run OnAdd (registering views for
// notifications) without ever being forgotten.
func (d *dirBase) childInode(ctx context.Context, name string, attr fs.StableAttr, mk func() fs.InodeEmbedder) *fs.Inode {
	if ch := d.GetChild(name); ch != nil && ch.StableAttr() == attr {
		return ch
	}
	return d.NewInode(ctx, mk(), attr)
}

// listDir lists fixed entries.
func listDir(entries []fuse.DirEntry) fs.DirStream { return fs.NewListDirStream(entries) }
