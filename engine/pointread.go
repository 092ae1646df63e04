// Point reads: one record by its offset, with one offset-index lookup and,
// once the record's batch is known (batchmemo.go), one pread of the part
// of the batch that holds the record.

package engine

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/topicfs/topicfs/engine/record"
)

// PointRecord is a record read by its offset, with the header of its batch.
type PointRecord struct {
	record.Record
	// Batch is the header of the record's batch (Raw nil): its attributes
	// (codec, control, transactional) and producer.
	Batch record.Batch
	// BatchPos is the batch's position in its segment's .log.
	BatchPos int64
}

// PointReader reads single records by offset: the first record at or
// after an offset (the record at that offset, unless compaction removed
// it). A batch is CRC-checked before any of its bytes are returned, once
// for as long as its segment is open: after that a read of one of its
// records costs the offset-index lookup and one pread of the anchor
// interval (a few KiB) holding the record.
//
// The zero value is ready. A PointReader is not safe for concurrent use
// (use one per goroutine); the records it returns alias its buffers and are
// valid until its next call.
type PointReader struct {
	buf     []byte          // bytes read: an anchor interval or a whole batch
	scratch []byte          // a compressed batch's records, decompressed
	recs    []record.Record // a compressed or legacy batch's records
}

// ReadRecord returns the first record of p at or after offset. offset must
// lie within [LogStartOffset, LogEndOffset), else the error wraps
// ErrOffsetOutOfRange. It retains only the segment it reads, for the read.
func (r *PointReader) ReadRecord(p *Partition, offset int64) (PointRecord, error) {
	for {
		ls, leo := p.logStart.Load(), p.logEnd.Load()
		if offset < ls || offset >= leo {
			return PointRecord{}, fmt.Errorf("%w: offset %d not in [%d, %d)", ErrOffsetOutOfRange, offset, ls, leo)
		}
		l := p.list()
		i := sort.Search(len(l), func(i int) bool { return l[i].base > offset }) - 1
		retry := false
		for i = max(i, 0); i < len(l); i++ {
			s := l[i]
			if !s.tryRetain() {
				retry = true // released since the list was loaded: it was replaced
				break
			}
			rec, err := r.ReadSegmentRecord(s, offset)
			s.Release()
			if !errors.Is(err, io.EOF) {
				return rec, err
			}
		}
		if !retry {
			return PointRecord{}, fmt.Errorf("%w: no record at or after offset %d", ErrOffsetOutOfRange, offset)
		}
	}
}

// ReadSegmentRecord returns the first record of s at or after offset, or
// io.EOF when s holds none. The caller holds a reference on s. Corruption
// returns an error wrapping ErrCorrupt that names the file and position.
func (r *PointReader) ReadSegmentRecord(s *Segment, offset int64) (PointRecord, error) {
	end := s.Size()
	m := s.memo()
	if m == nil || end == 0 {
		return PointRecord{}, io.EOF
	}
	m.touch()
	pos, err := s.indexFloor(offset)
	if err != nil {
		return PointRecord{}, err
	}
	// checked: pos is where a batch starts (position 0, or a walk from a
	// checked one). The batch at an index entry must end at or before
	// offset, as FindOffset checks; when it does not (or cannot be read),
	// FindOffset settles it (it rebuilds a lying index).
	checked := pos == 0
	for pos < end {
		var e memoSpan
		var remembered bool
		if checked {
			pos, e, remembered = m.skip(pos, offset)
			if pos >= end {
				break
			}
		} else {
			e, remembered = m.get(pos)
		}
		size, last := int64(e.size), s.base+int64(e.lastRel)
		var err error
		if !remembered {
			var h batchHeader
			h, err = s.peekHeader(pos, end)
			size, last = h.size, h.lastOffset
		}
		switch {
		case errors.Is(err, io.EOF):
			return PointRecord{}, io.EOF
		case !checked && (err != nil || last > offset):
			if pos, err = s.FindOffset(offset); err != nil {
				return PointRecord{}, err
			}
			checked = true
			continue
		case err != nil:
			return PointRecord{}, s.corrupt(pos, err)
		}
		checked = true
		if last < offset {
			pos += size
			continue
		}
		var rec PointRecord
		var found bool
		if remembered {
			rec, found, err = r.fromMemo(s, m, pos, e, offset)
		} else {
			rec, found, err = r.learn(s, m, pos, offset)
		}
		if found || err != nil {
			return rec, err
		}
		pos += size
	}
	return PointRecord{}, io.EOF
}

// indexFloor is indexPosition with the indexes loaded: one lock.
func (s *Segment) indexFloor(target int64) (int64, error) {
	if target <= s.base {
		return 0, nil
	}
	s.mu.RLock()
	if !s.mu.loaded {
		s.mu.RUnlock()
		return s.indexPosition(target)
	}
	var pos int64
	if s.mu.oidx != nil {
		_, pos = s.mu.oidx.Lookup(target)
	}
	s.usedLocked()
	if pos > s.Size() {
		pos = 0
	}
	return pos, nil
}

// learn reads the batch at pos whole, checks it (ReadBatch), remembers it
// with its detail and returns its first record at or after offset; found
// is false when it holds none.
func (r *PointReader) learn(s *Segment, m *batchMemo, pos, offset int64) (PointRecord, bool, error) {
	b, err := s.ReadBatch(pos, r.buf)
	if err != nil {
		return PointRecord{}, false, err
	}
	r.buf = b.Raw[:cap(b.Raw)]
	d := newDetail(&b)
	m.remember(pos, &b, d)
	return r.fromBatch(s, &b, d, pos, offset)
}

// fromMemo returns the first record at or after offset of the remembered
// batch e at pos: from one anchor interval when the batch has anchors, else
// from the whole batch, read again without its CRC check (it passed it).
func (r *PointReader) fromMemo(s *Segment, m *batchMemo, pos int64, e memoSpan, offset int64) (PointRecord, bool, error) {
	d := e.detail
	if d == nil || d.anchors == nil && d.starts == nil {
		b, err := r.readChecked(s, pos, e)
		if err != nil {
			return PointRecord{}, false, err
		}
		if d == nil {
			d = newDetail(&b)
			m.remember(pos, &b, d)
		}
		return r.fromBatch(s, &b, d, pos, offset)
	}
	target := max(offset-d.hdr.BaseOffset, 0)
	if st := d.starts; st != nil {
		if target >= int64(len(st)-1) {
			return PointRecord{}, false, nil
		}
		return r.fromInterval(s, d, pos, int64(st[target]), int64(st[target+1]), target, true)
	}
	a := d.anchors
	n := len(a) / 2
	// The last anchor at or before target; records before it are < target.
	k := sort.Search(n, func(i int) bool { return int64(a[2*i]) > target }) - 1
	for k = max(k, 0); k < n; k++ {
		from, to := int64(a[2*k+1]), int64(e.size)
		if k+1 < n {
			to = int64(a[2*k+3])
		}
		rec, found, err := r.fromInterval(s, d, pos, from, to, target, false)
		if found || err != nil {
			return rec, found, err
		}
	}
	return PointRecord{}, false, nil
}

// fromInterval reads [from, to) of the batch at pos, whole records between
// two anchors (exact: the one record whose offset delta is target), and
// returns its first record whose offset delta is at or after target: from
// the segment's mapping when it has one (the record's bytes copied out of
// it), else with one pread.
func (r *PointReader) fromInterval(s *Segment, d *memoDetail, pos, from, to, target int64, exact bool) (PointRecord, bool, error) {
	var (
		pr    PointRecord
		found bool
	)
	mapped, err := s.memo().withMapped(pos+from, pos+to, func(w []byte) error {
		p, end := 0, len(w)
		if !exact {
			var ok bool
			var err error
			if p, end, ok, err = findDelta(w, target); err != nil || !ok {
				return err
			}
		}
		r.buf = append(r.buf[:0], w[p:end]...)
		n, err := d.hdr.DecodeRecord(r.buf, 0, &pr.Record)
		if err == nil && (n != len(r.buf) || pr.Offset != d.hdr.BaseOffset+target && exact) {
			err = fmt.Errorf("%w: record at %d is not offset %d", record.ErrCorrupt, from+int64(p), d.hdr.BaseOffset+target)
		}
		if err != nil {
			return err
		}
		pr.Batch, pr.BatchPos, found = d.hdr, pos, true
		return nil
	})
	switch {
	case errors.Is(err, errMapFault):
		return PointRecord{}, false, s.memo().mapFault(pos)
	case err != nil:
		return PointRecord{}, false, s.corrupt(pos, err)
	case mapped:
		return pr, found, nil
	}
	n := int(to - from)
	if cap(r.buf) < n {
		r.buf = make([]byte, n)
	}
	w := r.buf[:n]
	if k, err := s.ReadAt(w, pos+from); k != n {
		if err == nil || errors.Is(err, io.EOF) {
			err = fmt.Errorf("%w: short read of %d/%d bytes at %d", record.ErrTruncated, k, n, pos+from)
		}
		return PointRecord{}, false, s.readError(pos, err)
	}
	p, _, ok, err := findDelta(w, target)
	if err != nil {
		return PointRecord{}, false, s.corrupt(pos, err)
	}
	if !ok {
		return PointRecord{}, false, nil
	}
	if _, err := d.hdr.DecodeRecord(w, p, &pr.Record); err != nil {
		return PointRecord{}, false, s.corrupt(pos, err)
	}
	pr.Batch, pr.BatchPos = d.hdr, pos
	return pr, true, nil
}

// findDelta walks w, whole records, to the first whose offset delta is at
// or after target and returns where it starts and ends; ok is false when
// none is.
func findDelta(w []byte, target int64) (p, end int, ok bool, err error) {
	for p < len(w) {
		delta, end, err := record.RecordFrame(w, p)
		if err != nil {
			return 0, 0, false, err
		}
		if int64(delta) >= target {
			return p, end, true, nil
		}
		p = end
	}
	return 0, 0, false, nil
}

// readChecked reads the remembered batch e at pos whole, without its CRC
// check; its framing is checked again.
func (r *PointReader) readChecked(s *Segment, pos int64, e memoSpan) (record.Batch, error) {
	b, err := record.ReadAt(s, pos, pos+int64(e.size), r.buf)
	if err == nil && b.Size() != int(e.size) {
		err = fmt.Errorf("%w: batch of %d bytes, %d remembered", record.ErrCorrupt, b.Size(), e.size)
	}
	if err != nil {
		return record.Batch{}, s.readError(pos, err)
	}
	r.buf = b.Raw[:cap(b.Raw)]
	return b, nil
}

// fromBatch returns the first record at or after offset of b, a checked
// batch at pos held whole.
func (r *PointReader) fromBatch(s *Segment, b *record.Batch, d *memoDetail, pos, offset int64) (PointRecord, bool, error) {
	pr := PointRecord{Batch: d.hdr, BatchPos: pos}
	if b.Magic == 2 && b.Codec() == record.None {
		target := max(offset-b.BaseOffset, 0)
		for p, i := record.HeaderSize, 0; i < int(b.RecordCount); i++ {
			delta, end, err := record.RecordFrame(b.Raw, p)
			if err != nil {
				return PointRecord{}, false, s.corrupt(pos, err)
			}
			if int64(delta) >= target {
				if _, err := b.DecodeRecord(b.Raw, p, &pr.Record); err != nil {
					return PointRecord{}, false, s.corrupt(pos, err)
				}
				return pr, true, nil
			}
			p = end
		}
		return PointRecord{}, false, nil
	}
	recs, scratch, err := b.RecordsInto(r.recs[:0], r.scratch)
	r.recs, r.scratch = recs[:0], scratch
	if err != nil {
		return PointRecord{}, false, s.corrupt(pos, err)
	}
	for i := range recs {
		if recs[i].Offset >= offset {
			pr.Record = recs[i]
			return pr, true, nil
		}
	}
	return PointRecord{}, false, nil
}

// newDetail returns the detail of b, a batch that passed its CRC check:
// its header and, when its records are uncompressed v2 records that walk
// exactly to its end with rising offset deltas, its anchors.
func newDetail(b *record.Batch) *memoDetail {
	d := &memoDetail{hdr: *b}
	d.hdr.Raw = nil
	if b.Magic != 2 || b.Codec() != record.None || b.RecordCount <= 0 || len(b.Raw) != b.Size() {
		return d
	}
	anchors := make([]uint32, 0, 2*(1+len(b.Raw)/anchorGap))
	starts := make([]uint32, 0, b.RecordCount+1)
	p, last, prev := record.HeaderSize, -anchorGap, int32(-1)
	dense := true
	for i := range b.RecordCount {
		delta, end, err := record.RecordFrame(b.Raw, p)
		if err != nil || delta <= prev || delta > b.LastOffsetDelta {
			return d
		}
		dense = dense && delta == i
		starts = append(starts, uint32(p))
		if p-last >= anchorGap {
			anchors = append(anchors, uint32(delta), uint32(p))
			last = p
		}
		prev, p = delta, end
	}
	if p != len(b.Raw) {
		return d
	}
	if dense {
		d.starts = append(starts, uint32(p))
		return d
	}
	d.anchors = slices.Clip(anchors)
	return d
}
