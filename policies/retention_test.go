package policies

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/topicfs/topicfs/engine"
)

// segs builds SegmentInfos of the given sizes and max timestamps, 100
// offsets each; the last is the active segment.
func testSegs(sizes []int64, maxTs []int64) []engine.SegmentInfo {
	out := make([]engine.SegmentInfo, len(sizes))
	for i := range sizes {
		out[i] = engine.SegmentInfo{
			BaseOffset: int64(i) * 100, NextOffset: int64(i+1) * 100, Size: sizes[i],
			MaxTimestamp: maxTs[i], FirstBatchTime: maxTs[i], Active: i == len(sizes)-1,
		}
	}
	return out
}

func TestRetentionPlan(t *testing.T) {
	const mib = 1 << 20
	now := time.UnixMilli(1_000_000)
	cfg := func(mut func(*engine.Config)) engine.Config {
		c := engine.DefaultConfig()
		c.RetentionMs = -1
		if mut != nil {
			mut(&c)
		}
		return c
	}
	tests := []struct {
		name     string
		sizes    []int64
		maxTs    []int64
		cfg      engine.Config
		logStart int64
		want     int
		reason   string // substring
	}{
		{
			name:  "nothing configured keeps all",
			sizes: []int64{5 * mib, 5 * mib, 5 * mib}, maxTs: []int64{0, 0, 0},
			cfg: cfg(nil), logStart: -1, want: 0,
		},
		{
			name:  "operator scenario: 20 MiB over 10 MiB leaves at most 15 MiB",
			sizes: []int64{5 * mib, 5 * mib, 5 * mib, 5 * mib}, maxTs: []int64{1, 2, 3, 4},
			cfg: cfg(func(c *engine.Config) { c.RetentionBytes = 10 * mib }), logStart: -1,
			want: 2, reason: "retention.bytes=10485760",
		},
		{
			name:  "bytes: partial active counts toward total",
			sizes: []int64{5 * mib, 5 * mib, 5 * mib, 1 * mib}, maxTs: []int64{1, 2, 3, 4},
			cfg: cfg(func(c *engine.Config) { c.RetentionBytes = 10 * mib }), logStart: -1,
			want: 1,
		},
		{
			name:  "bytes: exactly at limit deletes nothing",
			sizes: []int64{5 * mib, 5 * mib}, maxTs: []int64{1, 2},
			cfg: cfg(func(c *engine.Config) { c.RetentionBytes = 10 * mib }), logStart: -1,
			want: 0,
		},
		{
			name:  "bytes: retention 0 takes the active segment too (Kafka rolls, then deletes)",
			sizes: []int64{5, 5, 5}, maxTs: []int64{1, 2, 3},
			cfg: cfg(func(c *engine.Config) { c.RetentionBytes = 0 }), logStart: -1,
			want: 3,
		},
		{
			name:  "bytes: a big oldest segment stops the scan",
			sizes: []int64{8 * mib, 1 * mib, 1 * mib, 5 * mib}, maxTs: []int64{1, 2, 3, 4},
			cfg: cfg(func(c *engine.Config) { c.RetentionBytes = 10 * mib }), logStart: -1,
			want: 0,
		},
		{
			name:  "time: older than retention.ms deleted, stops at first young",
			sizes: []int64{1, 1, 1, 1}, maxTs: []int64{1000, 999_000, 10, 999_999},
			cfg: cfg(func(c *engine.Config) { c.RetentionMs = 10_000 }), logStart: -1,
			want: 1, reason: "retention.ms=10000",
		},
		{
			name:  "time: exactly retention.ms old is kept",
			sizes: []int64{1, 1}, maxTs: []int64{990_000, 999_999},
			cfg: cfg(func(c *engine.Config) { c.RetentionMs = 10_000 }), logStart: -1,
			want: 0,
		},
		{
			name:  "time: future timestamp is never old",
			sizes: []int64{1, 1}, maxTs: []int64{5_000_000, 0},
			cfg: cfg(func(c *engine.Config) { c.RetentionMs = 0 }), logStart: -1,
			want: 0,
		},
		{
			name:  "log start breached",
			sizes: []int64{1, 1, 1, 1}, maxTs: []int64{1, 2, 3, 4},
			cfg: cfg(nil), logStart: 200,
			want: 2, reason: "log start offset 200",
		},
		{
			name:  "log start breached runs under compact too",
			sizes: []int64{1, 1, 1}, maxTs: []int64{1, 2, 3},
			cfg: cfg(func(c *engine.Config) { c.CleanupPolicy = "compact"; c.RetentionBytes = 0; c.RetentionMs = 0 }), logStart: 150,
			want: 1,
		},
		{
			name:  "compact only: size and time do not apply",
			sizes: []int64{5, 5, 5}, maxTs: []int64{1, 2, 3},
			cfg: cfg(func(c *engine.Config) { c.CleanupPolicy = "compact"; c.RetentionBytes = 0; c.RetentionMs = 0 }), logStart: -1,
			want: 0,
		},
		{
			name:  "compact,delete applies size",
			sizes: []int64{5, 5, 5}, maxTs: []int64{1, 2, 3},
			cfg: cfg(func(c *engine.Config) { c.CleanupPolicy = "compact,delete"; c.RetentionBytes = 5 }), logStart: -1,
			want: 2,
		},
		{
			name:  "passes add up: bytes then time on the rest",
			sizes: []int64{10, 1, 1, 1}, maxTs: []int64{999_999, 1, 999_999, 999_999},
			cfg: cfg(func(c *engine.Config) { c.RetentionBytes = 3; c.RetentionMs = 1000 }), logStart: -1,
			want: 2, reason: "retention.bytes=3",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, reason := RetentionPlan(testSegs(tt.sizes, tt.maxTs), tt.cfg, tt.logStart, now)
			assert.Equal(t, tt.want, n)
			if tt.reason != "" {
				assert.Contains(t, reason, tt.reason)
			}
			if n == 0 {
				assert.Empty(t, reason)
			}
		})
	}
}

// TestRetentionPlanActiveSegment: as in Kafka, every pass but the log start
// one may take the active segment, unless it is empty.
func TestRetentionPlanActiveSegment(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	cfg := func(mut func(*engine.Config)) engine.Config {
		c := engine.DefaultConfig()
		c.RetentionMs = -1
		if mut != nil {
			mut(&c)
		}
		return c
	}
	tests := []struct {
		name     string
		sizes    []int64
		maxTs    []int64
		cfg      engine.Config
		logStart int64
		want     int
		reason   string // substring
	}{
		{
			name:  "bytes: an empty active segment is never counted",
			sizes: []int64{5, 5, 0}, maxTs: []int64{1, 2, 3},
			cfg: cfg(func(c *engine.Config) { c.RetentionBytes = 0 }), logStart: -1,
			want: 2,
		},
		{
			name:  "time: an expired active segment goes too",
			sizes: []int64{1}, maxTs: []int64{0},
			cfg: cfg(func(c *engine.Config) { c.RetentionMs = 0 }), logStart: -1,
			want: 1, reason: "retention.ms=0",
		},
		{
			name:  "time: a young active segment stays",
			sizes: []int64{1, 1}, maxTs: []int64{0, 995_000},
			cfg: cfg(func(c *engine.Config) { c.RetentionMs = 10_000 }), logStart: -1,
			want: 1,
		},
		{
			name:  "time: an empty active segment stays",
			sizes: []int64{1, 0}, maxTs: []int64{0, 0},
			cfg: cfg(func(c *engine.Config) { c.RetentionMs = 0 }), logStart: -1,
			want: 1,
		},
		{
			name:  "log start never takes the active segment",
			sizes: []int64{1, 1}, maxTs: []int64{1, 2},
			cfg: cfg(nil), logStart: 10_000,
			want: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, reason := RetentionPlan(testSegs(tt.sizes, tt.maxTs), tt.cfg, tt.logStart, now)
			assert.Equal(t, tt.want, n)
			assert.Contains(t, reason, tt.reason)
		})
	}
}

func TestRetentionDeletableNoActiveFlag(t *testing.T) {
	// The last segment is the active one, flag or not: deleted when it
	// expired and holds bytes, kept when empty.
	segs := testSegs([]int64{5, 5}, []int64{0, 0})
	segs[1].Active = false
	c := engine.DefaultConfig()
	c.RetentionMs = 0
	n, _ := RetentionDeletable(segs, c, time.UnixMilli(100))
	assert.Equal(t, 2, n)
	segs[1].Size = 0
	n, _ = RetentionDeletable(segs, c, time.UnixMilli(100))
	assert.Equal(t, 1, n)
}

func TestDeleteEnd(t *testing.T) {
	segs := testSegs([]int64{5, 5, 5}, []int64{1, 2, 3})
	segs[2].NextOffset = 250
	assert.Equal(t, int64(100), DeleteEnd(segs, 1), "the next segment's base")
	assert.Equal(t, int64(200), DeleteEnd(segs, 2))
	assert.Equal(t, int64(250), DeleteEnd(segs, 3), "the log end offset with the active segment")
}

func TestHasPolicy(t *testing.T) {
	assert.True(t, HasPolicy("delete", "delete"))
	assert.True(t, HasPolicy("compact, delete", "delete"))
	assert.True(t, HasPolicy("compact,delete", "compact"))
	assert.False(t, HasPolicy("compact", "delete"))
	assert.False(t, HasPolicy("", "delete"))
}
