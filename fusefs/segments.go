package fusefs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/vfs"
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

// enginePart returns the engine partition of loc (segments/ exists on local
// disk only).
func (f *fsys) enginePart(ctx context.Context, loc partLoc) (*engine.Partition, error) {
	p, _, err := f.partition(ctx, loc)
	if err != nil {
		return nil, err
	}
	ep := localOf(p)
	if ep == nil {
		return nil, backend.ErrUnknownPartition
	}
	return ep, nil
}

// diskFile is the identity of a file on disk (device and inode number); the
// zero value is unknown (a file system without inode numbers, MemFS).
type diskFile struct{ dev, ino uint64 }

func diskFileOf(fi os.FileInfo) diskFile {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return diskFile{dev: uint64(st.Dev), ino: st.Ino}
	}
	return diskFile{}
}

// segIno is the inode number of segments/name while name is the file id.
// The file's identity is part of it: a file the cleaner or an index rebuild
// put under an existing name is a new inode, never the old one's (the kernel
// ties a passthrough backing file to an inode, see segfile.go), and tail -F
// reports it as replaced, which it is.
func (l partLoc) segIno(name string, id diskFile) uint64 {
	if id == (diskFile{}) {
		return l.ino("segments", name)
	}
	return l.ino("segments", name, strconv.FormatUint(id.dev, 16)+":"+strconv.FormatUint(id.ino, 16))
}

func (d *segmentsDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	p, err := d.fsys.enginePart(ctx, d.loc)
	if err != nil {
		return nil, d.fsys.errno("lookup", err)
	}
	path := filepath.Join(p.Dir(), name)
	// Lstat, not Stat: only the partition's own regular files are shown,
	// never what a symbolic link points to.
	fi, err := vfs.Lstat(p.FS(), path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, syscall.ENOENT
	}
	if err != nil {
		return nil, d.fsys.errno("lookup", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, syscall.ENOENT
	}
	id := diskFileOf(fi)
	attr := fs.StableAttr{Mode: syscall.S_IFREG, Ino: d.loc.segIno(name, id), Gen: d.loc.gen + 1}
	ch := d.childInode(ctx, name, attr, func() fs.InodeEmbedder {
		return &segFileNode{fsys: d.fsys, vfs: p.FS(), loc: d.loc, path: path, id: id}
	})
	var ao fuse.AttrOut
	setSegFileAttr(&ao, fi, fi.Size())
	out.Attr = ao.Attr
	return ch, 0
}

func (d *segmentsDir) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	p, err := d.fsys.enginePart(ctx, d.loc)
	if err != nil {
		return nil, d.fsys.errno("readdir segments", err)
	}
	ents, err := p.FS().ReadDir(p.Dir())
	if err != nil {
		return nil, d.fsys.errno("readdir segments", err)
	}
	entries := make([]fuse.DirEntry, 0, len(ents))
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		// The inode number names the file's identity (segIno), which
		// only its stat has; a file gone since the listing is left out.
		fi, err := e.Info()
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, d.fsys.errno("readdir segments", err)
		}
		entries = append(entries, fuse.DirEntry{Name: e.Name(), Mode: syscall.S_IFREG, Ino: d.loc.segIno(e.Name(), diskFileOf(fi))})
	}
	return listDir(entries), 0
}
