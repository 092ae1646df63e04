package tools

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/topicfs/topicfs/engine/record"
)

// The repair scanner (check --repair, and check's plan of it) finds every
// intact batch of a damaged .log file, not only those before the first
// damage: after a batch that fails, it scans forward byte by byte for the
// next position where a batch header is plausible (a known magic, a length
// that fits, offsets inside the segment) and the whole batch passes its
// CRC, decodes, and keeps its records' offsets in order. Everything between
// is a damaged range.
//
// The base offset field is outside the CRC, so a damaged header can make a
// batch verify with wrong offsets. Kept batches must have strictly
// increasing offsets; when two verified batches claim the same offsets the
// scanner keeps the one the batches around it agree with (the following
// batches' offsets, then which one continues the offsets of its neighbours)
// and moves the other aside; when nothing tells them apart both are moved
// aside. Either way the dropped batch is named in the plan.

// scanBatch is one batch the scanner found intact.
type scanBatch struct {
	Pos, Size  int64
	Base, Last int64
	Records    int64
}

// DroppedBatch is a batch whose CRC verifies but which a repair moves aside
// because its offsets conflict with the batch at ConflictPos (one of the two
// has a damaged base offset, which the CRC does not cover).
type DroppedBatch struct {
	Pos, Size, Base, Last int64
	ConflictPos           int64
}

// DamagedRange is a byte range of a .log file that holds no batch a repair
// keeps. PrevLast is the last offset kept before it (the segment's base - 1
// at the start); NextBase is the first offset kept after it (-1 when
// nothing follows in the partition).
type DamagedRange struct {
	Pos, End           int64
	PrevLast, NextBase int64
	Dropped            []DroppedBatch
}

// SegmentPlan is what the repair scanner found in one .log file.
type SegmentPlan struct {
	Path                     string
	Base, Size               int64
	KeptBatches, KeptRecords int64
	Damaged                  []DamagedRange
	kept                     []scanBatch
}

// scanLimits bounds the offsets of a segment's batches: at least base, at
// most base + MaxInt32 (a relative offset must fit an int32) and below
// limit, the next segment's base (math.MaxInt64 for the last segment).
type scanLimits struct {
	base, limit int64
	hasNext     bool // limit is the next segment's base
}

// scanLookahead is how many following batches vote when two verified
// batches claim the same offsets.
const scanLookahead = 8

type segScanner struct {
	r    io.ReaderAt
	size int64
	lim  scanLimits
	buf  []byte
	recs []record.Record
}

// planSegment scans the .log held by r (size bytes) and returns what a
// repair keeps and moves aside. The error is an I/O error only.
func planSegment(r io.ReaderAt, size int64, lim scanLimits) (SegmentPlan, error) {
	sc := &segScanner{r: r, size: size, lim: lim}
	var cands []scanBatch
	for pos := int64(0); pos < size; {
		b, ok, err := sc.accept(pos)
		if err != nil {
			return SegmentPlan{}, err
		}
		if ok {
			cands = append(cands, b)
			pos += b.Size
			continue
		}
		if pos, err = sc.resync(pos + 1); err != nil {
			return SegmentPlan{}, err
		}
	}
	keep, conflict := resolveOffsets(cands, lim)
	plan := SegmentPlan{Base: lim.base, Size: size}
	for _, i := range keep {
		plan.kept = append(plan.kept, cands[i])
		plan.KeptBatches++
		plan.KeptRecords += cands[i].Records
	}
	plan.Damaged = damagedRanges(plan.kept, cands, conflict, size, lim)
	return plan, nil
}

// accept reads the batch at pos and reports whether a repair may keep it
// (ignoring its order relative to other batches).
func (sc *segScanner) accept(pos int64) (scanBatch, bool, error) {
	b, err := record.ReadAt(sc.r, pos, sc.size, sc.buf)
	if err != nil {
		if errors.Is(err, record.ErrCorrupt) || errors.Is(err, record.ErrTruncated) || errors.Is(err, io.EOF) {
			return scanBatch{}, false, nil
		}
		return scanBatch{}, false, err
	}
	sc.buf = b.Raw[:cap(b.Raw)]
	if b.Verify() != nil {
		return scanBatch{}, false, nil
	}
	sc.recs, err = b.Records(sc.recs[:0])
	if err != nil {
		return scanBatch{}, false, nil
	}
	base, last := b.BaseOffset, b.LastOffset()
	if b.Magic < 2 && len(sc.recs) > 0 {
		base = sc.recs[0].Offset
	}
	lim := sc.lim
	if base < lim.base || last < base || last >= lim.limit || last-lim.base > math.MaxInt32 {
		return scanBatch{}, false, nil
	}
	prev := base - 1
	for i := range sc.recs {
		o := sc.recs[i].Offset
		if o <= prev || o > last {
			return scanBatch{}, false, nil
		}
		prev = o
	}
	return scanBatch{Pos: pos, Size: int64(b.Size()), Base: base, Last: last, Records: int64(len(sc.recs))}, true, nil
}

// resync returns the first position at or after from where a batch is
// accepted, or the size of the file. Headers are screened in memory, a
// window at a time; only plausible ones are read and verified in full.
func (sc *segScanner) resync(from int64) (int64, error) {
	const win = 64 << 10
	const hdr = 17 // offset, length, leader epoch, magic
	window := make([]byte, win+hdr)
	for start := from; start+hdr <= sc.size; start += win {
		n := min(int64(len(window)), sc.size-start)
		if _, err := sc.r.ReadAt(window[:n], start); err != nil && !errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("read at position %d: %w", start, err)
		}
		for i := int64(0); i < min(win, n-hdr+1); i++ {
			pos := start + i
			if !sc.plausible(window[i:i+hdr], pos) {
				continue
			}
			_, ok, err := sc.accept(pos)
			if err != nil {
				return 0, err
			}
			if ok {
				return pos, nil
			}
		}
	}
	return sc.size, nil
}

// plausible screens the first 17 bytes of a would-be batch at pos.
func (sc *segScanner) plausible(h []byte, pos int64) bool {
	length := int64(int32(uint32(h[8])<<24 | uint32(h[9])<<16 | uint32(h[10])<<8 | uint32(h[11])))
	magic := h[16]
	if magic > 2 || length < 14 || pos+12+length > sc.size || (magic == 2 && length < record.HeaderSize-record.LogOverhead) {
		return false
	}
	var off int64
	for _, c := range h[:8] {
		off = off<<8 | int64(c)
	}
	return off >= sc.lim.base && off < sc.lim.limit
}

// keepOutcome decides between a kept batch and a new one claiming some of
// its offsets.
type keepOutcome int

const (
	keepOld keepOutcome = iota
	keepNew
	dropBoth
)

// resolveOffsets chooses, among the accepted batches in file order, those a
// repair keeps: strictly increasing offsets. It returns their indexes and,
// for each dropped one, the index of the batch it conflicted with.
func resolveOffsets(cands []scanBatch, lim scanLimits) (keep []int, conflict map[int]int) {
	conflict = map[int]int{}
	keep = make([]int, 0, len(cands))
	for i := range cands {
		v := &cands[i]
		for {
			if len(keep) == 0 || v.Base > cands[keep[len(keep)-1]].Last {
				keep = append(keep, i)
				break
			}
			ki := keep[len(keep)-1]
			prevLast := lim.base - 1
			if len(keep) > 1 {
				prevLast = cands[keep[len(keep)-2]].Last
			}
			ahead := cands[i+1 : min(len(cands), i+1+scanLookahead)]
			nextBase := int64(-1)
			if len(ahead) > 0 {
				nextBase = ahead[0].Base
			} else if lim.hasNext {
				nextBase = lim.limit
			}
			switch decideConflict(&cands[ki], v, prevLast, nextBase, ahead) {
			case keepOld:
				conflict[i] = ki
			case keepNew:
				keep = keep[:len(keep)-1]
				conflict[ki] = i
				continue // v may conflict with the batch before too
			case dropBoth:
				keep = keep[:len(keep)-1]
				conflict[ki], conflict[i] = i, ki
			}
			break
		}
	}
	return keep, conflict
}

// decideConflict picks between old (kept, just before) and nw (next in the
// file) whose offsets overlap. prevLast is the last offset kept before old,
// nextBase the base offset of the batch after nw (-1 unknown), ahead the
// batches after nw.
func decideConflict(old, nw *scanBatch, prevLast, nextBase int64, ahead []scanBatch) keepOutcome {
	if nw.Base <= prevLast {
		return keepOld // nw overlaps two kept batches
	}
	var votesOld, votesNew int
	for _, a := range ahead {
		if a.Base > old.Last {
			votesOld++
		}
		if a.Base > nw.Last {
			votesNew++
		}
	}
	switch {
	case votesNew > votesOld:
		return keepNew
	case votesOld > votesNew:
		return keepOld
	}
	contiguous := func(b *scanBatch) int {
		n := 0
		if b.Base == prevLast+1 {
			n++
		}
		if nextBase >= 0 && b.Last+1 == nextBase {
			n++
		}
		return n
	}
	switch co, cn := contiguous(old), contiguous(nw); {
	case cn > co:
		return keepNew
	case co > cn:
		return keepOld
	}
	return dropBoth
}

// damagedRanges returns the complement of the kept batches in [0, size), with
// the dropped verified batches inside each range.
func damagedRanges(kept, cands []scanBatch, conflict map[int]int, size int64, lim scanLimits) []DamagedRange {
	var out []DamagedRange
	pos := int64(0)
	prevLast := lim.base - 1
	add := func(end, nextBase int64) {
		if end > pos {
			out = append(out, DamagedRange{Pos: pos, End: end, PrevLast: prevLast, NextBase: nextBase})
		}
	}
	for _, k := range kept {
		add(k.Pos, k.Base)
		pos, prevLast = k.Pos+k.Size, k.Last
	}
	next := int64(-1)
	if lim.hasNext {
		next = lim.limit
	}
	add(size, next)
	for i, c := range cands {
		j, ok := conflict[i]
		if !ok {
			continue
		}
		for r := range out {
			if c.Pos >= out[r].Pos && c.Pos < out[r].End {
				out[r].Dropped = append(out[r].Dropped, DroppedBatch{Pos: c.Pos, Size: c.Size, Base: c.Base, Last: c.Last, ConflictPos: cands[j].Pos})
				break
			}
		}
	}
	return out
}
