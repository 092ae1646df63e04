package policies

import (
	"math"
	"time"

	"github.com/topicfs/topicfs/engine"
)

// Cleanable describes what the log cleaner may clean in one partition now,
// computed as Kafka's LogCleanerManager.cleanableOffsets and
// calculateCleanableBytes do. The cleanable (dirty) range is
// [FirstDirty, FirstUncleanable).
type Cleanable struct {
	// FirstDirty is the cleaner checkpoint clamped to [log start, log end]
	// (a checkpoint outside it restarts at the log start).
	FirstDirty int64 `json:"first_dirty_offset"`
	// FirstUncleanable is the smallest of the active segment's base offset
	// and the base of the first dirty segment holding a record younger than
	// min.compaction.lag.ms; always a segment boundary.
	FirstUncleanable int64 `json:"first_uncleanable_offset"`
	// CleanBytes is the size of the segments below FirstDirty.
	CleanBytes int64 `json:"clean_bytes"`
	// CleanableBytes is the size of the segments in the dirty range.
	CleanableBytes int64 `json:"cleanable_bytes"`
	// Ratio is CleanableBytes / (CleanBytes + CleanableBytes), 0 when empty.
	Ratio float64 `json:"dirty_ratio"`
	// MaxCompactionDelayMs is how long past max.compaction.lag.ms the oldest
	// dirty record has waited; > 0 makes the log eligible whatever its ratio.
	MaxCompactionDelayMs int64 `json:"max_compaction_delay_ms"`
	// LagHeld is the base offset of the first dirty segment held back by
	// min.compaction.lag.ms, or -1.
	LagHeld int64 `json:"min_lag_held_segment"`
	// ActiveBase is the base offset of the active segment (never cleaned).
	ActiveBase int64 `json:"active_segment_base"`
	// ActiveDirtyBytes is the size of the active segment when it is dirty.
	ActiveDirtyBytes int64 `json:"active_dirty_bytes"`
}

// Eligible reports whether the cleaner should clean this log now: its dirty
// ratio is above min.cleanable.dirty.ratio, or a record has waited past
// max.compaction.lag.ms and there is something cleanable.
func (c Cleanable) Eligible(cfg engine.Config) bool {
	if c.CleanableBytes <= 0 || c.FirstDirty >= c.FirstUncleanable {
		return false
	}
	return c.MaxCompactionDelayMs > 0 || c.Ratio > cfg.MinCleanableDirtyRatio
}

// CleanableRange computes the cleanable range and dirty ratio of a log from
// its segments (oldest first, the last or the one marked Active being the
// active segment), its log start and end offsets and the cleaner checkpoint
// firstDirty (-1 unknown). Pure: no disk.
func CleanableRange(segs []engine.SegmentInfo, cfg engine.Config, logStart, logEnd, firstDirty int64, now time.Time) Cleanable {
	c := Cleanable{LagHeld: -1, ActiveBase: logEnd}
	if firstDirty < logStart || firstDirty > logEnd {
		firstDirty = logStart
	}
	c.FirstDirty = firstDirty
	if len(segs) == 0 {
		c.FirstUncleanable = logEnd
		return c
	}
	active := activeSegment(segs)
	c.ActiveBase = segs[active].BaseOffset
	nonActive := segs[:active]
	nowMs := now.UnixMilli()

	// Dirty non-active segments: from the one holding firstDirty on.
	dirty := nonActive[segmentIndexFor(nonActive, firstDirty):]
	c.FirstUncleanable, c.LagHeld = firstUncleanable(nonActive, dirty, c.ActiveBase, cfg.MinCompactionLagMs, nowMs)

	for _, s := range segs {
		if s.BaseOffset < firstDirty {
			c.CleanBytes += s.Size
		}
	}
	lo := min(firstDirty, c.FirstUncleanable)
	start := segmentIndexFor(segs, lo)
	for _, s := range segs[start:] {
		if s.BaseOffset >= c.FirstUncleanable {
			break
		}
		c.CleanableBytes += s.Size
	}
	if total := c.CleanBytes + c.CleanableBytes; total > 0 {
		c.Ratio = float64(c.CleanableBytes) / float64(total)
	}
	if segs[active].NextOffset > firstDirty && segs[active].Size > 0 {
		c.ActiveDirtyBytes = segs[active].Size
	}
	c.MaxCompactionDelayMs = maxCompactionDelay(dirty, cfg.MaxCompactionLagMs, nowMs)
	return c
}

// activeSegment returns the index of the active segment: the one marked
// Active, else the last.
func activeSegment(segs []engine.SegmentInfo) int {
	for i, s := range segs {
		if s.Active {
			return i
		}
	}
	return len(segs) - 1
}

// firstUncleanable returns the first offset the cleaner must not clean: the
// active segment's base, or the base of the first dirty non-active segment
// holding a record younger than min.compaction.lag.ms (minLagMs), which it
// also returns as lagHeld (-1 none).
func firstUncleanable(nonActive, dirty []engine.SegmentInfo, activeBase, minLagMs, nowMs int64) (first, lagHeld int64) {
	first, lagHeld = activeBase, -1
	if lag := max(minLagMs, 0); lag > 0 {
		for _, s := range dirty {
			if s.MaxTimestamp > nowMs-lag {
				if s.BaseOffset < first {
					first = s.BaseOffset
					lagHeld = s.BaseOffset
				}
				break
			}
		}
	}
	// Round down to a segment boundary (already one, unless a future LSO
	// bound lands mid-segment).
	if first < activeBase && len(nonActive) > 0 {
		first = nonActive[segmentIndexFor(nonActive, first)].BaseOffset
	}
	return first, lagHeld
}

// maxCompactionDelay returns how long past max.compaction.lag.ms
// (maxLagMs) the oldest first-batch time of the dirty non-active segments
// lies, or 0.
func maxCompactionDelay(dirty []engine.SegmentInfo, maxLagMs, nowMs int64) int64 {
	earliest := int64(math.MaxInt64)
	for _, s := range dirty {
		if s.FirstBatchTime > 0 && s.FirstBatchTime < earliest {
			earliest = s.FirstBatchTime
		}
	}
	maxLag := max(maxLagMs, 0)
	cleanUntil := nowMs - maxLag
	if maxLag > nowMs { // avoid overflow: nothing can be that old
		cleanUntil = math.MinInt64
	}
	if earliest != math.MaxInt64 && earliest < cleanUntil {
		return cleanUntil - earliest
	}
	return 0
}

// segmentIndexFor returns the index of the segment holding off: the last
// segment whose base offset is <= off, or 0 when off is below every base.
func segmentIndexFor(segs []engine.SegmentInfo, off int64) int {
	i := 0
	for j, s := range segs {
		if s.BaseOffset <= off {
			i = j
		} else {
			break
		}
	}
	return i
}

// segSpan is what grouping needs of a segment: its offsets, its log size
// and the bytes of its offset and time index entries.
type segSpan struct {
	Base, Next, Size   int64
	OffsetIdx, TimeIdx int64
}

// groupSegments cuts segments (oldest first) into runs that each become one
// cleaned segment, as Kafka's groupSegmentsBySize does: a group's total log
// size stays within maxSize, the sums of its segments' offset index sizes
// and of their time index sizes each within maxIndexBytes
// (segment.index.bytes), and its offsets relative to its first base fit an
// int32 (an empty segment joins whatever its offsets).
func groupSegments(segs []segSpan, maxSize, maxIndexBytes int64) [][]segSpan {
	var groups [][]segSpan
	for len(segs) > 0 {
		g := segs[:1]
		size, oidx, tidx := segs[0].Size, segs[0].OffsetIdx, segs[0].TimeIdx
		segs = segs[1:]
		for len(segs) > 0 {
			next := segs[0]
			if size+next.Size > maxSize || oidx+next.OffsetIdx > maxIndexBytes || tidx+next.TimeIdx > maxIndexBytes {
				break
			}
			if next.Size > 0 && next.Next-1-g[0].Base > math.MaxInt32 {
				break
			}
			g = g[:len(g)+1]
			size, oidx, tidx = size+next.Size, oidx+next.OffsetIdx, tidx+next.TimeIdx
			segs = segs[1:]
		}
		groups = append(groups, g)
	}
	return groups
}
