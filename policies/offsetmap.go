package policies

import "hash/maphash"

// OffsetMap maps a 128-bit hash of a record key to the latest offset seen
// for that key, in a fixed amount of memory, like Kafka's SkimpyOffsetMap
// (which uses MD5; see hashKey). It is
// the only structure of the cleaner whose size grows with the number of keys,
// and it never grows past the memory it was created with.
//
// Slot (24 bytes, in memory only, never on disk):
//
//	+---------------------+---------------------+--------------------+
//	| hash[0:8]  uint64   | hash[8:16] uint64   | offset int64       |
//	+---------------------+---------------------+--------------------+
//
// An all-zero hash marks an empty slot (a real all-zero hash is stored as
// hash[8:16] = 1; a collision of that kind costs one key's dedup at worst, as
// any hash collision does). Collisions resolve by linear probing. The map
// accepts new keys until Len reaches LoadFactor × Slots; Full reports that,
// and the cleaner then stops mapping and cleans up to LatestOffset.
//
// An OffsetMap is not safe for concurrent use; each cleaner worker owns one.
type OffsetMap struct {
	slots  []offsetSlot
	n      int   // occupied slots
	max    int   // desired maximum entries (LoadFactor × len(slots))
	latest int64 // largest offset put or passed to UpdateLatestOffset; -1 none

	seed1, seed2 maphash.Seed // the key hash's two halves
}

type offsetSlot struct {
	h1, h2 uint64
	offset int64
}

const (
	// OffsetMapSlotSize is the memory one OffsetMap slot takes: a 16-byte key
	// hash and an 8-byte offset.
	OffsetMapSlotSize = 24
	// LoadFactor is the share of slots the map fills before it reports Full
	// (Kafka's log.cleaner.io.buffer.load.factor).
	LoadFactor = 0.9
)

// NewOffsetMap returns a map using at most memory bytes of slots (at least
// two slots, so that one is always empty and probing ends).
func NewOffsetMap(memory int64) *OffsetMap {
	n := memory / OffsetMapSlotSize
	if n < 2 {
		n = 2
	}
	m := &OffsetMap{slots: make([]offsetSlot, n), seed1: maphash.MakeSeed(), seed2: maphash.MakeSeed()}
	m.ResetFor(-1)
	return m
}

// Slots returns the number of slots in use (see ResetFor).
func (m *OffsetMap) Slots() int { return len(m.slots) }

// Len returns the number of distinct key hashes stored.
func (m *OffsetMap) Len() int { return m.n }

// MaxEntries returns how many keys the map takes before Full.
func (m *OffsetMap) MaxEntries() int { return m.max }

// Full reports whether the map has reached its load factor; Put of a new key
// must not be called then.
func (m *OffsetMap) Full() bool { return m.n >= m.max }

// MemoryBytes returns the bytes held by the slots (all of them, in use or
// not).
func (m *OffsetMap) MemoryBytes() int64 { return int64(cap(m.slots)) * OffsetMapSlotSize }

// LatestOffset returns the largest offset recorded, or -1.
func (m *OffsetMap) LatestOffset() int64 { return m.latest }

// UpdateLatestOffset raises LatestOffset to off (for batches with no key,
// such as control batches, whose range the cleaning still covers).
func (m *OffsetMap) UpdateLatestOffset(off int64) {
	if off > m.latest {
		m.latest = off
	}
}

// Reset empties the map, keeping its memory.
func (m *OffsetMap) Reset() {
	m.ResetFor(-1)
}

// ResetFor empties the map and, when at most keys distinct keys can come
// (keys >= 0, e.g. the number of offsets in the range to map), uses only as
// many slots as that needs at the load factor: a small dirty range then
// touches (and clears) a small part of the memory, which keeps the probes
// in cache. keys < 0 uses every slot.
func (m *OffsetMap) ResetFor(keys int64) {
	if m.n > 0 {
		clear(m.slots)
	}
	m.slots = m.slots[:cap(m.slots)]
	if keys >= 0 {
		need := int64(float64(keys)/LoadFactor) + 2
		if need < int64(len(m.slots)) {
			m.slots = m.slots[:max(need, 2)]
		}
	}
	m.max = max(int(float64(len(m.slots))*LoadFactor), 1)
	m.n = 0
	m.latest = -1
}

// hashKey returns the 128-bit key hash: two 64-bit halves from independent
// seeded hashes. Collisions between distinct keys happen with probability
// about n²/2¹²⁹ for n keys, as with MD5 (Kafka's choice), at a tenth of the
// cost; and since the seeds are random per map, keys cannot be crafted to
// collide, as MD5's can.
func (m *OffsetMap) hashKey(key []byte) (uint64, uint64) {
	h1 := maphash.Bytes(m.seed1, key)
	h2 := maphash.Bytes(m.seed2, key)
	if h1 == 0 && h2 == 0 {
		h2 = 1
	}
	return h1, h2
}

// Put records offset as the latest offset of key. It returns false, storing
// nothing, when key is new and the map is Full.
func (m *OffsetMap) Put(key []byte, offset int64) bool {
	h1, h2 := m.hashKey(key)
	n := uint64(len(m.slots))
	for i := h1 % n; ; i++ {
		if i == n {
			i = 0
		}
		s := &m.slots[i]
		if s.h1 == h1 && s.h2 == h2 {
			s.offset = offset
			m.UpdateLatestOffset(offset)
			return true
		}
		if s.h1 == 0 && s.h2 == 0 {
			if m.n >= m.max {
				return false
			}
			*s = offsetSlot{h1: h1, h2: h2, offset: offset}
			m.n++
			m.UpdateLatestOffset(offset)
			return true
		}
	}
}

// Get returns the latest offset recorded for key, or -1 if none.
func (m *OffsetMap) Get(key []byte) int64 {
	h1, h2 := m.hashKey(key)
	n := uint64(len(m.slots))
	for i, probes := h1%n, uint64(0); probes < n; i, probes = i+1, probes+1 {
		if i == n {
			i = 0
		}
		s := &m.slots[i]
		if s.h1 == h1 && s.h2 == h2 {
			return s.offset
		}
		if s.h1 == 0 && s.h2 == 0 {
			return -1
		}
	}
	return -1
}
