package fusefs

import (
	"context"
	"errors"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// rootNode is the mount's root: one directory per topic. mkdir creates a
// topic, rmdir deletes one.
type rootNode struct {
	dirBase
}

var (
	_ fs.NodeLookuper  = (*rootNode)(nil)
	_ fs.NodeReaddirer = (*rootNode)(nil)
	_ fs.NodeMkdirer   = (*rootNode)(nil)
	_ fs.NodeRmdirer   = (*rootNode)(nil)
)

func newRoot(f *fsys) *rootNode { return &rootNode{dirBase{fsys: f}} }

func (r *rootNode) topicChild(ctx context.Context, name string, out *fuse.EntryOut) *fs.Inode {
	gen := r.fsys.gen(name)
	ch := r.childInode(ctx, name, fs.StableAttr{Mode: syscall.S_IFDIR, Ino: ino(gen, name), Gen: gen + 1}, func() fs.InodeEmbedder {
		return &topicNode{dirBase: dirBase{fsys: r.fsys}, name: name, gen: gen}
	})
	r.fsys.dirAttr(&out.Attr)
	return ch
}

// nameMax is NAME_MAX: longer names are ENAMETOOLONG, as on any file
// system (the kernel leaves the check to FUSE servers).
const nameMax = 255

func (r *rootNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if len(name) > nameMax {
		return nil, syscall.ENAMETOOLONG
	}
	if _, err := r.fsys.b.Topic(ctx, name); err != nil {
		return nil, r.fsys.errno("lookup", err)
	}
	return r.topicChild(ctx, name, out), 0
}

func (r *rootNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	topics, err := r.fsys.b.Topics(ctx)
	if err != nil {
		return nil, r.fsys.errno("readdir", err)
	}
	entries := make([]fuse.DirEntry, 0, len(topics))
	for _, name := range topics {
		entries = append(entries, fuse.DirEntry{Name: name, Mode: syscall.S_IFDIR, Ino: ino(r.fsys.gen(name), name)})
	}
	return listDir(entries), 0
}

// Mkdir creates a topic with its configured partition count
// (num.partitions: the default, or the topic's [topics.NAME] override) in one
// engine call, so a crash never leaves a topic with fewer partitions.
func (r *rootNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if r.fsys.opts.ReadOnly {
		return nil, syscall.EROFS
	}
	if len(name) > nameMax {
		return nil, syscall.ENAMETOOLONG
	}
	if _, err := r.fsys.b.CreateTopic(ctx, name, 0); err != nil {
		var sys syscall.Errno
		if errors.As(err, &sys) {
			// A system failure (EMFILE, ENOSPC, EIO, ...), not a refusal
			// of the name: the operator needs to see it. The engine has
			// removed whatever the attempt created.
			r.fsys.log.Warn("fusefs: mkdir failed, no topic created", "topic", name, "errno", sys.Error(), "err", err)
		}
		return nil, r.fsys.errno("mkdir", err)
	}
	return r.topicChild(ctx, name, out), 0
}

// Rmdir deletes a topic, unless one of its append or config files is open
// for writing (EBUSY, after waiting releaseGrace for handles closed but not
// yet released): buffered records of an open writer would otherwise be
// lost or land in a recreated topic. Open views keep reading what they hold.
func (r *rootNode) Rmdir(ctx context.Context, name string) syscall.Errno {
	if r.fsys.opts.ReadOnly {
		return syscall.EROFS
	}
	return r.fsys.deleteTopic(ctx, name)
}
