package engine

import (
	"fmt"
	"io"

	"github.com/topicfs/topicfs/engine/record"
)

// Reader reads a partition snapshot's batches in offset order, segment
// after segment, through a SegmentReader (segreader.go): one pread of up to
// ReaderOptions.BufferSize bytes yields every whole batch in it, sliced out
// of the chunk without a copy and verified (CRC and structure) before the
// caller sees it. Memory is bounded by ReaderOptions (Buffers buffers of
// BufferSize when prefetching, one without), not by the log size; a batch
// larger than the buffer is read alone into a buffer of its own size.
//
// With prefetching (the default) a goroutine reads the next chunks while
// the caller decodes the current one; each side polls briefly for the other
// before blocking (see spinWait). With two or more CPUs the two share the
// CRC checks: the prefetcher checks a sent chunk's batches from the back
// while it waits for a free buffer, Next checks any batch it reaches first,
// so neither side idles while the other has work (docs/PERFORMANCE.md,
// engine read). Either way a batch is checked before Next returns it.
//
// A Reader is not safe for concurrent use: one goroutine calls Next and
// Close. The partition's writer may append concurrently; the reader stops at
// the snapshot's LogEndOffset. Always Close a Reader: until then it holds the
// snapshot's segments (their files stay open, also after retention removed
// them) and, once Next was called, its prefetch goroutine.
type Reader struct {
	snap *Snapshot
	rd   *SegmentReader
	from int64

	located bool  // seg and pos point at the batch holding from
	seg     int   // index in snap.Segments
	pos     int64 // position of the next batch in the segment
	end     int64 // the segment's size when the reader reached it; -1 = not yet

	batch  record.Batch // the batch Next returned last
	err    error        // sticky
	closed bool
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
		from: from,
		end:  -1,
		rd: NewSegmentReader(SegmentReaderOptions{
			MinChunk: opts.BufferSize,
			Prefetch: !opts.NoPrefetch,
			Ahead:    opts.Buffers - 1,
			Spin:     true,
		}),
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
	if r.err != nil { // also after Close, which always sets it
		return nil, r.err
	}
	if !r.located {
		if r.err = r.locate(); r.err != nil {
			return nil, r.err
		}
	}
	segs := r.snap.Segments
	for r.seg < len(segs) {
		s := segs[r.seg]
		if r.end < 0 {
			r.end = s.Size()
		}
		if r.pos >= r.end {
			r.seg, r.pos, r.end = r.seg+1, 0, -1
			continue
		}
		b, err := r.rd.Batch(s, r.pos, r.end)
		if err != nil {
			r.err = err
			return nil, err
		}
		if b.LastOffset() >= r.snap.LogEndOffset {
			break // appended after the snapshot was taken
		}
		r.pos += int64(b.Size())
		r.batch = b
		return &r.batch, nil
	}
	r.err = io.EOF
	return nil, r.err
}

// locate finds the first batch to read: the segment holding from, then its
// index lookup (FindOffset).
func (r *Reader) locate() error {
	r.located = true
	s := r.snap
	if r.from < s.LogStartOffset || r.from > s.LogEndOffset {
		return fmt.Errorf("%w: offset %d not in [%d, %d]", ErrOffsetOutOfRange, r.from, s.LogStartOffset, s.LogEndOffset)
	}
	if len(s.Segments) == 0 || r.from == s.LogEndOffset {
		r.seg = len(s.Segments)
		return nil
	}
	r.seg = s.SegmentFor(r.from)
	pos, err := s.Segments[r.seg].FindOffset(r.from)
	if err != nil {
		return err
	}
	r.pos = pos
	return nil
}

// Close stops the prefetching, drops the buffers and releases the
// snapshot. It is idempotent; Next after Close returns ErrClosed.
func (r *Reader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.rd.Free()
	r.err = fmt.Errorf("engine: reader: %w", ErrClosed)
	r.snap.Release()
	return nil
}
