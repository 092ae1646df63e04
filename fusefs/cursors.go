package fusefs

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/engine"
)

// Cursors (README, Cursors) are named, durable read positions, stored by
// the backend (backend.Cursors: a checkpoint file on one disk, a consumer
// group in a cluster). <topic>/<p>/cursors/NAME reads one partition from
// the cursor's position, <topic>/cursors/NAME every partition in order;
// closing a handle that read to the end commits where the content ended,
// so a pipeline reading a cursor is at-least-once and never skips.

// errNoCursors reports a backend that keeps no cursors.
var errNoCursors = fmt.Errorf("fusefs: this backend keeps no cursors: %w", syscall.EOPNOTSUPP)

// cursorName returns the cursor a cursors/ entry names and whether it is
// the JSON rendering: NAME or NAME.jsonl, NAME a valid Kafka topic name
// (engine.ValidTopicName: a cursor is a consumer group in a cluster, and
// the same rule keeps local names file-safe).
func cursorName(entry string) (string, bool, bool) {
	name, jsonl := splitFormat(entry)
	if engine.ValidTopicName(name) != nil {
		return "", false, false
	}
	if _, again := splitFormat(name); again {
		return "", false, false // NAME.jsonl.jsonl: NAME.jsonl is not a cursor name
	}
	return name, jsonl, true
}

// treeName reports whether name (without .jsonl) is also a file or
// directory name of a topic or partition directory.
func treeName(name string) bool {
	for _, es := range [][]treeEntry{topicEntries, partitionEntries} {
		for _, e := range es {
			if base, _ := splitFormat(e.name); base == name {
				return true
			}
		}
	}
	return false
}

// cursorsOf returns the backend's cursor store.
func (f *fsys) cursorsOf() (backend.Cursors, error) {
	cb, ok := f.b.(backend.Cursors)
	if !ok {
		return nil, errNoCursors
	}
	return cb, nil
}

// cursorsDir is a cursors/ directory: of partition id, or with id -1 of
// the whole topic.
type cursorsDir struct {
	dirBase
	topic string
	gen   uint64
	id    int
}

var (
	_ fs.NodeLookuper  = (*cursorsDir)(nil)
	_ fs.NodeReaddirer = (*cursorsDir)(nil)
	_ fs.NodeUnlinker  = (*cursorsDir)(nil)
	_ fs.NodeCreater   = (*cursorsDir)(nil)
)

func (d *cursorsDir) ino(entry string) uint64 {
	return ino(d.gen, d.topic, strconv.Itoa(d.id), "cursors", entry)
}

// Lookup resolves any valid name: reading a cursor that does not exist
// creates it (at cursor.start), as a consumer group comes into being at
// its first commit.
func (d *cursorsDir) Lookup(ctx context.Context, file string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	name, jsonl, ok := cursorName(file)
	if !ok {
		return nil, syscall.ENOENT
	}
	cb, err := d.fsys.cursorsOf()
	if err != nil {
		return nil, d.fsys.errno("lookup", err)
	}
	if _, err := d.fsys.topic(ctx, d.topic, d.gen); err != nil {
		return nil, d.fsys.errno("lookup", err)
	}
	if treeName(name) {
		// A glob such as t/*/records or t/*/stats finds cursors/records
		// and would create (and advance) a cursor of that name: such
		// names are cursors only once they have a position.
		if _, ok, err := cb.Cursor(ctx, d.topic, name); err != nil || !ok {
			return nil, syscall.ENOENT
		}
	}
	ch := d.childInode(ctx, file, fs.StableAttr{Mode: syscall.S_IFREG, Ino: d.ino(file), Gen: d.gen + 1}, func() fs.InodeEmbedder {
		return &cursorNode{fsys: d.fsys, topic: d.topic, gen: d.gen, id: d.id, name: name, jsonl: jsonl}
	})
	// Commits change the size behind the kernel's back.
	out.SetEntryTimeout(time.Millisecond)
	out.SetAttrTimeout(time.Millisecond)
	return ch, entry(ctx, ch.Operations(), out)
}

// Create is writing a position to a cursor Lookup does not resolve (one
// named like a file of the tree, before it has a position).
func (d *cursorsDir) Create(ctx context.Context, file string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if d.fsys.opts.ReadOnly {
		return nil, nil, 0, syscall.EROFS
	}
	name, jsonl, ok := cursorName(file)
	if !ok {
		return nil, nil, 0, syscall.EINVAL
	}
	if _, err := d.fsys.topic(ctx, d.topic, d.gen); err != nil {
		return nil, nil, 0, d.fsys.errno("create", err)
	}
	ch := d.childInode(ctx, file, fs.StableAttr{Mode: syscall.S_IFREG, Ino: d.ino(file), Gen: d.gen + 1}, func() fs.InodeEmbedder {
		return &cursorNode{fsys: d.fsys, topic: d.topic, gen: d.gen, id: d.id, name: name, jsonl: jsonl}
	})
	out.Mode = syscall.S_IFREG | d.fsys.perm(0644)
	out.SetEntryTimeout(time.Millisecond)
	out.SetAttrTimeout(time.Millisecond)
	return ch, &cursorWriteHandle{}, fuse.FOPEN_DIRECT_IO, 0
}

// Readdir lists the cursors with a position here (for a topic: on any
// partition), each with its .jsonl twin.
func (d *cursorsDir) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	cb, err := d.fsys.cursorsOf()
	if err != nil {
		return nil, d.fsys.errno("readdir", err)
	}
	if _, err := d.fsys.topic(ctx, d.topic, d.gen); err != nil {
		return nil, d.fsys.errno("readdir", err)
	}
	all, err := cb.ListCursors(ctx, d.topic)
	if err != nil {
		return nil, d.fsys.errno("readdir", err)
	}
	var names []string
	for name, pos := range all {
		if _, _, ok := cursorName(name); !ok {
			continue // a group whose name no file can carry
		}
		if _, has := pos[d.id]; d.id >= 0 && !has {
			continue
		}
		names = append(names, name)
	}
	slices.Sort(names)
	entries := make([]fuse.DirEntry, 0, 2*len(names))
	for _, name := range names {
		for _, e := range []string{name, name + jsonlSuffix} {
			entries = append(entries, fuse.DirEntry{Name: e, Mode: syscall.S_IFREG, Ino: d.ino(e)})
		}
	}
	return listDir(entries), 0
}

// Unlink deletes a cursor (NAME or NAME.jsonl alike): of this partition,
// or of every partition for the topic's cursors/.
func (d *cursorsDir) Unlink(ctx context.Context, file string) syscall.Errno {
	if d.fsys.opts.ReadOnly {
		return syscall.EROFS
	}
	name, _, ok := cursorName(file)
	if !ok {
		return syscall.ENOENT
	}
	cb, err := d.fsys.cursorsOf()
	if err != nil {
		return d.fsys.errno("unlink", err)
	}
	var parts []int
	if d.id >= 0 {
		parts = []int{d.id}
	}
	if err := cb.DeleteCursor(ctx, d.topic, name, parts); err != nil {
		return d.fsys.errno("unlink", err)
	}
	d.fsys.log.Info("fusefs: cursor deleted", "topic", d.topic, "partition", d.id, "cursor", name)
	// The twin names the same cursor: drop it from the tree as well.
	twin := name + jsonlSuffix
	if file != name {
		twin = name
	}
	d.RmChild(twin)
	return 0
}

// cursorLocks lets one reader at a time hold a cursor (a topic's cursor
// NAME and its partitions' cursors NAME are the same positions).
type cursorLocks struct {
	mu       sync.Mutex
	held     map[string]bool
	released chan struct{} // closed and replaced at every unlock
}

func cursorKey(topic, name string) string { return topic + "\x00" + name }

// acquire takes key, waiting up to releaseGrace for a holder to let go:
// the kernel sends RELEASE after close(2) has returned, so
// `cat cursors/c; cat cursors/c` can open again before the first handle
// is gone. A handle really held open makes the second open EBUSY.
func (l *cursorLocks) acquire(ctx context.Context, key string) syscall.Errno {
	var g graceWait
	defer g.stop()
	for {
		l.mu.Lock()
		if l.held == nil {
			l.held = map[string]bool{}
			l.released = make(chan struct{})
		}
		if !l.held[key] {
			l.held[key] = true
			l.mu.Unlock()
			return 0
		}
		released := l.released
		l.mu.Unlock()
		if errno := g.wait(ctx, released); errno != 0 {
			return errno
		}
	}
}

func (l *cursorLocks) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.held, key)
	close(l.released)
	l.released = make(chan struct{})
}
