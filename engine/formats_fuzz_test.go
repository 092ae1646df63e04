package engine

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/vfs"
)

// FuzzParseCheckpoint feeds arbitrary bytes to the offset checkpoint parser
// (recovery-point-offset-checkpoint and its siblings). It must never panic;
// what it accepts and formatCheckpoint can write (names without spaces)
// must parse back to the same map.
func FuzzParseCheckpoint(f *testing.F) {
	for _, s := range []string{
		"", "0\n", "0\n0\n", "0\n2\norders 0 1234\n__consumer_offsets 28 2\n",
		"0\r\n1\r\nt 0 -1\r\n", "0\n1\nt\t0   5", "1\n0\n", "0\n-1\n", "0\n1\nt 0 9223372036854775808\n",
		" 0 \n 1 \n a 01 +5\n", "0\n1\na b c\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseCheckpoint("/fuzz/checkpoint", data)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			require.Contains(t, err.Error(), "/fuzz/checkpoint", "errors name the file")
			return
		}
		for tp := range m {
			require.GreaterOrEqual(t, tp.Partition, 0)
		}
		out, err := formatCheckpoint(m)
		if err != nil {
			return // a topic name with bytes <= ' ' (strings.Fields split it off already)
		}
		back, err := parseCheckpoint("/fuzz/checkpoint", out)
		require.NoError(t, err, "formatCheckpoint's output:\n%s", out)
		require.Equal(t, m, back)
	})
}

// FuzzConfigSet sets an arbitrary value on every setting. Set must never
// panic; a refused value leaves the config unchanged and wraps
// ErrInvalidConfig; an accepted one reads back (Get) as a value Set accepts
// again to the same config, and the whole config written as String's
// name=value lines and applied again is the same config.
func FuzzConfigSet(f *testing.F) {
	for _, v := range []string{"", "0", "-1", " 42 ", "1e3", "9223372036854775807", "9223372036854775808",
		"0.5", "NaN", "true", "FALSE", "compact,delete", "delete,delete", "\t", "a\nb", "gzip", "\x00", "CreateTime"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, value string) {
		for _, name := range ConfigNames() {
			c := DefaultConfig()
			before := c
			if err := c.Set(name, value); err != nil {
				require.ErrorIs(t, err, ErrInvalidConfig)
				require.Equal(t, before, c, "a refused %s=%q changed the config", name, value)
				continue
			}
			got, err := c.Get(name)
			require.NoError(t, err)
			again := DefaultConfig()
			require.NoError(t, again.Set(name, got), "%s=%q read back as %q", name, value, got)
			require.Equal(t, c, again, "%s=%q read back as %q", name, value, got)

			kv := map[string]string{}
			for _, line := range strings.Split(strings.TrimSuffix(c.String(), "\n"), "\n") {
				k, v, ok := strings.Cut(line, "=")
				require.True(t, ok, "line %q", line)
				kv[k] = v
			}
			applied, err := DefaultConfig().Apply(kv)
			require.NoError(t, err, "String() of %s=%q", name, value)
			require.Equal(t, c, applied, "String() of %s=%q", name, value)
		}
	})
}

// FuzzParsePartitionDir feeds arbitrary directory names to the parser of
// <topic>-<partition> names. It must never panic, and a name it accepts
// is exactly the canonical name of what it returns, with a valid topic.
func FuzzParsePartitionDir(f *testing.F) {
	for _, s := range []string{"orders-0", "a-b-12", "-0", "t-", "t-01", "t--1", "t-+1", "x.delete", "t-0.abc-delete",
		"__cluster_metadata-0", "t-9223372036854775808", strings.Repeat("a", 249) + "-1", strings.Repeat("a", 250) + "-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		tp, ok := ParsePartitionDir(name)
		if !ok {
			return
		}
		require.NoError(t, ValidTopicName(tp.Topic))
		require.GreaterOrEqual(t, tp.Partition, 0)
		require.Equal(t, name, fmt.Sprintf("%s-%d", tp.Topic, tp.Partition))
	})
}

// FuzzTopicsFile opens a data directory (one partition, t-0) whose
// topicfs-topics.json holds arbitrary bytes. OpenLogDir must never panic:
// it opens, or fails with an error; a directory it opens closes cleanly and
// its topic's config is one every setting of which Set accepts again.
func FuzzTopicsFile(f *testing.F) {
	for _, s := range []string{
		`{"version":1,"topics":{"t":{"retention.ms":"3600000"}}}`,
		`{"version":1,"topics":{"t":{"segment.bytes":"1"}}}`,
		`{"version":1,"topics":{"t":{"no.such":"1"},"gone":{"print.key":"true"}}}`,
		`{"version":2,"topics":{}}`, `{"version":1}`, `{"version":1,"topics":null}`, `[]`, ``, `{"version":1,"topics":{"t":null}}`,
		`{"version":1,"topics":{"t":{"cleanup.policy":"compact","key.separator":"\n"}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := vfs.NewMem()
		require.NoError(t, mem.MkdirAll("/data/t-0", 0o755))
		file, err := mem.OpenFile("/data/"+TopicsConfigFile, os.O_CREATE|os.O_RDWR, 0o644)
		require.NoError(t, err)
		_, err = file.WriteAt(data, 0)
		require.NoError(t, err)
		require.NoError(t, file.Close())
		d, err := OpenLogDir(mem, "/data", LogDirOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			return
		}
		defer func() { require.NoError(t, d.Close()) }()
		tp, err := d.Topic("t")
		require.NoError(t, err)
		c := tp.Config()
		for _, name := range ConfigNames() {
			v, err := c.Get(name)
			require.NoError(t, err)
			again := c
			require.NoError(t, again.Set(name, v), "%s=%q", name, v)
		}
	})
}
