package fusefs

import (
	"fmt"
	"sort"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
)

// The first READ of a view that starts inside a batch (by-offset/N: N's
// batch) starts at its first record, from the chunk the measure of the
// records before it read: the LOOKUP's measure walks N's batch up to N
// (renderedBefore), keeps where N's record lies in it (startHint.at) and
// hands its reader over (spareReaders); the seek of the first READ takes
// both, so the batch is read, checked and walked once per open, not
// twice (docs/PERFORMANCE.md §6.5).

// startAt returns the recent renderedBefore answer whose view starts at
// rendered position rel of the segment, when its record's place in its
// batch is known (a seek to rel starts at that record).
func (x *segIndex) startAt(rel int64) (startHint, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, h := range x.mu.starts {
		if h.set && h.at.ok && h.r == rel {
			return h, true
		}
	}
	return startHint{}, false
}

// seekStart moves c, which a seek put at the batch start before rendered
// position rel of its segment, straight to the record that starts at rel
// when a recent renderedBefore answer knows where it lies in its batch,
// so that the records before it are not walked again: the batch's raw
// rendering starts there (takeStart).
func (c *cursor) seekStart(x *segIndex, rel int64) {
	hs, ok := x.startAt(rel)
	if !ok || hs.cp.fpos != c.fpos {
		return
	}
	c.pre, c.preAt, c.preStart = hs.at, c.fpos, c.next
	c.next += hs.r - hs.cp.rpos
}

// takeStart returns (and forgets) where the cursor starts in the batch at
// file position pos, if seekStart said so.
func (c *cursor) takeStart(pos int64) rawAt {
	pre := c.pre
	c.pre = rawAt{}
	if !pre.ok || c.preAt != pos {
		return rawAt{}
	}
	return pre
}

// startIn starts the cursor's raw batch b at pre (takeStart), whose
// bounds it checks against b.
func (c *cursor) startIn(b *record.Batch, pre rawAt) error {
	if pre.done > int(b.RecordCount) || pre.p > len(b.Raw)-record.HeaderSize {
		return fmt.Errorf("%w: batch of %d records, %d bytes: record %d at %d is past its end",
			engine.ErrCorrupt, b.RecordCount, b.Size(), pre.done, pre.p)
	}
	c.rawP, c.rawDone = pre.p, pre.done
	return nil
}

// indexGuesser is a segment whose offset index may name the batch holding
// an offset without a read (engine.Segment.IndexedBatch).
type indexGuesser interface {
	IndexedBatch(target int64) (pos, last int64, ok bool)
}

// batchOf returns the file position of the batch holding offset from (the
// first whose last offset is at or after it, FindOffset's answer). When
// the segment's offset index names a batch for it that starts a
// checkpoint (a batch of 64 KiB rendered or more: the one the measure
// reads first), that batch is read with rd, below scanned, and taken if
// it starts at or before from and ends where the index says: the read
// the measure needs anyway stands for FindOffset's header read.
func (x *segIndex) batchOf(rd *logChunk, from, scanned int64, cps []checkpoint) (int64, error) {
	seg := x.key.seg
	if ig, ok := seg.(indexGuesser); ok {
		if pos, last, ok := ig.IndexedBatch(from); ok && pos < scanned {
			i := sort.Search(len(cps), func(i int) bool { return cps[i].fpos >= pos })
			if i < len(cps) && cps[i].fpos == pos {
				b, err := rd.batch(seg, pos, scanned)
				if err == nil && b.Magic >= 2 && b.BaseOffset <= from && b.LastOffset() == last {
					return pos, nil
				}
			}
		}
	}
	return seg.FindOffset(from)
}
