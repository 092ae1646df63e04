package fusefs

import (
	"fmt"

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
