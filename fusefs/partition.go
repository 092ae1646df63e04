package fusefs

import (
	"context"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// partitionNode is a partition directory.
type partitionNode struct {
	dirBase
	loc partLoc
}

var (
	_ fs.NodeLookuper  = (*partitionNode)(nil)
	_ fs.NodeReaddirer = (*partitionNode)(nil)
)

// treeEntry is a fixed name of a topic or partition directory.
type treeEntry struct {
	name string
	mode uint32
}

// partitionEntries are the fixed names of a partition directory.
var partitionEntries = []treeEntry{
	{"append", syscall.S_IFREG},
	{"append.jsonl", syscall.S_IFREG},
	{"records", syscall.S_IFREG},
	{"records.jsonl", syscall.S_IFREG},
	{"by-offset", syscall.S_IFDIR},
	{"by-time", syscall.S_IFDIR},
	{"cursors", syscall.S_IFDIR},
	{"segments", syscall.S_IFDIR},
	{"stats", syscall.S_IFREG},
}

func (p *partitionNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	testPanic("lookup", &p.Inode, name)
	pl, _, err := p.fsys.partition(ctx, p.loc)
	if err != nil {
		return nil, p.fsys.errno("lookup", err)
	}
	var mk func() fs.InodeEmbedder
	mode := uint32(syscall.S_IFREG)
	switch name {
	case "append", "append.jsonl":
		mk = func() fs.InodeEmbedder {
			return &appendNode{fsys: p.fsys, topic: p.loc.topic, gen: p.loc.gen, partition: p.loc.id, jsonl: name == "append.jsonl"}
		}
	case "records", "records.jsonl":
		mk = func() fs.InodeEmbedder {
			return &viewNode{fsys: p.fsys, loc: p.loc, kind: viewRecords, jsonl: name == "records.jsonl"}
		}
	case "stats":
		mk = func() fs.InodeEmbedder { return &statsNode{fsys: p.fsys, loc: p.loc} }
	case "by-offset":
		mk, mode = func() fs.InodeEmbedder { return &byOffsetDir{dirBase: dirBase{fsys: p.fsys}, loc: p.loc} }, syscall.S_IFDIR
	case "by-time":
		mk, mode = func() fs.InodeEmbedder { return &byTimeDir{dirBase: dirBase{fsys: p.fsys}, loc: p.loc} }, syscall.S_IFDIR
	case "cursors":
		mk, mode = func() fs.InodeEmbedder {
			return &cursorsDir{dirBase: dirBase{fsys: p.fsys}, topic: p.loc.topic, gen: p.loc.gen, id: p.loc.id}
		}, syscall.S_IFDIR
	case "segments":
		if localOf(pl) == nil {
			return nil, syscall.ENOENT
		}
		mk, mode = func() fs.InodeEmbedder { return &segmentsDir{dirBase: dirBase{fsys: p.fsys}, loc: p.loc} }, syscall.S_IFDIR
	default:
		return nil, syscall.ENOENT
	}
	ch := p.childInode(ctx, name, fs.StableAttr{Mode: mode, Ino: p.loc.ino(name), Gen: p.loc.gen + 1}, mk)
	return ch, entry(ctx, ch.Operations(), out)
}

func (p *partitionNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	pl, _, err := p.fsys.partition(ctx, p.loc)
	if err != nil {
		return nil, p.fsys.errno("readdir", err)
	}
	entries := make([]fuse.DirEntry, 0, len(partitionEntries))
	for _, e := range partitionEntries {
		if e.name == "segments" && localOf(pl) == nil {
			continue // only a partition on local disk has segment files
		}
		entries = append(entries, fuse.DirEntry{Name: e.name, Mode: e.mode, Ino: p.loc.ino(e.name)})
	}
	return listDir(entries), 0
}

// byOffsetDir resolves by-offset/<N>[.jsonl] on lookup. It lists only the
// log start and log end offsets as examples; any offset in between works.
type byOffsetDir struct {
	dirBase
	loc partLoc
}

var (
	_ fs.NodeLookuper  = (*byOffsetDir)(nil)
	_ fs.NodeReaddirer = (*byOffsetDir)(nil)
)

func (d *byOffsetDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	off, jsonl, err := parseByOffset(name)
	if err != nil {
		return nil, syscall.ENOENT
	}
	pl, _, err := d.fsys.partition(ctx, d.loc)
	if err != nil {
		return nil, d.fsys.errno("lookup", err)
	}
	if off >= 0 {
		// by-offset/-N always exists; N must be retained or the end.
		offs, err := pl.Offsets(ctx)
		if err != nil {
			return nil, d.fsys.errno("lookup", err)
		}
		if off < offs.LogStart || off > offs.End {
			return nil, syscall.ENOENT
		}
	}
	ch := d.childInode(ctx, name, fs.StableAttr{Mode: syscall.S_IFREG, Ino: d.loc.ino("by-offset", name), Gen: d.loc.gen + 1}, func() fs.InodeEmbedder {
		return &viewNode{fsys: d.fsys, loc: d.loc, kind: viewByOffset, jsonl: jsonl, offset: off}
	})
	if off < 0 {
		// The start moves as the log grows: do not let the kernel keep
		// the entry (and its size) for long.
		out.SetEntryTimeout(time.Millisecond)
		out.SetAttrTimeout(time.Millisecond)
	}
	return ch, entry(ctx, ch.Operations(), out)
}

func (d *byOffsetDir) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	pl, _, err := d.fsys.partition(ctx, d.loc)
	if err != nil {
		return nil, d.fsys.errno("readdir", err)
	}
	bounds, err := pl.Offsets(ctx)
	if err != nil {
		return nil, d.fsys.errno("readdir", err)
	}
	var entries []fuse.DirEntry
	offs := []int64{bounds.LogStart}
	if bounds.End != offs[0] {
		offs = append(offs, bounds.End)
	}
	for _, off := range offs {
		for _, jsonl := range []bool{false, true} {
			name := formatOffsetName(off, jsonl)
			entries = append(entries, fuse.DirEntry{Name: name, Mode: syscall.S_IFREG, Ino: d.loc.ino("by-offset", name)})
		}
	}
	return listDir(entries), 0
}

// byTimeDir resolves by-time/<T>[.jsonl] on lookup; it lists nothing (any
// epoch-ms, RFC 3339 or relative name works).
type byTimeDir struct {
	dirBase
	loc partLoc
}

var (
	_ fs.NodeLookuper  = (*byTimeDir)(nil)
	_ fs.NodeReaddirer = (*byTimeDir)(nil)
)

func (d *byTimeDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	spec, jsonl, err := parseByTime(name)
	if err != nil {
		return nil, syscall.ENOENT
	}
	if _, _, err := d.fsys.partition(ctx, d.loc); err != nil {
		return nil, d.fsys.errno("lookup", err)
	}
	ch := d.childInode(ctx, name, fs.StableAttr{Mode: syscall.S_IFREG, Ino: d.loc.ino("by-time", name), Gen: d.loc.gen + 1}, func() fs.InodeEmbedder {
		return &viewNode{fsys: d.fsys, loc: d.loc, kind: viewByTime, jsonl: jsonl, tspec: spec}
	})
	if spec.relative {
		// The start moves with the clock: do not let the kernel keep the
		// entry (and its size) for long.
		out.SetEntryTimeout(time.Millisecond)
		out.SetAttrTimeout(time.Millisecond)
	}
	return ch, entry(ctx, ch.Operations(), out)
}

func (d *byTimeDir) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	return listDir(nil), 0
}
