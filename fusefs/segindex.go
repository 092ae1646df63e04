package fusefs

import (
	"container/list"
	"context"
	"fmt"
	"github.com/topicfs/topicfs/backend"
	"math"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
)

// segmentReader is what a view reads of a segment: a backend's Segment
// (*engine.Segment on local disk).
type segmentReader = backend.Segment

var _ segmentReader = (*engine.Segment)(nil)

// checkpointInterval is the rendered distance between two checkpoints of a
// segment index: a seek renders at most this much (plus one batch) before
// the wanted position. 64 KiB keeps a 1 GiB segment's index near 16k
// entries (256 KiB) while a seek costs well under a millisecond.
const checkpointInterval = 64 << 10

// indexCacheEntries bounds the number of segment indexes kept (LRU). An
// evicted index is rebuilt by scanning its segment once more.
const indexCacheEntries = 128

// segKey identifies a segment index: the segment and the rendering. Every
// view of the segment in that format shares it; a view that starts inside
// the segment skips the rendered bytes before its first offset.
type segKey struct {
	seg    segmentReader
	format viewFormat
}

// checkpoint maps a rendered position (relative to the segment's rendered
// start) to the file position of the batch that starts there.
type checkpoint struct {
	rpos int64
	fpos int64
}

// segIndex is the sparse rendered-position index of one segment in one
// format, built lazily and incrementally: batches below scanned have been
// rendered once and measured. Safe for concurrent use.
type segIndex struct {
	key   segKey
	scans *atomic.Uint64 // its cache's (nil outside one)

	mu struct {
		sync.Mutex
		cps     []checkpoint // cps[0] is {0, 0}
		scanned int64        // file position: every batch below it is indexed
		rlen    int64        // rendered bytes of the batches below scanned
		abHash  uint64       // the aborted set over the segment when measuring began
		// bad is the corruption found at scanned: the index (and every
		// view) ends there, and reading up to it fails with it (EIO).
		bad error
		// starts are the latest answers of renderedBefore (a ring): an
		// open of by-offset/N asks for N at its LOOKUP and again at its
		// OPEN, and its first READ seeks to where N starts.
		starts [startHints]startHint
		next   int // the ring's next slot
	}
}

// startHint is one answer of renderedBefore: the rendered length r of the
// segment's records below from, and cp, the checkpoint of the batch
// holding from (its file position and rendered start), from which a seek
// to r reads that one batch.
type startHint struct {
	from int64
	r    int64
	cp   checkpoint
	at   rawAt // where from's record starts in its batch, if walked raw
	set  bool
}

// rawAt is a position in a raw batch (rendered by putPlainRaw): p in its
// records section, after done records.
type rawAt struct {
	p, done int
	ok      bool
}

// startHints is how many renderedBefore answers a segment index keeps.
const startHints = 16

// extend indexes the batches of the segment up to file position limit
// (a committed size of the segment) and returns the indexed file position
// and the rendered length up to it. Corruption stops the index for good: it
// is returned as bad (and logged once, with the segment and position); err
// is only for a cancelled ctx.
func (x *segIndex) extend(ctx context.Context, limit int64, ab *abortedSet, log logFunc) (scanned, rlen int64, bad, err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.mu.cps == nil {
		x.mu.cps = []checkpoint{{0, 0}}
		x.mu.abHash = hashOver(ab, x.key.seg)
	}
	if x.mu.scanned >= limit || x.mu.bad != nil {
		return x.mu.scanned, x.mu.rlen, x.mu.bad, nil
	}
	var (
		// Measuring remembers the batches it checks in the engine's memo:
		// a later seek in the segment reads them without checking them
		// again.
		rd = logChunk{prefetch: true, remember: true}
		sc renderScratch
	)
	defer rd.free()
	if x.scans != nil {
		defer x.scans.Add(1)
	}
	for x.mu.scanned < limit && x.mu.bad == nil {
		if err := ctx.Err(); err != nil {
			return x.mu.scanned, x.mu.rlen, nil, err
		}
		var rlen int64
		b, err := rd.batch(x.key.seg, x.mu.scanned, limit)
		if err == nil {
			rlen, err = measureBatchRange(&b, x.key.format, math.MaxInt64, ab, &sc)
		}
		if err != nil {
			log(x.key.seg, x.mu.scanned, err)
			x.mu.bad = fmt.Errorf("%w: %s position %d: %w", engine.ErrCorrupt, x.key.seg.LogPath(), x.mu.scanned, err)
			break
		}
		last := x.mu.cps[len(x.mu.cps)-1]
		if x.mu.rlen-last.rpos >= checkpointInterval {
			x.mu.cps = append(x.mu.cps, checkpoint{x.mu.rlen, x.mu.scanned})
		}
		x.mu.scanned += int64(b.Size())
		x.mu.rlen += rlen
	}
	return x.mu.scanned, x.mu.rlen, x.mu.bad, nil
}

// seed fills a fresh x from the saved index of its segment (ViewSizesFile),
// if there is one for the segment at size limit: extend then goes on from
// the segment's end instead of scanning it.
func (x *segIndex) seed(v *viewSizes, limit int64, ab *abortedSet) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.mu.cps != nil {
		return
	}
	if m, cps, ok := v.index(x.key, limit, ab); ok {
		x.mu.cps, x.mu.scanned, x.mu.rlen, x.mu.abHash = cps, m.scanned, m.rlen, m.abHash
	}
}

// locate returns the last checkpoint at or before rendered position rel:
// of the index, or the batch start of a recent renderedBefore answer. The
// index must already cover rel.
func (x *segIndex) locate(rel int64) checkpoint {
	x.mu.Lock()
	defer x.mu.Unlock()
	cps := x.mu.cps
	i := sort.Search(len(cps), func(i int) bool { return cps[i].rpos > rel })
	cp := checkpoint{}
	if i > 0 {
		cp = cps[i-1]
	}
	for _, h := range x.mu.starts {
		if h.set && h.cp.fpos > cp.fpos && h.cp.rpos <= rel {
			cp = h.cp
		}
	}
	return cp
}

// startOf returns the recent renderedBefore answer for from, if any.
func (x *segIndex) startOf(from int64) (startHint, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, h := range x.mu.starts {
		if h.set && h.from == from {
			return h, true
		}
	}
	return startHint{}, false
}

// addStart keeps h among the recent renderedBefore answers.
func (x *segIndex) addStart(h startHint) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.mu.starts[x.mu.next] = h
	x.mu.next = (x.mu.next + 1) % startHints
}

// renderedBefore returns the rendered length of the segment's records
// below offset from: where a view starting at from begins in the segment's
// rendering. It costs a FindOffset, a binary search and at most one index
// interval of measuring (the batch holding from only, when a checkpoint
// starts it); a recent answer costs nothing. The index must cover the
// segment up to limit, and from's batch must lie below limit (or at it).
func (x *segIndex) renderedBefore(ctx context.Context, from int64, ab *abortedSet, log logFunc, spares *spareReaders) (int64, error) {
	if h, ok := x.startOf(from); ok {
		return h.r, nil
	}
	seg := x.key.seg
	x.mu.Lock()
	cps, scanned, rlen, bad := x.mu.cps, x.mu.scanned, x.mu.rlen, x.mu.bad
	x.mu.Unlock()
	var (
		// The reader is like a view cursor's (prefetching, once
		// sequential), so that the first READ can take it over (spares);
		// the batches it checks are remembered.
		rd    = logChunk{prefetch: true, remember: true}
		sc    renderScratch
		start startHint
	)
	defer func() { rd.free() }()
	fpos, err := x.batchOf(&rd, from, scanned, cps)
	if err != nil {
		return 0, err
	}
	if fpos >= scanned {
		if bad != nil && fpos > scanned {
			return 0, bad // from lies past corruption the index cannot cross
		}
		return rlen, nil
	}
	i := sort.Search(len(cps), func(i int) bool { return cps[i].fpos > fpos })
	cp := checkpoint{}
	if i > 0 {
		cp = cps[i-1]
	}
	r := cp.rpos
	for pos := cp.fpos; pos <= fpos && pos < scanned; {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		hi := int64(math.MaxInt64)
		if pos == fpos {
			hi = from // only the records of from's batch that come before it
			cp = checkpoint{rpos: r, fpos: pos}
		}
		b, err := rd.batch(seg, pos, scanned)
		var (
			n  int64
			at rawAt
		)
		if err == nil {
			n, at, err = measureBatchStart(&b, x.key.format, hi, ab, &sc)
		}
		if err != nil {
			log(seg, pos, err)
			return 0, err
		}
		pos += int64(b.Size())
		r += n
		if pos > fpos { // (from's batch, the last)
			start.at = at
			if spares != nil {
				// rd's chunk holds from's batch: the first READ of the
				// view takes it (its seek) instead of reading it again.
				spares.put(seg, fpos, rd)
				rd = logChunk{}
			}
		}
	}
	start.from, start.r, start.cp, start.set = from, r, cp, true
	x.addStart(start)
	return r, nil
}

// renderScratch is what rendering reuses from batch to batch: decoded
// records and the decompression buffer they alias, and the rendering of a
// record that is measured by rendering it (JSON).
type renderScratch struct {
	recs []record.Record
	dec  []byte
	out  []byte
}

// measureBatchRange returns the rendered length of the shown records of b
// with offsets below hi (none of a control batch, none of an aborted
// transaction). Records are measured without rendering (viewFormat.measure),
// except JSON records with headers, rendered once into sc.out.
func measureBatchRange(b *record.Batch, f viewFormat, hi int64, ab *abortedSet, sc *renderScratch) (int64, error) {
	n, _, err := measureBatchStart(b, f, hi, ab, sc)
	return n, err
}

// measureBatchStart is measureBatchRange, and, when it walked the records
// below hi raw (walkPlainRaw), where the first record at or after hi
// starts: a seek to hi resumes there without walking them again.
func measureBatchStart(b *record.Batch, f viewFormat, hi int64, ab *abortedSet, sc *renderScratch) (int64, rawAt, error) {
	if b.IsControl() {
		return 0, rawAt{}, nil
	}
	if rawEligible(b, f) && !(b.IsTransactional() && !ab.Empty()) {
		data, count := b.Raw[record.HeaderSize:], int(b.RecordCount)
		if hi == math.MaxInt64 {
			if n, ok := measurePlainRaw(data, count, f.nullMarker); ok {
				return n, rawAt{}, nil
			}
		} else if p, done, n, ok := walkPlainRaw(data, 0, count, f.nullMarker, hi-b.BaseOffset, math.MaxInt64); ok && (done < count || p == len(data)) {
			return n, rawAt{p: p, done: done, ok: true}, nil // the records below hi, not decoded
		}
	}
	n, err := measureDecoded(b, f, hi, ab, sc)
	return n, rawAt{}, err
}

// measureDecoded is measureBatchRange by decoding b's records.
func measureDecoded(b *record.Batch, f viewFormat, hi int64, ab *abortedSet, sc *renderScratch) (int64, error) {
	recs, dec, err := b.RecordsInto(sc.recs[:0], sc.dec)
	sc.recs, sc.dec = recs[:0], dec
	if err != nil {
		return 0, err
	}
	txn := b.IsTransactional() && !ab.Empty()
	var n int64
	for i := range recs {
		r := &recs[i]
		if r.Offset >= hi {
			break
		}
		if txn && ab.Aborted(b.ProducerID, r.Offset) {
			continue
		}
		n += int64(f.measure(r, &sc.out))
	}
	return n, nil
}

// Chunked reads of a segment (logChunk): chunkMin bytes after a jump,
// doubling each sequential load up to chunkMax, so a seek reads little more
// than it renders while a sequential reader pays one pread per chunkMax
// bytes (not two per batch, as ReadBatch does).
const (
	chunkMin = 64 << 10
	chunkMax = 1 << 20
)

// Chunk and read-ahead buffers are recycled between readers in two sizes:
// chunkMin for seeks (an open of by-offset/N reads one small chunk),
// chunkMax for sequential reads. They live on bounded free lists, not in a
// sync.Pool: a pool is emptied by every other GC, so a long reader kept
// allocating fresh 1 MiB buffers, each cycle's garbage raised the heap goal
// and the mount's resident memory crept up with every cat. A free list
// keeps at most its capacity of idle buffers across GCs; buffers beyond it
// (many concurrent readers) are left to the GC. A view handle gives its
// buffers back when it reaches the end of the view, so idle handles (tail
// -f) hold none.
var (
	smallBufs = newBufList(chunkMin, smallBufsMax)
	bigBufs   = newBufList(chunkMax, bigBufsMax)
)

// Free list capacities. A sequential reader holds at most seven big
// buffers (its log chunk and aheadDepth loaded ahead; aheadDepth chunks
// rendered ahead and the one the kernel is copying) and an index build
// three while it runs, so two busy readers recycle nearly everything; a
// seek holds one or two small ones.
const (
	bigBufsMax   = 14
	smallBufsMax = 16
)

// bufList is a bounded free list of buffers of one size. Safe for
// concurrent use.
type bufList struct {
	size int
	max  int

	mu   sync.Mutex
	free [][]byte
	out  int // handed out by get and not yet back through put
}

func newBufList(size, max int) *bufList {
	return &bufList{size: size, max: max, free: make([][]byte, 0, max)}
}

// get returns a buffer of l.size bytes: an idle one, else a new one.
func (l *bufList) get() []byte {
	l.mu.Lock()
	l.out++
	if n := len(l.free); n > 0 {
		b := l.free[n-1]
		l.free[n-1] = nil
		l.free = l.free[:n-1]
		l.mu.Unlock()
		return b
	}
	l.mu.Unlock()
	return make([]byte, l.size)
}

// put gives back a buffer from get. It is kept while the list has room,
// else dropped for the GC. A buffer of another capacity is ignored.
func (l *bufList) put(b []byte) {
	if cap(b) != l.size {
		return
	}
	l.mu.Lock()
	l.out--
	if len(l.free) < l.max {
		l.free = append(l.free, b[:l.size])
	}
	l.mu.Unlock()
}

// stats returns the buffers handed out and the idle ones held.
func (l *bufList) stats() (out, idle int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.out, len(l.free)
}

// bufListFor is the free list of buffers of at least n bytes, nil for
// n > chunkMax.
func bufListFor(n int) *bufList {
	switch {
	case n <= chunkMin:
		return smallBufs
	case n <= chunkMax:
		return bigBufs
	}
	return nil
}

// getBuf returns a buffer of n bytes, from a free list when n <= chunkMax.
func getBuf(n int) []byte {
	if l := bufListFor(n); l != nil {
		return l.get()[:n]
	}
	return make([]byte, n)
}

// putBuf gives b back to the free list it came from, if any.
func putBuf(b []byte) {
	switch cap(b) {
	case chunkMin:
		smallBufs.put(b)
	case chunkMax:
		bigBufs.put(b)
	}
}

// chunkBufs lends the engine's SegmentReader its chunk buffers from the
// free lists above.
type chunkBufs struct{}

func (chunkBufs) Get(n int) []byte { return getBuf(n) }
func (chunkBufs) Put(b []byte)     { putBuf(b) }

// logChunk reads the batches of a view's segments through the engine's
// SegmentReader (engine/segreader.go): chunkMin bytes after a jump, each
// sequential load twice the last up to chunkMax, every batch verified
// (CRC and structure) before it is returned, anything the chunks do not
// hold verified settled by the segment's ReadBatch, so errors, their
// logging and their wording are the engine's own. With prefetch set, once
// loads are sequential a goroutine loads the aheadDepth chunks after the
// current one ahead of the caller. The batches batch returns alias the
// current chunk until the next call; free must be called before the
// segment is released.
type logChunk struct {
	prefetch bool
	remember bool // the reader's Remember: the batches it checks go to the engine's memo
	// onPanic reports a panic of the prefetch goroutine (the handle's,
	// set by guard); without one it is logged on fallbackLog.
	onPanic func(v any, stack []byte)

	rd         *engine.SegmentReader
	rdPrefetch bool       // rd's Prefetch
	panics     *panicSink // rd's OnPanic
}

// batch returns the verified batch at file position pos of seg, whose
// bytes below limit are committed. A position that is not where a batch
// the chunk framed starts (a checkpoint from a damaged saved index, say)
// is read by seg.ReadBatch, which checks its CRC: it reads as corruption,
// never as a length out of range.
func (r *logChunk) batch(seg segmentReader, pos, limit int64) (record.Batch, error) {
	if r.rd == nil || r.rdPrefetch != r.prefetch {
		r.free()
		r.panics = &panicSink{}
		r.rd = engine.NewSegmentReader(engine.SegmentReaderOptions{
			MinChunk: chunkMin,
			MaxChunk: chunkMax,
			Prefetch: r.prefetch,
			Ahead:    aheadDepth,
			Buffers:  chunkBufs{},
			Remember: r.remember,
			OnPanic:  r.panics.report,
		})
		r.rdPrefetch = r.prefetch
	}
	r.panics.to.Store(&r.onPanic) // (before any prefetch goroutine of this call)
	return r.rd.Batch(seg, pos, limit)
}

// free stops the loader, gives the buffers back and forgets the segment.
func (r *logChunk) free() {
	if r.rd != nil {
		r.rd.Free()
	}
}

// abortedSet is the aborted transactions of a partition's segments, as
// views hide them (backend.AbortedSet).
type abortedSet = backend.AbortedSet

// logFunc reports a read error of a segment at a file position.
type logFunc func(seg segmentReader, pos int64, err error)

// indexCache holds the segment indexes of a mount, least recently used
// first out, and the measures of more segments than it keeps indexes of.
// A view's size is the sum of its segments' rendered lengths, so every stat
// of a view whose state was dropped (no handle open) needs each segment's
// rendered length; with indexes alone, a partition of more segments than
// the index LRU holds was scanned end to end again at each such stat. A
// measure (the indexed file size and rendered length, or the corruption
// that stopped it) is kept when an index is evicted, in a second LRU of
// many more entries (a few dozen bytes each): a stat then scans only the
// segments never measured or grown since, and a seek rebuilds the one
// index it needs. Safe for concurrent use.
type indexCache struct {
	mu    sync.Mutex
	max   int
	lru   *list.List // of *segIndex, front = most recent
	elems map[segKey]*list.Element

	maxMeasures int
	measures    *list.List // of *segMeasure, front = most recent
	measured    map[segKey]*list.Element

	// scans counts the extends that measured something (a periodic save
	// of ViewSizesFile is due only when it moved).
	scans atomic.Uint64
}

// segMeasure is what an evicted segIndex measured.
type segMeasure struct {
	key           segKey
	scanned, rlen int64
	bad           error
	abHash        uint64
}

// measureEntries bounds the measures kept: enough for every segment of
// several 10,000-segment partitions in two formats, at most a few MiB.
const measureEntries = 1 << 16

func newIndexCache(max, maxMeasures int) *indexCache {
	return &indexCache{
		max: max, lru: list.New(), elems: map[segKey]*list.Element{},
		maxMeasures: maxMeasures, measures: list.New(), measured: map[segKey]*list.Element{},
	}
}

// get returns the index for k, creating an empty one.
func (c *indexCache) get(k segKey) *segIndex {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.elems[k]; ok {
		c.lru.MoveToFront(e)
		return e.Value.(*segIndex)
	}
	x := &segIndex{key: k, scans: &c.scans}
	c.elems[k] = c.lru.PushFront(x)
	for c.lru.Len() > c.max {
		old := c.lru.Back()
		c.lru.Remove(old)
		ox := old.Value.(*segIndex)
		delete(c.elems, ox.key)
		c.keepMeasureLocked(ox.measure())
	}
	return x
}

// measure is what x has measured so far.
func (x *segIndex) measure() segMeasure {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.measureLocked()
}

func (x *segIndex) measureLocked() segMeasure {
	return segMeasure{key: x.key, scanned: x.mu.scanned, rlen: x.mu.rlen, bad: x.mu.bad, abHash: x.mu.abHash}
}

// remember keeps m as the measure of its segment (one read from
// ViewSizesFile), unless the segment's index is cached.
func (c *indexCache) remember(m segMeasure) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.elems[m.key]; !ok {
		c.keepMeasureLocked(m)
	}
}

// eachIndex calls fn with the measure and checkpoints of every cached
// index (the checkpoints are valid only during the call).
func (c *indexCache) eachIndex(fn func(m segMeasure, cps []checkpoint)) {
	c.mu.Lock()
	xs := make([]*segIndex, 0, c.lru.Len())
	for e := c.lru.Front(); e != nil; e = e.Next() {
		xs = append(xs, e.Value.(*segIndex))
	}
	c.mu.Unlock()
	for _, x := range xs {
		x.mu.Lock()
		fn(x.measureLocked(), x.mu.cps)
		x.mu.Unlock()
	}
}

// keptMeasures returns the measures kept of evicted indexes.
func (c *indexCache) keptMeasures() []segMeasure {
	c.mu.Lock()
	defer c.mu.Unlock()
	ms := make([]segMeasure, 0, c.measures.Len())
	for e := c.measures.Front(); e != nil; e = e.Next() {
		ms = append(ms, *e.Value.(*segMeasure))
	}
	return ms
}

// keepMeasureLocked remembers m (a measure of nothing is not kept).
func (c *indexCache) keepMeasureLocked(m segMeasure) {
	if m.scanned == 0 && m.bad == nil {
		return
	}
	if e, ok := c.measured[m.key]; ok {
		*e.Value.(*segMeasure) = m
		c.measures.MoveToFront(e)
		return
	}
	c.measured[m.key] = c.measures.PushFront(&m)
	for c.measures.Len() > c.maxMeasures {
		old := c.measures.Back()
		c.measures.Remove(old)
		delete(c.measured, old.Value.(*segMeasure).key)
	}
}

// measure returns what is known of k's segment: its measure (indexed file
// size, rendered length, corruption) from its index when cached, else from
// its kept measure. seen is whether the mount has measured the segment at
// all; ok whether the measure covers file size limit (a committed size) or
// stopped at a corruption. When seen and not ok, the segment has grown
// since: it must be scanned further (nothing saved by an earlier mount can
// be newer).
func (c *indexCache) measure(k segKey, limit int64) (m segMeasure, seen, ok bool) {
	c.mu.Lock()
	if e, hit := c.elems[k]; hit {
		c.mu.Unlock()
		m = e.Value.(*segIndex).measure()
	} else if e, hit := c.measured[k]; hit {
		c.measures.MoveToFront(e)
		m = *e.Value.(*segMeasure)
		c.mu.Unlock()
	} else {
		c.mu.Unlock()
		return segMeasure{}, false, false
	}
	if m.scanned == 0 && m.bad == nil {
		return m, false, false // an index created but not built yet
	}
	return m, true, m.scanned == limit || m.bad != nil
}
