package engine

import (
	"fmt"
	"math/big"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/vfs"
)

// ConfigRanges is every numeric setting with the range it accepts, written
// out (not read from the settings table) so that a changed bound fails here.
var configRanges = []struct{ name, min, max string }{
	{"segment.bytes", "14", "2147483647"},
	{"segment.ms", "1", "9223372036854775807"},
	{"segment.jitter.ms", "0", "9223372036854775807"},
	{"segment.index.bytes", "12", "2147483647"},
	{"index.interval.bytes", "0", "2147483647"},
	{"retention.ms", "-1", "9223372036854775807"},
	{"retention.bytes", "-9223372036854775808", "9223372036854775807"},
	{"retention.check.interval.ms", "1", "9223372036854775807"},
	{"min.cleanable.dirty.ratio", "0", "1"},
	{"delete.retention.ms", "0", "9223372036854"},
	{"min.compaction.lag.ms", "0", "9223372036854775807"},
	{"max.compaction.lag.ms", "1", "9223372036854775807"},
	{"file.delete.delay.ms", "0", "9223372036854"},
	{"flush.messages", "1", "9223372036854775807"},
	{"flush.ms", "0", "9223372036854775807"},
	{"max.message.bytes", "0", "2147483647"},
	{"num.partitions", "1", "10000"},
	{"log.cleaner.threads", "0", "32"},
	{"log.cleaner.dedupe.buffer.size", "1048576", "68719476704"},
	{"log.cleaner.io.buffer.load.factor", "0 (excluded)", "1"},
	{"log.index.mapped.max.segments", "1", "16384"},
	{"batch.size", "0", "67108864"},
	{"linger.ms", "0", "9223372036854"},
	{"key.index.memory.bytes", "16384", "68719476736"},
}

// rangeProbe is one value tried against a setting's bounds.
type rangeProbe struct {
	value string
	ok    bool
}

// probes returns the values just inside and just outside min and max. An
// integer one past int64 must fail too (it does not parse); the ratio is
// probed a hundredth outside.
func probes(name, min, max string) []rangeProbe {
	if name == "min.cleanable.dirty.ratio" {
		return []rangeProbe{{"0", true}, {"-0.01", false}, {"1", true}, {"1.01", false}}
	}
	if name == "log.cleaner.io.buffer.load.factor" {
		return []rangeProbe{{"0", false}, {"-0.01", false}, {"0.01", true}, {"1", true}, {"1.01", false}, {"NaN", false}}
	}
	lo, _ := new(big.Int).SetString(min, 10)
	hi, _ := new(big.Int).SetString(max, 10)
	one := big.NewInt(1)
	return []rangeProbe{
		{lo.String(), true},
		{new(big.Int).Add(lo, one).String(), true},
		{new(big.Int).Sub(lo, one).String(), false},
		{hi.String(), true},
		{new(big.Int).Sub(hi, one).String(), true},
		{new(big.Int).Add(hi, one).String(), false},
	}
}

// TestConfigRanges: every numeric setting is in the table, SettingRange
// says the same, and Set accepts the values at each bound and refuses one
// past it with an error naming the setting and the bound.
func TestConfigRanges(t *testing.T) {
	listed := map[string]bool{}
	for _, r := range configRanges {
		listed[r.name] = true
	}
	for _, name := range ConfigNames() {
		_, numeric := SettingRange(name)
		assert.Equal(t, numeric, listed[name], "%s: numeric settings and configRanges differ", name)
	}
	for _, r := range configRanges {
		got, ok := SettingRange(r.name)
		require.True(t, ok, r.name)
		assert.Equal(t, r.min+" to "+r.max, got, r.name)
		for _, p := range probes(r.name, r.min, r.max) {
			t.Run(fmt.Sprintf("%s=%s", r.name, p.value), func(t *testing.T) {
				c := DefaultConfig()
				err := c.Set(r.name, p.value)
				if p.ok {
					require.NoError(t, err)
					v, _ := c.Get(r.name)
					assert.Equal(t, p.value, v)
					return
				}
				require.ErrorIs(t, err, ErrInvalidConfig)
				assert.Contains(t, err.Error(), r.name)
				assert.Equal(t, DefaultConfig(), c, "unchanged on error")
			})
		}
	}
}

// TestAlterConfigRanges: a topic's config change (what a write to its
// config file runs) takes the values at each bound of every topic setting
// and refuses one past it, changing nothing.
func TestAlterConfigRanges(t *testing.T) {
	d, err := OpenLogDir(vfs.NewMem(), "/data", ldOpts())
	require.NoError(t, err)
	defer d.Close()
	topic, err := d.CreateTopic("ranges", 1)
	require.NoError(t, err)
	for _, r := range configRanges {
		if !IsTopicSetting(r.name) {
			continue
		}
		for _, p := range probes(r.name, r.min, r.max) {
			if r.name == "num.partitions" {
				continue // a partition count, not an override: TestAddPartitionsLimit
			}
			before := topic.Config()
			err := topic.AlterConfig(map[string]string{r.name: p.value})
			if p.ok {
				assert.NoError(t, err, "%s=%s", r.name, p.value)
				continue
			}
			assert.ErrorIs(t, err, ErrInvalidConfig, "%s=%s", r.name, p.value)
			assert.Equal(t, before, topic.Config(), "%s=%s changed the config", r.name, p.value)
		}
	}
}

// TestAddPartitionsLimit: a topic grows to MaxPartitions, not past it.
func TestAddPartitionsLimit(t *testing.T) {
	d, err := OpenLogDir(vfs.NewMem(), "/data", ldOpts())
	require.NoError(t, err)
	defer d.Close()
	topic, err := d.CreateTopic("wide", 1)
	require.NoError(t, err)
	assert.ErrorIs(t, topic.AddPartitions(MaxPartitions+1), ErrInvalidConfig)
	assert.Equal(t, 1, topic.NumPartitions())
	require.NoError(t, topic.AddPartitions(3))
	assert.Equal(t, 3, topic.NumPartitions())

	c := DefaultConfig()
	require.NoError(t, c.Set("num.partitions", "10000"))
	assert.ErrorIs(t, c.Set("num.partitions", "10001"), ErrInvalidConfig)
}

// TestCheckCleanerMemory: a thread's share of the dedupe buffer stays within
// 2 GiB - 1, and the offset maps (the buffer plus a tag byte per 24-byte
// entry) within half of the machine's memory.
func TestCheckCleanerMemory(t *testing.T) {
	const gib = int64(1) << 30
	dm := func(threads, buffer int64) uint64 {
		c := DefaultConfig()
		c.CleanerThreads, c.CleanerDedupeBufferSize = threads, buffer
		return uint64(c.DedupeMemory())
	}
	tests := []struct {
		threads, buffer int64
		mem             uint64
		ok              bool
	}{
		{1, MaxDedupeBytesPerThread, 0, true},
		{1, MaxDedupeBytesPerThread + 1, 0, false},
		{0, MaxDedupeBytesPerThread + 1, 0, true}, // 0 threads: no cleaner, no map
		{0, MaxDedupeBufferSize, 1 << 30, true},
		{2, 2 * MaxDedupeBytesPerThread, 0, true},
		{2, 2*MaxDedupeBytesPerThread + 2, 0, false},
		{32, MaxDedupeBufferSize, 0, true},
		{1, 4 * gib, 16 * uint64(gib), false},   // per thread
		{8, 8 * gib, 2 * dm(8, 8*gib), true},    // exactly half
		{8, 8 * gib, 2*dm(8, 8*gib) - 2, false}, // past half
		{8, 8 * gib, 16 * uint64(gib), false},   // the tags count too
		{1, 128 << 20, 200 << 20, false},
		{1, 128 << 20, 2 * dm(1, 128<<20), true},
	}
	for _, tc := range tests {
		c := DefaultConfig()
		c.CleanerThreads, c.CleanerDedupeBufferSize = tc.threads, tc.buffer
		err := c.CheckCleanerMemory(tc.mem)
		if tc.ok {
			assert.NoError(t, err, "%+v", tc)
		} else {
			assert.ErrorIs(t, err, ErrInvalidConfig, "%+v", tc)
		}
	}
}

// TestDedupeMemory: the offset maps take one 24-byte entry per 24 bytes of
// each thread's share of the buffer (Kafka's sizing) and a tag byte each.
func TestDedupeMemory(t *testing.T) {
	c := DefaultConfig()
	assert.Equal(t, int64(134217728/24*25), c.DedupeMemory())
	c.CleanerThreads = 3
	assert.Equal(t, int64(3*(134217728/3/24)*25), c.DedupeMemory())
	c.CleanerThreads = 0
	assert.Zero(t, c.DedupeMemory(), "no cleaner, no map")
}
