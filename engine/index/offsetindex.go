package index

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime/debug"

	"github.com/topicfs/topicfs/engine/vfs"
)

// OffsetEntrySize is the size of one offset index entry. Part of the format.
const OffsetEntrySize = 8

// Offset index entry (8 bytes, big-endian), sorted by strictly increasing
// relative offset:
//
//	+-------------------------+-------------------------+
//	| RelativeOffset int32    | Position int32          |
//	+-------------------------+-------------------------+
//	  offset - baseOffset       byte position of the batch start in the .log
func encodeOffsetEntry(dst []byte, rel, pos int32) {
	binary.BigEndian.PutUint32(dst[0:4], uint32(rel))
	binary.BigEndian.PutUint32(dst[4:8], uint32(pos))
}

func decodeOffsetEntry(e []byte) (rel, pos int32) {
	return int32(binary.BigEndian.Uint32(e[0:4])), int32(binary.BigEndian.Uint32(e[4:8]))
}

// OffsetIndex maps offsets to .log byte positions. An entry (O, P) says the
// batch (or multi-batch append) starting at position P ends at offset O.
// One writer, many concurrent readers (see the package doc).
type OffsetIndex struct {
	ef entryFile
}

// OpenOffsetIndex opens (writable: creating and preallocating to
// floor(maxBytes/8)*8 bytes) the offset index of the segment whose base
// offset is base. A read-only open of a missing file fails with an error
// wrapping fs.ErrNotExist and never writes.
func OpenOffsetIndex(fs vfs.FS, path string, base int64, maxBytes int, writable bool) (*OffsetIndex, error) {
	x := &OffsetIndex{ef: entryFile{fs: fs, path: path, base: base, entrySize: OffsetEntrySize, writable: writable}}
	err := x.ef.open(maxBytes, func(i int, prev, cur []byte) (bool, error) {
		rel, pos := decodeOffsetEntry(cur)
		if rel < 0 {
			return true, fmt.Errorf("entry %d offset %d below base offset %d", i, base+int64(rel), base)
		}
		if i == 0 {
			return rel == 0 && pos == 0, nil // (base, 0) says nothing: an empty preallocated file
		}
		if rel == 0 {
			return true, nil // the zero tail of a preallocated file
		}
		if prel, _ := decodeOffsetEntry(prev); rel <= prel {
			return true, fmt.Errorf("entry %d offset %d is not above entry %d offset %d", i, base+int64(rel), i-1, base+int64(prel))
		}
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	return x, nil
}

// Path returns the file name the index was opened with.
func (x *OffsetIndex) Path() string { return x.ef.path }

// BaseOffset returns the segment's base offset.
func (x *OffsetIndex) BaseOffset() int64 { return x.ef.base }

// Entries returns the number of entries.
func (x *OffsetIndex) Entries() int { return int(x.ef.n.Load()) }

// MaxEntries returns how many entries the index can hold.
func (x *OffsetIndex) MaxEntries() int { return x.ef.capacity }

// IsFull reports whether no entry can be appended.
func (x *OffsetIndex) IsFull() bool { return x.Entries() >= x.ef.capacity }

// Entry returns entry i (0 <= i < Entries()) as an absolute offset and a position.
// After a fault (Faulted) it returns (base, 0).
func (x *OffsetIndex) Entry(i int) (offset, pos int64) {
	offset = x.ef.base
	x.ef.read(func(n int, view []byte) {
		if i < 0 || i >= n {
			panic(fmt.Sprintf("index: entry %d out of range [0,%d)", i, n))
		}
		rel, p := decodeOffsetEntry(x.ef.entry(view, i))
		offset, pos = x.ef.base+int64(rel), int64(p)
	})
	return offset, pos
}

// LastOffset returns the offset of the last entry, or the base offset if
// empty (or Faulted).
func (x *OffsetIndex) LastOffset() int64 {
	last := x.ef.base
	x.ef.read(func(n int, view []byte) {
		if n > 0 {
			rel, _ := decodeOffsetEntry(x.ef.entry(view, n-1))
			last = x.ef.base + int64(rel)
		}
	})
	return last
}

// Faulted reports that a read of the index's read-only mapping faulted
// (its file was cut short under it): every answer since is the empty
// index's. Its owner should close it and rebuild the file.
func (x *OffsetIndex) Faulted() bool { return x.ef.faulted.Load() }

// Mapped reports whether the entries are read from a mapping of the file
// (else from the heap).
func (x *OffsetIndex) Mapped() bool { return x.ef.mm != nil }

// Append adds the entry (offset, pos). offset must be above the last entry's
// and within [base, base+MaxInt32]; pos must fit an int32. A first entry
// (base, 0) is a no-op: it is what Lookup returns for an empty index, and on
// disk it is indistinguishable from a preallocated zero tail. Kafka never
// writes it (the first append to a segment gets no entry).
func (x *OffsetIndex) Append(offset int64, pos int64) error {
	if err := x.ef.checkWritable(); err != nil {
		return err
	}
	rel := offset - x.ef.base
	if rel < 0 || rel > math.MaxInt32 || pos < 0 || pos > math.MaxInt32 {
		return fmt.Errorf("%w: %s: offset %d pos %d outside base %d + int32", ErrInvalidAppend, x.ef.path, offset, pos, x.ef.base)
	}
	if n := x.Entries(); n > 0 && offset <= x.LastOffset() {
		return fmt.Errorf("%w: %s: offset %d not above last entry %d", ErrInvalidAppend, x.ef.path, offset, x.LastOffset())
	}
	if x.Entries() == 0 && rel == 0 && pos == 0 {
		return nil // (base, 0) is what Lookup answers anyway; on disk it reads as the zero tail
	}
	var e [OffsetEntrySize]byte
	encodeOffsetEntry(e[:], int32(rel), int32(pos))
	return x.ef.put(e[:])
}

// Lookup returns the largest entry with offset <= target, or (base, 0) if
// there is none (or the index Faulted). The caller scans batches from pos for the first one whose
// last offset is >= target. O(log n).
func (x *OffsetIndex) Lookup(target int64) (offset, pos int64) {
	offset = x.ef.base
	n, view := x.ef.snapshot()
	if x.ef.guarded {
		if x.ef.faulted.Load() {
			return offset, 0
		}
		defer x.ef.endGuard(debug.SetPanicOnFault(true))
	}
	if i := x.search(n, view, target); i >= 0 {
		rel, p := decodeOffsetEntry(x.ef.entry(view, i))
		offset, pos = x.ef.base+int64(rel), int64(p)
	}
	return offset, pos
}

// Ceiling returns the smallest entry with offset >= target; ok is false
// when there is none. When the entry before it (Lookup's) indexes the
// batch right before, the batch at pos is the one holding target.
func (x *OffsetIndex) Ceiling(target int64) (offset, pos int64, ok bool) {
	_, _, offset, pos, ok = x.Around(target)
	return offset, pos, ok
}

// Around is Lookup and Ceiling in one guarded search: the largest entry
// with offset <= target (or (base, 0)), and the smallest with offset >=
// target (ceil false when there is none, or the index Faulted).
func (x *OffsetIndex) Around(target int64) (floorOff, floorPos, ceilOff, ceilPos int64, ceil bool) {
	floorOff = x.ef.base
	n, view := x.ef.snapshot()
	if x.ef.guarded {
		if x.ef.faulted.Load() {
			return floorOff, 0, 0, 0, false
		}
		defer x.ef.endGuard(debug.SetPanicOnFault(true))
	}
	i := x.search(n, view, target)
	if i >= 0 {
		rel, p := decodeOffsetEntry(x.ef.entry(view, i))
		floorOff, floorPos = x.ef.base+int64(rel), int64(p)
		if floorOff == target {
			return floorOff, floorPos, target, floorPos, true
		}
	}
	if i+1 >= n {
		return floorOff, floorPos, 0, 0, false
	}
	rel, p := decodeOffsetEntry(x.ef.entry(view, i+1))
	return floorOff, floorPos, x.ef.base + int64(rel), int64(p), true
}

// warmEntries is how many tail entries Kafka's "warm section" covers
// (8192 bytes): lookups near the end, the common case for tailing readers,
// touch only the last pages of the index.
const warmBytes = 8192

// search returns the index of the largest entry with offset <= target, or -1.
// Binary search over the warm tail first when the target lies in it.
func (x *OffsetIndex) search(n int, view []byte, target int64) int {
	rel := target - x.ef.base
	if rel < 0 || n == 0 {
		return -1
	}
	relAt := func(i int) int64 {
		return int64(int32(binary.BigEndian.Uint32(view[i*OffsetEntrySize:])))
	}
	lo, hi := 0, n // answer in [lo-1, hi-1]: first entry > rel lies in [lo, hi]
	if warm := n - 1 - warmBytes/OffsetEntrySize; warm > 0 && relAt(warm) <= rel {
		lo = warm + 1
	}
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if relAt(mid) > rel {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo - 1
}

// TruncateTo drops every entry with offset >= offset. On a heap-backed
// index the file is cut by the next Append, Sync, Trim or Close (which
// report any error). Exclusive access.
func (x *OffsetIndex) TruncateTo(offset int64) {
	n, view := x.ef.snapshot()
	keep := x.search(n, view, offset-1) + 1
	if offset <= x.ef.base {
		keep = 0
	}
	x.ef.truncateEntries(keep)
}

// Reset drops every entry and cuts the file accordingly. Exclusive access.
func (x *OffsetIndex) Reset() error { return x.ef.reset() }

// SanityCheck reports (wrapping ErrCorruptIndex) a file whose length is not
// a multiple of 8, entries out of order, or a last offset below the base.
func (x *OffsetIndex) SanityCheck() error {
	if err := x.ef.sanityLength(); err != nil {
		return err
	}
	if x.Entries() > 0 && x.LastOffset() < x.ef.base {
		return fmt.Errorf("%w: %s: last offset %d below base offset %d", ErrCorruptIndex, x.ef.path, x.LastOffset(), x.ef.base)
	}
	return nil
}

// Trim shrinks the file to Entries()*8 bytes (on seal). A later Append
// re-expands it. Exclusive access.
func (x *OffsetIndex) Trim() error { return x.ef.trim() }

// Sync makes the entries durable.
func (x *OffsetIndex) Sync() error { return x.ef.sync() }

// Close trims a writable index and releases its file and mapping.
// Exclusive access.
func (x *OffsetIndex) Close() error { return x.ef.close() }
