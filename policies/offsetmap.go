package policies

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math/bits"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/topicfs/topicfs/engine"
)

// OffsetMap maps a 127-bit hash of a record key to the latest offset seen
// for that key, in a fixed amount of memory, like Kafka's SkimpyOffsetMap
// (which uses MD5; see hash2). It is
// the only structure of the cleaner whose size grows with the number of keys,
// and it never grows past the memory it was created with.
//
// Memory (in memory only, never on disk): n slots of 24 bytes, then n tag
// bytes. As in Kafka, n is the memory given (a cleaner thread's share of
// log.cleaner.dedupe.buffer.size) divided by OffsetMapSlotSize (24: a
// 16-byte key hash and an 8-byte offset), so the map takes as many keys as
// a broker's; the tags come on top (1/24 more memory):
//
//	slot i:  +-------------------+-------------------+------------------+
//	         | hash[0:8] uint64  | hash[8:16] uint64 | offset int64     |
//	         +-------------------+-------------------+------------------+
//	tag i:   +-----------------------------------+
//	         | 0 = empty, else 0x80 | hash[0]&0x7f |
//	         +-----------------------------------+
//
// A key's home slot is hash[0:8] scaled to [0, n) by a multiply (no
// division, any n). Collisions resolve by linear probing over the tag
// array: Put reads one tag per probe, Get eight at a time (one 64-bit word),
// and both touch a 24-byte slot only when the tag matches, so a miss at load
// factor 0.9 (tens of probes) costs about one cache line of tags, and the
// second hash half is computed only for a tag match. (A hit costs the tag
// line and the slot line: slightly more than with slots alone.) The map
// accepts new keys until Len reaches the load factor
// (log.cleaner.io.buffer.load.factor) × Slots, Kafka's maxDesiredMapSize;
// Full reports that, and the cleaner then stops mapping and cleans up to
// LatestOffset.
//
// The slots and tags live outside the Go heap (an anonymous private mmap,
// falling back to the heap if mmap fails): the map's memory then does not
// count toward the garbage collector's goal, so the heap does not grow by
// as much again in decode garbage before a collection, and Release returns
// the memory to the system at once. Pages never touched (ResetFor a small
// range) are never made resident.
//
// An OffsetMap is not safe for concurrent use; each cleaner worker owns one.
type OffsetMap struct {
	slots  []offsetSlot
	tags   []uint8 // len(tags) == len(slots), cap(tags) == cap(slots)
	n      int     // occupied slots
	max    int     // desired maximum entries (load × len(slots))
	load   float64 // the load factor
	latest int64   // largest offset put or passed to UpdateLatestOffset; -1 none

	mem    []byte          // the mmap backing slots and tags; nil when on the heap
	unmap  runtime.Cleanup // unmaps mem if the map is dropped without Release
	memory int64           // the bytes slots and tags take (all of them)

	seed1, seed2 maphash.Seed // the key hash's two halves
}

type offsetSlot struct {
	h1, h2 uint64
	offset int64
}

const (
	// OffsetMapSlotSize is the memory given per OffsetMap slot: a 16-byte
	// key hash and an 8-byte offset (Kafka's bytes per entry).
	OffsetMapSlotSize = engine.OffsetMapEntryBytes
	// offsetMapTagSize is the probe tag each slot has on top.
	offsetMapTagSize = 1
	// LoadFactor is the default share of slots the map fills before it
	// reports Full (Kafka's log.cleaner.io.buffer.load.factor).
	LoadFactor = 0.9

	slotBytes = int64(unsafe.Sizeof(offsetSlot{}))

	lo1 = 0x0101010101010101 // 0x01 in each byte
	lo7 = lo1 * 0x7f         // 0x7f in each byte
	hi1 = lo1 * 0x80         // 0x80 in each byte
)

// MaxOffsetMapBytes is the most memory one OffsetMap may use: the
// per-cleaner-thread limit the config enforces (Kafka's, 2 GiB - 1).
const MaxOffsetMapBytes = engine.MaxDedupeBytesPerThread

// maxHeapMapBytes is the largest map put on the Go heap when mmap fails;
// a larger one is refused instead, since a failed heap allocation kills the
// process.
const maxHeapMapBytes = 64 << 20

// NewOffsetMap returns a map of memory / OffsetMapSlotSize slots (at least
// two, so that one is always empty and probing ends), each with its tag,
// that takes keys up to loadFactor of its slots (0 or less: LoadFactor;
// above 1: 1, and never the last empty slot). It refuses a size above
// MaxOffsetMapBytes, and memory the system does not give, with an error
// rather than a crash.
func NewOffsetMap(memory int64, loadFactor float64) (*OffsetMap, error) {
	if memory > MaxOffsetMapBytes {
		return nil, fmt.Errorf("policies: offset map of %d bytes: the most is %d (lower log.cleaner.dedupe.buffer.size or raise log.cleaner.threads)", memory, int64(MaxOffsetMapBytes))
	}
	n := memory / OffsetMapSlotSize
	if n < 2 {
		n = 2
	}
	if loadFactor <= 0 {
		loadFactor = LoadFactor
	}
	m := &OffsetMap{seed1: maphash.MakeSeed(), seed2: maphash.MakeSeed(), load: min(loadFactor, 1)}
	if err := m.alloc(n); err != nil {
		return nil, err
	}
	m.ResetFor(-1)
	return m, nil
}

// alloc sets up n slots and tags, off the Go heap if it can.
func (m *OffsetMap) alloc(n int64) error {
	size := n * (OffsetMapSlotSize + offsetMapTagSize)
	mem, err := syscall.Mmap(-1, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err == nil {
		// Page-aligned, zero-filled, pointer-free: slots first (8-byte
		// aligned), tags after.
		m.memory = size
		m.mem = mem
		_ = unix.Madvise(mem, unix.MADV_HUGEPAGE)
		m.unmap = runtime.AddCleanup(m, func(mem []byte) { _ = syscall.Munmap(mem) }, mem)
		m.slots = unsafe.Slice((*offsetSlot)(unsafe.Pointer(&mem[0])), n)
		m.tags = mem[n*slotBytes : size : size]
		return nil
	}
	if size > maxHeapMapBytes {
		return fmt.Errorf("policies: offset map of %d bytes: %w", size, err)
	}
	m.memory = size
	m.slots = make([]offsetSlot, n)
	m.tags = make([]uint8, n)
	return nil
}

// Release returns the map's memory (to the system when it was mapped). The
// map must not be used afterwards.
func (m *OffsetMap) Release() {
	if m.mem != nil {
		m.unmap.Stop()
		_ = syscall.Munmap(m.mem)
	}
	m.mem, m.slots, m.tags, m.n, m.max = nil, nil, nil, 0, 0
}

// Slots returns the number of slots in use (see ResetFor).
func (m *OffsetMap) Slots() int { return len(m.slots) }

// Len returns the number of distinct key hashes stored.
func (m *OffsetMap) Len() int { return m.n }

// MaxEntries returns how many keys the map takes before Full (with the
// slots ResetFor left in use).
func (m *OffsetMap) MaxEntries() int { return m.max }

// Capacity returns how many keys the map takes with all its slots: Kafka's
// maxDesiredMapSize for the same memory and load factor.
func (m *OffsetMap) Capacity() int { return m.maxFor(cap(m.slots)) }

// maxFor is how many keys n slots take: the load factor's share, never all
// of them (a probe must meet an empty slot), at least one.
func (m *OffsetMap) maxFor(n int) int {
	return max(min(int(float64(n)*m.load), n-1), 1)
}

// LoadFactor returns the share of the slots the map fills before Full.
func (m *OffsetMap) LoadFactor() float64 { return m.load }

// Full reports whether the map has reached its load factor; Put of a new key
// must not be called then.
func (m *OffsetMap) Full() bool { return m.n >= m.max }

// MemoryBytes returns the bytes held by the slots and tags (all of them, in
// use or not).
func (m *OffsetMap) MemoryBytes() int64 { return m.memory }

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
// in cache. keys < 0 uses every slot. Only the tags are cleared (a slot is
// empty when its tag is 0).
func (m *OffsetMap) ResetFor(keys int64) {
	if m.n > 0 {
		clear(m.tags)
	}
	m.slots = m.slots[:cap(m.slots)]
	if keys >= 0 {
		need := int64(float64(keys)/m.load) + 2
		if need < int64(len(m.slots)) {
			m.slots = m.slots[:max(need, 2)]
		}
	}
	m.tags = m.tags[:len(m.slots)]
	m.max = m.maxFor(len(m.slots))
	m.n = 0
	m.latest = -1
}

// The key hash is 127 bits: two 64-bit halves from independent seeded
// hashes (h1 with seed1, hash2 with seed2; hash2's low bit is always set, so
// 0 means "not computed yet"). Collisions between distinct keys happen with
// probability about n²/2¹²⁸ for n keys, as with MD5 (Kafka's choice), at a
// tenth of the cost; and since the seeds are random per map, keys cannot be
// crafted to collide, as MD5's can. Put and Get compute the second half only
// when a tag and the first half match (or to store it). Not inlined, so that
// lazyHash2 is.
//
//go:noinline
func (m *OffsetMap) hash2(key []byte) uint64 { return maphash.Bytes(m.seed2, key) | 1 }

// home returns the first slot to probe for h1 and its tag: the high bits
// of h1 × len(slots) pick the slot, h1's low bits the tag.
func (m *OffsetMap) home(h1 uint64) (uint64, uint8) {
	i, _ := bits.Mul64(h1, uint64(len(m.slots)))
	return i, uint8(h1) | 0x80
}

// Put records offset as the latest offset of key. It returns false, storing
// nothing, when key is new and the map is Full.
func (m *OffsetMap) Put(key []byte, offset int64) bool {
	h1 := m.Hash(key)
	var h2 uint64 // 0 until computed
	i, tag := m.home(h1)
	n := uint64(len(m.slots))
	tags := m.tags[:n]
	for {
		t := tags[i]
		if t == 0 {
			if m.n >= m.max {
				return false
			}
			m.slots[i] = offsetSlot{h1: h1, h2: m.lazyHash2(key, &h2), offset: offset}
			tags[i] = tag
			m.n++
			m.UpdateLatestOffset(offset)
			return true
		}
		if t == tag {
			if s := &m.slots[i]; s.h1 == h1 && s.h2 == m.lazyHash2(key, &h2) {
				s.offset = offset
				m.UpdateLatestOffset(offset)
				return true
			}
		}
		if i++; i == n {
			i = 0
		}
	}
}

// lazyHash2 returns hash2(key), computed on the first call of a probe and
// kept in *h2 for the rest (0 until then, which hash2 never returns).
func (m *OffsetMap) lazyHash2(key []byte, h2 *uint64) uint64 {
	if *h2 == 0 {
		*h2 = m.hash2(key)
	}
	return *h2
}

// Hash is the first half of key's hash, for Touch and GetHashed.
func (m *OffsetMap) Hash(key []byte) uint64 { return maphash.Bytes(m.seed1, key) }

// Touch reads the tag word and slot where a lookup of the key hashed h1
// begins, and returns something of them (for the caller to keep, so the
// reads stay). The map is far larger than the caches: a lookup's first two
// reads each miss to memory, and lookups one after the other wait out one
// miss after the other. Touching a batch's keys first issues those reads
// back to back, so their misses overlap; the lookups then find the lines
// in the cache.
func (m *OffsetMap) Touch(h1 uint64) uint64 {
	i, _ := m.home(h1)
	return uint64(m.tags[i]) ^ m.slots[i].h1
}

// Get returns the latest offset recorded for key, or -1 if none.
func (m *OffsetMap) Get(key []byte) int64 { return m.GetHashed(key, m.Hash(key)) }

// GetHashed is Get for a key whose Hash is h1.
func (m *OffsetMap) GetHashed(key []byte, h1 uint64) int64 {
	var h2 uint64 // 0 until computed
	i, tag := m.home(h1)
	n := uint64(len(m.slots))
	tags := m.tags[:n]
	pat := uint64(tag) * lo1 // tag in each byte
	for probes := uint64(0); probes < n; probes++ {
		if i+8 <= n {
			// Eight tags at once: the first empty byte ends the probe,
			// matching bytes before it are checked in order.
			w := binary.LittleEndian.Uint64(tags[i:])
			empty := ^w & hi1 // a used tag always has its high bit set
			x := w ^ pat
			match := ^(((x & lo7) + lo7) | x) & hi1 // exactly the zero bytes of x
			if empty != 0 {
				match &= empty&-empty - 1 // only matches before the first empty
			}
			for ; match != 0; match &= match - 1 {
				if s := &m.slots[i+uint64(bits.TrailingZeros64(match)>>3)]; s.h1 == h1 && s.h2 == m.lazyHash2(key, &h2) {
					return s.offset
				}
			}
			if empty != 0 {
				return -1
			}
			probes += 7
			if i += 8; i == n {
				i = 0
			}
			continue
		}
		t := tags[i]
		if t == 0 {
			return -1
		}
		if t == tag {
			if s := &m.slots[i]; s.h1 == h1 && s.h2 == m.lazyHash2(key, &h2) {
				return s.offset
			}
		}
		if i++; i == n {
			i = 0
		}
	}
	return -1
}
