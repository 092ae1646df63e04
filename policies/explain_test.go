package policies

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
)

func TestExplainRetention(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	cfg := func(mut func(*engine.Config)) engine.Config {
		c := engine.DefaultConfig()
		mut(&c)
		return c
	}
	tests := []struct {
		name  string
		segs  []engine.SegmentInfo
		cfg   engine.Config
		wants []string
	}{
		{"active only", testSegs([]int64{10}, []int64{5}), cfg(func(c *engine.Config) {}),
			[]string{"is the active segment", "younger than retention.ms=604800000", "retention deletes it like any other"}},
		{"active in the future", testSegs([]int64{10}, []int64{5_000_000}), cfg(func(c *engine.Config) {}),
			[]string{"is the active segment", "in the future"}},
		{"active only, expired", testSegs([]int64{10}, []int64{5}), cfg(func(c *engine.Config) { c.RetentionMs = 10 }),
			[]string{"the oldest 1 segment(s) are due", "the active segment among them is rolled first"}},
		{"empty", testSegs([]int64{0}, []int64{5}), cfg(func(c *engine.Config) { c.RetentionMs = 10 }),
			[]string{"the log is empty"}},
		{"forever", testSegs([]int64{10, 10}, []int64{5, 6}), cfg(func(c *engine.Config) { c.RetentionMs = -1 }),
			[]string{"retention.ms is -1", "retention.bytes is -1"}},
		{"future timestamp", testSegs([]int64{10, 10}, []int64{5_000_000, 6}), cfg(func(c *engine.Config) { c.RetentionMs = 10 }),
			[]string{"in the future", "retention.ms=10"}},
		{"young", testSegs([]int64{10, 10}, []int64{999_000, 6}), cfg(func(c *engine.Config) { c.RetentionMs = 10_000 }),
			[]string{"younger than retention.ms=10000"}},
		{"bytes", testSegs([]int64{10, 10}, []int64{999_000, 6}), cfg(func(c *engine.Config) { c.RetentionBytes = 15 }),
			[]string{"below retention.bytes=15"}},
		{"due", testSegs([]int64{10, 10}, []int64{5, 6}), cfg(func(c *engine.Config) { c.RetentionMs = 10 }),
			[]string{"due for deletion", "retention.ms=10"}},
		{"compact", testSegs([]int64{10, 10}, []int64{5, 6}), cfg(func(c *engine.Config) { c.CleanupPolicy = "compact"; c.RetentionMs = 10 }),
			[]string{"cleanup.policy=compact"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ExplainRetention(tt.segs, tt.cfg, 0, now)
			for _, w := range tt.wants {
				assert.Contains(t, got, w)
			}
		})
	}
	assert.Equal(t, "the log has no segments", ExplainRetention(nil, engine.DefaultConfig(), 0, now))
}

func TestExplainCleaner(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	compact := engine.DefaultConfig()
	compact.CleanupPolicy = "compact"
	lag := compact
	lag.MinCompactionLagMs = 1000
	maxLag := compact
	maxLag.MaxCompactionLagMs = 500_000
	tests := []struct {
		name     string
		sizes    []int64
		maxTs    []int64
		cfg      engine.Config
		dirty    int64
		last     *CleaningRun
		cleaning bool
		wants    []string
	}{
		{"delete policy", []int64{10, 5}, []int64{1, 2}, engine.DefaultConfig(), -1, nil, false, []string{"not compacted"}},
		{"due", []int64{10, 5}, []int64{1, 2}, compact, -1, nil, false, []string{"above min.cleanable.dirty.ratio=0.5"}},
		{"in progress", []int64{10, 5}, []int64{1, 2}, compact, -1, nil, true, []string{"being cleaned now"}},
		{"below ratio", []int64{10, 10, 10, 5}, []int64{1, 2, 3, 4}, compact, 200, nil, false, []string{"not above min.cleanable.dirty.ratio"}},
		{"all dirty in active", []int64{10, 5}, []int64{1, 2}, compact, 100, nil, false, []string{"everything dirty sits in the active segment"}},
		{"lag", []int64{10, 5}, []int64{999_500, 2}, lag, -1, nil, false, []string{"younger than min.compaction.lag.ms=1000"}},
		{"max lag", []int64{100, 100, 1, 5}, []int64{1, 2, 3, 4}, maxLag, 200, nil, false, []string{"past max.compaction.lag.ms"}},
		{"tombstones", []int64{10, 5}, []int64{1, 2}, compact, 100,
			&CleaningRun{TombstonesKept: 3, EarliestHorizonMs: 2_000_000}, false,
			[]string{"3 tombstone(s)", "kept until their delete horizon"}},
		{"map full", []int64{10, 5}, []int64{1, 2}, compact, 100,
			&CleaningRun{MapFull: true, EndOffset: 42, EarliestHorizonMs: -1}, false,
			[]string{"stopped at offset 42"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			segs := testSegs(tt.sizes, tt.maxTs)
			c := CleanableRange(segs, tt.cfg, 0, segs[len(segs)-1].NextOffset, tt.dirty, now)
			got := ExplainCleaner(c, tt.cfg, tt.last, tt.cleaning, now)
			require.NotEmpty(t, got)
			all := ""
			for _, g := range got {
				all += g + "\n"
			}
			for _, w := range tt.wants {
				assert.Contains(t, all, w)
			}
		})
	}
}

func TestPartitionStateJSON(t *testing.T) {
	st := PartitionState{Topic: "t", Partition: 1, DirtyRatio: 0.25,
		LastCleaning: &CleaningRun{BytesIn: 10, EarliestHorizonMs: -1}, Explanations: []string{"x"}}
	b, err := json.Marshal(st)
	require.NoError(t, err)
	s := string(b)
	for _, k := range []string{`"dirty_ratio":0.25`, `"first_dirty_offset"`, `"last_cleaning":{`, `"bytes_in":10`, `"segments_deleted"`, `"explanations":["x"]`} {
		assert.Contains(t, s, k)
	}
	assert.NotContains(t, s, "last_retention_check", "zero times are omitted")
}
