package cli

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
)

// fuzzConfigPath is where the fuzzed mount.toml pretends to live: errors name
// it and a relative log.dirs resolves against its directory.
const fuzzConfigPath = "/etc/topicfs/mount.toml"

// FuzzLoadMountConfig feeds arbitrary bytes to the mount.toml loader. It must
// never panic, and whatever it accepts must round-trip: every resulting
// engine.Config written as Config.String's name=value lines and set again
// gives the same Config, and the whole MountConfig written back as TOML
// loads to the same defaults, overrides and data directory.
func FuzzLoadMountConfig(f *testing.F) {
	example, err := os.ReadFile("../../mount.toml.example")
	require.NoError(f, err)
	f.Add(example)
	for _, s := range []string{
		"",
		`"segment.bytes" = 1048576` + "\n" + `"min.cleanable.dirty.ratio" = 0.25`,
		"segment.bytes = 42\n[retention]\nms = -1\nbytes = 100\n",
		`"print.key" = true` + "\n" + `"cleanup.policy" = ["compact", "delete"]` + "\n" + `"key.separator" = "\t"`,
		`"key.separator" = " = "` + "\n" + `"null.marker" = "\\N"`,
		"\"retention.ms\" = 1000\n[topics.orders]\n\"retention.ms\" = -1\n[topics.\"users.v2\"]\ncleanup.policy = \"compact\"\n",
		"[log]\ndirs = \"data/../x\"\ncleaner.threads = 2\n",
		`"flush.messages" = 9223372036854775807`,
		`"segment.ms" = " 1000 "`,
		"[topics.t]\n\"log.cleaner.threads\" = 2\n",
		"topics = 3\n",
		"\"segment.bytes\" = 1\n[segment]\nbytes = 2\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		mc, err := parseMountConfig(fuzzConfigPath, data)
		if err != nil {
			require.Contains(t, err.Error(), fuzzConfigPath, "errors name the file")
			return
		}
		require.Equal(t, fuzzConfigPath, mc.Source)

		checkLinesRoundTrip(t, mc.Defaults)
		for topic, kv := range mc.Overrides {
			c, err := mc.Defaults.Apply(kv)
			require.NoError(t, err, "override of %s was accepted once", topic)
			checkLinesRoundTrip(t, c)
		}

		// The whole MountConfig back as TOML: every setting (not only the
		// ones the file set), log.dirs and the [topics.NAME] tables.
		doc := map[string]any{}
		for _, name := range engine.ConfigNames() {
			v, err := mc.Defaults.Get(name)
			require.NoError(t, err)
			doc[name] = v
		}
		if mc.DataDir != "" {
			doc["log.dirs"] = mc.DataDir
		}
		if len(mc.Overrides) > 0 {
			topics := map[string]any{}
			for topic, kv := range mc.Overrides {
				m := map[string]any{}
				for k, v := range kv {
					m[k] = v
				}
				topics[topic] = m
			}
			doc[topicsTable] = topics
		}
		var buf bytes.Buffer
		require.NoError(t, toml.NewEncoder(&buf).Encode(doc))
		again, err := parseMountConfig(fuzzConfigPath, buf.Bytes())
		require.NoError(t, err, "re-serialised config:\n%s", buf.String())
		require.Equal(t, mc.Defaults, again.Defaults, "re-serialised config:\n%s", buf.String())
		require.Equal(t, mc.Overrides, again.Overrides)
		require.Equal(t, mc.DataDir, again.DataDir)
	})
}

// checkLinesRoundTrip sets every name=value line of c.String() on the
// built-in defaults and requires c back: the text a topic's config file shows
// is always text it accepts.
func checkLinesRoundTrip(t *testing.T, c engine.Config) {
	t.Helper()
	text := c.String()
	require.True(t, strings.HasSuffix(text, "\n"))
	got := engine.DefaultConfig()
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	require.Len(t, lines, len(engine.ConfigNames()), "one line per setting:\n%s", text)
	for _, line := range lines {
		name, value, ok := strings.Cut(line, "=")
		require.True(t, ok, "line %q has no =", line)
		require.NoError(t, got.Set(name, value), "line %q", line)
	}
	require.Equal(t, c, got, "config text:\n%s", text)
}
