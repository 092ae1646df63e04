package cli

import (
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
)

// boundProbe is a value tried in mount.toml and whether it must load.
type boundProbe struct {
	value string
	ok    bool
}

// boundProbes returns, for a numeric setting, its bounds and the values
// one step inside and outside each (a hundredth for the ratio).
func boundProbes(t *testing.T, name string) []boundProbe {
	t.Helper()
	rng, ok := engine.SettingRange(name)
	require.True(t, ok)
	if name == "min.cleanable.dirty.ratio" {
		return []boundProbe{{"0.0", true}, {"-0.01", false}, {"1.0", true}, {"1.01", false}}
	}
	if name == "log.cleaner.io.buffer.load.factor" {
		return []boundProbe{{"0.0", false}, {"0.01", true}, {"1.0", true}, {"1.01", false}}
	}
	lo, hi, found := strings.Cut(rng, " to ")
	require.True(t, found, rng)
	l, _ := new(big.Int).SetString(lo, 10)
	h, _ := new(big.Int).SetString(hi, 10)
	one := big.NewInt(1)
	return []boundProbe{
		{l.String(), true}, {new(big.Int).Add(l, one).String(), true}, {new(big.Int).Sub(l, one).String(), false},
		{h.String(), true}, {new(big.Int).Sub(h, one).String(), true}, {new(big.Int).Add(h, one).String(), false},
	}
}

// TestMountConfigRanges: mount.toml takes every numeric setting at each of
// its bounds and refuses a value one past it with one line naming the key,
// at the top level and, for topic settings, in a [topics.NAME] table.
func TestMountConfigRanges(t *testing.T) {
	n := 0
	for _, name := range engine.ConfigNames() {
		if _, numeric := engine.SettingRange(name); !numeric {
			continue
		}
		n++
		for _, p := range boundProbes(t, name) {
			texts := []string{fmt.Sprintf("%q = %s\n", name, p.value)}
			if engine.IsTopicSetting(name) {
				texts = append(texts, fmt.Sprintf("[topics.orders]\n%q = %s\n", name, p.value))
			}
			if name == "log.cleaner.dedupe.buffer.size" && p.ok {
				// Within range; the per-thread share is checked with the
				// thread count (TestMountConfigCleanerMemory).
				texts[0] = fmt.Sprintf("%q = %s\n\"log.cleaner.threads\" = 32\n", name, p.value)
			}
			for _, text := range texts {
				_, err := parseMountConfig("/etc/topicfs/mount.toml", []byte(text))
				if p.ok {
					assert.NoError(t, err, "%s", text)
					continue
				}
				if assert.Error(t, err, "%s", text) {
					assert.Contains(t, err.Error(), "mount.toml")
					assert.NotContains(t, err.Error(), "\n")
				}
			}
		}
	}
	assert.Equal(t, 24, n, "numeric settings probed")
}

// TestMountConfigCleanerMemory: the dedupe buffer passes the range check but
// not the machine: each thread's share past 2 GiB - 1, or the whole past
// half of the memory, stops the mount with a message naming the setting.
func TestMountConfigCleanerMemory(t *testing.T) {
	mc, err := parseMountConfig("m.toml", []byte(`"log.cleaner.dedupe.buffer.size" = 2147483648`))
	require.NoError(t, err)
	err = mc.Defaults.CheckCleanerMemory(64 << 30)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "log.cleaner.dedupe.buffer.size=2147483648")

	mc, err = parseMountConfig("m.toml", []byte("\"log.cleaner.dedupe.buffer.size\" = 2147483648\n\"log.cleaner.threads\" = 2\n"))
	require.NoError(t, err)
	half := uint64(mc.Defaults.DedupeMemory())
	assert.NoError(t, mc.Defaults.CheckCleanerMemory(2*half), "exactly half")
	assert.Error(t, mc.Defaults.CheckCleanerMemory(2*half-2), "past half")
	assert.Error(t, mc.Defaults.CheckCleanerMemory(4<<30), "the probe tags count too")
	assert.NoError(t, mc.Defaults.CheckCleanerMemory(0), "memory unknown")
}
