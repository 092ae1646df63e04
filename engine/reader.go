package engine

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/topicfs/topicfs/engine/record"
)

// Reader reads a partition snapshot's batches in order, in large chunks: one
// pread of up to ReaderOptions.BufferSize bytes yields every whole batch in
// it, sliced out of the chunk without a copy and verified (CRC and
// structure) before the caller sees it. Memory is bounded by
// ReaderOptions (Buffers buffers of BufferSize when prefetching, one
// without), not by the log size; a batch larger than the buffer is read
// alone into a buffer of its own size.
//
// With prefetching (the default) a goroutine reads the next chunks while
// the caller decodes the current one; each side polls briefly for the other
// before blocking (see spinWait). With two or more CPUs the two share the
// CRC checks: the prefetcher checks a sent chunk's batches from the back
// while it waits for a free buffer, Next checks any batch it reaches first
// (chunk.verify), so neither side idles while the other has work
// (docs/PERFORMANCE.md, engine read). Either way a batch is checked before
// Next returns it.
//
// A Reader is not safe for concurrent use: one goroutine calls Next and
// Close. The partition's writer may append concurrently; the reader stops at
// the snapshot's LogEndOffset. Always Close a Reader: until then it holds the
// snapshot's segments (their files stay open, also after retention removed
// them) and, once Next was called, its prefetch goroutine.
type Reader struct {
	snap *Snapshot
	prod producer
	opts ReaderOptions

	cur  *chunk // the chunk whose batches Next returns
	next int    // index in cur.batches of the next batch
	err  error  // sticky: returned once cur is drained

	// Prefetch mode: the goroutine fills chunks from free and sends them
	// on full; done stops it (nil until Next started the goroutine).
	free     chan *chunk
	full     chan *chunk
	done     chan struct{}
	wg       sync.WaitGroup
	closed   bool
	consSpin spinner // the caller waiting for a full chunk
	prodSpin spinner // the prefetcher waiting for a free one
}

// ReaderOptions configure a Reader. The zero value means defaults.
type ReaderOptions struct {
	// BufferSize is the size of one read (and of each buffer when
	// prefetching). 0 = DefaultReaderBufferSize; values below
	// MinReaderBufferSize are raised to it.
	BufferSize int
	// Buffers is the number of buffers when prefetching: the one the
	// caller decodes plus up to Buffers-1 read ahead. 0 =
	// DefaultReaderBuffers; values below 2 are raised to 2.
	Buffers int
	// NoPrefetch reads in the caller's goroutine, with one buffer.
	NoPrefetch bool
}

// Reader buffer sizes.
const (
	DefaultReaderBufferSize = 1 << 20
	MinReaderBufferSize     = 4 << 10
	DefaultReaderBuffers    = 2
)

// chunk is one read: a buffer, the verified batches in it and what ended
// the read (nil: more to come; io.EOF at the end; or an error after the
// batches).
type chunk struct {
	buf     []byte
	batches []record.Batch
	err     error

	// Shared verification (prefetch mode on two or more CPUs): the
	// prefetcher sends a chunk as soon as it is read and framed, its
	// batches' CRCs not yet checked. The caller checks each batch it
	// reaches first; the prefetcher, while it waits for a free buffer,
	// checks batches from the back. claim packs the two fronts, lo<<32 |
	// hi: batches [lo, hi) are nobody's yet, and each side moves its own
	// front by compare-and-swap. The prefetcher stores the outcome for a
	// batch j >= hi in state[j] (errs[j] first when bad).
	verify bool
	seg    *Segment
	pos    []int64 // batch j's position in seg
	claim  atomic.Uint64
	state  []atomic.Uint32
	errs   []error
}

// Outcomes of a batch the prefetcher checks (chunk.state).
const (
	batchPending uint32 = iota // being checked
	batchOK
	batchBad
)

// openClaims readies c's shared verification (before c is sent).
func (c *chunk) openClaims() {
	n := len(c.batches)
	if cap(c.state) < n {
		c.state = make([]atomic.Uint32, n)
		c.errs = make([]error, n)
	}
	c.state, c.errs = c.state[:n], c.errs[:n]
	for j := range n {
		c.state[j].Store(batchPending)
		c.errs[j] = nil
	}
	c.claim.Store(uint64(n))
}

// checkFromBack checks c's batches from the back, one at a time, until a
// free buffer is there to fill or the caller has claimed the rest. It
// reports whether it found a bad batch (the caller stops at it, or at an
// earlier one, so nothing after it is needed).
func (c *chunk) checkFromBack(free chan *chunk) bool {
	for len(free) == 0 {
		st := c.claim.Load()
		lo, hi := uint32(st>>32), uint32(st)
		if hi <= lo {
			return false
		}
		if !c.claim.CompareAndSwap(st, uint64(lo)<<32|uint64(hi-1)) {
			continue
		}
		j := hi - 1
		if err := c.batches[j].Verify(); err != nil {
			c.errs[j] = c.seg.corrupt(c.pos[j], err)
			c.state[j].Store(batchBad)
			return true
		}
		c.state[j].Store(batchOK)
	}
	return false
}

// check makes batch j (the caller's next) verified: it claims and checks it,
// or, when the prefetcher has claimed it, waits for its outcome.
func (c *chunk) check(j int) error {
	for {
		st := c.claim.Load()
		hi := uint32(st)
		if uint32(j) >= hi {
			break
		}
		if c.claim.CompareAndSwap(st, uint64(j+1)<<32|uint64(hi)) {
			if err := c.batches[j].Verify(); err != nil {
				return c.seg.corrupt(c.pos[j], err)
			}
			return nil
		}
	}
	for {
		switch c.state[j].Load() {
		case batchOK:
			return nil
		case batchBad:
			return c.errs[j]
		}
		runtime.Gosched() // one batch's CRC: microseconds
	}
}

// NewReader returns a Reader over the snapshot's batches from the batch
// holding offset from to the snapshot's LogEndOffset. The first batch may
// hold records below from (skip them by Record.Offset). from must be within
// [LogStartOffset, LogEndOffset], else the first Next returns an error
// wrapping ErrOffsetOutOfRange.
//
// The Reader takes over the snapshot: Close releases it (do not Release it
// yourself while the Reader is in use).
func (s *Snapshot) NewReader(from int64, opts ReaderOptions) *Reader {
	if opts.BufferSize == 0 {
		opts.BufferSize = DefaultReaderBufferSize
	}
	opts.BufferSize = max(opts.BufferSize, MinReaderBufferSize)
	if opts.Buffers == 0 {
		opts.Buffers = DefaultReaderBuffers
	}
	opts.Buffers = max(opts.Buffers, 2)
	return &Reader{
		snap: s,
		opts: opts,
		prod: producer{snap: s, from: from, end: -1},
	}
}

// NewReader is p.Snapshot().NewReader(from, opts): Close releases the
// snapshot.
func (p *Partition) NewReader(from int64, opts ReaderOptions) *Reader {
	return p.Snapshot().NewReader(from, opts)
}

// Next returns the next verified batch, or io.EOF after the last one. The
// batch (its Raw bytes) is valid until the next call of Next or Close.
// Corruption returns an error wrapping ErrCorrupt that names the file and
// position; the batches before the bad one are returned first, nothing from
// it or after it. Errors are sticky.
func (r *Reader) Next() (*record.Batch, error) {
	for {
		if r.cur != nil && r.next < len(r.cur.batches) {
			if r.cur.verify {
				if err := r.cur.check(r.next); err != nil {
					// Nothing from the bad batch on; the error is sticky.
					r.next, r.err = len(r.cur.batches), err
					return nil, err
				}
			}
			b := &r.cur.batches[r.next]
			r.next++
			return b, nil
		}
		if r.err != nil { // also after Close, which always sets it
			return nil, r.err
		}
		r.advance()
	}
}

// advance replaces the drained current chunk by the next one.
func (r *Reader) advance() {
	if r.opts.NoPrefetch {
		if r.cur == nil {
			r.cur = &chunk{buf: make([]byte, r.opts.BufferSize)}
		}
		r.prod.fill(r.cur)
	} else {
		if r.done == nil {
			r.start()
		}
		if r.cur != nil {
			r.free <- r.cur // never blocks: free has room for every chunk
		}
		r.cur = spinReceive(&r.consSpin, r.full)
	}
	r.next = 0
	r.err = r.cur.err
}

// start launches the prefetch goroutine with opts.Buffers buffers.
func (r *Reader) start() {
	n := r.opts.Buffers
	r.free = make(chan *chunk, n)
	r.full = make(chan *chunk, n)
	r.done = make(chan struct{})
	for range n {
		r.free <- &chunk{buf: make([]byte, r.opts.BufferSize)}
	}
	oneP := runtime.GOMAXPROCS(0) < 2
	r.consSpin.off, r.prodSpin.off = oneP, oneP
	// With two CPUs the CRC checks are shared (chunk.verify): the caller's
	// decoding and the prefetcher's reads then take about as long each.
	r.prod.share = !oneP
	r.wg.Go(func() {
		var last *chunk // the chunk sent last, whose batches may await checking
		for {
			select {
			case <-r.done: // Close wins over a free buffer
				return
			default:
			}
			var c *chunk
			select {
			case c = <-r.free:
			default:
				if last != nil && last.verify && last.checkFromBack(r.free) {
					return // the caller stops at that bad batch or before
				}
				spinPoll(&r.prodSpin, r.free)
				select {
				case c = <-r.free:
				case <-r.done:
					return
				}
			}
			r.prod.fill(c)
			if c.verify {
				c.openClaims()
			}
			last = c
			select {
			case r.full <- c:
			case <-r.done:
				return
			}
			if c.err != nil {
				return
			}
		}
	})
}

// Close stops the prefetching, drops the buffers and releases the
// snapshot. It is idempotent; Next after Close returns ErrClosed.
func (r *Reader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	if r.done != nil {
		close(r.done)
		r.wg.Wait()
	}
	r.cur, r.free, r.full = nil, nil, nil
	r.err = fmt.Errorf("engine: reader: %w", ErrClosed)
	r.snap.Release()
	return nil
}

// producer walks the snapshot's segments chunk by chunk. It is used by one
// goroutine at a time (the prefetcher, or the caller without prefetch).
type producer struct {
	snap    *Snapshot
	from    int64
	located bool  // seg and pos point at the batch holding from
	seg     int   // index in snap.Segments
	pos     int64 // next read position in the segment
	end     int64 // the segment's size when the producer reached it; -1 = not yet
	stop    bool  // the snapshot's end is reached
	// share leaves the batches' CRC checks to the chunk's shared
	// verification (chunk.verify) instead of checking them in fill.
	share bool
	// tail holds the bytes at pos that the last read got beyond its last
	// whole batch (the start of the next batch, in the last filled buffer,
	// which nobody writes until the producer fills it again): the next read
	// copies them instead of reading them again.
	tail []byte
}

// locate finds the first batch to read: the segment holding from, then its
// index lookup (FindOffset).
func (p *producer) locate() error {
	p.located = true
	s := p.snap
	if p.from < s.LogStartOffset || p.from > s.LogEndOffset {
		return fmt.Errorf("%w: offset %d not in [%d, %d]", ErrOffsetOutOfRange, p.from, s.LogStartOffset, s.LogEndOffset)
	}
	if len(s.Segments) == 0 || p.from == s.LogEndOffset {
		p.stop = true
		return nil
	}
	p.seg = s.SegmentFor(p.from)
	pos, err := s.Segments[p.seg].FindOffset(p.from)
	if err != nil {
		return err
	}
	p.pos = pos
	return nil
}

// fill reads the next chunk into c: the verified whole batches found in one
// read of up to len(c.buf) bytes of the current segment, moving to the next
// segment at a segment's end. c.err is io.EOF at the snapshot's end, an
// error after the batches when one is bad, else nil.
func (p *producer) fill(c *chunk) {
	c.batches, c.pos = c.batches[:0], c.pos[:0]
	c.err, c.verify, c.seg = nil, false, nil
	if !p.located {
		if c.err = p.locate(); c.err != nil {
			return
		}
	}
	for !p.stop && p.seg < len(p.snap.Segments) {
		s := p.snap.Segments[p.seg]
		if p.end < 0 {
			p.end = s.Size()
		}
		if p.pos >= p.end {
			p.seg, p.pos, p.end, p.tail = p.seg+1, 0, -1, nil
			continue
		}
		c.err = p.readChunk(s, c)
		if c.err != nil || len(c.batches) > 0 {
			return
		}
	}
	c.err = io.EOF
}

// readChunk reads from p.pos of s into c.buf and appends every whole batch
// in it to c.batches (verified), advancing p.pos past them. A first batch
// larger than the buffer is read alone into a buffer of its size.
func (p *producer) readChunk(s *Segment, c *chunk) error {
	n := min(int64(len(c.buf)), p.end-p.pos)
	data := c.buf[:n]
	k := 0
	if len(p.tail) < len(data) {
		k = copy(data, p.tail) // may overlap (one buffer): copy is a memmove
	}
	p.tail = nil
	if err := p.read(s, data[k:], p.pos+int64(k)); err != nil {
		return err
	}
	off := 0
	for off < len(data) {
		pos := p.pos + int64(off)
		rem := data[off:]
		if len(rem) < record.LogOverhead+5 {
			if pos+int64(len(rem)) == p.end {
				return s.corrupt(pos, fmt.Errorf("%w: %d trailing bytes", record.ErrTruncated, len(rem)))
			}
			break // the rest is in the next read
		}
		h, err := record.PeekHeader(rem, p.end-pos)
		if err != nil {
			return s.corrupt(pos, err)
		}
		size := int64(h.Size())
		raw := rem
		if size > int64(len(rem)) {
			if off > 0 {
				break // starts the next read
			}
			// A batch larger than the buffer: read it alone.
			raw = make([]byte, size)
			copy(raw, rem)
			if err := p.read(s, raw[len(rem):], pos+int64(len(rem))); err != nil {
				return err
			}
		}
		raw = raw[:size:size]
		b, err := record.Parse(raw)
		if err == nil && !p.share {
			err = b.Verify()
		}
		if err != nil {
			return s.corrupt(pos, err)
		}
		if b.LastOffset() >= p.snap.LogEndOffset {
			// Appended after the snapshot was taken.
			p.stop = true
			break
		}
		c.batches = append(c.batches, b)
		if p.share {
			c.pos = append(c.pos, pos)
			c.verify, c.seg = true, s
		}
		if size > int64(len(data)) { // the big batch read alone
			p.pos += size
			return nil
		}
		off += int(size)
	}
	p.pos += int64(off)
	if !p.stop {
		p.tail = data[off:]
	}
	return nil
}

// read fills p from s at off (within the segment's size when reached).
func (p *producer) read(s *Segment, buf []byte, off int64) error {
	got, err := s.ReadAt(buf, off)
	if got == len(buf) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return s.corrupt(off, fmt.Errorf("%w: short read of %d/%d bytes", record.ErrTruncated, got, len(buf)))
	}
	return fmt.Errorf("engine: segment %s pos %d: %w", s.LogPath(), off, err)
}
