// The verified span: the bytes of a segment this process wrote from
// batches it had CRC-checked (AppendAsFollower), so that reading them back
// does not check them again.

package engine

// verifiedSpan is [from, to) of a Segment's .log: bytes this Segment
// wrote, one write after another, from batches AppendAsFollower had
// verified (CRC and structure) before writing them. A reader may take a
// batch lying wholly inside it as checked: the bytes below a segment's
// committed size never change while it is open (batchmemo.go says why),
// so what was verified before the write is what a read returns. It lives
// in its Segment, so a segment opened again (a copy reopened from disk)
// starts without one and its batches are checked when read, as any others.
// Immutable: the writer publishes a new one.
type verifiedSpan struct {
	from, to int64
}

// markVerified extends s's verified span with [from, to), a run of
// verified batches just written and published. A run that does not follow
// the span (bytes written otherwise lie between) starts a new span. Only
// the partition's writer calls it.
func (s *Segment) markVerified(from, to int64) {
	if v := s.verified.Load(); v != nil && v.to == from {
		from = v.from
	}
	s.verified.Store(&verifiedSpan{from: from, to: to})
}

// clampVerified cuts the verified span at size (the .log truncated there).
// Only the partition's writer calls it.
func (s *Segment) clampVerified(size int64) {
	if v := s.verified.Load(); v != nil && v.to > size {
		if size <= v.from {
			s.verified.Store(nil)
		} else {
			s.verified.Store(&verifiedSpan{from: v.from, to: size})
		}
	}
}

// checkedBefore reports whether the batch of size bytes at pos is known to
// have passed its CRC check: it lies in the verified span, or the batch
// memo holds it.
func (s *Segment) checkedBefore(pos int64, size int) bool {
	if v := s.verified.Load(); v != nil && pos >= v.from && pos+int64(size) <= v.to {
		return true
	}
	m := s.bmemo.Load()
	return m != nil && m.verified(pos, size)
}

// VerifiedBytes returns the span of s's .log written from batches verified
// before the write (AppendAsFollower) since s was opened: [from, to), empty
// when none.
func (s *Segment) VerifiedBytes() (from, to int64) {
	if v := s.verified.Load(); v != nil {
		return v.from, v.to
	}
	return 0, 0
}

// SegmentBacked is a BatchSource that reads the committed bytes of an open
// Segment (a view that cuts it short, say: cluster mode's mirror
// segments). A SegmentReader reading one skips the CRC check of the
// batches the Segment knows were checked (its batch memo and its verified
// span), as it does reading the Segment itself.
type SegmentBacked interface {
	BatchSource
	EngineSegment() *Segment
}

// segmentOf returns the Segment src reads, nil when it reads none.
func segmentOf(src BatchSource) *Segment {
	switch s := src.(type) {
	case *Segment:
		return s
	case SegmentBacked:
		return s.EngineSegment()
	}
	return nil
}
