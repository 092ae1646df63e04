package fusefs

import (
	"context"
	"strconv"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// topicNode is a topic directory: append, append.jsonl, config and one
// directory per partition. mkdir TOPIC/N with N the current partition count
// adds partition N (as does writing num.partitions=N+1 to config).
type topicNode struct {
	dirBase
	name string
	gen  uint64
}

var (
	_ fs.NodeLookuper  = (*topicNode)(nil)
	_ fs.NodeReaddirer = (*topicNode)(nil)
	_ fs.NodeMkdirer   = (*topicNode)(nil)
)

// parsePartitionName accepts canonical decimal partition ids ("0", "12").
func parsePartitionName(name string) (int, bool) {
	id, err := strconv.Atoi(name)
	if err != nil || id < 0 || strconv.Itoa(id) != name {
		return 0, false
	}
	return id, true
}

func (t *topicNode) partitionChild(ctx context.Context, id int, out *fuse.EntryOut) *fs.Inode {
	loc := partLoc{topic: t.name, gen: t.gen, id: id}
	ch := t.childInode(ctx, strconv.Itoa(id), fs.StableAttr{Mode: syscall.S_IFDIR, Ino: loc.ino(), Gen: t.gen + 1}, func() fs.InodeEmbedder {
		return &partitionNode{dirBase: dirBase{fsys: t.fsys}, loc: loc}
	})
	t.fsys.dirAttr(&out.Attr)
	return ch
}

func (t *topicNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	topic, err := t.fsys.topic(ctx, t.name, t.gen)
	if err != nil {
		return nil, t.fsys.errno("lookup", err)
	}
	var mk func() fs.InodeEmbedder
	switch name {
	case "append", "append.jsonl":
		mk = func() fs.InodeEmbedder {
			return &appendNode{fsys: t.fsys, topic: t.name, gen: t.gen, partition: -1, jsonl: name == "append.jsonl"}
		}
	case "config":
		mk = func() fs.InodeEmbedder { return &configNode{fsys: t.fsys, topic: t.name, gen: t.gen} }
	case "stats":
		mk = func() fs.InodeEmbedder {
			return &statsNode{fsys: t.fsys, loc: partLoc{topic: t.name, gen: t.gen, id: -1}}
		}
	case "cursors", "by-key":
		ch := t.childInode(ctx, name, fs.StableAttr{Mode: syscall.S_IFDIR, Ino: ino(t.gen, t.name, name), Gen: t.gen + 1}, func() fs.InodeEmbedder {
			if name == "by-key" {
				return &byKeyDir{dirBase: dirBase{fsys: t.fsys}, topic: t.name, gen: t.gen}
			}
			return &cursorsDir{dirBase: dirBase{fsys: t.fsys}, topic: t.name, gen: t.gen, id: -1}
		})
		t.fsys.dirAttr(&out.Attr)
		return ch, 0
	default:
		id, ok := parsePartitionName(name)
		if !ok {
			return nil, syscall.ENOENT
		}
		if _, err := topic.Partition(id); err != nil {
			return nil, t.fsys.errno("lookup", err)
		}
		return t.partitionChild(ctx, id, out), 0
	}
	ch := t.childInode(ctx, name, fs.StableAttr{Mode: syscall.S_IFREG, Ino: ino(t.gen, t.name, name), Gen: t.gen + 1}, mk)
	return ch, entry(ctx, ch.Operations(), out)
}

// topicEntries are the fixed names of a topic directory (its partitions
// follow).
var topicEntries = []treeEntry{
	{"append", syscall.S_IFREG},
	{"append.jsonl", syscall.S_IFREG},
	{"by-key", syscall.S_IFDIR},
	{"config", syscall.S_IFREG},
	{"cursors", syscall.S_IFDIR},
	{"stats", syscall.S_IFREG},
}

func (t *topicNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	topic, err := t.fsys.topic(ctx, t.name, t.gen)
	if err != nil {
		return nil, t.fsys.errno("readdir", err)
	}
	entries := make([]fuse.DirEntry, 0, len(topicEntries)+topic.NumPartitions())
	for _, e := range topicEntries {
		entries = append(entries, fuse.DirEntry{Name: e.name, Mode: e.mode, Ino: ino(t.gen, t.name, e.name)})
	}
	for id := range topic.NumPartitions() {
		loc := partLoc{topic: t.name, gen: t.gen, id: id}
		entries = append(entries, fuse.DirEntry{Name: strconv.Itoa(id), Mode: syscall.S_IFDIR, Ino: loc.ino()})
	}
	return listDir(entries), 0
}

// Mkdir adds the next partition: the name must be the current partition
// count (EEXIST for an existing one, EINVAL for a gap or a non-number).
func (t *topicNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if t.fsys.opts.ReadOnly {
		return nil, syscall.EROFS
	}
	topic, err := t.fsys.topic(ctx, t.name, t.gen)
	if err != nil {
		return nil, t.fsys.errno("mkdir partition", err)
	}
	id, ok := parsePartitionName(name)
	if !ok {
		return nil, syscall.EINVAL
	}
	n := topic.NumPartitions()
	switch {
	case id < n:
		return nil, syscall.EEXIST
	case id > n:
		return nil, syscall.EINVAL
	}
	if err := topic.AddPartitions(ctx, n+1); err != nil {
		return nil, t.fsys.errno("mkdir partition", err)
	}
	return t.partitionChild(ctx, id, out), 0
}
