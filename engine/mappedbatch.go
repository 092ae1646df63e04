// Batches read in place from a segment's read-only mapping (pointmap.go):
// for a reader that needs a few records of a batch once (a view opened at
// an offset), without a pread of the whole batch into a buffer.

package engine

import (
	"encoding/binary"
	"errors"

	"github.com/topicfs/topicfs/engine/record"
)

// errNotMapped ends a MappedBatch callback that found no batch it can
// hand over in place: the caller reads it the usual way.
var errNotMapped = errors.New("engine: batch not read from the mapping")

// MappedBatch calls fn with the batch at file position pos of s, whose
// bytes below limit are committed, straight from the segment's read-only
// mapping: no pread, no copy. The batch has passed its CRC check (before,
// as the memo or the verified span knows, or here, and is then
// remembered). Its Raw aliases the mapping and is valid only during fn,
// which runs under the memo's read lock: fn must not keep Raw (or
// anything sliced from it) and must not read s (its memo's lock is held).
//
// ok is false, and fn is not called, when the bytes are not there to be
// read in place (no mapping, or not one that covers the batch) or do not
// frame and check as one batch below limit: the caller reads the batch
// the usual way (ReadBatch, a SegmentReader), whose errors are the
// engine's own. A fault while reading the mapping (the file cut short
// behind the engine's back) returns an error wrapping ErrCorrupt; an error
// of fn is returned as it is.
func (s *Segment) MappedBatch(pos, limit int64, fn func(b record.Batch) error) (ok bool, err error) {
	m := s.memo()
	if m == nil || pos < 0 || pos+record.LogOverhead > limit || limit > s.Size() {
		return false, nil
	}
	m.touch()
	var (
		fnErr    error
		verified bool // checked here, to remember once the lock is let go
		batch    record.Batch
	)
	mapped, err := m.withMapped(pos, limit, func(w []byte) error {
		total := record.LogOverhead + int64(int32(binary.BigEndian.Uint32(w[8:])))
		if total <= record.LogOverhead || total > int64(len(w)) {
			return errNotMapped
		}
		b, err := record.Parse(w[:total:total])
		if err != nil {
			return errNotMapped
		}
		if !s.checkedBefore(pos, b.Size()) {
			if b.Verify() != nil {
				return errNotMapped // ReadBatch reports it
			}
			verified = b.Magic >= 2 // (a legacy entry's last offset is in its bytes)
		}
		s.stats.bytesRead.Add(total)
		s.stats.reads.Add(1)
		batch = b
		fnErr = fn(b)
		return nil
	})
	switch {
	case errors.Is(err, errMapFault):
		return false, m.mapFault(pos)
	case err != nil || !mapped: // (errNotMapped: withMapped returns fn's errors only)
		return false, nil
	}
	if verified {
		batch.Raw = nil // the mapping may go now; remember reads the header only
		m.remember(pos, &batch, nil)
	}
	return true, fnErr
}
