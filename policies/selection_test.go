package policies

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/topicfs/topicfs/engine"
)

func TestCleanableRange(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	base := func(mut func(*engine.Config)) engine.Config {
		c := engine.DefaultConfig()
		c.CleanupPolicy = "compact"
		if mut != nil {
			mut(&c)
		}
		return c
	}
	tests := []struct {
		name        string
		sizes       []int64
		maxTs       []int64
		cfg         engine.Config
		firstDirty  int64
		wantDirty   int64
		wantUnclean int64
		wantClean   int64
		wantBytes   int64
		wantRatio   float64
		eligible    bool
		lagHeld     int64
		delay       bool
	}{
		{
			name:  "never cleaned: all non-active dirty",
			sizes: []int64{10, 10, 10, 5}, maxTs: []int64{1, 2, 3, 4},
			cfg: base(nil), firstDirty: -1,
			wantDirty: 0, wantUnclean: 300, wantClean: 0, wantBytes: 30, wantRatio: 1, eligible: true, lagHeld: -1,
		},
		{
			name:  "half cleaned",
			sizes: []int64{10, 10, 10, 10, 5}, maxTs: []int64{1, 2, 3, 4, 5},
			cfg: base(nil), firstDirty: 200,
			wantDirty: 200, wantUnclean: 400, wantClean: 20, wantBytes: 20, wantRatio: 0.5, eligible: false, lagHeld: -1,
		},
		{
			name:  "ratio above minimum",
			sizes: []int64{10, 10, 10, 10, 5}, maxTs: []int64{1, 2, 3, 4, 5},
			cfg: base(nil), firstDirty: 100,
			wantDirty: 100, wantUnclean: 400, wantClean: 10, wantBytes: 30, wantRatio: 0.75, eligible: true, lagHeld: -1,
		},
		{
			name:  "dirty offset mid-segment counts that segment on both sides",
			sizes: []int64{10, 10, 5}, maxTs: []int64{1, 2, 3},
			cfg: base(nil), firstDirty: 150,
			wantDirty: 150, wantUnclean: 200, wantClean: 20, wantBytes: 10, wantRatio: 10.0 / 30, eligible: false, lagHeld: -1,
		},
		{
			name:  "everything dirty in the active segment",
			sizes: []int64{10, 10, 5}, maxTs: []int64{1, 2, 3},
			cfg: base(nil), firstDirty: 200,
			wantDirty: 200, wantUnclean: 200, wantClean: 20, wantBytes: 0, wantRatio: 0, eligible: false, lagHeld: -1,
		},
		{
			name:  "checkpoint past log end restarts at log start",
			sizes: []int64{10, 10, 5}, maxTs: []int64{1, 2, 3},
			cfg: base(nil), firstDirty: 10_000,
			wantDirty: 0, wantUnclean: 200, wantClean: 0, wantBytes: 20, wantRatio: 1, eligible: true, lagHeld: -1,
		},
		{
			name:  "min.compaction.lag.ms holds young segments",
			sizes: []int64{10, 10, 10, 5}, maxTs: []int64{1, 999_500, 3, 999_999},
			cfg: base(func(c *engine.Config) { c.MinCompactionLagMs = 1000 }), firstDirty: -1,
			wantDirty: 0, wantUnclean: 100, wantClean: 0, wantBytes: 10, wantRatio: 1, eligible: true, lagHeld: 100,
		},
		{
			name:  "min.compaction.lag.ms holds the first dirty segment",
			sizes: []int64{10, 10, 5}, maxTs: []int64{999_900, 2, 3},
			cfg: base(func(c *engine.Config) { c.MinCompactionLagMs = 1000 }), firstDirty: -1,
			wantDirty: 0, wantUnclean: 0, wantClean: 0, wantBytes: 0, wantRatio: 0, eligible: false, lagHeld: 0,
		},
		{
			name:  "max.compaction.lag.ms makes a low ratio eligible",
			sizes: []int64{100, 100, 1, 5}, maxTs: []int64{1, 2, 3, 4},
			cfg: base(func(c *engine.Config) { c.MaxCompactionLagMs = 500_000 }), firstDirty: 200,
			wantDirty: 200, wantUnclean: 300, wantClean: 200, wantBytes: 1, wantRatio: 1.0 / 201, eligible: true, lagHeld: -1, delay: true,
		},
		{
			name:  "max.compaction.lag.ms not yet reached",
			sizes: []int64{100, 100, 1, 5}, maxTs: []int64{1, 2, 999_000, 4},
			cfg: base(func(c *engine.Config) { c.MaxCompactionLagMs = 500_000 }), firstDirty: 200,
			wantDirty: 200, wantUnclean: 300, wantClean: 200, wantBytes: 1, wantRatio: 1.0 / 201, eligible: false, lagHeld: -1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			segs := testSegs(tt.sizes, tt.maxTs)
			logEnd := segs[len(segs)-1].NextOffset
			c := CleanableRange(segs, tt.cfg, 0, logEnd, tt.firstDirty, now)
			assert.Equal(t, tt.wantDirty, c.FirstDirty, "first dirty")
			assert.Equal(t, tt.wantUnclean, c.FirstUncleanable, "first uncleanable")
			assert.Equal(t, tt.wantClean, c.CleanBytes, "clean bytes")
			assert.Equal(t, tt.wantBytes, c.CleanableBytes, "cleanable bytes")
			assert.InDelta(t, tt.wantRatio, c.Ratio, 1e-9, "ratio")
			assert.Equal(t, tt.eligible, c.Eligible(tt.cfg), "eligible")
			assert.Equal(t, tt.lagHeld, c.LagHeld, "lag held")
			assert.Equal(t, tt.delay, c.MaxCompactionDelayMs > 0, "max lag delay")
		})
	}
}

func TestGroupSegments(t *testing.T) {
	span := func(base, next, size int64) segSpan {
		return segSpan{Base: base, Next: next, Size: size, OffsetIdx: 8 * (size/4096 + 1), TimeIdx: 12 * (size/4096 + 1)}
	}
	idx := func(base, next, size, oidx, tidx int64) segSpan {
		return segSpan{Base: base, Next: next, Size: size, OffsetIdx: oidx, TimeIdx: tidx}
	}
	tests := []struct {
		name     string
		segs     []segSpan
		maxSize  int64
		maxIndex int64
		want     [][]int64 // bases per group
	}{
		{"all fit", []segSpan{span(0, 10, 10), span(10, 20, 10), span(20, 30, 10)}, 100, 1 << 20, [][]int64{{0, 10, 20}}},
		{"size splits", []segSpan{span(0, 10, 60), span(10, 20, 40), span(20, 30, 10)}, 100, 1 << 20, [][]int64{{0, 10}, {20}}},
		{"big one alone", []segSpan{span(0, 10, 200), span(10, 20, 10)}, 100, 1 << 20, [][]int64{{0}, {10}}},
		{"index limit splits", []segSpan{span(0, 10, 4096), span(10, 20, 4096)}, 1 << 30, 36, [][]int64{{0}, {10}}},
		{"offset range splits", []segSpan{span(0, 10, 1), span(1<<31, 1<<31+5, 1)}, 100, 1 << 20, [][]int64{{0}, {1 << 31}}},
		{"empty segment joins despite offsets", []segSpan{span(0, 10, 1), span(1<<31, 1<<31, 0)}, 100, 1 << 20, [][]int64{{0, 1 << 31}}},
		// Real index sizes, not estimates from the log size: sparse indexes
		// (a large index.interval.bytes) let big segments group, and full
		// ones split small segments.
		{"sparse indexes group", []segSpan{idx(0, 10, 40960, 8, 12), idx(10, 20, 40960, 8, 12), idx(20, 30, 40960, 8, 12)}, 1 << 30, 36, [][]int64{{0, 10, 20}}},
		{"offset index sum splits", []segSpan{idx(0, 10, 10, 16, 0), idx(10, 20, 10, 16, 0), idx(20, 30, 10, 16, 0)}, 1 << 30, 40, [][]int64{{0, 10}, {20}}},
		{"time index sum splits", []segSpan{idx(0, 10, 10, 8, 24), idx(10, 20, 10, 8, 24)}, 1 << 30, 40, [][]int64{{0}, {10}}},
		{"sum at the limit joins", []segSpan{idx(0, 10, 10, 8, 20), idx(10, 20, 10, 8, 20)}, 1 << 30, 40, [][]int64{{0, 10}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			groups := groupSegments(tt.segs, tt.maxSize, tt.maxIndex)
			var got [][]int64
			for _, g := range groups {
				var bases []int64
				for _, s := range g {
					bases = append(bases, s.Base)
				}
				got = append(got, bases)
			}
			assert.Equal(t, tt.want, got)
		})
	}
}
