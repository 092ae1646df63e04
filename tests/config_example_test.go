package tests

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/internal/cli"
)

// TestConfigExample loads mount.toml.example with the real loader and checks
// it against engine.DefaultConfig: every setting present at its default,
// nothing stale, no topic overrides, data directory left at its default.
func TestConfigExample(t *testing.T) {
	mc, err := cli.LoadMountConfig("../mount.toml.example")
	require.NoError(t, err)

	names := append([]string(nil), engine.ConfigNames()...)
	sort.Strings(names)
	assert.Equal(t, names, mc.Keys, "mount.toml.example sets exactly every setting (none missing, none stale)")

	def := engine.DefaultConfig()
	for _, name := range engine.ConfigNames() {
		want, err := def.Get(name)
		require.NoError(t, err)
		got, err := mc.Defaults.Get(name)
		require.NoError(t, err)
		assert.Equal(t, want, got, "mount.toml.example: %s is not at its default", name)
	}
	assert.Equal(t, def.String(), mc.Defaults.String())
	assert.Empty(t, mc.Overrides, "the example's [topics.NAME] tables stay commented out")
	assert.Empty(t, mc.DataDir, "the example leaves log.dirs commented out (default data home)")
}

// TestConfigExampleExplainsEverySetting: each setting line of the example is
// preceded by a comment saying why (the "one line of why").
func TestConfigExampleExplainsEverySetting(t *testing.T) {
	b, err := os.ReadFile("../mount.toml.example")
	require.NoError(t, err)
	setting := regexp.MustCompile(`^"([a-z.]+)" = `)
	lines := strings.Split(string(b), "\n")
	seen := 0
	for i, line := range lines {
		m := setting.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		seen++
		require.Positive(t, i)
		assert.True(t, strings.HasPrefix(lines[i-1], "# "), "%s has no comment line right above it", m[1])
	}
	assert.Equal(t, len(engine.ConfigNames()), seen, "one active line per setting")
}
