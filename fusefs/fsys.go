package fusefs

import (
	"cmp"
	"context"
	"hash/fnv"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/backend/local"
	"github.com/topicfs/topicfs/engine"
)

// localPartition is what the tree uses of a partition on local disk
// beyond backend.Partition: the segments/ directory, the local fields of
// stats and the append path that encodes outside the partition lock.
// backend/local's Partition has it; a cluster's partitions do not.
type localPartition interface {
	backend.Partition
	Engine() *engine.Partition
}

// lineEncoder is a partition that encodes plain lines into batches
// outside its lock, then appends them (the local engine's path for
// cat > append; see appendHandle.writeBare).
type lineEncoder interface {
	EncodeLines(e *engine.EncodedLines, lines []byte, batchBytes int) error
	AppendEncoded(e *engine.EncodedLines) (first, last int64, err error)
}

// localOf returns p's engine partition, or nil if p is not on local disk.
func localOf(p backend.Partition) *engine.Partition {
	if lp, ok := p.(localPartition); ok {
		return lp.Engine()
	}
	return nil
}

// fsys is the state shared by every node of one mount.
type fsys struct {
	b       backend.Backend
	local   *engine.LogDir // the data directory, nil in cluster mode
	opts    Options
	log     *slog.Logger
	mounted time.Time
	cache   *indexCache
	sizes   *viewSizes   // ViewSizesFile
	sticky  atomic.Int64 // where the next handle's keyless records start (round robin)
	// tailsHeld counts mu.tails, so readers skip the lock when it is 0.
	tailsHeld atomic.Int32
	// passthrough is set once at mount when segments/ may offer sealed
	// segments' files for FUSE passthrough (passthrough.go).
	passthrough atomic.Bool
	refusedOnce sync.Once    // the warning that the kernel did not take one
	curLocks    cursorLocks  // cursors open for reading (cursors.go)
	keys        *keyIndexes  // by-key/ (keyindexes.go)
	spares      spareReaders // chunks a LOOKUP read, for the OPEN's READ (spare.go)

	mu struct {
		sync.Mutex
		gens    map[string]uint64      // topic → generation, bumped when it is deleted
		parts   map[partKey]*partState // partitions with view or notifier state
		writers map[string]int         // topic → open append/config write handles
		// released is closed (and replaced) whenever a write handle is
		// released or drops its tail hold, to wake a waiting rmdir or
		// reader.
		released chan struct{}
		// tails are the append handles whose FLUSH left an unterminated
		// line that becomes a record at their RELEASE (appendline.go).
		tails map[*appendHandle]tailHold
	}
}

func newFsys(b backend.Backend, opts Options) *fsys {
	f := &fsys{b: b, opts: opts, log: opts.Logger, mounted: time.Now(), cache: newIndexCache(cmp.Or(opts.indexEntries, indexCacheEntries), measureEntries)}
	if f.log == nil {
		f.log = slog.Default()
	}
	if lb, ok := b.(*local.Backend); ok {
		f.local = lb.LogDir()
	}
	f.sizes = newViewSizes(f.local, opts.ReadOnly, f.log)
	spill := opts.KeyIndexDir
	if spill == "" && f.local != nil {
		spill = f.local.Path()
	}
	f.keys = newKeyIndexes(f, opts.KeyIndexMemory, spill)
	f.mu.gens = map[string]uint64{}
	f.mu.parts = map[partKey]*partState{}
	f.mu.writers = map[string]int{}
	f.mu.released = make(chan struct{})
	f.mu.tails = map[*appendHandle]tailHold{}
	return f
}

// segIndex returns the cached index of k's segment; a fresh one is seeded
// from ViewSizesFile's saved index for the segment at size limit, if any,
// so that extending it scans only what that mount did not.
func (f *fsys) segIndex(k segKey, limit int64, ab *abortedSet) *segIndex {
	x := f.cache.get(k)
	x.seed(f.sizes, limit, ab)
	return x
}

// errno maps err for operation op (see errno.go).
func (f *fsys) errno(op string, err error) syscall.Errno { return toErrno(f.log, op, err) }

// refuse is the errno for a change the tree does not allow: EROFS on a
// read-only mount, else EPERM.
func (f *fsys) refuse() syscall.Errno {
	if f.opts.ReadOnly {
		return syscall.EROFS
	}
	return syscall.EPERM
}

// gen returns the generation of topic: 0 until it is first deleted.
func (f *fsys) gen(topic string) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.gens[topic]
}

// ino is the inode number of a path under a topic generation: a 64-bit
// FNV-1a hash of the generation and the path components. It is the same
// whenever the same name is looked up again (after FORGET too, so tail -F
// never sees a replaced file), differs for a recreated topic, and is never
// 0, 1 (the root) or ^0.
func ino(gen uint64, parts ...string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(strconv.FormatUint(gen, 10)))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	v := h.Sum64()
	if v <= 1 || v == ^uint64(0) {
		v += 2
	}
	return v
}

// partLoc names a partition as the tree sees it.
type partLoc struct {
	topic string
	gen   uint64
	id    int
}

func (l partLoc) ino(rest ...string) uint64 {
	return ino(l.gen, append([]string{l.topic, strconv.Itoa(l.id)}, rest...)...)
}

// topic resolves the topic of generation gen; a deleted (or deleted and
// recreated) topic is ErrUnknownTopic.
func (f *fsys) topic(ctx context.Context, name string, gen uint64) (backend.Topic, error) {
	if f.gen(name) != gen {
		return nil, backend.ErrUnknownTopic
	}
	return f.b.Topic(ctx, name)
}

// writeTopic is topic for a writer: it makes sure the topic is still the
// one of its name (backend.Verifier), so that records written right after
// another client made the topic again go to the new one.
func (f *fsys) writeTopic(ctx context.Context, name string, gen uint64) (backend.Topic, error) {
	t, err := f.topic(ctx, name, gen)
	if err != nil {
		return nil, err
	}
	return t, backend.VerifyTopic(ctx, t)
}

// partition resolves l to the engine partition and its view state.
func (f *fsys) partition(ctx context.Context, l partLoc) (backend.Partition, *partState, error) {
	t, err := f.topic(ctx, l.topic, l.gen)
	if err != nil {
		return nil, nil, err
	}
	p, err := t.Partition(l.id)
	if err != nil {
		return nil, nil, err
	}
	return p, f.partState(p), nil
}

// partState returns the view state of p, creating it on first use.
func (f *fsys) partState(p backend.Partition) *partState {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := partKey{p.Topic(), p.ID()}
	ps := f.mu.parts[key]
	if ps == nil || ps.p != p {
		// A new partition value for the name (a topic made again by
		// another client) replaces the old one's state: views open on
		// the old one keep theirs, as after rmdir.
		ps = newPartState(f, p)
		f.mu.parts[key] = ps
	}
	return ps
}

// partKey names a partition in fsys's state.
type partKey struct {
	topic string
	id    int
}

// notified returns a channel closed once the views of p that the kernel
// knows have been told of its growth, or nil if there are none.
func (f *fsys) notified(p backend.Partition) chan struct{} {
	f.mu.Lock()
	ps := f.mu.parts[partKey{p.Topic(), p.ID()}]
	f.mu.Unlock()
	if ps == nil || ps.p != p {
		return nil
	}
	return ps.notified()
}

// addWriter counts an open write handle on topic (rmdir refuses while any).
func (f *fsys) addWriter(topic string, delta int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.writers[topic] += delta
	if f.mu.writers[topic] <= 0 {
		delete(f.mu.writers, topic)
	}
	if delta < 0 {
		close(f.mu.released)
		f.mu.released = make(chan struct{})
	}
}

// releaseGrace is how long rmdir waits for the write handles of a topic to
// be released before it answers EBUSY. The kernel sends RELEASE after
// close(2) has returned, so `echo x > t/0/append && rmdir t` can reach
// rmdir before the echo's handle is gone; a handle really held open
// (exec 3>>append) still gets EBUSY, after this delay.
const releaseGrace = time.Second

// graceWait bounds one call's waits for handles to be released to
// releaseGrace in all. The zero value is ready; stop it when done.
type graceWait struct {
	t       *time.Timer
	expired bool
}

// wait waits for released to be closed: 0 when it is, EBUSY once
// releaseGrace has passed since the first wait, EINTR when ctx ends.
func (g *graceWait) wait(ctx context.Context, released <-chan struct{}) syscall.Errno {
	if g.expired {
		return syscall.EBUSY
	}
	if g.t == nil {
		g.t = time.NewTimer(releaseGrace)
	}
	select {
	case <-released:
		return 0
	case <-g.t.C:
		g.expired = true
		return syscall.EBUSY
	case <-ctx.Done():
		return syscall.EINTR
	}
}

func (g *graceWait) stop() {
	if g.t != nil {
		g.t.Stop()
	}
}

// deleteTopic deletes topic unless a write handle is open on it (EBUSY).
func (f *fsys) deleteTopic(ctx context.Context, name string) syscall.Errno {
	f.mu.Lock()
	defer f.mu.Unlock()
	var g graceWait
	defer g.stop()
	for f.mu.writers[name] > 0 {
		released := f.mu.released
		f.mu.Unlock()
		errno := g.wait(ctx, released)
		f.mu.Lock()
		if errno == syscall.EINTR || errno != 0 && f.mu.writers[name] > 0 {
			return errno
		}
	}
	if err := f.b.DeleteTopic(ctx, name); err != nil {
		return f.errno("rmdir", err)
	}
	f.mu.gens[name]++
	for key := range f.mu.parts {
		if key.topic == name {
			delete(f.mu.parts, key) // open views keep their partState and segments
		}
	}
	go f.keys.dropTopic(name, f.mu.gens[name]) // closing waits for the follower: not under f.mu
	return 0
}
