package keyindex

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/internal/panics"
)

// ErrNotFound reports a key that has no live record: never written, or
// its latest record is a tombstone, or retention deleted it.
var ErrNotFound = errors.New("keyindex: no such key")

// progressEvery is how often a build logs how far it got.
const progressEvery = 5 * time.Second

// retryEvery is how long the follower waits after a failed catch-up.
const retryEvery = time.Second

// Index maps the keys of one partition to the offset of each key's latest
// record: a table of 64-bit key hashes (hash/maphash, seeded per mount) to
// offsets, built by reading the partition once and kept current by
// following it. Every answer is checked against the record it points at,
// so a hash collision never returns another key's value. Safe for
// concurrent use.
type Index struct {
	p      backend.Partition
	budget *Budget
	log    *slog.Logger

	built chan struct{} // closed after the first build attempt
	stop  context.CancelFunc
	done  chan struct{}

	mu       sync.Mutex // guards t, next, sc and the catch-up
	t        *table
	next     int64 // records below next are indexed
	added    int64 // records indexed since the last noteCounts
	logStart int64 // the log start the table was last swept at
	closed   bool
	sc       scanner

	live    atomic.Int64 // keys whose latest record is not a tombstone
	slotsB  atomic.Int64 // table bytes
	spilled atomic.Bool
	indexed atomic.Int64 // next, for Stats without the lock
	records atomic.Int64 // keyed records indexed
	lastErr atomic.Pointer[error]
	warned  atomic.Bool // a collision was logged
}

// Stats describe an index for the stats file.
type Stats struct {
	LiveKeys   int64 // keys with a live latest record
	Records    int64 // keyed records indexed since the mount opened it
	IndexedTo  int64 // offset below which every record is indexed
	TableBytes int64 // the table's size, in memory or in its spill file
	Spilled    bool  // the table lives in a spill file
	Err        string
}

// Open starts indexing p in the background: the first build reads every
// retained record (logging progress), then the index follows p as it
// grows. Close stops it.
func Open(p backend.Partition, b *Budget, log *slog.Logger) *Index {
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	x := &Index{
		p: p, budget: b, built: make(chan struct{}), stop: cancel, done: make(chan struct{}),
		log: log.With("topic", p.Topic(), "partition", p.ID()),
	}
	go x.follow(ctx)
	return x
}

// Close stops following and frees the table.
func (x *Index) Close() {
	x.stop()
	<-x.done
	x.release()
}

// release frees the table; the index then answers ErrClosed.
func (x *Index) release() {
	x.mu.Lock()
	x.t.free()
	x.t, x.closed = nil, true
	x.mu.Unlock()
}

// hash is the table hash of key: maphash of the key, or of its SHA-256
// when the key is named by its digest (so the digest name finds it).
func (x *Index) hash(key []byte) uint64 {
	if long(key) {
		d := sha256.Sum256(key)
		return x.hashBytes(d[:])
	}
	return x.hashBytes(key)
}

func (x *Index) hashBytes(b []byte) uint64 {
	h := maphash.Bytes(x.budget.seed, b)
	if h == 0 {
		h = 1 // 0 marks an empty slot
	}
	return h
}

func (x *Index) refHash(r Ref) uint64 {
	if r.Digest != nil {
		return x.hashBytes(r.Digest[:])
	}
	return x.hash(r.Key)
}

// follow builds the index, then catches up each time p grows, until ctx
// ends.
func (x *Index) follow(ctx context.Context) {
	defer close(x.done)
	grew, unsubscribe := x.p.Subscribe()
	defer unsubscribe()
	first := true
	for {
		err := x.guardedCatchUp(ctx, first)
		if first {
			close(x.built)
			first = false
		}
		if gone(err) {
			x.log.Info("key index: partition gone; stopped following", "err", err)
			x.release()
			return
		}
		wait := (<-chan time.Time)(nil)
		if err != nil && ctx.Err() == nil {
			x.log.Warn("key index: catching up failed; retrying", "err", err)
			wait = time.After(retryEvery)
		}
		select {
		case <-ctx.Done():
			return
		case <-grew:
		case <-wait:
		}
	}
}

// gone reports an error after which the partition will never answer.
func gone(err error) bool {
	return errors.Is(err, backend.ErrClosed) || errors.Is(err, backend.ErrUnknownTopic) ||
		errors.Is(err, backend.ErrUnknownPartition)
}

// guardedCatchUp is catchUp with a panic turned into this catch-up's error.
func (x *Index) guardedCatchUp(ctx context.Context, build bool) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panics.Recovered(x.log, "keyindex", "follow", v, debug.Stack())
			x.lastErr.Store(&err)
		}
	}()
	if build {
		select {
		case x.budget.builds <- struct{}{}:
			defer func() { <-x.budget.builds }()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if build {
		return x.build(ctx)
	}
	return x.catchUp(ctx)
}

// build is the first catch-up, with progress in the log.
func (x *Index) build(ctx context.Context) error {
	start := time.Now()
	offs, err := x.p.Offsets(ctx)
	if err != nil {
		x.setErr(err)
		return err
	}
	x.log.Info("key index: building", "log_start", offs.LogStart, "end", offs.End)
	last := start
	x.sc.progress = func(next, read int64) {
		if now := time.Now(); now.Sub(last) >= progressEvery {
			last = now
			x.log.Info("key index: building", "offset", next, "end", offs.End,
				"keys", x.live.Load(), "bytes_read", read)
		}
	}
	err = x.catchUp(ctx)
	x.sc.progress = nil
	if err != nil {
		return err
	}
	x.log.Info("key index: built", "keys", x.live.Load(), "records", x.records.Load(),
		"end", x.next, "table_bytes", x.slotsB.Load(), "spilled", x.spilled.Load(),
		"took", time.Since(start).Round(time.Millisecond))
	return nil
}

// catchUp indexes the records appended since the last catch-up. The
// caller holds x.mu.
func (x *Index) catchUp(ctx context.Context) error {
	offs, err := x.p.Offsets(ctx)
	if err != nil {
		x.setErr(err)
		return err
	}
	if x.t != nil && offs.End == x.next && offs.LogStart <= x.logStart {
		return nil
	}
	if offs.End < x.next {
		// The log was truncated below what was indexed (a follower
		// reconciling with its leader): offsets may now hold other
		// records. Start again.
		x.log.Info("key index: log end moved back; rebuilding", "indexed_to", x.next, "end", offs.End)
		x.t.free()
		x.t, x.next, x.logStart = nil, 0, 0
	}
	if x.t == nil {
		t, err := newTable(x.budget, initialSlots(offs.End-offs.LogStart))
		if err != nil {
			x.setErr(err)
			return err
		}
		x.t = t
		x.live.Store(0)
		x.noteTable()
	}
	if offs.LogStart > x.logStart {
		// Retention deleted records: their keys are gone unless written
		// again later (then their entries point past the log start).
		x.t.dropBelow(offs.LogStart)
		x.logStart = offs.LogStart
		x.noteCounts()
	}
	from := max(x.next, offs.LogStart)
	end, err := x.sc.scan(ctx, x.p, from, x.add)
	if err != nil {
		x.noteCounts()
		x.setErr(err)
		return err
	}
	x.next = max(x.next, end)
	x.noteCounts()
	x.indexed.Store(x.next)
	x.lastErr.Store(nil)
	return nil
}

func (x *Index) setErr(err error) { x.lastErr.Store(&err) }

// noteCounts publishes the table's counters for Stats (x.mu held).
func (x *Index) noteCounts() {
	x.live.Store(int64(x.t.live))
	x.records.Add(x.added)
	x.added = 0
}

func (x *Index) noteTable() {
	x.slotsB.Store(x.t.bytes())
	x.spilled.Store(x.t.file != nil)
}

// add indexes one record (the scanner's callback; x.mu held).
func (x *Index) add(r *record.Record) error {
	if r.Key == nil {
		return nil // a keyless record belongs to no key
	}
	if x.t.full() && !x.prune() {
		nt, err := x.t.grown()
		if err != nil {
			return fmt.Errorf("key index of %s-%d: %w", x.p.Topic(), x.p.ID(), err)
		}
		x.t = nt
		x.noteTable()
	}
	word := uint64(r.Offset)
	if r.Value == nil {
		word |= tombBit
	}
	x.t.put(x.hash(r.Key), word)
	x.added++
	return nil
}

// prune drops the tombstone entries whose record is gone (the cleaner
// removes a tombstone once delete.retention.ms has passed), so a table of
// keys that come and go does not grow with every key ever deleted. It runs
// only when a full table is at least a quarter tombstones, and only where
// records can be read in place (RecordReader: one read each); it reports
// whether it freed enough (an eighth of the entries) to skip growing.
// x.mu is held.
func (x *Index) prune() bool {
	if _, ok := x.p.(backend.RecordReader); !ok || (x.t.n-x.t.live)*4 < x.t.n {
		return false
	}
	var tombs [][2]uint64
	x.t.each(func(h, word uint64) bool {
		if word&tombBit != 0 {
			tombs = append(tombs, [2]uint64{h, word})
		}
		return true
	})
	freed := 0
	for _, e := range tombs {
		if _, found, err := x.readAt(context.Background(), int64(e[1]&^tombBit)); err == nil && !found {
			x.t.remove(e[0])
			freed++
		}
	}
	x.log.Debug("key index: dropped tombstones the cleaner removed", "dropped", freed, "tombstones", len(tombs))
	return freed*8 >= x.t.n
}

// initialSlots sizes a new table for a partition of n records: room for
// n distinct keys without growing, up to maxInitialSlots (a log of many
// records may hold few keys; past that the table doubles as it fills).
func initialSlots(n int64) int {
	s := minSlots
	for int64(s)*3 < n*4 && s < maxInitialSlots {
		s *= 2
	}
	return s
}

// maxInitialSlots bounds a new table (16 MiB).
const maxInitialSlots = 1 << 20

// Stats returns the index's counters without waiting for a build.
func (x *Index) Stats() Stats {
	s := Stats{
		LiveKeys: x.live.Load(), Records: x.records.Load(), IndexedTo: x.indexed.Load(),
		TableBytes: x.slotsB.Load(), Spilled: x.spilled.Load(),
	}
	if e := x.lastErr.Load(); e != nil {
		s.Err = (*e).Error()
	}
	return s
}
