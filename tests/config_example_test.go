//go:build wiring

package tests

import (
	"sort"
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
