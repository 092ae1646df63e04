package fusefs

import (
	"container/list"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"sync"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/index"
	"github.com/topicfs/topicfs/engine/record"
)

// segmentReader is what a view reads of a segment. *engine.Segment
// satisfies it.
type segmentReader interface {
	BaseOffset() int64
	NextOffset() int64
	Size() int64
	ReadBatch(pos int64, buf []byte) (record.Batch, error)
	ReadAt(p []byte, off int64) (int, error)
	FindOffset(target int64) (int64, error)
	AbortedTxns() []index.AbortedTxn
	Retain()
	Release()
	LogPath() string
}

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
	key segKey

	mu struct {
		sync.Mutex
		cps     []checkpoint // cps[0] is {0, 0}
		scanned int64        // file position: every batch below it is indexed
		rlen    int64        // rendered bytes of the batches below scanned
		// bad is the corruption found at scanned: the index (and every
		// view) ends there, and reading up to it fails with it (EIO).
		bad error
	}
}

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
	}
	if x.mu.scanned >= limit || x.mu.bad != nil {
		return x.mu.scanned, x.mu.rlen, x.mu.bad, nil
	}
	var (
		rd logChunk
		sc renderScratch
	)
	defer rd.free()
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

// locate returns the last checkpoint at or before rendered position rel.
// The index must already cover rel.
func (x *segIndex) locate(rel int64) checkpoint {
	x.mu.Lock()
	defer x.mu.Unlock()
	cps := x.mu.cps
	i := sort.Search(len(cps), func(i int) bool { return cps[i].rpos > rel })
	if i == 0 {
		return checkpoint{}
	}
	return cps[i-1]
}

// renderedBefore returns the rendered length of the segment's records
// below offset from: where a view starting at from begins in the segment's
// rendering. It costs a FindOffset, a binary search and at most one index
// interval of rendering. The index must cover the segment up to limit, and
// from's batch must lie below limit (or at it).
func (x *segIndex) renderedBefore(ctx context.Context, from int64, ab *abortedSet, log logFunc) (int64, error) {
	seg := x.key.seg
	fpos, err := seg.FindOffset(from)
	if err != nil {
		return 0, err
	}
	x.mu.Lock()
	cps, scanned, rlen, bad := x.mu.cps, x.mu.scanned, x.mu.rlen, x.mu.bad
	x.mu.Unlock()
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
	var (
		rd logChunk
		sc renderScratch
	)
	defer rd.free()
	r := cp.rpos
	for pos := cp.fpos; pos <= fpos && pos < scanned; {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		b, err := rd.batch(seg, pos, scanned)
		if err != nil {
			log(seg, pos, err)
			return 0, err
		}
		hi := int64(math.MaxInt64)
		if pos == fpos {
			hi = from // only the records of from's batch that come before it
		}
		n, err := measureBatchRange(&b, x.key.format, hi, ab, &sc)
		if err != nil {
			log(seg, pos, err)
			return 0, err
		}
		r += n
		pos += int64(b.Size())
	}
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
// with offsets below hi: renderBatchRange's output length. Plain formats
// add up record lengths without rendering; JSON renders each record once
// into sc.out.
func measureBatchRange(b *record.Batch, f viewFormat, hi int64, ab *abortedSet, sc *renderScratch) (int64, error) {
	if b.IsControl() {
		return 0, nil
	}
	recs, dec, err := b.RecordsInto(sc.recs[:0], sc.dec)
	sc.recs, sc.dec = recs[:0], dec
	if err != nil {
		return 0, err
	}
	txn := b.IsTransactional() && !ab.empty()
	var n int64
	for i := range recs {
		r := &recs[i]
		if r.Offset >= hi {
			break
		}
		if txn && ab.aborted(b.ProducerID, r.Offset) {
			continue
		}
		if k, ok := f.renderedLen(r); ok {
			n += int64(k)
			continue
		}
		sc.out = f.appendRecord(sc.out[:0], r)
		n += int64(len(sc.out))
	}
	return n, nil
}

// Chunked reads of a segment: logChunk starts with chunkMin bytes after a
// jump and doubles each sequential refill up to chunkMax, so a seek reads
// little more than it renders while a sequential reader pays one pread per
// chunkMax bytes (not two per batch, as ReadBatch does).
const (
	chunkMin = 64 << 10
	chunkMax = 256 << 10
)

// chunkPool recycles chunkMax buffers between readers: a view handle gives
// its chunk back when it reaches the end of the view, so idle handles (tail
// -f) hold none.
var chunkPool = sync.Pool{New: func() any { b := make([]byte, chunkMax); return &b }}

// logChunk reads the batches of one segment through a buffer holding the
// file bytes [start, start+len(buf)). The batches it returns alias the
// buffer until the next call.
type logChunk struct {
	seg   segmentReader
	start int64
	buf   []byte
	pool  *[]byte // buf's pooled backing array, if any
	next  int     // size of the next refill
}

// batch returns the verified batch at file position pos of seg, whose
// bytes below limit are committed. Any doubt (a header or CRC that does not
// check out, a short read) is settled by seg.ReadBatch, so errors, their
// logging and their wording are the engine's own.
func (r *logChunk) batch(seg segmentReader, pos, limit int64) (record.Batch, error) {
	if seg != r.seg {
		r.seg, r.start, r.buf = seg, 0, r.buf[:0]
	}
	if pos < r.start || pos+record.LogOverhead > r.start+int64(len(r.buf)) {
		if !r.fill(pos, record.LogOverhead, limit) {
			return r.slow(pos)
		}
	}
	i := pos - r.start
	size := int64(int32(binary.BigEndian.Uint32(r.buf[i+8:])))
	total := record.LogOverhead + size
	if size < 0 || total > limit-pos {
		return r.slow(pos)
	}
	if pos+total > r.start+int64(len(r.buf)) {
		if !r.fill(pos, total, limit) {
			return r.slow(pos)
		}
		i = 0
	}
	b, err := record.Parse(r.buf[i : i+total : i+total])
	if err == nil {
		err = b.Verify()
	}
	if err != nil {
		return r.slow(pos)
	}
	return b, nil
}

// slow reads the batch at pos with ReadBatch (its own buffer).
func (r *logChunk) slow(pos int64) (record.Batch, error) {
	return r.seg.ReadBatch(pos, nil)
}

// fill reads at least need bytes at pos (below limit) into the buffer.
func (r *logChunk) fill(pos, need, limit int64) bool {
	if need > limit-pos {
		return false
	}
	sequential := len(r.buf) > 0 && pos == r.start+int64(len(r.buf)) || pos > r.start && pos < r.start+int64(len(r.buf))
	switch {
	case r.next == 0 || !sequential:
		r.next = chunkMin
	case r.next < chunkMax:
		r.next *= 2
	}
	n := min(max(int64(r.next), need), limit-pos)
	switch {
	case n <= chunkMax && r.pool == nil:
		r.pool = chunkPool.Get().(*[]byte)
		r.buf = (*r.pool)[:0]
	case int64(cap(r.buf)) < n:
		r.release()
		r.buf = make([]byte, n)
	}
	r.buf = r.buf[:n]
	k, _ := r.seg.ReadAt(r.buf, pos)
	if int64(k) < need {
		r.start, r.buf = 0, r.buf[:0]
		return false
	}
	r.start, r.buf = pos, r.buf[:k]
	return true
}

// release gives a pooled buffer back (the chunk forgets its bytes).
func (r *logChunk) release() {
	if r.pool != nil {
		chunkPool.Put(r.pool)
		r.pool = nil
	}
	r.start, r.buf = 0, nil
}

// free releases the buffer and forgets the segment.
func (r *logChunk) free() {
	r.release()
	r.seg, r.next = nil, 0
}

// renderBatch appends the rendering of the shown records of b: none for a
// control batch, none of an aborted transaction. The rendering never
// aliases b.Raw or sc.
func renderBatch(dst []byte, b *record.Batch, f viewFormat, ab *abortedSet, sc *renderScratch) ([]byte, error) {
	return renderBatchRange(dst, b, f, math.MaxInt64, ab, sc)
}

// renderBatchRange renders the shown records of b with offsets below hi.
// Records are decoded with RecordsInto: keys and values alias b.Raw (codec
// none) or sc.dec (compressed), so no batch body is copied per render.
func renderBatchRange(dst []byte, b *record.Batch, f viewFormat, hi int64, ab *abortedSet, sc *renderScratch) ([]byte, error) {
	if b.IsControl() {
		return dst, nil
	}
	recs, dec, err := b.RecordsInto(sc.recs[:0], sc.dec)
	sc.recs, sc.dec = recs[:0], dec
	if err != nil {
		return dst, err
	}
	txn := b.IsTransactional() && !ab.empty()
	for i := range recs {
		r := &recs[i]
		if r.Offset >= hi {
			break
		}
		if txn && ab.aborted(b.ProducerID, r.Offset) {
			continue
		}
		dst = f.appendRecord(dst, r)
	}
	return dst, nil
}

// abortedSet is the union of the aborted transactions of a partition's
// segments (their .txnindex files): a record of a transactional batch is
// hidden when an aborted transaction of its producer covers its offset.
type abortedSet struct {
	byProducer map[int64][]index.AbortedTxn
}

func newAbortedSet(segs []segmentReader) *abortedSet {
	var ab abortedSet
	for _, s := range segs {
		for _, t := range s.AbortedTxns() {
			if ab.byProducer == nil {
				ab.byProducer = map[int64][]index.AbortedTxn{}
			}
			ab.byProducer[t.ProducerID] = append(ab.byProducer[t.ProducerID], t)
		}
	}
	return &ab
}

func (a *abortedSet) empty() bool { return a == nil || len(a.byProducer) == 0 }

func (a *abortedSet) aborted(producer, offset int64) bool {
	for _, t := range a.byProducer[producer] {
		if offset >= t.FirstOffset && offset <= t.LastOffset {
			return true
		}
	}
	return false
}

// logFunc reports a read error of a segment at a file position.
type logFunc func(seg segmentReader, pos int64, err error)

// indexCache holds the segment indexes of a mount, least recently used
// first out. Safe for concurrent use.
type indexCache struct {
	mu    sync.Mutex
	max   int
	lru   *list.List // of *segIndex, front = most recent
	elems map[segKey]*list.Element
}

func newIndexCache(max int) *indexCache {
	return &indexCache{max: max, lru: list.New(), elems: map[segKey]*list.Element{}}
}

// get returns the index for k, creating an empty one.
func (c *indexCache) get(k segKey) *segIndex {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.elems[k]; ok {
		c.lru.MoveToFront(e)
		return e.Value.(*segIndex)
	}
	x := &segIndex{key: k}
	c.elems[k] = c.lru.PushFront(x)
	for c.lru.Len() > c.max {
		old := c.lru.Back()
		c.lru.Remove(old)
		delete(c.elems, old.Value.(*segIndex).key)
	}
	return x
}
