// Reading a Segment: ReadAt and ReadBatch on its .log, the cheap batch
// header peek, and the lookups by offset and by timestamp through the
// segment's indexes (FindOffset, FindTimestamp), rebuilding a sealed
// segment's indexes from its .log when they are found wrong. AbortedTxns
// reads the transaction index.

package engine

import (
	"errors"
	"fmt"
	"io"

	"github.com/topicfs/topicfs/engine/index"
	"github.com/topicfs/topicfs/engine/record"
)

// ReadAt reads committed bytes: [0, Size()). Past Size it returns io.EOF.
func (s *Segment) ReadAt(p []byte, off int64) (int, error) {
	size := s.Size()
	if off < 0 {
		return 0, fmt.Errorf("engine: segment %s: negative read position %d", s.LogPath(), off)
	}
	if off >= size || s.log == nil {
		return 0, io.EOF
	}
	short := false
	if rem := size - off; int64(len(p)) > rem {
		p = p[:rem]
		short = true
	}
	n, err := s.log.ReadAt(p, off)
	s.stats.bytesRead.Add(int64(n))
	s.stats.reads.Add(1)
	if err == nil && short {
		err = io.EOF
	}
	return n, err
}

// ReadBatch reads and verifies (CRC, structure) the batch at pos, reusing
// buf when it is large enough; a batch that passed the check before
// (batchmemo.go) is not checked again. At Size() it returns io.EOF. Corruption
// returns an error wrapping ErrCorrupt that names the file and position,
// and is logged.
func (s *Segment) ReadBatch(pos int64, buf []byte) (record.Batch, error) {
	size := s.Size()
	if pos >= size || s.log == nil {
		return record.Batch{}, io.EOF
	}
	b, err := record.ReadAt(s.log, pos, size, buf)
	if err == nil {
		s.stats.bytesRead.Add(int64(b.Size()))
		s.stats.reads.Add(1)
		if !s.checkedBefore(pos, b.Size()) {
			err = b.Verify()
		}
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			return record.Batch{}, io.EOF
		}
		return record.Batch{}, s.readError(pos, err)
	}
	return b, nil
}

// readError is the error for a failed read of the batch at pos: bad bytes
// (ErrCorrupt, ErrTruncated) are corruption (logged), anything else (an
// I/O error) is returned wrapped.
func (s *Segment) readError(pos int64, err error) error {
	if errors.Is(err, record.ErrCorrupt) || errors.Is(err, record.ErrTruncated) {
		return s.corrupt(pos, err)
	}
	return fmt.Errorf("engine: segment %s pos %d: %w", s.LogPath(), pos, err)
}

// corrupt builds (and logs) the error for bad bytes at pos.
func (s *Segment) corrupt(pos int64, cause error) error {
	path := s.LogPath()
	s.stats.corruptions.Add(1)
	s.logger.Error("engine: corrupt data", "segment", path, "position", pos, "err", cause)
	if errors.Is(cause, ErrCorrupt) {
		return fmt.Errorf("engine: segment %s position %d: %w", path, pos, cause)
	}
	return fmt.Errorf("%w: segment %s position %d: %v", ErrCorrupt, path, pos, cause)
}

// batchHeader is what FindOffset and rebuilds need from a batch without
// reading its records.
type batchHeader struct {
	baseOffset int64 // legacy: == lastOffset
	lastOffset int64
	maxTs      int64
	size       int64
	magic      int8
	attributes int16
}

// Batch header prefix read by peekHeader (v2 layout, big-endian):
//
//	+--------------+----------+-------------+-------+--------+------------+-----------------+---------------+--------------+
//	| baseOffset 8 | length 4 | leaderEp. 4 | magic | crc 4  | attrs 2    | lastOffsetDelta | baseTimestamp | maxTimestamp |
//	| 0            | 8        | 12          | 16    | 17     | 21         | 23 (4)          | 27 (8)        | 35 (8)       |
//	+--------------+----------+-------------+-------+--------+------------+-----------------+---------------+--------------+
//
// Legacy entries: offset 8 | size 4 | crc 4 | magic 1 (@16) | attrs 1 | [timestamp 8 (@18), v1 only].
const peekSize = 43

// peekHeader reads the header of the entry at pos (valid data ends at end).
// It returns io.EOF at end and wraps ErrCorrupt for a bad header.
func (s *Segment) peekHeader(pos, end int64) (batchHeader, error) {
	if s.log == nil {
		return batchHeader{}, io.EOF
	}
	h, n, err := peekAt(s.log, pos, end)
	s.stats.bytesRead.Add(n)
	return h, err
}

// peekAt reads the header of the entry at pos of r, whose valid data ends at
// end; it also returns the bytes it read.
func peekAt(r io.ReaderAt, pos, end int64) (batchHeader, int64, error) {
	if pos >= end {
		return batchHeader{}, 0, io.EOF
	}
	var buf [peekSize]byte
	n := int64(peekSize)
	if end-pos < n {
		n = end - pos
	}
	if n < 17 {
		return batchHeader{}, 0, fmt.Errorf("%w: %d trailing bytes at position %d", record.ErrTruncated, n, pos)
	}
	got, err := r.ReadAt(buf[:n], pos)
	if int64(got) < n {
		if err == nil || errors.Is(err, io.EOF) {
			return batchHeader{}, int64(got), fmt.Errorf("%w: short header at position %d", record.ErrTruncated, pos)
		}
		return batchHeader{}, int64(got), err
	}
	h, err := parsePeek(buf[:n], pos, end)
	return h, n, err
}

func parsePeek(buf []byte, pos, end int64) (batchHeader, error) {
	b, err := record.PeekHeader(buf, end-pos)
	if err != nil {
		return batchHeader{}, fmt.Errorf("%w (position %d)", err, pos)
	}
	h := batchHeader{baseOffset: b.BaseOffset, size: int64(b.Size()), magic: b.Magic,
		attributes: b.Attributes, lastOffset: b.LastOffset(), maxTs: b.MaxTimestamp}
	if b.Magic == 2 && len(buf) < peekSize {
		// Not reached: a v2 batch that fits before end is longer than peekSize.
		return batchHeader{}, fmt.Errorf("%w: position %d: v2 header cut at %d bytes", record.ErrCorrupt, pos, len(buf))
	}
	return h, nil
}

// FindOffset returns the position of the first batch whose last offset is
// >= target, or Size() if there is none. It looks the target up in the
// offset index and scans at most one index interval of batch headers.
func (s *Segment) FindOffset(target int64) (int64, error) {
	end := s.Size()
	if pos, ok := s.indexedBatch(target, end); ok {
		return pos, nil
	}
	pos, err := s.indexPosition(target)
	if err != nil {
		return 0, err
	}
	// Batches the memo holds need no header read; one at the index entry
	// that ends at or before target shows the entry tells the truth.
	m := s.bmemo.Load()
	checked := false
	if m != nil {
		e, ok := m.get(pos)
		checked = ok && s.base+int64(e.lastRel) <= target
	}
	if pos > 0 && !checked {
		// The batch at an index entry ends at or before the entry's offset,
		// so at or before target; anything else means the index lies.
		h, err := s.peekHeader(pos, end)
		if err == nil && h.lastOffset > target {
			err = fmt.Errorf("batch there ends at %d, past %d", h.lastOffset, target)
		}
		switch {
		case err != nil:
			// The index points at no batch: distrust it.
			s.logger.Warn("engine: offset index entry points at no batch; scanning from the start",
				"segment", s.LogPath(), "position", pos, "err", err)
			s.distrustIndexes()
			if pos, err = s.indexPosition(target); err != nil {
				return 0, err
			}
			if _, err := s.peekHeader(pos, end); err != nil {
				pos = 0
			}
		case h.lastOffset == target:
			return pos, nil
		default:
			pos += h.size // the scan below starts after it (one header read)
		}
	}
	for pos < end {
		if m != nil {
			var found bool
			if pos, _, found = m.skip(pos, target); found {
				return pos, nil
			}
			if pos >= end {
				break
			}
		}
		h, err := s.peekHeader(pos, end)
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return 0, s.corrupt(pos, err)
		}
		if h.lastOffset >= target {
			return pos, nil
		}
		pos += h.size
	}
	return end, nil
}

// indexedBatch returns the position of the batch holding target when the
// offset index has an entry for it: the first entry at or after target
// names a batch whose header (one read, or the memo) shows it starts at
// or before target and ends where the entry says. Batches are in offset
// order, so every batch before it ends before target. ok is false
// otherwise (no such entry, a batch between the entries, an index that
// lies): FindOffset scans from the entry before instead.
func (s *Segment) indexedBatch(target, end int64) (int64, bool) {
	pos, last, ok := s.IndexedBatch(target)
	if !ok || pos >= end {
		return 0, false
	}
	if m := s.bmemo.Load(); m != nil {
		if _, known := m.get(pos); known {
			return 0, false // the scan walks remembered batches without reading
		}
	}
	h, err := s.peekHeader(pos, end)
	if err != nil || h.lastOffset != last || h.baseOffset > target || h.magic < 2 {
		return 0, false
	}
	return pos, true
}

// IndexedBatch returns, from the offset index alone (no read), where the
// batch holding target should be: the first entry at or after target
// names a batch, at pos, that ends at last. It holds target when it
// starts at or before target and ends at last: the caller reading it
// checks that (a batch the index has no entry for may lie between the
// entry before and it; FindOffset answers then). ok is false without
// such an entry, or without one before target (the segment's first
// batches, which a scan from the start reaches at once).
func (s *Segment) IndexedBatch(target int64) (pos, last int64, ok bool) {
	if target <= s.base {
		return 0, 0, false
	}
	if s.useIndexes(func(oidx *index.OffsetIndex, _ *index.TimeIndex, _ *index.TxnIndex) {
		if oidx == nil {
			return
		}
		if off, floor, cOff, cPos, cOK := oidx.Around(target); floor > 0 || off > s.base {
			last, pos, ok = cOff, cPos, cOK
		}
	}) != nil || !ok || pos <= 0 || pos >= s.Size() {
		return 0, 0, false
	}
	return pos, last, true
}

// distrustIndexes rebuilds a sealed segment's indexes from its .log (the
// active segment's belong to the writer and stay).
func (s *Segment) distrustIndexes() { s.rebuildSealed(func() bool { return true }) }

// indexPosition returns the offset-index position for target.
func (s *Segment) indexPosition(target int64) (int64, error) {
	if target <= s.base {
		return 0, nil
	}
	var pos int64
	err := s.useIndexes(func(oidx *index.OffsetIndex, _ *index.TimeIndex, _ *index.TxnIndex) {
		if oidx != nil {
			_, pos = oidx.Lookup(target)
		}
	})
	if err != nil {
		return 0, err
	}
	if pos > s.Size() {
		pos = 0
	}
	return pos, nil
}

// useIndexes calls fn with the loaded indexes (loading them first), under
// the read lock so that they cannot be evicted meanwhile.
func (s *Segment) useIndexes(fn func(*index.OffsetIndex, *index.TimeIndex, *index.TxnIndex)) error {
	for {
		if err := s.loadIndexes(); err != nil {
			return err
		}
		s.mu.RLock()
		if s.mu.loaded {
			fn(s.mu.oidx, s.mu.tidx, s.mu.txn)
			s.usedLocked()
			return nil
		}
		s.mu.RUnlock() // evicted in between: load again
	}
}

// FindTimestamp returns the offset of the first record whose timestamp is
// >= ts, looking it up in the time index, then the offset index, then
// scanning. ok is false when no record of the segment qualifies.
func (s *Segment) FindTimestamp(ts int64) (offset int64, ok bool, err error) {
	if err := s.loadIndexes(); err != nil {
		return 0, false, err
	}
	end := s.Size()
	pos, err := s.timePosition(ts, end)
	if err != nil {
		return 0, false, err
	}
	var buf []byte
	var recs []record.Record
	for pos < end {
		h, err := s.peekHeader(pos, end)
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return 0, false, s.corrupt(pos, err)
		}
		if h.maxTs >= ts {
			b, err := s.ReadBatch(pos, buf)
			if err != nil {
				return 0, false, err
			}
			buf = b.Raw
			recs, err = b.Records(recs[:0])
			if err != nil {
				return 0, false, s.corrupt(pos, err)
			}
			for _, r := range recs {
				if r.Timestamp >= ts {
					return r.Offset, true, nil
				}
			}
		}
		pos += h.size
	}
	return 0, false, nil
}

// timePosition returns where to scan from for the first record with a
// timestamp >= ts. A time-index entry (T, O) says the batch ending at O holds
// the segment's max timestamp T so far; an entry that does not match its
// batch means the index lies, and it is rebuilt (sealed segments) or
// ignored.
func (s *Segment) timePosition(ts, end int64) (int64, error) {
	for attempt := 0; ; attempt++ {
		entryTs, entryOff := int64(-1), s.base
		err := s.useIndexes(func(_ *index.OffsetIndex, tidx *index.TimeIndex, _ *index.TxnIndex) {
			if tidx != nil {
				entryTs, entryOff = tidx.Lookup(ts)
			}
		})
		if err != nil {
			return 0, err
		}
		if entryTs < 0 {
			return 0, nil
		}
		pos, err := s.FindOffset(entryOff)
		if err != nil {
			return 0, err
		}
		h, err := s.peekHeader(pos, end)
		if err == nil && h.lastOffset == entryOff && h.maxTs == entryTs {
			return s.indexPosition(entryOff)
		}
		if attempt > 0 || !s.Sealed() {
			return 0, nil // scan the whole segment
		}
		s.logger.Warn("engine: time index entry matches no batch; rebuilding the indexes",
			"segment", s.LogPath(), "timestamp", entryTs, "offset", entryOff)
		s.distrustIndexes()
	}
}

// AbortedTxns returns the aborted transactions whose ABORT marker lies in
// this segment.
func (s *Segment) AbortedTxns() []index.AbortedTxn {
	// Most segments have no .txnindex: answer without loading (and caching)
	// the offset and time indexes, so that a sequential read of a whole
	// partition never pulls its indexes into memory.
	s.mu.RLock()
	none := s.mu.files.txnIndex == "" && s.mu.txn == nil
	s.mu.RUnlock()
	if none {
		return nil
	}
	var out []index.AbortedTxn
	err := s.useIndexes(func(_ *index.OffsetIndex, _ *index.TimeIndex, txn *index.TxnIndex) {
		if txn != nil {
			out = txn.All()
		}
	})
	if err != nil {
		s.logger.Error("engine: reading the txn index", "segment", s.LogPath(), "err", err)
	}
	return out
}
