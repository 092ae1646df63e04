// The batch memo: what reading a segment learned about its batches, kept
// for as long as the segment is open so that a batch is CRC-checked once,
// not at every read, and a point read (pointread.go) finds a record's bytes
// without reading its whole batch.

package engine

import (
	"sync"
	"sync/atomic"

	"github.com/topicfs/topicfs/engine/record"
)

// batchMemo remembers, for one Segment, the batches that passed their CRC
// check: by file position, their size and last offset, and for those a
// point read used, their header and anchors (memoDetail).
//
// What it holds is only ever about committed bytes, which never change
// while the Segment is open: a batch is remembered only once it lies whole
// below the Size() it was read under, and the bytes below a segment's
// committed size are never rewritten in place (a failed append truncates
// only what was never committed; recovery and salvage run before a Segment
// is published; follower truncation, the cleaner and retention replace or
// drop whole Segments). The memo lives in its Segment, so it is keyed by
// the segment's identity, never by its file name: a segment of the same
// name opened again (a cleaned copy swapped in, a log restarted after
// truncation) starts with an empty memo. A memo is dropped when its
// Segment closes, and whole when all memos together outgrow memoBudget
// (the one used least recently first).
//
// Safe for concurrent use.
type batchMemo struct {
	seg     *Segment
	lastUse atomic.Uint64 // memoClock at the last use

	mu      sync.RWMutex
	batches map[int64]memoSpan // nil until the first entry, and once dropped
	bytes   int64              // what the entries are charged (memoEntryBytes, memoDetail.bytes)
	closed  bool               // its Segment closed: remember nothing more
	// mapped is the segment's .log mapped read-only for point reads
	// (pointmap.go), nil when not (yet); unmap undoes it; mapTried is set
	// once mapping was tried (and for good once closed or faulted).
	mapped   []byte
	unmap    func([]byte) error
	mapTried bool
}

// memoSpan is a remembered batch: size bytes from its position, its last
// offset relative to the segment's base (offsets of one segment are within
// an int32 of its base, as the offset index requires), and its detail once
// a point read needed it.
type memoSpan struct {
	size    int32
	lastRel int32
	detail  *memoDetail
}

// memoDetail is what a point read needs of a batch besides its bytes: the
// header fields that resolve a record (Raw nil), and where its records
// start. starts (a batch whose offset deltas are 0, 1, 2, ...: the usual
// one) holds every record's position in the batch and then the batch's
// size: record i is starts[i]:starts[i+1], and a point read reads just
// its bytes. Otherwise (offsets compaction removed) anchors holds, every
// anchorGap bytes, a record's offset delta and position (pairs in one
// slice), and a point read reads one anchor interval, whole records. A
// batch whose records cannot be walked (compressed, legacy, records the
// walk does not take) has neither: point reads decode it whole.
type memoDetail struct {
	hdr     record.Batch
	starts  []uint32
	anchors []uint32
}

// anchorGap is the least distance between two anchors of a batch: a point
// read reads at most about this much more than its record.
const anchorGap = 1 << 10

// Memory charged per entry: a map slot (key, memoSpan, control byte, load
// factor), and per detail its allocation and anchors.
const (
	memoEntryBytes  = 40
	memoDetailBytes = 144
)

func (d *memoDetail) bytes() int64 {
	return memoDetailBytes + 4*int64(cap(d.anchors)+cap(d.starts))
}

// memoBudget bounds the bytes of all batch memos together: a remembered
// batch costs about 40 bytes, one with a point read's detail about 150
// bytes and 4 per record (under 4% of 100-byte records), so the default
// holds the checked batches of hundreds of GiB of log, or the details of
// about 1.5 GiB of 100-byte records that point reads use.
var memoBudget atomic.Int64

// DefaultMemoBudget is memoBudget's initial value.
const DefaultMemoBudget = 64 << 20

func init() { memoBudget.Store(DefaultMemoBudget) }

// memoClock orders the uses of memos (least recently used goes first); it
// moves at every remembered batch, not at every lookup.
var memoClock atomic.Uint64

// memoRegistry lists the memos holding entries and what they hold, for
// the budget.
var memoRegistry struct {
	mu     sync.Mutex
	used   int64
	memos  map[*batchMemo]struct{}
	mapped map[*batchMemo]struct{} // memos holding a mapping (pointmap.go)
}

// memo returns s's memo, creating it; nil for a virtual segment.
func (s *Segment) memo() *batchMemo {
	if m := s.bmemo.Load(); m != nil {
		return m
	}
	if s.log == nil {
		return nil
	}
	s.bmemo.CompareAndSwap(nil, &batchMemo{seg: s})
	return s.bmemo.Load()
}

// touch marks m used now.
func (m *batchMemo) touch() {
	if now := memoClock.Load(); m.lastUse.Load() != now {
		m.lastUse.Store(now)
	}
}

// get returns what m remembers of the batch at pos.
func (m *batchMemo) get(pos int64) (memoSpan, bool) {
	m.mu.RLock()
	e, ok := m.batches[pos]
	m.mu.RUnlock()
	return e, ok
}

// skip walks the remembered batches from pos while they end before
// offset, and returns the position it stopped at and what m remembers of
// the batch there (ok false: nothing).
func (m *batchMemo) skip(pos, offset int64) (int64, memoSpan, bool) {
	rel := offset - m.seg.base
	m.mu.RLock()
	defer m.mu.RUnlock()
	for {
		e, ok := m.batches[pos]
		if !ok || int64(e.lastRel) >= rel {
			return pos, e, ok
		}
		pos += int64(e.size)
	}
}

// verified reports whether the batch of size bytes at pos passed its CRC
// check before.
func (m *batchMemo) verified(pos int64, size int) bool {
	e, ok := m.get(pos)
	return ok && int(e.size) == size
}

// remember records that b, at pos of m's segment, passed its CRC check,
// with d (nil: no detail; an existing detail is kept). The caller has
// checked that b lies whole below a committed size of the segment.
func (m *batchMemo) remember(pos int64, b *record.Batch, d *memoDetail) {
	lastRel := b.LastOffset() - m.seg.base
	if lastRel < 0 || lastRel > 1<<31-1 || b.Size() > 1<<31-1 {
		return // not what a segment holds: nothing to remember
	}
	e := memoSpan{size: int32(b.Size()), lastRel: int32(lastRel), detail: d}
	var grew int64
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	if m.batches == nil {
		m.batches = map[int64]memoSpan{}
	}
	old, had := m.batches[pos]
	switch {
	case !had:
		grew = memoEntryBytes
	case old.size != e.size:
		// Not the batch remembered there (a position inside a batch, say):
		// keep what was remembered first.
		m.mu.Unlock()
		return
	case d == nil || old.detail != nil:
		m.mu.Unlock()
		return
	}
	if d != nil {
		grew += d.bytes()
	}
	m.batches[pos] = e
	m.bytes += grew
	m.mu.Unlock()
	m.lastUse.Store(memoClock.Add(1))
	chargeMemo(m, grew)
}

// chargeMemo adds grew bytes of m to the registry and drops memos, least
// recently used first, until all of them fit memoBudget again. Lock order:
// the registry, then a memo.
func chargeMemo(m *batchMemo, grew int64) {
	r := &memoRegistry
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.memos == nil {
		r.memos = map[*batchMemo]struct{}{}
	}
	r.used += grew
	m.mu.RLock()
	closed := m.closed
	m.mu.RUnlock()
	if !closed {
		r.memos[m] = struct{}{}
	}
	for r.used > memoBudget.Load() && len(r.memos) > 0 {
		var v *batchMemo
		for x := range r.memos {
			if v == nil || x.lastUse.Load() < v.lastUse.Load() {
				v = x
			}
		}
		delete(r.memos, v)
		r.used -= v.clear(false)
	}
}

// clear forgets every entry of m (closed: for good, its segment closed)
// and returns what they were charged. The registry's count stays exact:
// an entry added but not charged yet is subtracted here and charged by its
// chargeMemo afterwards. The caller holds memoRegistry.mu.
func (m *batchMemo) clear(closed bool) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.bytes
	m.batches, m.bytes = nil, 0
	if closed {
		m.closed = true
	}
	return n
}

// close drops m for good (its segment closed).
func (m *batchMemo) close() {
	r := &memoRegistry
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.memos, m)
	r.used -= m.clear(true)
	delete(r.mapped, m)
	m.unmapLocked(true)
}

// memoUsed returns the bytes all memos are charged (tests).
func memoUsed() int64 {
	memoRegistry.mu.Lock()
	defer memoRegistry.mu.Unlock()
	return memoRegistry.used
}
