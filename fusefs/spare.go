package fusefs

import "sync"

// spareReaders keeps, for a moment, the readers with which a LOOKUP's
// measure read the first batch of a view that starts inside it (N's batch
// of by-offset/N): the OPEN's first READ takes the one holding its batch
// (seek) and renders from the chunk already read and checked, instead of
// reading the batch again. A reader not taken before spareReadersMax
// later ones were kept is freed. Safe for concurrent use.
type spareReaders struct {
	mu   sync.Mutex
	held [spareReadersMax]spareReader
	next int // the ring's next slot
}

// spareReadersMax bounds the readers kept: each holds one chunk buffer
// (up to chunkMax bytes). Enough for a few opens of by-offset/N at once.
const spareReadersMax = 4

// spareReader is a kept reader whose current chunk holds the batch at file
// position pos of seg.
type spareReader struct {
	seg segmentReader
	pos int64
	rd  logChunk
}

// put keeps rd, whose chunk holds the batch at pos of seg, in place of the
// oldest kept reader (freed).
func (s *spareReaders) put(seg segmentReader, pos int64, rd logChunk) {
	if rd.rd == nil {
		return
	}
	rd.rd.StopPrefetch() // (it reads seg no more until taken)
	s.mu.Lock()
	old := s.held[s.next]
	s.held[s.next] = spareReader{seg: seg, pos: pos, rd: rd}
	s.next = (s.next + 1) % len(s.held)
	s.mu.Unlock()
	old.rd.free()
}

// take returns the kept reader holding the batch at pos of seg, if any;
// it is the caller's from then on.
func (s *spareReaders) take(seg segmentReader, pos int64) (logChunk, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.held {
		if h := &s.held[i]; h.seg == seg && h.pos == pos && h.rd.rd != nil {
			rd := h.rd
			*h = spareReader{}
			return rd, true
		}
	}
	return logChunk{}, false
}
