package policies

import (
	"fmt"
	"strings"
	"time"

	"github.com/topicfs/topicfs/engine"
)

// ExplainRetention says in plain words why the oldest segment is still kept
// (or that it is due for deletion). Pure: no disk.
func ExplainRetention(segs []engine.SegmentInfo, cfg engine.Config, logStart int64, now time.Time) string {
	if len(segs) == 0 {
		return "the log has no segments"
	}
	oldest := segs[0]
	nowMs := now.UnixMilli()
	if len(segs) == 1 && oldest.Size == 0 {
		return fmt.Sprintf("the log is empty: its only segment (base offset %d) is the active one and holds no records", oldest.BaseOffset)
	}
	if n, reason := RetentionPlan(segs, cfg, logStart, now); n > 0 {
		msg := fmt.Sprintf("the oldest %d segment(s) are due for deletion at the next retention check (%s)", n, reason)
		if n == len(segs) {
			msg += "; the active segment among them is rolled first"
		}
		return msg
	}
	if !HasPolicy(cfg.CleanupPolicy, "delete") {
		return fmt.Sprintf("cleanup.policy=%s: retention.bytes and retention.ms do not apply; the cleaner compacts the log instead of deleting segments", cfg.CleanupPolicy)
	}
	var why []string
	if cfg.RetentionBytes < 0 {
		why = append(why, "retention.bytes is -1 (no size limit)")
	} else {
		var total int64
		for _, s := range segs {
			total += s.Size
		}
		why = append(why, fmt.Sprintf("the log holds %d bytes, and deleting the oldest segment (%d bytes) would take it below retention.bytes=%d",
			total, oldest.Size, cfg.RetentionBytes))
	}
	switch {
	case cfg.RetentionMs < 0:
		why = append(why, "retention.ms is -1 (kept forever)")
	case oldest.MaxTimestamp > nowMs:
		why = append(why, fmt.Sprintf("its largest timestamp %s is in the future, so retention.ms=%d counts from then (it expires after %s)",
			fmtMs(oldest.MaxTimestamp), cfg.RetentionMs, fmtMs(satAdd(oldest.MaxTimestamp, cfg.RetentionMs))))
	default:
		why = append(why, fmt.Sprintf("its largest timestamp %s is younger than retention.ms=%d (it expires after %s)",
			fmtMs(oldest.MaxTimestamp), cfg.RetentionMs, fmtMs(satAdd(oldest.MaxTimestamp, cfg.RetentionMs))))
	}
	if len(segs) == 1 {
		return fmt.Sprintf("the oldest segment (base offset %d) is the active segment, kept: %s (retention deletes it like any other once it qualifies, rolling first)",
			oldest.BaseOffset, strings.Join(why, "; "))
	}
	return fmt.Sprintf("the oldest segment (base offset %d) is kept: %s", oldest.BaseOffset, strings.Join(why, "; "))
}

// ExplainCleaner says in plain words why the log is or is not being cleaned.
// last is the last completed cleaning (nil none). Pure: no disk.
func ExplainCleaner(c Cleanable, cfg engine.Config, last *CleaningRun, cleaning bool, now time.Time) []string {
	if !HasPolicy(cfg.CleanupPolicy, "compact") {
		return []string{fmt.Sprintf("cleanup.policy=%s: the log is not compacted", cfg.CleanupPolicy)}
	}
	var out []string
	switch {
	case cleaning:
		out = append(out, "the log is being cleaned now")
	case c.Eligible(cfg) && c.MaxCompactionDelayMs > 0 && c.Ratio <= cfg.MinCleanableDirtyRatio:
		out = append(out, fmt.Sprintf("a record has waited %d ms past max.compaction.lag.ms=%d: cleaning is due", c.MaxCompactionDelayMs, cfg.MaxCompactionLagMs))
	case c.Eligible(cfg):
		out = append(out, fmt.Sprintf("dirty ratio %.3f is above min.cleanable.dirty.ratio=%g: cleaning is due", c.Ratio, cfg.MinCleanableDirtyRatio))
	case c.LagHeld >= 0 && c.CleanableBytes == 0:
		out = append(out, fmt.Sprintf("not cleaned: the dirty segment at base offset %d holds records younger than min.compaction.lag.ms=%d", c.LagHeld, cfg.MinCompactionLagMs))
	case c.CleanableBytes == 0 && c.ActiveDirtyBytes > 0:
		out = append(out, fmt.Sprintf("not cleaned: everything dirty sits in the active segment (base offset %d, %d bytes), which is never cleaned; it rolls when an append finds it past segment.bytes=%d or segment.ms=%d",
			c.ActiveBase, c.ActiveDirtyBytes, cfg.SegmentBytes, cfg.SegmentMs))
	case c.CleanableBytes == 0:
		out = append(out, fmt.Sprintf("not cleaned: nothing is dirty (clean up to offset %d)", c.FirstDirty))
	default:
		out = append(out, fmt.Sprintf("not cleaned: dirty ratio %.3f is not above min.cleanable.dirty.ratio=%g", c.Ratio, cfg.MinCleanableDirtyRatio))
	}
	if c.LagHeld >= 0 && c.CleanableBytes > 0 {
		out = append(out, fmt.Sprintf("cleaning stops before base offset %d: its records are younger than min.compaction.lag.ms=%d", c.LagHeld, cfg.MinCompactionLagMs))
	}
	if last != nil && last.TombstonesKept > 0 && last.EarliestHorizonMs >= 0 {
		if last.EarliestHorizonMs > now.UnixMilli() {
			out = append(out, fmt.Sprintf("%d tombstone(s) or transaction marker(s) are kept until their delete horizon (the earliest %s; delete.retention.ms=%d)",
				last.TombstonesKept, fmtMs(last.EarliestHorizonMs), cfg.DeleteRetentionMs))
		} else {
			out = append(out, fmt.Sprintf("%d tombstone(s) or marker(s) passed their delete horizon; a later cleaning removes them", last.TombstonesKept))
		}
	}
	if last != nil && last.OpenTxnOffset >= 0 {
		out = append(out, fmt.Sprintf("the last cleaning stopped at offset %d, where a transaction is still open (no COMMIT or ABORT marker yet)", last.OpenTxnOffset))
	}
	if last != nil && last.MapFull {
		out = append(out, fmt.Sprintf("the last cleaning stopped at offset %d because the offset map (log.cleaner.dedupe.buffer.size) was full; the next one continues from there", last.EndOffset))
	}
	return out
}

func fmtMs(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }

// satAdd adds without overflowing past MaxInt64.
func satAdd(a, b int64) int64 {
	if b > 0 && a > (1<<63-1)-b {
		return 1<<63 - 1
	}
	return a + b
}
