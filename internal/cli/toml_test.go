package cli

import (
	"flag"
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseConfigFlattens(t *testing.T) {
	tests := []struct {
		name     string
		text     string
		settings map[string]string
		topics   map[string]map[string]string
		dataDir  string
	}{
		{
			name:     "quoted keys",
			text:     `"segment.bytes" = 1048576` + "\n" + `"min.cleanable.dirty.ratio" = 0.25`,
			settings: map[string]string{"segment.bytes": "1048576", "min.cleanable.dirty.ratio": "0.25"},
		},
		{
			name:     "dotted keys and tables",
			text:     "segment.bytes = 42\n[retention]\nms = -1\nbytes = 100\n",
			settings: map[string]string{"segment.bytes": "42", "retention.ms": "-1", "retention.bytes": "100"},
		},
		{
			name:     "strings booleans arrays",
			text:     `"print.key" = true` + "\n" + `"cleanup.policy" = ["compact", "delete"]` + "\n" + `"key.separator" = "\t"`,
			settings: map[string]string{"print.key": "true", "cleanup.policy": "compact,delete", "key.separator": "\t"},
		},
		{
			name:     "max int64 stays exact",
			text:     `"flush.messages" = 9223372036854775807`,
			settings: map[string]string{"flush.messages": "9223372036854775807"},
		},
		{
			name:     "topics tables",
			text:     "\"retention.ms\" = 1000\n[topics.orders]\n\"retention.ms\" = -1\n[topics.\"users.v2\"]\ncleanup.policy = \"compact\"\n",
			settings: map[string]string{"retention.ms": "1000"},
			topics: map[string]map[string]string{
				"orders":   {"retention.ms": "-1"},
				"users.v2": {"cleanup.policy": "compact"},
			},
		},
		{
			name:     "log.dirs relative to the config file",
			text:     `"log.dirs" = "data"`,
			settings: map[string]string{},
			dataDir:  "/etc/topicfs/data",
		},
		{
			name:     "log.dirs as a table, absolute",
			text:     "[log]\ndirs = \"/var/lib/topicfs\"\ncleaner.threads = 2\n",
			settings: map[string]string{"log.cleaner.threads": "2"},
			dataDir:  "/var/lib/topicfs",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc, err := parseConfig("/etc/topicfs/mount.toml", tt.text)
			require.NoError(t, err)
			assert.Equal(t, tt.settings, fc.Settings)
			if tt.topics == nil {
				tt.topics = map[string]map[string]string{}
			}
			assert.Equal(t, tt.topics, fc.Topics)
			assert.Equal(t, tt.dataDir, fc.DataDir)
		})
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{"syntax error names the line", "\"segment.bytes\" = 1\nretention.ms = = 2\n", "line 2"},
		{"duplicate spelling", "\"segment.bytes\" = 1\n[segment]\nbytes = 2\n", `key "segment.bytes" is given twice`},
		{"topics not a table", "topics = 3\n", `"topics" must be a table`},
		{"topic entry not a table", "[topics]\norders = 3\n", "topics.orders must be a table"},
		{"several log dirs", `"log.dirs" = "/a,/b"`, "one data directory"},
		{"log.dirs ending in white space once cleaned", `"log.dirs" = "data /"`, "ending in white space"},
		{"both log.dir and log.dirs", "\"log.dirs\" = \"/a\"\n\"log.dir\" = \"/b\"\n", "keep one"},
		{"datetime value", "\"segment.ms\" = 1979-05-27T07:32:00Z\n", `key "segment.ms": unsupported value type`},
		{"array of tables", "[[segment]]\nbytes = 1\n", `key "segment"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConfig("m.toml", tt.text)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Contains(t, err.Error(), "m.toml")
		})
	}
}

func TestLoadConfigFileMissing(t *testing.T) {
	p := filepath.Join(t.TempDir(), "nope.toml")
	_, err := loadConfigFile(p)
	require.Error(t, err)
	assert.Equal(t, "cannot read config "+p+": no such file or directory", err.Error())
}

func TestParseInterleaved(t *testing.T) {
	tests := []struct {
		name string
		args []string
		pos  []string
		ro   bool
		data string
	}{
		{"flags first", []string{"--read-only", "--data", "/d", "mnt"}, []string{"mnt"}, true, "/d"},
		{"flags after", []string{"mnt", "--read-only", "--data=/d"}, []string{"mnt"}, true, "/d"},
		{"double dash", []string{"--data", "/d", "--", "--read-only"}, []string{"--read-only"}, false, "/d"},
		{"several positionals", []string{"a", "-read-only", "b"}, []string{"a", "b"}, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			ro := fs.Bool("read-only", false, "")
			data := fs.String("data", "", "")
			pos, err := parseInterleaved(fs, tt.args)
			require.NoError(t, err)
			assert.Equal(t, tt.pos, pos)
			assert.Equal(t, tt.ro, *ro)
			assert.Equal(t, tt.data, *data)
		})
	}
}

func TestResolvePath(t *testing.T) {
	assert.Equal(t, "/etc/topicfs/data", resolvePath("/etc/topicfs", "data"))
	assert.Equal(t, "/var/lib/x", resolvePath("/etc/topicfs", "/var/lib/x/"))
	t.Setenv("HOME", "/home/u")
	assert.Equal(t, "/home/u/topics", resolvePath("/etc", "~/topics"))
}

func TestUnescapeOctal(t *testing.T) {
	assert.Equal(t, "/tmp/a b", unescapeOctal(`/tmp/a\040b`))
	assert.Equal(t, `/tmp/a\x`, unescapeOctal(`/tmp/a\x`))
	assert.Equal(t, "/plain", unescapeOctal("/plain"))
}

func TestWithin(t *testing.T) {
	assert.True(t, within("/mnt/t", "/mnt/t"))
	assert.True(t, within("/mnt/t/data", "/mnt/t"))
	assert.False(t, within("/mnt/topics", "/mnt/t"))
	assert.False(t, within("/var/data", "/mnt/t"))
	assert.False(t, within("/mnt/..data", "/mnt/t"))
}
