package fusefs

import (
	"context"
	"fmt"
	"github.com/topicfs/topicfs/backend"
	"math"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
)

// heldSeg is one segment a view state holds (retained) and the part of its
// rendering the view shows: from skip (the records before the view's first
// offset) up to the batches below limit.
type heldSeg struct {
	held   segmentReader // what is retained; its size is what the view shows
	key    segKey        // the index of its bytes (keyOf)
	from   int64         // first offset shown of this segment, -1 for all
	skip   int64         // rendered bytes of the segment before from
	limit  int64         // file bytes of the segment the view shows
	rstart int64         // view position of the segment's first shown byte
	rlen   int64         // rendered bytes shown (below limit, after skip)
	bad    error         // corruption at limit: reading past the shown bytes fails
}

// viewState is the content of an open view: the segments it started with
// (retained, so retention and compaction never change bytes already
// readable through it) plus the newer segments appended since. Handles of
// one inode share it (the kernel's page cache is per inode); it is dropped
// when the last handle is released. Safe for concurrent use.
type viewState struct {
	ps     *partState
	format viewFormat
	from   int64 // first offset shown

	mu struct {
		sync.Mutex
		segs []heldSeg
		size int64
		ab   *abortedSet
		// end is the offset the view stops before: its last snapshot's
		// end (the log end, or the last stable offset while a
		// transaction is open). ab lists every aborted transaction with
		// records below it.
		end      int64
		released bool
		// stream hands out the rest of the records up to the end at open
		// while they are still being fetched (viewstream.go); nil once
		// they all arrived.
		stream backend.Stream
		failed *streamError // the stream failed: the view cannot be read on
	}
}

// newViewState snapshots ps's partition from offset hint (the view's
// start as far as it is known before the snapshot; backend.FromStart) and
// holds the segments from the one holding offset from(snapshot) onwards.
// from may return ErrOffsetOutOfRange.
func newViewState(ctx context.Context, ps *partState, format viewFormat, take snapshotFunc, from func(*backend.Snapshot) (int64, error)) (*viewState, error) {
	snap, stream, err := take(ctx)
	if err != nil {
		return nil, err
	}
	defer snap.Release()
	opened := false
	defer func() {
		if !opened && stream != nil {
			stream.Close() // stops the fetching nobody will read
		}
	}()
	start, err := from(snap)
	if err != nil {
		return nil, err
	}
	if start < snap.Offsets.LogStart || start > snap.Offsets.End {
		return nil, fmt.Errorf("%w: offset %d not in [%d, %d]", backend.ErrOffsetOutOfRange, start, snap.Offsets.LogStart, snap.Offsets.End)
	}
	st := &viewState{ps: ps, format: format, from: start}
	st.mu.end = snap.Offsets.End
	st.mu.stream = stream
	segs := snap.Segments
	if len(segs) == 0 {
		st.release()
		return nil, engine.ErrClosed // a deleted or closed partition
	}
	// The segment holding start: the last whose base is <= start.
	k := sort.Search(len(segs), func(i int) bool { return segs[i].BaseOffset() > start }) - 1
	k = max(k, 0)
	st.mu.ab = backend.NewAbortedSet(segs)
	for i := k; i < len(segs); i++ {
		f := int64(-1)
		if i == k && start > segs[i].BaseOffset() {
			f = start
		}
		st.mu.segs = append(st.mu.segs, newHeld(segs[i], format, f))
	}
	if err := st.extendLocked(ctx, 0); err != nil {
		st.release()
		return nil, err
	}
	opened = true
	return st, nil
}

// extendLocked brings the held segments from index i on up to their
// committed sizes and recomputes positions. The caller holds st.mu (or owns
// st exclusively).
func (st *viewState) extendLocked(ctx context.Context, i int) error {
	st.settleWholeLocked(ctx, i)
	for ; i < len(st.mu.segs); i++ {
		h := &st.mu.segs[i]
		if i > 0 {
			prev := &st.mu.segs[i-1]
			h.rstart = prev.rstart + prev.rlen
		}
		size := st.shownSizeLocked(h.held)
		if (size <= h.limit || h.bad != nil) && h.skip >= 0 {
			continue
		}
		x := st.ps.fsys.segIndex(h.key, size, st.mu.ab)
		scanned, rlen, bad, err := x.extend(ctx, size, st.mu.ab, st.ps.logCorrupt)
		if err != nil {
			return err
		}
		h.bad = bad
		if h.skip < 0 {
			h.skip = 0
			if h.from >= 0 {
				if h.skip, err = x.renderedBefore(ctx, h.from, st.mu.ab, st.ps.logCorrupt, &st.ps.fsys.spares); err != nil {
					return err
				}
			}
		}
		if scanned >= h.limit {
			h.limit, h.rlen = scanned, max(rlen-h.skip, 0)
		}
	}
	last := st.mu.segs[len(st.mu.segs)-1]
	st.mu.size = last.rstart + last.rlen
	return nil
}

// knownLocked fills h, a segment shown whole, from a measure of it at size
// if one is known (the mount's, or else ViewSizesFile's): no index to
// build.
func (st *viewState) knownLocked(h *heldSeg, size int64) bool {
	f := st.ps.fsys
	m, seen, ok := f.cache.measure(h.key, size)
	if !ok && !seen { // (seen and not ok: grown since the mount measured it)
		if m, ok = f.sizes.measure(h.key, size, st.mu.ab); ok {
			f.cache.remember(m)
		}
	}
	if ok {
		h.bad, h.skip, h.limit, h.rlen = m.bad, 0, m.scanned, m.rlen
	}
	return ok
}

// measureWorkers is how many segments a view's first measure renders at
// once. Two: the first stat of a partition never measured (a broker's
// copy, a deleted topicfs-view-sizes) takes about half as long on two
// CPUs or more, and a reader's peak memory stays the same whatever the
// partition's size (each worker holds one segment's read buffers).
const measureWorkers = 2

// settleWholeLocked brings the held segments from index i on that are
// shown whole up to their committed sizes: from what is known of them
// (knownLocked), else by rendering them, measureWorkers at a time when
// there are several. What it cannot settle (a cancelled ctx) extendLocked
// meets again.
func (st *viewState) settleWholeLocked(ctx context.Context, i int) {
	type job struct {
		h    *heldSeg
		size int64
	}
	var jobs []job
	for j := i; j < len(st.mu.segs); j++ {
		h := &st.mu.segs[j]
		size := st.shownSizeLocked(h.held)
		if h.from >= 0 || (size <= h.limit || h.bad != nil) && h.skip >= 0 || st.knownLocked(h, size) {
			continue
		}
		jobs = append(jobs, job{h, size})
	}
	f, ab := st.ps.fsys, st.mu.ab
	workers := min(measureWorkers, len(jobs))
	if runtime.GOMAXPROCS(0) < 2 {
		workers = min(workers, 1)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			defer st.ps.catchMeasure()
			for k := next.Add(1) - 1; k < int64(len(jobs)) && ctx.Err() == nil; k = next.Add(1) - 1 {
				j := jobs[k]
				testPanicPart("measure", st.ps.p)
				_, _, _, _ = f.segIndex(j.h.key, j.size, ab).extend(ctx, j.size, ab, st.ps.logCorrupt)
			}
		})
	}
	wg.Wait()
	for _, j := range jobs {
		st.knownLocked(j.h, j.size)
	}
}

// refresh takes in what was appended since: the growth of the last held
// segment and any newer segments. It returns the old and new size. The
// snapshot is taken without st.mu held (in a cluster it may fetch, up
// to the request timeout): readers of what the view holds go on
// meanwhile, and takeInLocked keeps only what is newer than what it has.
func (st *viewState) refresh(ctx context.Context) (oldSize, newSize int64, err error) {
	if s := st.streaming(); s != nil {
		return st.streamStep(ctx, s)
	}
	st.mu.Lock()
	oldSize = st.mu.size
	failed, released := st.mu.failed, st.mu.released
	st.mu.Unlock()
	if failed != nil {
		return oldSize, oldSize, failed
	}
	if released {
		return oldSize, oldSize, nil
	}
	snap, err := st.ps.p.Snapshot(ctx, st.from)
	if err != nil {
		return oldSize, oldSize, err
	}
	defer snap.Release()
	st.mu.Lock()
	defer st.mu.Unlock()
	oldSize = st.mu.size
	if st.mu.released {
		return oldSize, oldSize, nil
	}
	err = st.takeInLocked(ctx, snap)
	return oldSize, st.mu.size, err
}

// takeInLocked adds what snap holds past the view's segments: the growth
// of the last held segment and any newer segments. The caller holds st.mu
// and releases snap.
func (st *viewState) takeInLocked(ctx context.Context, snap *backend.Snapshot) error {
	n := len(st.mu.segs)
	lastHeld := &st.mu.segs[n-1]
	last := lastHeld.held
	// Segments newer than the last held one: those after it in the
	// snapshot, or, if it is gone (retention, compaction), those holding
	// offsets at or past its end. A snapshot of a cluster's copy hands out
	// its segments anew, cut at its end: the same bytes, grown, replace
	// the held one.
	pos := -1
	for i, s := range snap.Segments {
		if keyOf(s, st.format) == lastHeld.key {
			pos = i
			if s != last && s.Size() > last.Size() {
				s.Retain()
				last.Release()
				lastHeld.held, last = s, s
			}
			break
		}
	}
	var newer []segmentReader
	if pos >= 0 {
		for _, s := range snap.Segments[pos+1:] {
			newer = append(newer, s)
		}
	} else {
		next := last.NextOffset()
		for _, s := range snap.Segments {
			if s.NextOffset() > next {
				newer = append(newer, s)
			}
		}
	}
	if len(newer) > 0 {
		// The last held segment is sealed; newer segments start at its end.
		next := last.NextOffset()
		for _, s := range newer {
			f := int64(-1)
			if s.BaseOffset() < next {
				f = next
			}
			st.mu.segs = append(st.mu.segs, newHeld(s, st.format, f))
		}
	}
	// The records the view may show now were aborted, if at all, by markers
	// in the last held segment or later: add their transactions first.
	scan := snap.Segments
	if pos >= 0 {
		scan = snap.Segments[pos:]
	}
	st.mu.ab = st.mu.ab.With(scan)
	st.mu.end = max(st.mu.end, snap.Offsets.End)
	return st.extendLocked(ctx, n-1)
}

// sizeBelower is a segment that may grow past a view's end (the engine's
// active segment): the view shows the bytes of its batches below the end.
type sizeBelower interface {
	SizeBelow(end int64) (int64, error)
}

// shownSizeLocked is the committed size of seg the view shows: all of it,
// or, for a segment that grows past the view's end, its batches below the
// end, so that records of a transaction still open never show. Callers
// hold st.mu.
func (st *viewState) shownSizeLocked(seg segmentReader) int64 {
	if sb, ok := seg.(sizeBelower); ok {
		if n, err := sb.SizeBelow(st.mu.end); err == nil {
			return n
		}
	}
	return seg.Size()
}

// size is the rendered length the view shows now.
func (st *viewState) size() int64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.mu.size
}

// endOffset returns the offset the view stops before now.
func (st *viewState) endOffset() int64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.mu.end
}

// extent returns the view's size and end offset, and whether it holds
// every record of its range (none is still arriving, none failed to).
func (st *viewState) extent() (size, end int64, complete bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.mu.size, st.mu.end, st.mu.stream == nil && st.mu.failed == nil
}

// release lets go of the held segments.
func (st *viewState) release() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.mu.released {
		return
	}
	st.mu.released = true
	for _, h := range st.mu.segs {
		h.held.Release()
	}
	if s := st.mu.stream; s != nil {
		st.mu.stream = nil
		go s.Close() // stops the fetching; Close waits for it
	}
}

// find returns the held segment holding view position pos (< size). At the
// position where a corrupt segment's shown bytes end it returns that
// corruption instead, so a reader never skips silently past it.
func (st *viewState) find(pos int64) (heldSeg, int, bool, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.mu.released {
		return heldSeg{}, 0, false, nil
	}
	segs := st.mu.segs
	i := sort.Search(len(segs), func(i int) bool { return segs[i].rstart+segs[i].rlen > pos })
	for j := i - 1; j >= 0 && segs[j].rstart+segs[j].rlen == pos; j-- {
		if segs[j].bad != nil {
			return heldSeg{}, 0, false, segs[j].bad
		}
	}
	if pos >= st.mu.size || i == len(segs) {
		return heldSeg{}, 0, false, nil
	}
	return segs[i], i, true, nil
}

func (st *viewState) abSet() *abortedSet {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.mu.ab
}

// cursor is a handle's read position: a stream of rendered bytes that
// continues at view position next. The stream is pend (rendered, not yet
// delivered), then the records recs[ri:] of the current batch, then the
// batches from file position fpos of held segment seg. Sequential reads
// continue from it without an index lookup; records are rendered straight
// into the reader's buffer whenever they fit.
type cursor struct {
	valid bool
	seg   int
	h     heldSeg
	lo    int64 // view position of the segment's first shown byte
	next  int64 // view position of the stream's next byte
	pend  []byte
	buf   []byte // pend's backing array
	recs  []record.Record
	ri    int
	txn   bool // the current batch is transactional and aborts are known
	pid   int64
	ab    *abortedSet
	fpos  int64
	rd    logChunk
	sc    renderScratch
	err   error // from a failed seek, returned by read

	// A plain view without print.key renders an uncompressed batch
	// straight from its bytes (putPlainRaw): raw[rawP:] holds its
	// remaining rawLeft() records, rawDone rendered so far, of batch rawB.
	raw     []byte
	rawP    int
	rawDone int
	rawB    record.Batch

	// pre is where in the batch at file position preAt (whose rendering
	// starts at view position preStart) the cursor starts: a seek put it
	// at a record inside that batch (seekStart), and c.next is already
	// that record's view position.
	pre      rawAt
	preAt    int64
	preStart int64
}

// rawLeft is how many records of the raw batch are still to render.
func (c *cursor) rawLeft() int { return int(c.rawB.RecordCount) - c.rawDone }

// rawEligible reports whether b's records can be rendered by putPlainRaw
// in format f.
func rawEligible(b *record.Batch, f viewFormat) bool {
	return !f.json && !f.printKey && b.Magic == 2 && b.Codec() == record.None &&
		!b.IsControl() && b.RecordCount > 0 && len(b.Raw) == b.Size() && len(b.Raw) > record.HeaderSize
}

// pendRaw renders the next record of the raw batch, which did not fit in
// the reader's buffer, into pend; false if putPlainRaw does not take it.
func (c *cursor) pendRaw(f viewFormat) bool {
	need := len(f.nullMarker) + 1
	if u, q, ok := plainVarint(c.raw, c.rawP); ok && u > 0 {
		need += q - c.rawP + u
	} else {
		return false
	}
	if cap(c.buf) < need {
		c.buf = make([]byte, need)
	}
	buf := c.buf[:cap(c.buf)]
	k, p, m := putPlainRaw(buf, 0, c.raw, c.rawP, 1, f.nullMarker)
	if m != 1 {
		return false
	}
	c.pend = buf[:k]
	c.rawP, c.rawDone = p, c.rawDone+1
	if c.rawLeft() == 0 && c.rawP == len(c.raw) {
		c.raw = nil
	}
	return true
}

// skipRaw moves the cursor over raw records towards pos without rendering
// them (walkPlainRaw); the record that straddles pos is rendered into
// pend, which deliverPend skips into. false: it met a record putPlainRaw
// does not take (decode the rest of the batch instead).
func (c *cursor) skipRaw(f viewFormat, pos int64) bool {
	p, done, k, ok := walkPlainRaw(c.raw, c.rawP, c.rawLeft(), f.nullMarker, math.MaxInt64, pos-c.next)
	c.rawP, c.rawDone, c.next = p, c.rawDone+done, c.next+k
	switch {
	case c.rawLeft() == 0 && c.rawP == len(c.raw):
		c.raw = nil
		return true
	case !ok || c.rawLeft() == 0: // (bytes after the last record: decoding says what is wrong)
		return false
	case c.next < pos:
		return c.pendRaw(f)
	}
	return true
}

// rawToRecs decodes the rest of the raw batch into recs (for a record
// putPlainRaw does not take, or to skip within the batch), or returns the
// batch's decoding error.
func (c *cursor) rawToRecs() error {
	recs, dec, err := c.rawB.RecordsInto(c.sc.recs[:0], c.sc.dec)
	c.sc.recs, c.sc.dec = recs[:0], dec
	done := c.rawDone
	c.raw, c.rawDone, c.rawB = nil, 0, record.Batch{}
	if err != nil {
		return err
	}
	if done > len(recs) {
		return fmt.Errorf("%w: batch decoded to %d records, %d rendered", engine.ErrCorrupt, len(recs), done)
	}
	c.recs, c.ri = recs, done
	return nil
}

// idle gives the cursor's pooled log buffer back when no decoded record
// still aliases it (at the end of the view, say); the cursor stays where
// it is.
func (c *cursor) idle() {
	if c.ri >= len(c.recs) && c.rawLeft() == 0 {
		c.rd.free()
	}
}

// read fills dest from view position off. It returns fewer bytes at the
// end of the view (never waits for more) and stops early, with what it
// has, when ctx is cancelled. Each turn of its loop takes one step of the
// cursor's stream: bytes rendered earlier (deliverPend), decoded records
// (renderRecords), a raw batch (renderRaw) or the next batch (nextBatch).
func (st *viewState) read(ctx context.Context, c *cursor, dest []byte, off int64) (int, error) {
	n := 0
	// sought is set once this call has sought: the cursor then stands at
	// the last checkpoint at or before pos, the nearest there is, and only
	// moves towards pos. A batch (or record) longer than the distance that
	// makes a cursor seek lies between two checkpoints further apart than
	// that, so seeking again would find the same checkpoint forever.
	sought := false
	for n < len(dest) {
		pos := off + int64(n)
		if !c.valid || pos < c.next || pos < c.lo || pos-c.next > 2*checkpointInterval && !sought {
			if !st.seek(ctx, c, pos) {
				break
			}
			sought = true
			continue
		}
		step, err := stepOn, error(nil)
		switch {
		case len(c.pend) > 0:
			n = c.deliverPend(dest, n, pos)
		case c.ri < len(c.recs):
			n = c.renderRecords(st.format, dest, n, pos)
		case c.raw != nil:
			n, step, err = st.renderRaw(c, dest, n, pos)
		default:
			step, err = st.nextBatch(ctx, c, n, pos)
		}
		if err != nil {
			return n, err
		}
		if step == stepSought {
			sought = true
		} else if step == stepDone {
			break
		}
	}
	if c.err != nil {
		err := c.err
		c.err = nil
		return n, err
	}
	return n, nil
}

// readStep says how read goes on after a step of the cursor.
type readStep int

const (
	stepOn     readStep = iota // go on filling dest
	stepDone                   // stop: dest holds what there is for now
	stepSought                 // the cursor sought (read seeks no more this call)
)

// deliverPend copies the rendered bytes in c.pend to dest[n:] (or skips
// them up to pos, when the cursor stands before it) and returns the new n.
func (c *cursor) deliverPend(dest []byte, n int, pos int64) int {
	if pos > c.next { // skipping to pos
		k := min(int64(len(c.pend)), pos-c.next)
		c.pend = c.pend[k:]
		c.next += k
		return n
	}
	k := copy(dest[n:], c.pend)
	c.pend = c.pend[k:]
	c.next += int64(k)
	return n + k
}

// renderRecords renders the current batch's decoded records c.recs[c.ri:]
// into dest[n:] (the first that may not fit into pend), or skips them up
// to pos, and returns the new n.
func (c *cursor) renderRecords(f viewFormat, dest []byte, n int, pos int64) int {
	if pos > c.next {
		c.skipRecord(f, pos)
		return n
	}
	// Render records in place while they surely fit; the first that may
	// not goes to pend.
	if !f.json && !c.txn {
		k, m := f.putPlain(dest, n, c.recs[c.ri:])
		c.next += int64(k - n)
		n = k
		c.ri += m
		if c.ri < len(c.recs) && n < len(dest) {
			c.buf = f.appendRecord(c.buf[:0], &c.recs[c.ri])
			c.pend = c.buf
			c.ri++
		}
		return n
	}
	for c.ri < len(c.recs) {
		r := &c.recs[c.ri]
		if c.txn && c.ab.Aborted(c.pid, r.Offset) {
			c.ri++
			continue
		}
		if f.recordBound(r) > len(dest)-n {
			if n == len(dest) {
				break
			}
			c.ri++
			c.buf = f.appendRecord(c.buf[:0], r)
			c.pend = c.buf
			break
		}
		c.ri++
		k := len(f.appendRecord(dest[n:n:len(dest)], r))
		n += k
		c.next += int64(k)
	}
	return n
}

// skipRecord moves the cursor over the next record towards pos: without
// rendering it where its length is known and it ends at or before pos,
// else rendering it into pend (which deliverPend then skips into).
func (c *cursor) skipRecord(f viewFormat, pos int64) {
	r := &c.recs[c.ri]
	c.ri++
	if c.txn && c.ab.Aborted(c.pid, r.Offset) {
		return
	}
	if k, ok := f.renderedLen(r); ok && c.next+int64(k) <= pos {
		c.next += int64(k)
		return
	}
	c.buf = f.appendRecord(c.buf[:0], r)
	c.pend = c.buf
}

// renderRaw renders the raw batch's records straight from its bytes into
// dest[n:] (putPlainRaw) while the cursor stands at pos; a record it does
// not take (or that does not fit), a skip, or bytes after the last record
// make it decode the rest of the batch into c.recs instead.
func (st *viewState) renderRaw(c *cursor, dest []byte, n int, pos int64) (int, readStep, error) {
	f := st.format
	if pos > c.next && c.skipRaw(f, pos) {
		return n, stepOn, nil
	}
	if pos == c.next {
		k, p, m := putPlainRaw(dest, n, c.raw, c.rawP, c.rawLeft(), f.nullMarker)
		c.next += int64(k - n)
		n, c.rawP, c.rawDone = k, p, c.rawDone+m
		if c.rawLeft() == 0 && c.rawP == len(c.raw) {
			c.raw = nil
			return n, stepOn, nil
		}
		if n == len(dest) {
			return n, stepDone, nil
		}
		if c.rawLeft() > 0 && c.pendRaw(f) {
			return n, stepOn, nil
		}
	}
	batchPos := c.fpos - int64(c.rawB.Size())
	if err := c.rawToRecs(); err != nil {
		st.ps.logCorrupt(c.h.key.seg, batchPos, err)
		return n, stepOn, err
	}
	return n, stepOn, nil
}

// nextBatch moves the cursor (with n bytes in dest, at view position pos)
// to the next batch of its segment and readies its records: raw for
// putPlainRaw, else decoded into c.recs. At the end of what the cursor
// knows of its segment it looks again (endOfSegment). A failure with
// bytes in dest ends the read with them (stepDone) and fails the next.
func (st *viewState) nextBatch(ctx context.Context, c *cursor, n int, pos int64) (readStep, error) {
	if err := ctx.Err(); err != nil {
		return keepRead(n, err)
	}
	if c.fpos >= c.h.limit {
		if step, err := st.endOfSegment(ctx, c, n, pos); step != stepOn || err != nil {
			return step, err
		}
	}
	b, err := c.rd.batch(c.h.key.seg, c.fpos, c.h.limit)
	if err != nil {
		st.ps.logCorrupt(c.h.key.seg, c.fpos, err)
		return stepOn, err
	}
	pre := c.takeStart(c.fpos)
	c.recs, c.ri = c.recs[:0], 0
	if !b.IsControl() {
		c.ab = st.abSet()
		c.txn, c.pid = b.IsTransactional() && !c.ab.Empty(), b.ProducerID
		if !c.txn && rawEligible(&b, st.format) {
			c.raw, c.rawP, c.rawDone, c.rawB = b.Raw[record.HeaderSize:], 0, 0, b
			if pre.ok {
				if err := c.startIn(&b, pre); err != nil {
					st.ps.logCorrupt(c.h.key.seg, c.fpos, err)
					return stepOn, err
				}
			}
			c.fpos += int64(b.Size())
			return stepOn, nil
		}
		recs, dec, err := b.RecordsInto(c.sc.recs[:0], c.sc.dec)
		c.sc.recs, c.sc.dec = recs[:0], dec
		if err != nil {
			st.ps.logCorrupt(c.h.key.seg, c.fpos, err)
			return stepOn, err
		}
		c.recs = recs
	}
	if pre.ok {
		c.next = c.preStart // the records before the start are skipped again
	}
	c.fpos += int64(b.Size())
	return stepOn, nil
}

// endOfSegment handles a cursor at the end of the batches it knows of its
// segment (c.h.limit): corruption there fails the read (a sequential
// reader never skips past it), a segment grown since is taken in, and pos
// in a later segment makes the cursor seek there. stepOn: a batch follows
// at c.fpos.
func (st *viewState) endOfSegment(ctx context.Context, c *cursor, n int, pos int64) (readStep, error) {
	if c.h.bad != nil {
		return keepRead(n, c.h.bad)
	}
	h, i, ok, err := st.find(pos)
	if err != nil {
		return keepRead(n, err)
	}
	if !ok {
		return stepDone, nil
	}
	if i != c.seg {
		if !st.seek(ctx, c, pos) {
			return stepDone, nil
		}
		return stepSought, nil
	}
	c.h = h // the segment grew since the cursor saw it
	if c.fpos >= h.limit {
		return stepDone, nil
	}
	return stepOn, nil
}

// keepRead is how a read with n bytes in dest meets err: it returns those
// bytes (the next read meets err again), or err when it has none.
func keepRead(n int, err error) (readStep, error) {
	if n > 0 {
		return stepDone, nil
	}
	return stepOn, err
}

// seek moves c to the checkpoint at or before view position pos; false at
// the end of the view or on an error (kept in c.err).
func (st *viewState) seek(ctx context.Context, c *cursor, pos int64) bool {
	h, i, ok, err := st.find(pos)
	if err != nil {
		c.err = err
		return false
	}
	if !ok {
		return false
	}
	ab := st.abSet()
	x := st.ps.fsys.segIndex(h.key, h.limit, ab)
	if _, _, _, err := x.extend(ctx, h.limit, ab, st.ps.logCorrupt); err != nil {
		c.err = err
		return false
	}
	rel := pos - h.rstart + h.skip
	cp := x.locate(rel)
	c.valid, c.seg, c.h, c.lo = true, i, h, h.rstart
	c.rd.prefetch = true
	c.next, c.fpos = h.rstart-h.skip+cp.rpos, cp.fpos
	c.pend, c.recs, c.ri = nil, c.recs[:0], 0
	c.raw, c.rawDone, c.rawB = nil, 0, record.Batch{}
	c.pre = rawAt{}
	c.seekStart(x, rel)
	if rd, ok := st.ps.fsys.spares.take(h.key.seg, c.fpos); ok {
		// The chunk a LOOKUP's measure read holds this batch. (Its
		// reader reports a panic to the handle's onPanic from the next
		// batch call on: panicSink.)
		rd.onPanic = c.rd.onPanic
		c.rd.free()
		c.rd = rd
	}
	return true
}
