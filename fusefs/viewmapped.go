package fusefs

import (
	"fmt"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
)

// Batches read in place from a segment's mapping (engine.Segment.MappedBatch)
// instead of a pread of their bytes into a chunk. A seek lands inside a
// batch and usually needs part of it and part of the next: an open of
// by-offset/N, which measures the records before N in N's batch and then
// renders the first READ from N, would otherwise read N's batch whole
// twice and the next once (docs/PERFORMANCE.md §6.5). Sequential reading
// goes on with the chunks (their prefetch keeps a reader busy).

// mappedSegment returns the engine segment whose mapping seg's batches
// can be read from, nil when there is none (a segment of another backend).
func mappedSegment(seg segmentReader) *engine.Segment {
	switch s := seg.(type) {
	case *engine.Segment:
		return s
	case engine.SegmentBacked:
		return s.EngineSegment()
	}
	return nil
}

// measureMapped is measureBatchStart of the batch at pos of seg (whose
// bytes below limit are committed), read from the segment's mapping; ok
// is false when it cannot be read there (read it the usual way). size is
// the batch's size.
func measureMapped(seg segmentReader, pos, limit int64, f viewFormat, hi int64, ab *abortedSet, sc *renderScratch) (n int64, size int, at rawAt, ok bool, err error) {
	s := mappedSegment(seg)
	if s == nil {
		return 0, 0, rawAt{}, false, nil
	}
	ok, err = s.MappedBatch(pos, limit, func(b record.Batch) error {
		size = b.Size()
		var err error
		n, at, err = measureBatchStart(&b, f, hi, ab, sc)
		clear(sc.recs[:cap(sc.recs)]) // (they alias the mapping)
		return err
	})
	return n, size, at, ok, err
}

// startAt returns the recent renderedBefore answer whose view starts at
// rendered position rel of the segment, when its record's place in its
// batch is known (a seek to rel starts at that record).
func (x *segIndex) startAt(rel int64) (startHint, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, h := range x.mu.starts {
		if h.set && h.at.ok && h.r == rel {
			return h, true
		}
	}
	return startHint{}, false
}

// seekMapped moves c, which a seek put at the batch start before rendered
// position rel of its segment, straight to the record that starts at rel
// when a recent renderedBefore answer knows where it lies in its batch
// (the first READ of by-offset/N: N's record): that batch is then read in
// place from the mapping, from the record on.
func (c *cursor) seekMapped(x *segIndex, rel int64) {
	hs, ok := x.startAt(rel)
	if !ok || hs.cp.fpos != c.fpos {
		return
	}
	c.startMapped()
	c.rawP, c.rawDone = hs.at.p, hs.at.done
	c.next += hs.r - hs.cp.rpos
}

// mapsRaw reports whether a cursor in format f reads batches from their
// mapping after a seek: only batches putPlainRaw renders are read there.
func mapsRaw(f viewFormat, seg segmentReader) bool {
	return !f.json && !f.printKey && mappedSegment(seg) != nil
}

// startMapped makes the batch at c.fpos the cursor's mapped batch (read
// in place by renderMapped, which checks that it is one to read there).
func (c *cursor) startMapped() {
	c.onMap, c.mapAt, c.mapChecked, c.mapStart = true, c.fpos, false, c.next
	c.raw, c.rawP, c.rawDone, c.rawB = nil, 0, 0, record.Batch{}
}

// renderMapped renders (or skips towards view position off+n) the
// records of the cursor's mapped batch into dest[n:], straight from the
// segment's mapping, as renderRaw does from a chunk. It returns with the
// batch done (c.onMap cleared), dest full, or a record rendered into pend
// (the read loop delivers it; the next call goes on in the mapping). A
// batch that is not one putPlainRaw renders, or that cannot be read in
// place, is left to nextBatch; one that meets a record putPlainRaw does
// not take is read the usual way, from where the cursor stands, for
// renderRaw to decode.
func (st *viewState) renderMapped(c *cursor, dest []byte, n int, off int64) (int, error) {
	f := st.format
	var done, decode, skipped bool
	ok, err := mappedSegment(c.h.key.seg).MappedBatch(c.mapAt, c.h.limit, func(b record.Batch) error {
		if !c.mapChecked {
			ab := st.abSet()
			if b.IsControl() || !rawEligible(&b, f) || b.IsTransactional() && !ab.empty() {
				skipped = true
				return nil
			}
			if c.rawDone > int(b.RecordCount) || c.rawP > len(b.Raw)-record.HeaderSize {
				return fmt.Errorf("%w: batch at %d: record %d at %d is past its end", engine.ErrCorrupt, c.mapAt, c.rawDone, c.rawP)
			}
			c.rawB, c.ab, c.txn, c.pid = b, ab, false, b.ProducerID
			c.rawB.Raw = nil // (the header only: the bytes stay in the mapping)
			c.fpos, c.mapChecked = c.mapAt+int64(b.Size()), true
		} else if b.Size() != c.rawB.Size() {
			return fmt.Errorf("%w: batch of %d bytes at %d, %d before", engine.ErrCorrupt, b.Size(), c.mapAt, c.rawB.Size())
		}
		c.raw = b.Raw[record.HeaderSize:]
		n, done, decode = c.renderInPlace(f, dest, n, off)
		c.raw = nil
		return nil
	})
	switch {
	case err != nil:
		// The next READ seeks again: the mapping is not read after a
		// fault, and a batch read again reports what is wrong with it.
		st.ps.logCorrupt(c.h.key.seg, c.mapAt, err)
		c.onMap, c.mapNext, c.valid = false, false, false
		return n, err
	case !ok && !c.mapChecked || skipped:
		// Left to nextBatch, from the batch's start (nothing consumed;
		// seekMapped may have moved the cursor past records the read
		// loop now skips again); the rest of this READ reads chunks.
		c.onMap, c.mapNext, c.fpos, c.next = false, false, c.mapAt, c.mapStart
		c.rawP, c.rawDone = 0, 0
		return n, nil
	case done:
		c.onMap = false
		return n, nil
	case decode || !ok:
		return n, st.unmapBatch(c)
	}
	return n, nil
}

// renderInPlace is renderRaw's fast path over c.raw, a batch in the
// mapping: it skips towards and renders from view position off+n until
// the batch is done, dest is full or a record went to pend. decode: it
// stopped at a record only the decoding path takes.
func (c *cursor) renderInPlace(f viewFormat, dest []byte, n int, off int64) (_ int, done, decode bool) {
	for n < len(dest) && len(c.pend) == 0 {
		if c.rawLeft() == 0 {
			// Bytes after the last record: the decoding says what is wrong.
			return n, c.rawP == len(c.raw), c.rawP != len(c.raw)
		}
		if pos := off + int64(n); pos > c.next {
			if !c.skipRaw(f, pos) {
				return n, false, true
			}
			if c.raw == nil { // skipRaw (or its pendRaw) took the last record
				return n, true, false
			}
			continue
		}
		k, p, m := putPlainRaw(dest, n, c.raw, c.rawP, c.rawLeft(), f.nullMarker)
		c.next += int64(k - n)
		n, c.rawP, c.rawDone = k, p, c.rawDone+m
		switch {
		case c.rawLeft() == 0 && c.rawP == len(c.raw):
			return n, true, false
		case n == len(dest):
		case !c.pendRaw(f):
			return n, false, true
		case c.raw == nil: // pendRaw took the last record
			return n, true, false
		}
	}
	return n, false, false
}

// unmapBatch reads the cursor's mapped batch the usual way (a chunk), for
// renderRaw to go on from where the cursor stands in it.
func (st *viewState) unmapBatch(c *cursor) error {
	c.onMap, c.mapNext = false, false
	b, err := c.rd.batch(c.h.key.seg, c.mapAt, c.h.limit)
	if err == nil && b.Size() != c.rawB.Size() {
		err = fmt.Errorf("%w: batch of %d bytes at %d, %d before", engine.ErrCorrupt, b.Size(), c.mapAt, c.rawB.Size())
	}
	if err != nil {
		st.ps.logCorrupt(c.h.key.seg, c.mapAt, err)
		return err
	}
	c.raw, c.rawB = b.Raw[record.HeaderSize:], b
	if c.rawLeft() == 0 && c.rawP == len(c.raw) {
		c.raw = nil
	}
	return nil
}
