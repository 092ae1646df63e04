// SegmentReader: the one reader of a segment's batches in bulk. Reader
// (partition order, for bench and other callers), the mount's views and
// check's scan read .log files through it.

package engine

import (
	"encoding/binary"
	"io"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/topicfs/topicfs/engine/record"
)

// BatchSource is what a SegmentReader reads: the committed bytes of one
// .log file and a checked read of the one batch at a position, which has
// the last word on anything the chunks do not hold verified (its errors,
// their wording and logging are the source's). *Segment is one; FileBatches
// makes one of a plain file.
type BatchSource interface {
	ReadAt(p []byte, off int64) (int, error)
	ReadBatch(pos int64, buf []byte) (record.Batch, error)
}

var _ BatchSource = (*Segment)(nil)

// ChunkBuffers lends a SegmentReader the buffers of its chunks, so that
// readers can share bounded free lists (the mount's). Get returns n bytes
// (the capacity may be larger); Put takes back a buffer from Get and may
// drop it. Both must be safe for concurrent use.
type ChunkBuffers interface {
	Get(n int) []byte
	Put(b []byte)
}

// SegmentReaderOptions configure a SegmentReader. The zero value reads
// DefaultReaderBufferSize chunks without prefetching.
type SegmentReaderOptions struct {
	// MinChunk is the size of the first load after a jump (0 =
	// DefaultReaderBufferSize); each sequential load doubles it up to
	// MaxChunk (0 = MinChunk). A seek then reads little more than it
	// needs while a sequential reader pays one pread per MaxChunk bytes.
	MinChunk, MaxChunk int
	// Prefetch starts a goroutine, once sequential loads reach MaxChunk,
	// that loads the following chunks (up to Ahead of them; 0 = 1) while
	// the caller works on the current one. On two or more CPUs the two
	// share the CRC checks: the goroutine sends a chunk once framed and
	// checks its batches from the back while it waits for room, the
	// caller checks any batch it reaches first.
	Prefetch bool
	Ahead    int
	// Spin makes each side poll briefly for the other before blocking
	// (spinWait; never on one P): worth it when both are busy all along
	// (Reader), not for a reader that idles between requests.
	Spin bool
	// Buffers lends the chunk buffers; nil: the reader allocates its own.
	Buffers ChunkBuffers
	// Remember records the batches it checks in their segment's memo
	// (batchmemo.go), so that later reads of them skip the CRC check:
	// for readers whose batches are likely read again (a view measuring a
	// segment it will seek in). Without it the reader still skips the
	// check of batches the memo holds.
	Remember bool
	// OnPanic, if set, is told of a panic in the prefetch goroutine (with
	// its stack). Such a panic is recovered either way: the reader then
	// loads in the caller's goroutine from there on, where a persistent
	// bug shows again.
	OnPanic func(v any, stack []byte)
}

// SegmentReader returns the verified batches of a segment by file
// position, read in chunks: one pread of up to MaxChunk bytes yields every
// whole batch in it, sliced out of the chunk without a copy. Every length
// is checked against the bytes the chunk holds before it is used, and a
// batch is CRC-checked (and its structure verified) before it is returned;
// a position that is not where a framed batch starts, a batch that does
// not check out, a short read, a first batch larger than the bytes
// committed: whatever the chunk does not hold verified is read by the
// source's ReadBatch, so errors are the source's own. A batch larger than
// the chunk is loaded alone, into a buffer of its size.
//
// Not safe for concurrent use; the batches Batch returns are valid until
// the next call of Batch or Free. Free must be called before the sources
// are released (it stops the prefetch goroutine and gives the buffers
// back); the reader can be used again afterwards.
type SegmentReader struct {
	opts  SegmentReaderOptions
	src   BatchSource
	cur   *segChunk  // the chunk batches are returned from (nil: none)
	next  int        // index in cur of the batch after the one returned last
	grow  int        // size of the next in-place load (0: none yet)
	ahead *prefetch  // the running prefetch goroutine, nil when none
	own   ownBuffers // the buffers when opts.Buffers is nil
	// failed is set once the prefetch goroutine panicked: no more of it.
	failed atomic.Bool
}

// NewSegmentReader returns a SegmentReader with opts.
func NewSegmentReader(opts SegmentReaderOptions) *SegmentReader {
	if opts.MinChunk <= 0 {
		opts.MinChunk = DefaultReaderBufferSize
	}
	opts.MaxChunk = max(opts.MaxChunk, opts.MinChunk)
	opts.Ahead = max(opts.Ahead, 1)
	r := &SegmentReader{opts: opts}
	if r.opts.Buffers == nil {
		r.own.size = opts.MaxChunk
		r.opts.Buffers = &r.own
	}
	return r
}

// Batch returns the verified batch at file position pos of src, whose
// bytes below limit are committed: the chunks read below limit only. A pos
// outside [0, limit), and anything the chunks do not hold verified, is
// src.ReadBatch's to answer. Another src than the last call's starts afresh
// (Free).
func (r *SegmentReader) Batch(src BatchSource, pos, limit int64) (record.Batch, error) {
	if src != r.src {
		r.Free()
		r.src = src
	}
	if pos < 0 || pos >= limit {
		return r.settle(pos)
	}
	j, ok := r.find(pos)
	if !ok {
		if r.cur.holds(pos) {
			return r.settle(pos) // inside the chunk, but where no framed batch starts
		}
		r.move(pos, limit)
		if j, ok = r.find(pos); !ok {
			return r.settle(pos)
		}
	}
	if !r.cur.check(j) {
		return r.settle(pos)
	}
	r.next = j + 1
	return r.cur.batches[j], nil
}

// find returns the index in cur of the framed batch starting at pos.
func (r *SegmentReader) find(pos int64) (int, bool) {
	c := r.cur
	if c == nil {
		return 0, false
	}
	if r.next < len(c.pos) && c.pos[r.next] == pos {
		return r.next, true // the usual case: the batch after the last one
	}
	if !c.holds(pos) {
		return 0, false
	}
	lo, hi := 0, len(c.pos)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if c.pos[m] < pos {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(c.pos) && c.pos[lo] == pos
}

// settle reads the batch at pos with the source's ReadBatch, for whatever
// the chunks do not hold verified.
func (r *SegmentReader) settle(pos int64) (record.Batch, error) {
	return r.src.ReadBatch(pos, nil)
}

// move makes cur the chunk starting at pos: the next one the prefetch
// goroutine loaded, else one loaded here (after a jump MinChunk bytes,
// each sequential load twice the last up to MaxChunk).
func (r *SegmentReader) move(pos, limit int64) {
	sequential := r.cur != nil && len(r.cur.pos) > 0 && pos == r.cur.end
	if a := r.ahead; a != nil {
		if pos == a.at {
			// The current chunk goes back first: the goroutine may be
			// waiting for it to load the one after.
			a.free <- r.cur // never blocks: free has room for every chunk
			r.cur = nil
			if c := a.take(); c != nil {
				r.cur, r.next = c, 0
				a.at = c.end
				return
			}
		}
		r.stopAhead()
	}
	switch {
	case r.grow == 0 || !sequential:
		r.grow = r.opts.MinChunk
	case r.grow < r.opts.MaxChunk:
		r.grow = min(2*r.grow, r.opts.MaxChunk)
	}
	var tail []byte
	if r.cur == nil {
		r.cur = r.chunk()
	} else if sequential && cap(r.cur.buf) >= r.grow {
		tail = r.cur.tailAt(pos) // in the buffer the load keeps
	}
	r.cur.load(r.src, pos, limit, r.grow, r.opts.Buffers, tail, r.opts.Remember)
	r.next = 0
	if r.opts.Prefetch && r.grow >= r.opts.MaxChunk && len(r.cur.pos) > 0 && r.cur.end < limit && !r.failed.Load() {
		r.startAhead(r.cur.end, limit)
	}
}

// chunks recycles the chunks of all readers without their buffers: their
// batch lists, grown to a chunk's batches, are not grown again by each
// new reader (a view's cursor, a segment being measured).
var chunks = sync.Pool{New: func() any { return new(segChunk) }}

// chunk returns a chunk holding nothing.
func (r *SegmentReader) chunk() *segChunk { return chunks.Get().(*segChunk) }

// drop gives c's buffer back and c to the pool.
func (r *SegmentReader) drop(c *segChunk) {
	c.release(r.opts.Buffers)
	chunks.Put(c)
}

// StopPrefetch stops the prefetch goroutine, if one runs, and gives back
// the chunks it loaded; the current chunk stays. After it the reader
// reads its source only when Batch is called again: one kept for later
// (a by-offset view's first batch, read while measuring) touches nothing
// of a source that may be released meanwhile.
func (r *SegmentReader) StopPrefetch() { r.stopAhead() }

// Free stops the prefetch goroutine, gives every buffer back and forgets
// the source. The reader can be used again.
func (r *SegmentReader) Free() {
	r.stopAhead()
	if r.cur != nil {
		r.drop(r.cur)
	}
	r.cur, r.next, r.grow, r.src = nil, 0, 0, nil
}

// segChunk is file bytes of a source from start: buf[:end-start] are whole
// batches framed back to back (each length checked against the bytes
// held), batches[j] starting at pos[j]. A batch is returned only once it
// passed its CRC check (state[j]); who checks it is settled per batch by
// compare-and-swap, so the prefetch goroutine can check a chunk's batches
// from the back while the caller returns them from the front.
type segChunk struct {
	start, end int64
	buf        []byte
	batches    []record.Batch
	pos        []int64
	state      []atomic.Uint32
	shared     bool // the prefetch goroutine may check it too (set before it can)
	// seg is the source's Segment (nil: none), whose batches checked
	// before are not checked again; memo is its memo of checked batches
	// (nil: none), to which remember adds the batches checked here.
	seg      *Segment
	memo     *batchMemo
	remember bool
}

// Check states of a batch of a chunk.
const (
	batchUnchecked uint32 = iota
	batchChecking
	batchOK
	batchBad
)

func (c *segChunk) holds(pos int64) bool {
	return c != nil && pos >= c.start && pos < c.end
}

// tailAt returns the bytes c read past its last whole batch when the next
// load is at pos, where that batch ends; nil otherwise.
func (c *segChunk) tailAt(pos int64) []byte {
	if c == nil || pos != c.end || len(c.pos) == 0 {
		return nil
	}
	return c.buf[c.end-c.start:]
}

// ensure makes buf n bytes long, from bufs when it must grow (its bytes
// are not kept).
func (c *segChunk) ensure(n int, bufs ChunkBuffers) {
	if cap(c.buf) < n {
		if c.buf != nil {
			bufs.Put(c.buf)
		}
		c.buf = bufs.Get(n)
	}
	c.buf = c.buf[:n]
}

// grow makes buf n bytes long, keeping its bytes: into a buffer from bufs
// when it must grow (the old one is given back after the copy).
func (c *segChunk) grow(n int, bufs ChunkBuffers) {
	if cap(c.buf) < n {
		nb := bufs.Get(n)
		copy(nb, c.buf)
		if c.buf != nil {
			bufs.Put(c.buf)
		}
		c.buf = nb
	}
	c.buf = c.buf[:n]
}

// release gives the buffer back; the chunk then holds nothing.
func (c *segChunk) release(bufs ChunkBuffers) {
	if c.buf != nil {
		bufs.Put(c.buf)
	}
	c.buf = nil
	c.start, c.end = 0, 0
	// The batches alias the buffer (Raw): a pooled chunk must not keep
	// it from the GC (the next reader would fault in fresh pages).
	clear(c.batches[:cap(c.batches)])
	c.batches, c.pos = c.batches[:0], c.pos[:0]
	c.seg, c.memo, c.remember = nil, nil, false // nor its segment
}

// load reads up to size bytes of src at pos (below limit) and frames the
// whole batches in them. A first batch larger than size is read alone,
// into a buffer of its size, when its length field keeps it below limit.
// Framing stops at the first entry whose length does not fit the bytes
// read or whose header does not parse; the caller asks ReadBatch about
// it. Nothing is CRC-checked yet (check does). tail, if any, is the bytes
// at pos an earlier load read past its last whole batch (tailAt): they are
// copied instead of read again. It must stay valid during the load (not in
// a buffer ensure gives back).
func (c *segChunk) load(src BatchSource, pos, limit int64, size int, bufs ChunkBuffers, tail []byte, remember bool) {
	// start is set first: ensure may replace the buffer, never the position.
	c.start, c.end = pos, pos
	c.seg, c.memo, c.remember = nil, nil, false
	if s := segmentOf(src); s != nil {
		c.seg = s
		if remember {
			c.memo = s.memo()
		} else {
			c.memo = s.bmemo.Load()
		}
		c.remember = remember && c.memo != nil
	}
	c.batches, c.pos = c.batches[:0], c.pos[:0]
	if pos < 0 || pos >= limit || size <= 0 {
		c.buf = c.buf[:0]
		return
	}
	n := int(min(int64(size), limit-pos))
	c.ensure(n, bufs)
	t := 0
	if len(tail) < n {
		t = copy(c.buf, tail) // may overlap (a load in place): copy is a memmove
	}
	k, _ := src.ReadAt(c.buf[t:n], pos+int64(t))
	c.buf = c.buf[:t+min(max(k, 0), n-t)]
	if len(c.buf) >= record.LogOverhead {
		total := record.LogOverhead + int64(int32(binary.BigEndian.Uint32(c.buf[8:])))
		if total > int64(len(c.buf)) && total <= limit-pos && total > record.LogOverhead {
			// The first batch alone, larger than the load: read what is
			// missing of it after the bytes read (a seek into a batch of
			// 1000 records reads it once, not its first chunk twice).
			have := len(c.buf)
			c.grow(int(total), bufs)
			if k, _ = src.ReadAt(c.buf[have:], pos+int64(have)); int64(have+k) != total {
				c.buf = c.buf[:0]
				return
			}
		}
	}
	p, end := 0, len(c.buf)
	for p+record.LogOverhead <= end {
		total := record.LogOverhead + int(int32(binary.BigEndian.Uint32(c.buf[p+8:])))
		if total <= record.LogOverhead || total > end-p {
			break
		}
		b, err := record.Parse(c.buf[p : p+total : p+total])
		if err != nil {
			break
		}
		c.batches = append(c.batches, b)
		c.pos = append(c.pos, pos+int64(p))
		p += total
	}
	c.end = pos + int64(p)
	n = len(c.batches)
	if cap(c.state) < n {
		c.state = make([]atomic.Uint32, n)
	}
	c.state = c.state[:n]
	clear(c.state) // batchUnchecked; nobody else holds c while it loads
	c.shared = false
}

// check reports whether batch j passed its CRC check: it checks it, or
// waits for the prefetch goroutine's outcome when that one claimed it.
func (c *segChunk) check(j int) bool {
	s := &c.state[j]
	if !c.shared { // the caller's alone: no claim to take
		switch s.Load() {
		case batchOK:
			return true
		case batchBad:
			return false
		}
		return c.verify(j)
	}
	for {
		switch s.Load() {
		case batchOK:
			return true
		case batchBad:
			return false
		case batchUnchecked:
			if s.CompareAndSwap(batchUnchecked, batchChecking) {
				return c.verify(j)
			}
		default:
			runtime.Gosched() // one batch's CRC: microseconds
		}
	}
}

// verify checks batch j, which the caller claimed, and stores the outcome.
// A batch its segment knows was checked before (the memo, the verified
// span) is not checked again: its bytes, committed, have not changed since.
func (c *segChunk) verify(j int) bool {
	b := &c.batches[j]
	if c.seg == nil || !c.seg.checkedBefore(c.pos[j], b.Size()) {
		if b.Verify() != nil {
			c.state[j].Store(batchBad)
			return false
		}
		if c.remember {
			c.memo.remember(c.pos[j], b, nil)
		}
	}
	c.state[j].Store(batchOK)
	return true
}

// checkFromBack checks c's batches from the back, one at a time, until a
// chunk is free to load into or it meets a batch already claimed (the
// caller got there first). It reports whether it found a bad batch (the
// caller stops at it or before: nothing after it is needed).
func (c *segChunk) checkFromBack(free chan *segChunk) bool {
	for j := len(c.state) - 1; j >= 0 && len(free) == 0; j-- {
		if !c.state[j].CompareAndSwap(batchUnchecked, batchChecking) {
			return false
		}
		if !c.verify(j) {
			return true
		}
	}
	return false
}

// prefetch is a running prefetch goroutine: it loads chunks into the
// chunks of free and sends them on full, in order, until the source's
// limit, a chunk that frames no batch, a bad batch, a panic or stop.
type prefetch struct {
	at       int64 // where the next chunk on full starts (the caller's side)
	free     chan *segChunk
	full     chan *segChunk // closed when the goroutine ends
	done     chan struct{}
	wg       sync.WaitGroup
	consSpin spinner
}

// startAhead starts the prefetch goroutine at pos with opts.Ahead chunks.
func (r *SegmentReader) startAhead(pos, limit int64) {
	n := r.opts.Ahead
	a := &prefetch{
		at:   pos,
		free: make(chan *segChunk, n+1),
		full: make(chan *segChunk, n),
		done: make(chan struct{}),
	}
	for range n {
		a.free <- r.chunk()
	}
	oneP := runtime.GOMAXPROCS(0) < 2
	a.consSpin.off = oneP || !r.opts.Spin
	prodSpin := spinner{off: a.consSpin.off}
	src, size, bufs, first, remember := r.src, r.opts.MaxChunk, r.opts.Buffers, r.cur, r.opts.Remember
	first.shared = true // the goroutine may check its batches from the back
	r.ahead = a
	a.wg.Go(func() {
		var c *segChunk // the chunk being loaded: back to free however the goroutine ends
		defer close(a.full)
		defer func() {
			if c != nil {
				a.free <- c
			}
		}()
		defer r.catch()
		// last is the chunk sent last (the caller's at first): its batches
		// may await checking, and the bytes it read past its last whole
		// batch begin the next load. The caller reads it, never writes it:
		// it gives chunks back through free, the last sent one only after
		// taking a later one, and reloads one in place only after stopAhead.
		last := first
		for pos < limit {
			c = nil
			select {
			case c = <-a.free:
			default:
				if !oneP && last.checkFromBack(a.free) {
					return // the caller stops at that bad batch or before
				}
				spinPoll(&prodSpin, a.free)
				select {
				case c = <-a.free:
				case <-a.done:
					return
				}
			}
			select {
			case <-a.done: // stop wins over a free chunk
				return
			default:
			}
			c.load(src, pos, limit, size, bufs, last.tailAt(pos), remember)
			if len(c.pos) == 0 {
				return // the caller settles what is there
			}
			c.shared = true
			a.full <- c // never blocks: full has room for every chunk sent
			last, pos, c = c, c.end, nil
		}
	})
}

// catch recovers a panic of the prefetch goroutine: it is reported and
// the reader prefetches no more.
func (r *SegmentReader) catch() {
	if v := recover(); v != nil {
		r.failed.Store(true)
		if r.opts.OnPanic != nil {
			r.opts.OnPanic(v, debug.Stack())
		}
	}
}

// take returns the next loaded chunk, waiting for it; nil once the
// goroutine has ended without it.
func (a *prefetch) take() *segChunk {
	return spinReceive(&a.consSpin, a.full)
}

// stopAhead stops the prefetch goroutine, waits for it and gives back
// the buffers of the chunks it loaded.
func (r *SegmentReader) stopAhead() {
	a := r.ahead
	if a == nil {
		return
	}
	r.ahead = nil
	close(a.done)
	a.wg.Wait()
	for c := range a.full { // closed by the goroutine
		r.drop(c)
	}
	close(a.free)
	for c := range a.free {
		r.drop(c)
	}
}

// ownBuffers lends a reader without ChunkBuffers its buffers: it keeps
// those of its chunk size for reuse (a reader holds a few), drops others.
type ownBuffers struct {
	size int
	mu   sync.Mutex
	free [][]byte
}

func (o *ownBuffers) Get(n int) []byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	if k := len(o.free); k > 0 && n <= o.size {
		b := o.free[k-1]
		o.free = o.free[:k-1]
		return b[:n]
	}
	if n <= o.size {
		return make([]byte, o.size)[:n]
	}
	return make([]byte, n)
}

func (o *ownBuffers) Put(b []byte) {
	if cap(b) != o.size {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.free) < 8 {
		o.free = append(o.free, b)
	}
}

// FileBatches returns a BatchSource over a .log file that is not an open
// Segment (an offline check), whose valid bytes end at size: its ReadBatch
// reads with record.ReadAt and verifies, returning record's errors as they
// are (io.EOF at size), logging nothing.
func FileBatches(f io.ReaderAt, size int64) BatchSource {
	return fileBatches{f: f, size: size}
}

type fileBatches struct {
	f    io.ReaderAt
	size int64
}

func (s fileBatches) ReadAt(p []byte, off int64) (int, error) {
	if off >= s.size {
		return 0, io.EOF
	}
	if rem := s.size - off; int64(len(p)) > rem {
		n, err := s.f.ReadAt(p[:rem], off)
		if err == nil {
			err = io.EOF
		}
		return n, err
	}
	return s.f.ReadAt(p, off)
}

func (s fileBatches) ReadBatch(pos int64, buf []byte) (record.Batch, error) {
	b, err := record.ReadAt(s.f, pos, s.size, buf)
	if err == nil {
		err = b.Verify()
	}
	return b, err
}
