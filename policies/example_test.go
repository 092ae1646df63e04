package policies_test

import (
	"fmt"
	"time"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/policies"
)

// Retention decides from segment descriptions alone; the engine then does
// the file work with Partition.DeleteOldestSegments.
func ExampleRetentionPlan() {
	const mib = 1 << 20
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := engine.DefaultConfig()
	cfg.RetentionBytes = 10 * mib // keep about 10 MiB
	segs := []engine.SegmentInfo{
		{BaseOffset: 0, NextOffset: 5000, Size: 5 * mib, MaxTimestamp: now.UnixMilli()},
		{BaseOffset: 5000, NextOffset: 10000, Size: 5 * mib, MaxTimestamp: now.UnixMilli()},
		{BaseOffset: 10000, NextOffset: 15000, Size: 5 * mib, MaxTimestamp: now.UnixMilli()},
		{BaseOffset: 15000, NextOffset: 16000, Size: 1 * mib, MaxTimestamp: now.UnixMilli(), Active: true},
	}
	n, reason := policies.RetentionPlan(segs, cfg, 0, now)
	fmt.Println(n, reason)
	// Output: 1 retention.bytes=10485760: log size 16777216, 1 segment(s) of 5242880 bytes over
}

// The cleaner compacts a log once its dirty share passes
// min.cleanable.dirty.ratio.
func ExampleCleanableRange() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cfg := engine.DefaultConfig()
	cfg.CleanupPolicy = "compact"
	segs := []engine.SegmentInfo{
		{BaseOffset: 0, NextOffset: 100, Size: 1000},   // cleaned before
		{BaseOffset: 100, NextOffset: 200, Size: 3000}, // dirty
		{BaseOffset: 200, NextOffset: 250, Size: 500, Active: true},
	}
	c := policies.CleanableRange(segs, cfg, 0, 250, 100, now)
	fmt.Printf("dirty [%d, %d) ratio %.2f eligible %v\n", c.FirstDirty, c.FirstUncleanable, c.Ratio, c.Eligible(cfg))
	// Output: dirty [100, 200) ratio 0.75 eligible true
}
