// The mount-wide bound on sealed segments whose indexes are open.

package engine

import (
	"sync"
	"sync/atomic"

	"github.com/topicfs/topicfs/engine/index"
)

// indexLRU bounds how many sealed segments keep their offset and time
// indexes open (mapped read-only on the real file system, a heap copy on a
// MemFS), across every partition of a LogDir (log.index.mapped.max.segments)
// or, for partitions opened on their own, of the process. Past the bound
// the least recently used one is closed; its next lookup opens it again.
// The active segments' writable indexes are not counted.
//
// Recency: every add advances tick, and a lookup stamps its segment with
// the current tick (a load of the shared counter and, when it moved, a
// store to the segment's own field), so the victim is a segment not used
// since the earliest add among the members: exact LRU up to uses between
// two adds, without a shared lock or write on the lookup path.
//
// A reader uses an index only under its segment's read lock, and closing
// (unmapping) takes the write lock, so a mapping goes only once the last
// reader has let go of it.
type indexLRU struct {
	mu   sync.Mutex
	max  int
	segs []*Segment // the members, in no order; Segment.lruSlot is the index
	tick atomic.Uint64

	evictions atomic.Int64
}

// defaultIndexLRU is the bound of partitions opened without a LogDir
// (tools, the cluster mode's local copy): one per process.
var defaultIndexLRU = newIndexLRU(int(DefaultConfig().IndexMappedMaxSegments))

func newIndexLRU(bound int) *indexLRU { return &indexLRU{max: max(bound, 1)} }

// used stamps s as just used.
func (c *indexLRU) used(s *Segment) {
	if c == nil {
		return
	}
	if t := c.tick.Load(); s.idxUse.Load() != t {
		s.idxUse.Store(t)
	}
}

// add records that the sealed segment s has its indexes open, and closes
// those of the least recently used others past the bound. Callers hold no
// segment lock (closing takes the victims').
func (c *indexLRU) add(s *Segment) {
	if c == nil || !s.Sealed() {
		return
	}
	c.mu.Lock()
	s.idxUse.Store(c.tick.Add(1))
	if s.lruSlot < 0 {
		s.lruSlot = len(c.segs)
		c.segs = append(c.segs, s)
	}
	var victims []*Segment
	for len(c.segs) > c.max {
		v := c.oldestLocked(s)
		c.removeLocked(v)
		victims = append(victims, v)
	}
	c.mu.Unlock()
	for _, v := range victims {
		c.evictions.Add(1)
		v.evictIndexes()
	}
}

// oldestLocked returns the member used least recently, other than keep.
func (c *indexLRU) oldestLocked(keep *Segment) *Segment {
	var v *Segment
	var vUse uint64
	for _, x := range c.segs {
		if x == keep {
			continue
		}
		if u := x.idxUse.Load(); v == nil || u < vUse {
			v, vUse = x, u
		}
	}
	return v
}

// remove forgets s (its indexes were closed with it).
func (c *indexLRU) remove(s *Segment) {
	if c == nil {
		return
	}
	c.mu.Lock()
	if s.lruSlot >= 0 {
		c.removeLocked(s)
	}
	c.mu.Unlock()
}

func (c *indexLRU) removeLocked(s *Segment) {
	i, last := s.lruSlot, len(c.segs)-1
	c.segs[i] = c.segs[last]
	c.segs[i].lruSlot = i
	c.segs[last] = nil
	c.segs = c.segs[:last]
	s.lruSlot = -1
}

// IndexStats describes the sealed segments whose indexes are open.
type IndexStats struct {
	// Segments is how many sealed segments have their indexes open, at
	// most Max (log.index.mapped.max.segments).
	Segments, Max int
	// Evictions counts the indexes closed to stay within Max.
	Evictions int64
	// MappedFiles and MappedBytes are the index files mapped in this
	// process now (sealed and active, every data directory) and the bytes
	// those mappings span.
	MappedFiles, MappedBytes int64
}

func (c *indexLRU) stats() IndexStats {
	c.mu.Lock()
	st := IndexStats{Segments: len(c.segs), Max: c.max, Evictions: c.evictions.Load()}
	c.mu.Unlock()
	st.MappedFiles, st.MappedBytes = index.Mapped()
	return st
}
