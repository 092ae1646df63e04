package engine

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/topicfs/topicfs/engine/record"
)

// The salvage scanner (used by crash recovery, by check --repair and by
// check's plan of it) finds every intact batch of a damaged .log file, not only those before the first
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
//
// ApplySegmentPlan (salvageapply.go) carries a plan out.

// scanBatch is one batch the scanner found intact.
type scanBatch struct {
	Pos, Size  int64
	Base, Last int64
	Records    int64
}

// DroppedBatch is a batch whose CRC verifies but which a salvage moves aside
// because its offsets conflict with the batch at ConflictPos (one of the two
// has a damaged base offset, which the CRC does not cover).
type DroppedBatch struct {
	Pos, Size, Base, Last int64
	ConflictPos           int64
}

// DamagedRange is a byte range of a .log file that holds no batch a salvage
// keeps. PrevLast is the last offset kept before it (the segment's base - 1
// at the start); NextBase is the first offset kept after it (-1 when
// nothing follows in the partition).
type DamagedRange struct {
	Pos, End           int64
	PrevLast, NextBase int64
	Dropped            []DroppedBatch
	// Aside is the file the bytes move to (chosen by PlanLogFile and
	// recovery; "" is AsidePath's plain name).
	Aside string
	// Discard: the bytes are dropped, not moved aside: they are all zero,
	// space a file system extended but never wrote (decideDamaged).
	Discard bool
}

// SegmentPlan is what the salvage scanner found in one .log file.
type SegmentPlan struct {
	Path                     string
	Base, Size               int64
	KeptBatches, KeptRecords int64
	Damaged                  []DamagedRange
	// Kept are the byte ranges of kept batches, merged where adjacent:
	// the complement of Damaged.
	Kept []Span
}

// Truncates reports whether the plan only cuts the file's tail: one
// damaged range, up to the end.
func (p *SegmentPlan) Truncates() bool {
	return len(p.Damaged) == 1 && p.Damaged[0].End == p.Size
}

// Span is a byte range [Pos, End) of a file.
type Span struct{ Pos, End int64 }

// ScanLimits bounds the offsets of a segment's batches: at least Base, at
// most Base + MaxInt32 (a relative offset must fit an int32) and below
// Limit, the next segment's base (math.MaxInt64 for the last segment).
type ScanLimits struct {
	Base, Limit int64
	HasNext     bool // Limit is the next segment's base
}

// scanLookahead is how many following batches vote when two verified
// batches claim the same offsets.
const scanLookahead = 8

type segScanner struct {
	r    io.ReaderAt
	size int64
	lim  ScanLimits
	buf  []byte
	recs []record.Record
}

// PlanSegment scans the .log held by r (size bytes) and returns what a
// salvage keeps and moves aside. The error is an I/O error only. Memory is
// bounded by the lookahead and the number of damaged ranges, not by the
// number of batches.
func PlanSegment(r io.ReaderAt, size int64, lim ScanLimits) (SegmentPlan, error) {
	sc := &segScanner{r: r, size: size, lim: lim}
	pl := &planner{lim: lim, plan: SegmentPlan{Base: lim.Base, Size: size}, prevLast: lim.Base - 1}
	for pos := int64(0); pos < size; {
		b, ok, err := sc.accept(pos)
		if err != nil {
			return SegmentPlan{}, err
		}
		if ok {
			pl.add(b)
			pos += b.Size
			continue
		}
		if pos, err = sc.resync(pos + 1); err != nil {
			return SegmentPlan{}, err
		}
	}
	return pl.finish(), nil
}

// accept reads the batch at pos and reports whether a salvage may keep it
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
	if base < lim.Base || last < base || last >= lim.Limit || last-lim.Base > math.MaxInt32 {
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
	const minHdr = 17 // offset, length, leader epoch, magic: what every entry has
	const maxHdr = 64 // a v2 header (61 bytes) and a little more
	window := make([]byte, win+maxHdr)
	for start := from; start+minHdr <= sc.size; start += win {
		n := min(int64(len(window)), sc.size-start)
		if _, err := sc.r.ReadAt(window[:n], start); err != nil && !errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("read at position %d: %w", start, err)
		}
		for i := int64(0); i < min(win, n-minHdr+1); i++ {
			pos := start + i
			if !sc.plausible(window[i:min(n, i+maxHdr)], pos) {
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

// maxLegacyEntry bounds the size of a legacy (magic 0/1) message the resync
// scan considers: those brokers refused messages above message.max.bytes
// (1 MB by default), and without a bound every random length would cost a
// CRC over the rest of the file.
const maxLegacyEntry = 64 << 20

// plausible screens the header bytes h (at least 17, and all of a v2 header
// when the file holds one) of a would-be batch at pos, with checks every
// batch Kafka writes passes, so that the CRC is computed for few positions
// of a damaged range.
func (sc *segScanner) plausible(h []byte, pos int64) bool {
	hd, err := record.PeekHeader(h, sc.size-pos)
	if err != nil || hd.BaseOffset < sc.lim.Base || hd.BaseOffset >= sc.lim.Limit {
		return false
	}
	if hd.Magic < 2 {
		return hd.Length <= maxLegacyEntry && sc.legacyPlausible(h, pos, hd)
	}
	if len(h) < record.HeaderSize {
		return false
	}
	attrs := uint16(hd.Attributes)
	return attrs&0xff80 == 0 && attrs&7 <= 4 && // unused bits zero, a known codec
		hd.LastOffsetDelta >= 0 && hd.BaseOffset+int64(hd.LastOffsetDelta) < sc.lim.Limit &&
		hd.RecordCount >= 0 && int64(hd.RecordCount) <= int64(hd.LastOffsetDelta)+1 &&
		hd.ProducerID >= -1 && hd.ProducerEpoch >= -1 && hd.BaseSequence >= -1
}

// legacyPlausible checks that a would-be legacy message at pos (header hd,
// from the bytes h) adds up: its attributes use only defined bits and its
// key and value lengths account for exactly its length.
func (sc *segScanner) legacyPlausible(h []byte, pos int64, hd record.Batch) bool {
	// offset, size, crc, magic, attributes, [timestamp (v1)], then the key
	// length: the first field of the message past its header.
	keyAt := int64(18)
	attrMask := int16(0x07)
	if hd.Magic == 1 {
		keyAt += 8
		attrMask = 0x0f
	}
	length := int64(hd.Length)
	if int64(len(h)) < keyAt+4 || hd.Attributes&^attrMask != 0 || hd.Attributes&7 > 3 {
		return false
	}
	keyLen := int64(int32(binary.BigEndian.Uint32(h[keyAt:])))
	if keyLen < -1 || keyAt+4+max(keyLen, 0)+4 > 12+length {
		return false
	}
	var v [4]byte
	if _, err := sc.r.ReadAt(v[:], pos+keyAt+4+max(keyLen, 0)); err != nil {
		return false
	}
	valueLen := int64(int32(binary.BigEndian.Uint32(v[:])))
	return valueLen >= -1 && keyAt+4+max(keyLen, 0)+4+max(valueLen, 0) == 12+length
}

// keepOutcome decides between a kept batch and a new one claiming some of
// its offsets.
type keepOutcome int

const (
	keepOld keepOutcome = iota
	keepNew
	dropBoth
)

// planner chooses, among the accepted batches in file order, those a salvage
// keeps: strictly increasing offsets. A batch is decided once the
// scanLookahead batches after it are known; a new batch can only displace
// the last kept one (decideConflict keeps the old one when the new one
// overlaps two), so only the last two kept batches are still open; older ones
// are final and only their byte ranges are kept.
type planner struct {
	lim      ScanLimits
	plan     SegmentPlan
	pending  []scanBatch // accepted, not decided yet
	open     []scanBatch // kept, at most two, not final
	pos      int64       // end of the last final batch
	prevLast int64       // its last offset
	dropped  []DroppedBatch
}

func (p *planner) add(b scanBatch) {
	p.pending = append(p.pending, b)
	if len(p.pending) > scanLookahead {
		p.decide()
	}
}

// decide settles the oldest pending batch.
func (p *planner) decide() {
	v := p.pending[0]
	ahead := p.pending[1:]
	nextBase := int64(-1)
	if len(ahead) > 0 {
		nextBase = ahead[0].Base
	} else if p.lim.HasNext {
		nextBase = p.lim.Limit
	}
	for {
		n := len(p.open)
		if n == 0 || v.Base > p.open[n-1].Last {
			p.keep(v)
			break
		}
		k := p.open[n-1]
		prevLast := p.prevLast
		if n > 1 {
			prevLast = p.open[n-2].Last
		}
		out := decideConflict(&k, &v, prevLast, nextBase, ahead)
		if out == keepOld {
			p.drop(v, k.Pos)
			break
		}
		p.open = p.open[:n-1]
		p.drop(k, v.Pos)
		if out == dropBoth {
			p.drop(v, k.Pos)
			break
		}
		// keepNew: v overlaps no earlier batch, so it is kept next round.
	}
	p.pending = append(p.pending[:0], p.pending[1:]...)
}

func (p *planner) keep(b scanBatch) {
	p.open = append(p.open, b)
	if len(p.open) > 2 {
		p.final(p.open[0])
		p.open = append(p.open[:0], p.open[1:]...)
	}
}

func (p *planner) drop(b scanBatch, conflictPos int64) {
	p.dropped = append(p.dropped, DroppedBatch{Pos: b.Pos, Size: b.Size, Base: b.Base, Last: b.Last, ConflictPos: conflictPos})
}

// final records a kept batch: the bytes since the previous one are damaged.
func (p *planner) final(b scanBatch) {
	if b.Pos > p.pos {
		p.plan.Damaged = append(p.plan.Damaged, DamagedRange{Pos: p.pos, End: b.Pos, PrevLast: p.prevLast, NextBase: b.Base})
	}
	if n := len(p.plan.Kept); n > 0 && p.plan.Kept[n-1].End == b.Pos {
		p.plan.Kept[n-1].End = b.Pos + b.Size
	} else {
		p.plan.Kept = append(p.plan.Kept, Span{b.Pos, b.Pos + b.Size})
	}
	p.pos, p.prevLast = b.Pos+b.Size, b.Last
	p.plan.KeptBatches++
	p.plan.KeptRecords += b.Records
}

func (p *planner) finish() SegmentPlan {
	for len(p.pending) > 0 {
		p.decide()
	}
	for _, b := range p.open {
		p.final(b)
	}
	if p.pos < p.plan.Size {
		next := int64(-1)
		if p.lim.HasNext {
			next = p.lim.Limit
		}
		p.plan.Damaged = append(p.plan.Damaged, DamagedRange{Pos: p.pos, End: p.plan.Size, PrevLast: p.prevLast, NextBase: next})
	}
	// Each dropped batch lies in a damaged range (it is not kept).
	slices.SortFunc(p.dropped, func(a, b DroppedBatch) int { return cmp.Compare(a.Pos, b.Pos) })
	r := 0
	for _, d := range p.dropped {
		for r < len(p.plan.Damaged) && p.plan.Damaged[r].End <= d.Pos {
			r++
		}
		if r < len(p.plan.Damaged) {
			p.plan.Damaged[r].Dropped = append(p.plan.Damaged[r].Dropped, d)
		}
	}
	return p.plan
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
