package keyindex

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/engine/record"
)

// scanner reads a partition's data records in offset order, as a
// read_committed consumer sees them: control batches and the records of
// aborted transactions are skipped, and reading stops at the snapshot's end
// (the last stable offset, or the high watermark).
type scanner struct {
	buf     []byte
	scratch []byte
	// progress, if set, is called after each batch with the offset reached
	// and the bytes read so far.
	progress func(next, bytes int64)
}

// scan calls fn with every data record of p from offset from to the end at
// the time of the call, and returns that end.
func (s *scanner) scan(ctx context.Context, p backend.Partition, from int64, fn func(*record.Record) error) (end int64, err error) {
	snap, err := p.Snapshot(ctx, from)
	if err != nil {
		return 0, err
	}
	defer snap.Release()
	end = snap.Offsets.End
	aborted := backend.NewAbortedSet(snap.Segments)
	var read int64
	for _, seg := range snap.Segments {
		if seg.NextOffset() <= from || seg.BaseOffset() >= end {
			continue
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		n, err := s.segment(seg, from, end, aborted, fn, &read)
		if err != nil {
			return 0, err
		}
		if n {
			break
		}
	}
	return end, nil
}

// segment scans one segment; done reports that it reached end.
func (s *scanner) segment(seg backend.Segment, from, end int64, aborted *backend.AbortedSet, fn func(*record.Record) error, read *int64) (done bool, err error) {
	var pos int64
	if from > seg.BaseOffset() {
		if pos, err = seg.FindOffset(from); err != nil {
			return false, fmt.Errorf("keyindex: %s: find offset %d: %w", seg.LogPath(), from, err)
		}
	}
	for size := seg.Size(); pos < size; {
		b, err := seg.ReadBatch(pos, s.buf)
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("keyindex: %s: batch at %d: %w", seg.LogPath(), pos, err)
		}
		if cap(b.Raw) > cap(s.buf) {
			s.buf = b.Raw[:cap(b.Raw)]
		}
		if b.BaseOffset >= end {
			return true, nil
		}
		pos += int64(b.Size())
		*read += int64(b.Size())
		if b.NextOffset() > from && !b.IsControl() {
			if err := s.batch(&b, from, end, aborted, fn); err != nil {
				return false, err
			}
		}
		if s.progress != nil {
			s.progress(min(b.NextOffset(), end), *read)
		}
	}
	return false, nil
}

func (s *scanner) batch(b *record.Batch, from, end int64, aborted *backend.AbortedSet, fn func(*record.Record) error) error {
	txn := b.IsTransactional() && !aborted.Empty()
	var err error
	s.scratch, err = b.EachRecord(s.scratch, func(r *record.Record) error {
		if r.Offset < from || r.Offset >= end {
			return nil
		}
		if txn && aborted.Aborted(b.ProducerID, r.Offset) {
			return nil
		}
		return fn(r)
	})
	if err != nil && !errors.Is(err, errStop) {
		return fmt.Errorf("keyindex: batch at offset %d: %w", b.BaseOffset, err)
	}
	return err
}

// errStop ends a scan early without an error.
var errStop = errors.New("keyindex: stop")
