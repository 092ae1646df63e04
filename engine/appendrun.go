// The pending run of an append: batches encoded but not yet written, where
// each is placed (rolling to a new segment first when Kafka's roll rule says
// so), and how the run is written to the active segment with one write call
// and then published: bytes first, then the offsets, then the index entries.

package engine

import (
	"errors"
	"fmt"
)

// appendRun is the writer's pending run: encoded batches in p.w.encBuf[0:end]
// waiting to be written at pos0 of seg with one write call, then published.
// Batches are placed (roll decided, index entries planned) as they are
// encoded, exactly as if each had been written at once: Kafka's roll rule
// sees the pending bytes, and when it depends on something only a write
// makes exact (index fullness) the run is written first.
type appendRun struct {
	seg     *Segment
	pos0    int64        // segment size when the run started
	ib      indexBuilder // seg.w.ib when the run started (restored on failure)
	end     int          // bytes of encBuf in the run
	next    int64        // next offset after the run
	entries int          // index entries planned among batches
	batches []runBatch
	gen     int  // bumped by every write or drop
	checked bool // its batches were verified before they were placed (appendParams.verified)
}

// runBatch is one batch of a run (start and end in encBuf).
type runBatch struct {
	batchSpan
	entry   bool  // an index entry is due before this batch
	tidxTs  int64 // time index entry (index builder state after the batch)
	tidxOff int64
}

// runMark is a point in a run to rewind to.
type runMark struct {
	gen, end, batches, entries int
	next                       int64
	ib                         indexBuilder
	ok                         bool
}

func (r *appendRun) mark(bufLen int) runMark {
	if r.seg == nil {
		return runMark{gen: r.gen, end: bufLen}
	}
	return runMark{gen: r.gen, end: r.end, batches: len(r.batches), entries: r.entries, next: r.next, ib: r.seg.w.ib, ok: true}
}

// rewind takes the batches placed after m out of the run, if the run was
// not written since.
func (r *appendRun) rewind(m runMark, buf *[]byte) {
	if r.gen != m.gen {
		return
	}
	if !m.ok || r.seg == nil {
		r.drop()
		*buf = (*buf)[:0]
		return
	}
	r.end, r.entries, r.next = m.end, m.entries, m.next
	r.batches = r.batches[:m.batches]
	r.seg.w.ib = m.ib
	*buf = (*buf)[:m.end]
}

func (r *appendRun) drop() {
	r.seg, r.checked = nil, false
	r.end, r.entries = 0, 0
	r.batches = r.batches[:0]
	r.gen++
}

// nextOffsetLocked is the offset the next record gets (pending run included).
func (p *Partition) nextOffsetLocked() int64 {
	if p.w.run.seg != nil {
		return p.w.run.next
	}
	return p.logEnd.Load()
}

// placeLocked adds the batch encoded at encBuf[sp.start:sp.end] to the run.
// Everything in the buffer from the end of the run on is batches not placed
// yet, in order; it is the first of them. If it belongs in a new segment,
// placeLocked writes the run and rolls first. If the run was written (then
// it is empty), it moves down to the run's end. Callers hold mu.
func (p *Partition) placeLocked(sp batchSpan, ap *appendParams) error {
	b := runBatch{batchSpan: sp}
	r := &p.w.run
	cfg := ap.cfg
	size := int64(b.end - b.start)
	for {
		s := p.active()
		if r.seg == nil {
			r.seg, r.pos0, r.ib, r.end = s, s.Size(), s.w.ib, 0
			r.checked = ap.verified
		}
		firstTs := int64(-1)
		if len(r.batches) > 0 {
			firstTs = r.batches[0].maxTs
		}
		reason, exact := p.rollDue(s, ap, int64(r.end), r.entries, firstTs, size, b.last, b.maxTs)
		if !exact {
			if err := p.writeRunLocked(); err != nil {
				return err
			}
			continue
		}
		if reason != "" {
			if err := p.writeRunLocked(); err != nil {
				return err
			}
			if err := p.rollLocked(b.first, cfg, reason); err != nil {
				return err
			}
			s = p.active()
			r.seg, r.pos0, r.ib, r.end = s, s.Size(), s.w.ib, 0
			r.checked = ap.verified
		}
		break
	}
	if b.start != r.end {
		// The run was written: move the batch down (later batches sit at or
		// after b.end, so they are not overwritten).
		n := copy(p.w.encBuf[r.end:b.end], p.w.encBuf[b.start:b.end])
		b.start, b.end = r.end, r.end+n
	}
	p.w.encBuf = p.w.encBuf[:b.end]
	s := r.seg
	b.entry = s.w.ib.add(b.last, b.maxTs, r.pos0+int64(b.start), size, cfg.IndexIntervalBytes)
	b.tidxTs, b.tidxOff = s.w.ib.maxTs, s.w.ib.offsetOfMax
	if b.entry {
		r.entries++
	}
	r.batches = append(r.batches, b)
	r.end = b.end
	r.next = b.last + 1
	if r.end >= ap.runLimit {
		return p.writeRunLocked()
	}
	return nil
}

// writeRunLocked writes the pending run with one write call and publishes
// it: bytes first, then the offsets that point into them, then the index
// entries. On failure nothing of the run is published and the bytes are
// truncated away (best effort: recovery truncates them anyway). The write
// empties the buffer. Callers hold mu.
func (p *Partition) writeRunLocked() error {
	r := &p.w.run
	if r.seg == nil {
		return nil
	}
	defer func() {
		r.drop()
		p.w.encBuf = p.w.encBuf[:0]
	}()
	var err error
	if r.end > 0 {
		p.reserveLocked(r.seg, r.pos0+int64(r.end))
		_, err = r.seg.log.WriteAt(p.w.encBuf[:r.end], r.pos0)
	}
	if len(r.batches) == 0 {
		return nil
	}
	s := r.seg
	if err != nil {
		s.w.ib = r.ib
		if terr := s.truncateLogLocked(r.pos0); terr != nil {
			p.logger.Warn("engine: cannot truncate after a failed write", "segment", s.LogPath(), "err", terr)
		}
		return fmt.Errorf("engine: append to %s: %w", s.LogPath(), err)
	}
	var records int64
	maxTs := s.maxTs.Load()
	for i := range r.batches {
		b := &r.batches[i]
		records += int64(b.count)
		maxTs = max(maxTs, b.maxTs)
	}
	if r.pos0 == 0 {
		s.firstBatchTs.Store(r.batches[0].maxTs)
	}
	// Publish: bytes first, then the offsets that point into them (both
	// inside pubSeq's odd phase, for readers that need them together).
	s.pubSeq.Add(1)
	s.size.Store(r.pos0 + int64(r.end))
	s.next.Store(r.next)
	s.pubSeq.Add(1)
	if r.checked {
		s.markVerified(r.pos0, r.pos0+int64(r.end))
	}
	if maxTs > s.maxTs.Load() {
		s.maxTs.Store(maxTs)
	}
	p.logEnd.Store(r.next)
	if r.entries > 0 {
		s.mu.Lock()
		var err error
		for i := range r.batches {
			b := &r.batches[i]
			if !b.entry {
				continue
			}
			if s.mu.oidx != nil {
				err = errors.Join(err, s.mu.oidx.Append(b.last, r.pos0+int64(b.start)))
			}
			if s.mu.tidx != nil && b.tidxTs >= 0 {
				err = errors.Join(err, s.mu.tidx.MaybeAppend(b.tidxTs, b.tidxOff, false))
			}
		}
		s.mu.Unlock()
		if err != nil {
			p.logger.Warn("engine: index append failed", "segment", s.LogPath(), "err", err)
		}
	}
	p.stats.bytesAppended.Add(int64(r.end))
	p.stats.recordsAppended.Add(records)
	p.stats.batchesAppended.Add(int64(len(r.batches)))
	return nil
}
