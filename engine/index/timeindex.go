package index

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime/debug"
	"sort"

	"github.com/topicfs/topicfs/engine/vfs"
)

// TimeEntrySize is the size of one time index entry. Part of the format.
const TimeEntrySize = 12

// Time index entry (12 bytes, big-endian); timestamps strictly increase,
// offsets never decrease:
//
//	+-----------------------------------------------+-------------------------+
//	| Timestamp int64 (ms since epoch)              | RelativeOffset int32    |
//	+-----------------------------------------------+-------------------------+
//	  max timestamp seen up to and including the      offset - baseOffset of the
//	  batch that ends at this offset                  batch holding that timestamp
func encodeTimeEntry(dst []byte, ts int64, rel int32) {
	binary.BigEndian.PutUint64(dst[0:8], uint64(ts))
	binary.BigEndian.PutUint32(dst[8:12], uint32(rel))
}

func decodeTimeEntry(e []byte) (ts int64, rel int32) {
	return int64(binary.BigEndian.Uint64(e[0:8])), int32(binary.BigEndian.Uint32(e[8:12]))
}

// TimeIndex maps timestamps to offsets. One writer, many concurrent readers
// (see the package doc).
type TimeIndex struct {
	ef entryFile
}

// OpenTimeIndex opens (writable: creating and preallocating to
// floor(maxBytes/12)*12 bytes) the time index of the segment whose base
// offset is base. A read-only open of a missing file fails with an error
// wrapping fs.ErrNotExist and never writes.
func OpenTimeIndex(fs vfs.FS, path string, base int64, maxBytes int, writable bool) (*TimeIndex, error) {
	x := &TimeIndex{ef: entryFile{fs: fs, path: path, base: base, entrySize: TimeEntrySize, writable: writable}}
	err := x.ef.open(maxBytes, func(i int, prev, cur []byte) (bool, error) {
		ts, rel := decodeTimeEntry(cur)
		if rel < 0 {
			return true, fmt.Errorf("entry %d offset %d below base offset %d", i, base+int64(rel), base)
		}
		if i == 0 {
			return ts == 0 && rel == 0, nil // an empty preallocated file
		}
		if rel == 0 {
			return true, nil // the zero tail of a preallocated file
		}
		pts, prel := decodeTimeEntry(prev)
		if ts <= pts || rel < prel {
			return true, fmt.Errorf("entry %d (%d, %d) does not follow entry %d (%d, %d)",
				i, ts, base+int64(rel), i-1, pts, base+int64(prel))
		}
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	return x, nil
}

// Path returns the file name the index was opened with.
func (x *TimeIndex) Path() string { return x.ef.path }

// BaseOffset returns the segment's base offset.
func (x *TimeIndex) BaseOffset() int64 { return x.ef.base }

// Entries returns the number of entries.
func (x *TimeIndex) Entries() int { return int(x.ef.n.Load()) }

// MaxEntries returns how many entries the index can hold.
func (x *TimeIndex) MaxEntries() int { return x.ef.capacity }

// IsFull reports whether the index is full. As in Kafka, one slot is held
// back for the entry appended on roll or close (MaybeAppend with skipFull).
func (x *TimeIndex) IsFull() bool { return x.Entries() >= x.ef.capacity-1 }

// Entry returns entry i (0 <= i < Entries()).
// After a fault (Faulted) it returns (-1, base).
func (x *TimeIndex) Entry(i int) (timestamp, offset int64) {
	timestamp, offset = -1, x.ef.base
	x.ef.read(func(n int, view []byte) {
		if i < 0 || i >= n {
			panic(fmt.Sprintf("index: entry %d out of range [0,%d)", i, n))
		}
		ts, rel := decodeTimeEntry(x.ef.entry(view, i))
		timestamp, offset = ts, x.ef.base+int64(rel)
	})
	return timestamp, offset
}

// LastEntry returns the last entry, or (-1, base) if the index is empty
// (or Faulted).
func (x *TimeIndex) LastEntry() (ts, offset int64) {
	ts, offset = -1, x.ef.base
	x.ef.read(func(n int, view []byte) {
		if n > 0 {
			t, rel := decodeTimeEntry(x.ef.entry(view, n-1))
			ts, offset = t, x.ef.base+int64(rel)
		}
	})
	return ts, offset
}

// Faulted reports that a read of the index's read-only mapping faulted
// (its file was cut short under it): every answer since is the empty
// index's. Its owner should close it and rebuild the file.
func (x *TimeIndex) Faulted() bool { return x.ef.faulted.Load() }

// Mapped reports whether the entries are read from a mapping of the file
// (else from the heap).
func (x *TimeIndex) Mapped() bool { return x.ef.mm != nil }

// MaybeAppend appends (ts, offset) when ts is above the last entry's
// timestamp (-1 when empty); ts equal to it is a silent no-op. It fails when
// the index is full (unless skipFull), when offset is below the last entry's
// offset or outside [base, base+MaxInt32], or when ts is below the last
// timestamp. A first entry (0, base) is stored but reads back as an empty
// index after reopening (it is indistinguishable from a zero tail), which
// changes no lookup's offset.
func (x *TimeIndex) MaybeAppend(ts, offset int64, skipFull bool) error {
	if err := x.ef.checkWritable(); err != nil {
		return err
	}
	if !skipFull && x.IsFull() {
		return fmt.Errorf("%w: %s holds %d entries", ErrFull, x.ef.path, x.Entries())
	}
	lastTs, lastOff := x.LastEntry()
	if x.Entries() > 0 && offset < lastOff {
		return fmt.Errorf("%w: %s: offset %d below last entry offset %d", ErrInvalidAppend, x.ef.path, offset, lastOff)
	}
	if x.Entries() > 0 && ts < lastTs {
		return fmt.Errorf("%w: %s: timestamp %d below last entry timestamp %d", ErrInvalidAppend, x.ef.path, ts, lastTs)
	}
	if ts <= lastTs {
		return nil
	}
	rel := offset - x.ef.base
	if rel < 0 || rel > math.MaxInt32 {
		return fmt.Errorf("%w: %s: offset %d outside base %d + int32", ErrInvalidAppend, x.ef.path, offset, x.ef.base)
	}
	var e [TimeEntrySize]byte
	encodeTimeEntry(e[:], ts, int32(rel))
	return x.ef.put(e[:])
}

// Lookup returns the largest entry with timestamp <= target, or (-1, base)
// if there is none (or the index Faulted). O(log n).
func (x *TimeIndex) Lookup(target int64) (timestamp, offset int64) {
	timestamp, offset = -1, x.ef.base
	n, view := x.ef.snapshot()
	if x.ef.guarded {
		if x.ef.faulted.Load() {
			return timestamp, offset
		}
		defer x.ef.endGuard(debug.SetPanicOnFault(true))
	}
	tsAt := func(i int) int64 { return int64(binary.BigEndian.Uint64(view[i*TimeEntrySize:])) }
	lo, hi := 0, n
	if warm := n - 1 - warmBytes/TimeEntrySize; warm > 0 && tsAt(warm) <= target {
		lo = warm + 1
	}
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if tsAt(mid) > target {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if i := lo - 1; i >= 0 {
		ts, rel := decodeTimeEntry(x.ef.entry(view, i))
		timestamp, offset = ts, x.ef.base+int64(rel)
	}
	return timestamp, offset
}

// TruncateTo drops every entry with offset >= offset. On a heap-backed index
// the file is cut by the next append, Sync, Trim or Close. Exclusive access.
func (x *TimeIndex) TruncateTo(offset int64) {
	n, view := x.ef.snapshot()
	keep := sort.Search(n, func(i int) bool {
		_, rel := decodeTimeEntry(x.ef.entry(view, i))
		return x.ef.base+int64(rel) >= offset
	})
	x.ef.truncateEntries(keep)
}

// Reset drops every entry and cuts the file accordingly. Exclusive access.
func (x *TimeIndex) Reset() error { return x.ef.reset() }

// SanityCheck reports (wrapping ErrCorruptIndex) a file whose length is not
// a multiple of 12, entries out of order, a last timestamp below the first,
// or a last offset below the base.
func (x *TimeIndex) SanityCheck() error {
	if err := x.ef.sanityLength(); err != nil {
		return err
	}
	if x.Entries() == 0 {
		return nil
	}
	firstTs, _ := x.Entry(0)
	lastTs, lastOff := x.LastEntry()
	if lastTs < firstTs {
		return fmt.Errorf("%w: %s: last timestamp %d below first timestamp %d", ErrCorruptIndex, x.ef.path, lastTs, firstTs)
	}
	if lastOff < x.ef.base {
		return fmt.Errorf("%w: %s: last offset %d below base offset %d", ErrCorruptIndex, x.ef.path, lastOff, x.ef.base)
	}
	return nil
}

// Trim shrinks the file to Entries()*12 bytes (on seal). Exclusive access.
func (x *TimeIndex) Trim() error { return x.ef.trim() }

// Sync makes the entries durable.
func (x *TimeIndex) Sync() error { return x.ef.sync() }

// Close trims a writable index and releases its file and mapping.
// Exclusive access.
func (x *TimeIndex) Close() error { return x.ef.close() }
