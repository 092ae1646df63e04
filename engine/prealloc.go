package engine

import (
	"github.com/topicfs/topicfs/engine/vfs"
)

// The active segment's .log gets disk blocks reserved ahead of its end
// (fallocate with FALLOC_FL_KEEP_SIZE: the size, and so everything recovery
// and readers see, is unchanged). A write into reserved blocks skips ext4's
// delayed-allocation bookkeeping per page, which makes the kernel's writes
// cheaper without making an fsync slower (docs/PERFORMANCE.md, engine
// append). Kafka's preallocate=true sizes
// the whole segment up front (and trims it at roll); this reserves a window
// that grows with the segment, from preallocMin to preallocMax, so an idle
// partition holds little more than it stores. The blocks past the end are
// freed when the segment is sealed, when the partition closes and when
// recovery reopens the active segment after a crash.
const (
	preallocMin = 64 << 10
	preallocMax = 8 << 20
)

// reserveLocked makes sure s's .log has blocks reserved up to end before a
// write that ends there. A failure (a full disk, a file system without
// fallocate is not one) only stops the reservations for s: the write
// itself reports what it must. Callers hold mu.
func (p *Partition) reserveLocked(s *Segment, end int64) {
	if end <= s.w.reserved || s.w.noPrealloc {
		return
	}
	from := max(s.w.reserved, s.Size())
	upto := end + min(preallocMax, max(preallocMin, end))
	if limit := p.cfg.Load().SegmentBytes; upto > limit {
		upto = max(limit, end)
	}
	if err := vfs.Allocate(s.log, from, upto-from); err != nil {
		p.logger.Debug("engine: not preallocating the segment", "segment", s.LogPath(), "err", err)
		s.w.noPrealloc = true
		return
	}
	s.w.reserved = upto
}

// truncateLogLocked truncates s's .log to size; the blocks reserved past
// it are gone with the bytes (even when the truncate fails, reserving again
// is harmless). Every truncation of an appended .log goes through it.
// Callers hold mu.
func (s *Segment) truncateLogLocked(size int64) error {
	s.w.reserved = min(s.w.reserved, size)
	s.clampVerified(size)
	return s.log.Truncate(size)
}

// releaseReserved frees the blocks reserved past the end of s's .log (s
// is no longer appended to, or was found after a crash). Callers hold mu
// or own the partition alone.
func (p *Partition) releaseReserved(s *Segment) {
	if s.log == nil || p.opts.ReadOnly {
		return
	}
	if err := vfs.ReleaseBeyond(s.log, s.Size()); err != nil {
		p.logger.Warn("engine: cannot free the blocks reserved past the end of a segment", "segment", s.LogPath(), "err", err)
	}
	s.w.reserved = 0
}
