package policies

import (
	"fmt"
	"strings"
	"time"

	"github.com/topicfs/topicfs/engine"
)

// Retention follows Kafka's UnifiedLog.deleteOldSegments. With cleanup.policy
// containing "delete", three passes run in order, each over what the previous
// pass left:
//
//  1. log start breached: a segment goes when the next segment's base offset
//     is at or below the log start offset;
//  2. retention.bytes: with diff = total size − retention.bytes, a segment
//     goes while diff − its size ≥ 0 (diff shrinks by each deleted segment);
//  3. retention.ms: a segment goes when now − its largest timestamp exceeds
//     retention.ms.
//
// Without "delete" only pass 1 runs. Every pass scans from the oldest segment
// and stops at the first segment it may not delete. As in Kafka
// (LocalLog.deletableSegments), the active segment may be deleted too,
// unless it is empty: the engine then rolls first, so the new active
// segment is empty and starts at the old log end offset. So a quiet topic
// expires retention.ms after its last record, whatever segment.ms says. A
// negative retention.ms or retention.bytes means unlimited.

// HasPolicy reports whether a cleanup.policy value ("delete", "compact",
// "compact,delete") contains policy.
func HasPolicy(cleanupPolicy, policy string) bool {
	for _, p := range strings.Split(cleanupPolicy, ",") {
		if strings.TrimSpace(p) == policy {
			return true
		}
	}
	return false
}

// RetentionDeletable returns how many of the oldest segments retention
// deletes now, and why, running passes 2 and 3 (the log start offset is not
// part of a SegmentInfo; RetentionPlan runs all three). Pure: no disk.
func RetentionDeletable(segs []engine.SegmentInfo, cfg engine.Config, now time.Time) (n int, reason string) {
	return RetentionPlan(segs, cfg, -1, now)
}

// RetentionPlan returns how many of the oldest segments retention deletes now
// and a reason naming each pass that fired, running the three passes with
// logStart as the log start offset (-1 skips pass 1). segs is oldest first,
// the last one the active segment, which is counted only when it holds
// bytes (Kafka's isLastSegmentAndEmpty).
func RetentionPlan(segs []engine.SegmentInfo, cfg engine.Config, logStart int64, now time.Time) (n int, reason string) {
	var reasons []string
	nowMs := now.UnixMilli()

	// Pass 1: log start offset breached.
	if logStart >= 0 {
		k := deletableWhile(segs, func(i int, _ engine.SegmentInfo) bool {
			return i+1 < len(segs) && segs[i+1].BaseOffset <= logStart
		})
		if k > 0 {
			reasons = append(reasons, fmt.Sprintf("log start offset %d is past %d segment(s)", logStart, k))
			n += k
		}
	}
	if !HasPolicy(cfg.CleanupPolicy, "delete") {
		return n, strings.Join(reasons, "; ")
	}

	// Pass 2: retention.bytes over what pass 1 left.
	if rb := cfg.RetentionBytes; rb >= 0 {
		rest := segs[n:]
		var total int64
		for _, s := range rest {
			total += s.Size
		}
		if total >= rb {
			diff := total - rb
			var freed int64
			k := deletableWhile(rest, func(_ int, s engine.SegmentInfo) bool {
				if diff-s.Size >= 0 {
					diff -= s.Size
					freed += s.Size
					return true
				}
				return false
			})
			if k > 0 {
				reasons = append(reasons, fmt.Sprintf("retention.bytes=%d: log size %d, %d segment(s) of %d bytes over", rb, total, k, freed))
				n += k
			}
		}
	}

	// Pass 3: retention.ms over what passes 1 and 2 left.
	if rm := cfg.RetentionMs; rm >= 0 {
		k := deletableWhile(segs[n:], func(_ int, s engine.SegmentInfo) bool {
			return nowMs-s.MaxTimestamp > rm
		})
		if k > 0 {
			reasons = append(reasons, fmt.Sprintf("retention.ms=%d: %d segment(s) with largest timestamp older than %s", rm, k,
				time.UnixMilli(nowMs-rm).UTC().Format(time.RFC3339Nano)))
			n += k
		}
	}
	return n, strings.Join(reasons, "; ")
}

// deletableWhile counts segments from the oldest while pred holds, stopping
// at the first one it rejects and at the last segment when it is empty.
func deletableWhile(segs []engine.SegmentInfo, pred func(i int, s engine.SegmentInfo) bool) int {
	n := 0
	for i, s := range segs {
		if i == len(segs)-1 && s.Size == 0 {
			break
		}
		if !pred(i, s) {
			break
		}
		n++
	}
	return n
}

// DeleteEnd is the offset below which the oldest n segments of segs hold
// every record: the next segment's base offset, or the log end offset when
// the active segment is among them. Passed to Partition.DeleteSegmentsBelow,
// it deletes what RetentionPlan planned, and not the records an append added
// to the active segment since.
func DeleteEnd(segs []engine.SegmentInfo, n int) int64 {
	if n < len(segs) {
		return segs[n].BaseOffset
	}
	return segs[len(segs)-1].NextOffset
}
