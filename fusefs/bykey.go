package fusefs

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/keyindex"
)

// byKeyDir is a topic's by-key/: one file per live key, reading as the
// key's latest value. A key lives in the partition Kafka's default
// partitioner gives it (murmur2), as append puts it there.
type byKeyDir struct {
	dirBase
	topic string
	gen   uint64
}

var (
	_ fs.NodeLookuper  = (*byKeyDir)(nil)
	_ fs.NodeReaddirer = (*byKeyDir)(nil)
	_ fs.NodeCreater   = (*byKeyDir)(nil)
	_ fs.NodeUnlinker  = (*byKeyDir)(nil)
)

func (d *byKeyDir) ino(name string) uint64 { return ino(d.gen, d.topic, "by-key", name) }

// find returns the latest live record of the key ref names and its
// partition. A key given by its digest is looked for in every partition.
func (d *byKeyDir) find(ctx context.Context, ref keyindex.Ref) (keyindex.Entry, int, error) {
	t, err := d.fsys.topic(ctx, d.topic, d.gen)
	if err != nil {
		return keyindex.Entry{}, 0, err
	}
	n := t.NumPartitions()
	ids := []int{0}
	if ref.Digest != nil {
		ids = make([]int, n)
		for i := range ids {
			ids[i] = i
		}
	} else {
		ids[0] = partitionForKey(ref.Key, n)
	}
	for _, id := range ids {
		p, err := t.Partition(id)
		if err != nil {
			return keyindex.Entry{}, 0, err
		}
		x, err := d.fsys.keys.of(partLoc{topic: d.topic, gen: d.gen, id: id}, p)
		if err != nil {
			return keyindex.Entry{}, 0, err
		}
		e, err := x.Lookup(ctx, ref)
		if errors.Is(err, keyindex.ErrNotFound) {
			continue
		}
		if err == nil && partitionForKey(e.Key, n) != id {
			continue // a key written to another partition than its own
		}
		return e, id, err
	}
	return keyindex.Entry{}, 0, keyindex.ErrNotFound
}

func (d *byKeyDir) child(ctx context.Context, name string, ref keyindex.Ref) *fs.Inode {
	return d.childInode(ctx, name, fs.StableAttr{Mode: syscall.S_IFREG, Ino: d.ino(name), Gen: d.gen + 1}, func() fs.InodeEmbedder {
		return &byKeyNode{dir: d, ref: ref}
	})
}

// Lookup finds a live key: ENOENT for a key never written, deleted by a
// tombstone, or a name that names no key.
func (d *byKeyDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ref, err := keyindex.ParseName(name)
	if err != nil {
		return nil, syscall.ENOENT
	}
	d.awaitWriters(ctx, name)
	if _, _, err := d.find(ctx, ref); err != nil {
		return nil, d.fsys.keyErrno("lookup", err)
	}
	ch := d.child(ctx, name, ref)
	// Values change behind the kernel's back (appends, other clients).
	out.SetEntryTimeout(time.Millisecond)
	out.SetAttrTimeout(time.Millisecond)
	return ch, entry(ctx, ch.Operations(), out)
}

// awaitWriters waits for the closed writers of the key called name, if
// the tree holds its file (byKeyNode.awaitWriters).
func (d *byKeyDir) awaitWriters(ctx context.Context, name string) {
	if ch := d.GetChild(name); ch != nil {
		if n, ok := ch.Operations().(*byKeyNode); ok {
			n.awaitWriters(ctx)
		}
	}
}

// keyErrno maps a by-key failure: an absent key is ENOENT.
func (f *fsys) keyErrno(op string, err error) syscall.Errno {
	if errors.Is(err, keyindex.ErrNotFound) {
		return syscall.ENOENT
	}
	return f.errno(op, err)
}

// Readdir lists the live keys, partition by partition, a chunk of the
// index at a time (memory does not grow with the number of keys).
func (d *byKeyDir) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	t, err := d.fsys.topic(ctx, d.topic, d.gen)
	if err != nil {
		return nil, d.fsys.errno("readdir", err)
	}
	// Keys whose writers closed but are not yet released (the kernel
	// sends RELEASE after close(2) returned) are appended first, so that
	// `echo v > by-key/K; ls by-key` lists K.
	for _, ch := range d.Children() {
		if n, ok := ch.Operations().(*byKeyNode); ok {
			n.awaitWriters(ctx)
		}
	}
	return &keyStream{d: d, n: t.NumPartitions()}, 0
}

// Create makes a key: the file's content, written and closed, becomes its
// value (one record appended to the key's partition).
func (d *byKeyDir) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if d.fsys.opts.ReadOnly {
		return nil, nil, 0, syscall.EROFS
	}
	ref, err := keyindex.ParseName(name)
	if err != nil || ref.Digest != nil {
		// A digest names a key it cannot spell: only existing keys have one.
		d.fsys.log.Info("fusefs: by-key name names no key (EINVAL)", "topic", d.topic, "name", name)
		return nil, nil, 0, syscall.EINVAL
	}
	if _, err := d.fsys.topic(ctx, d.topic, d.gen); err != nil {
		return nil, nil, 0, d.fsys.errno("create", err)
	}
	ch := d.child(ctx, name, ref)
	n := ch.Operations().(*byKeyNode)
	h := &keyWriteHandle{trunc: true}
	n.addWriter(h)
	n.attr(&out.Attr, 0)
	return ch, h, fuse.FOPEN_DIRECT_IO, 0
}

// Unlink deletes a key: a tombstone (null value) appended to its
// partition. ENOENT if the key has no live value.
func (d *byKeyDir) Unlink(ctx context.Context, name string) syscall.Errno {
	if d.fsys.opts.ReadOnly {
		return syscall.EROFS
	}
	ref, err := keyindex.ParseName(name)
	if err != nil {
		return syscall.ENOENT
	}
	d.awaitWriters(ctx, name)
	e, _, err := d.find(ctx, ref)
	if err != nil {
		return d.fsys.keyErrno("unlink", err)
	}
	return d.put(ctx, e.Key, nil, "unlink")
}

// put appends (key, value) to the key's partition (murmur2, as append
// places keyed records); a nil value is a tombstone.
func (d *byKeyDir) put(ctx context.Context, key, value []byte, op string) syscall.Errno {
	t, err := d.fsys.writeTopic(ctx, d.topic, d.gen)
	if err != nil {
		return d.fsys.errno(op, err)
	}
	p, err := t.Partition(partitionForKey(key, t.NumPartitions()))
	if err != nil {
		return d.fsys.errno(op, err)
	}
	r := record.Record{Key: key, Value: value, Timestamp: time.Now().UnixMilli()}
	if _, _, err := p.AppendEach(ctx, [][]record.Record{{r}}); err != nil {
		return d.fsys.errno(op, err)
	}
	return 0
}

// keyStream is the by-key/ listing: the keys of partition p's index from
// slot on, fetched a chunk at a time.
type keyStream struct {
	d       *byKeyDir
	n       int // partitions
	p, slot int
	started bool
	pending []fuse.DirEntry
	err     syscall.Errno
}

var _ fs.DirStream = (*keyStream)(nil)

func (s *keyStream) HasNext() bool {
	for len(s.pending) == 0 && s.err == 0 && s.p < s.n {
		s.fill()
	}
	return len(s.pending) > 0 || s.err != 0
}

// fill reads the next chunk of keys into pending.
func (s *keyStream) fill() {
	ctx := context.Background()
	x, err := s.d.fsys.keys.get(ctx, partLoc{topic: s.d.topic, gen: s.d.gen, id: s.p})
	if err == nil && !s.started {
		err = x.Ready(ctx)
		s.started = true
	}
	if err != nil {
		s.err = s.d.fsys.keyErrno("readdir", err)
		return
	}
	next, err := x.ListChunk(ctx, s.slot, func(key []byte) error {
		if partitionForKey(key, s.n) == s.p {
			name := keyindex.Name(key)
			s.pending = append(s.pending, fuse.DirEntry{Name: name, Mode: syscall.S_IFREG, Ino: s.d.ino(name)})
		}
		return nil
	})
	switch {
	case err != nil:
		s.err = s.d.fsys.keyErrno("readdir", err)
	case next < 0:
		s.p, s.slot, s.started = s.p+1, 0, false
	default:
		s.slot = next
	}
}

func (s *keyStream) Next() (fuse.DirEntry, syscall.Errno) {
	if len(s.pending) == 0 {
		return fuse.DirEntry{}, s.err
	}
	e := s.pending[0]
	s.pending = s.pending[1:]
	return e, 0
}

func (s *keyStream) Close() {}
