package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/topicfs/topicfs/backend"
)

// configLines returns the name=value lines of the topic's config text.
func configLines(t *testing.T, tp *Topic) map[string]string {
	t.Helper()
	text, err := tp.ConfigText(context.Background())
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(string(text), "\n"))
	lines := map[string]string{}
	var names []string
	for _, l := range strings.Split(strings.TrimSuffix(string(text), "\n"), "\n") {
		name, value, ok := strings.Cut(l, "=")
		require.True(t, ok, l)
		lines[name] = value
		names = append(names, name)
	}
	assert.IsIncreasing(t, names, "sorted by name")
	return lines
}

func TestConfigText(t *testing.T) {
	kc := newKfake(t)
	c, _ := openTest(t, kc, func(o *Options) { o.Defaults = map[string]string{"parse.key": "true", "linger.ms": "0"} })
	tp := mkTopic(t, c, "cfg", 3)
	lines := configLines(t, tp)
	for name, want := range map[string]string{
		"num.partitions": "3", "replication.factor": "3", "cleanup.policy": "delete",
		"max.message.bytes": "1048588", "min.insync.replicas": "1",
		"parse.key": "true", "linger.ms": "0", "print.key": "false", "key.separator": "\t",
		"null.marker": "", "batch.size": "16384",
	} {
		assert.Equal(t, want, lines[name], name)
	}
	s := tp.Settings()
	assert.True(t, s.ParseKey)
	assert.Equal(t, int64(0), s.LingerMs)
	assert.Equal(t, int64(1048588), s.MaxRecordBytes)
	assert.True(t, s.Uncompressed)
	assert.False(t, s.Compacted)
}

func TestAlterConfig(t *testing.T) {
	kc := newKfake(t)
	c, _ := openTest(t, kc, nil)
	ctx := context.Background()
	tp := mkTopic(t, c, "alter", 1)
	require.NoError(t, tp.AlterConfig(ctx, map[string]string{
		"cleanup.policy": "compact", "compression.type": "zstd", "retention.ms": "1000",
		"print.key": "true", "key.separator": " | ", "batch.size": "100", "num.partitions": "4",
		"replication.factor": "3",
	}))
	s := tp.Settings()
	assert.True(t, s.Compacted)
	assert.False(t, s.Uncompressed)
	assert.True(t, s.PrintKey)
	assert.Equal(t, " | ", s.KeySeparator)
	assert.Equal(t, int64(100), s.BatchSize)
	assert.Equal(t, 4, tp.NumPartitions())
	lines := configLines(t, tp)
	assert.Equal(t, "compact", lines["cleanup.policy"])
	assert.Equal(t, "1000", lines["retention.ms"])
	assert.Equal(t, " | ", lines["key.separator"])
	assert.Equal(t, "4", lines["num.partitions"])

	// An empty value resets a broker config to its default.
	require.NoError(t, tp.AlterConfig(ctx, map[string]string{"retention.ms": ""}))
	assert.Equal(t, "604800000", configLines(t, tp)["retention.ms"])

	// The local settings persist per cluster id and topic: another backend
	// with the same state directory sees them.
	data, err := os.ReadFile(filepath.Join(c.opts.StateDir, "clusters", "kfake", "topics", "alter.json"))
	require.NoError(t, err)
	assert.Contains(t, string(data), `"print.key": "true"`)
	c2, _ := openTest(t, kc, func(o *Options) { o.StateDir = c.opts.StateDir })
	bt, err := c2.Topic(ctx, "alter")
	require.NoError(t, err)
	assert.True(t, bt.Settings().PrintKey)

	// Concurrent changes of different settings all persist.
	changes := map[string]string{"parse.key": "true", "null.marker": "NULL", "linger.ms": "7"}
	var wg sync.WaitGroup
	for name, value := range changes {
		wg.Go(func() { assert.NoError(t, tp.AlterConfig(ctx, map[string]string{name: value})) })
	}
	wg.Wait()
	lines = configLines(t, tp)
	for name, value := range changes {
		assert.Equal(t, value, lines[name], name)
	}
	assert.Equal(t, "true", lines["print.key"], "and the earlier ones stay")

	// Deleting and creating the topic again forgets them.
	require.NoError(t, c.DeleteTopic(ctx, "alter"))
	tp = mkTopic(t, c, "alter", 1)
	assert.False(t, tp.Settings().PrintKey)
}

// TestAlterConfigAllOrNothing: one bad entry, of any kind, changes nothing
// and the error names it. kfake validates no topic config value itself
// (it accepts any name and value), so the broker's refusal of a value is
// injected: INVALID_CONFIG for every validate_only request naming
// retention.ms.
func TestAlterConfigAllOrNothing(t *testing.T) {
	kc := newKfake(t)
	c, _ := openTest(t, kc, nil)
	ctx := context.Background()
	tp := mkTopic(t, c, "aon", 2)
	kc.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.IncrementalAlterConfigs}, Err: kerr.InvalidConfig, Count: -1,
		When: func(req kmsg.Request) bool {
			r := req.(*kmsg.IncrementalAlterConfigsRequest)
			for _, rc := range r.Resources[0].Configs {
				if rc.Name == "retention.ms" {
					return true
				}
			}
			return false
		}})
	before := configLines(t, tp)
	for _, tc := range []struct {
		kv   map[string]string
		want []string // in the error
	}{
		{map[string]string{"print.key": "maybe", "cleanup.policy": "compact"}, []string{`print.key="maybe"`}},
		{map[string]string{"batch.size": "-1", "parse.key": "true"}, []string{"batch.size", "at least 0"}},
		{map[string]string{"linger.ms": "1e3"}, []string{"linger.ms", "not an integer"}},
		{map[string]string{"key.separator": ""}, []string{"key.separator", "empty"}},
		{map[string]string{"null.marker": "a\nb"}, []string{"null.marker", "line break"}},
		{map[string]string{"num.partitions": "1", "print.key": "true"}, []string{"num.partitions=1", "never shrink"}},
		{map[string]string{"num.partitions": "x"}, []string{"num.partitions", "not an integer"}},
		{map[string]string{"replication.factor": "2"}, []string{"replication.factor=2", "reassignment"}},
		{map[string]string{"retention.ms": "soon", "cleanup.policy": "compact", "parse.key": "true"},
			[]string{`retention.ms="soon"`, "INVALID_CONFIG", "the broker refused it"}},
		{map[string]string{"retention.ms": "1", "print.key": "maybe"}, []string{"retention.ms", "print.key"}},
	} {
		err := tp.AlterConfig(ctx, tc.kv)
		require.ErrorIs(t, err, backend.ErrInvalidConfig, "%v", tc.kv)
		for _, w := range tc.want {
			assert.Contains(t, err.Error(), w, "%v", tc.kv)
		}
		assert.NotContains(t, err.Error(), "cleanup.policy", "a good entry is not blamed")
		assert.Equal(t, before, configLines(t, tp), "nothing changed: %v", tc.kv)
		assert.Equal(t, 2, tp.NumPartitions())
	}
}

// TestAlterConfigSensitive: a sensitive config reads [hidden] and its value
// is not repeated in an error.
func TestAlterConfigSensitive(t *testing.T) {
	kc := newKfake(t)
	c, _ := openTest(t, kc, nil)
	tp := mkTopic(t, c, "sens", 1)
	tp.mu.Lock()
	tp.configs = append(tp.configs, brokerConfig{name: "secret.thing", value: kmsg.StringPtr("s3cret"), sensitive: true})
	tp.mu.Unlock()
	err := tp.refused("secret.thing", "s3cret", kerr.InvalidConfig)
	assert.NotContains(t, err.Error(), "s3cret")
	assert.Contains(t, err.Error(), "secret.thing")

	kc.ControlKey(int16(kmsg.DescribeConfigs), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.DescribeConfigsRequest)
		resp := r.ResponseKind().(*kmsg.DescribeConfigsResponse)
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "sens"
		rc := kmsg.NewDescribeConfigsResponseResourceConfig()
		rc.Name, rc.Value, rc.IsSensitive = "secret.thing", kmsg.StringPtr("s3cret"), true
		rr.Configs = append(rr.Configs, rc)
		resp.Resources = append(resp.Resources, rr)
		return resp, nil, true
	})
	text, err := tp.ConfigText(context.Background())
	require.NoError(t, err)
	assert.Contains(t, string(text), "secret.thing=[hidden]\n")
	assert.NotContains(t, string(text), "s3cret")
}

func TestDefaultsChecked(t *testing.T) {
	kc := newKfake(t)
	o := testOptions(t, kc, &logBuf{})
	o.Defaults = map[string]string{"linger.ms": "-3"}
	_, err := Open(context.Background(), o)
	assert.ErrorIs(t, err, backend.ErrInvalidConfig)
	o.Defaults = map[string]string{"segment.bytes": "1"}
	_, err = Open(context.Background(), o)
	assert.ErrorIs(t, err, backend.ErrInvalidConfig, "only topicfs's own settings have mount-wide defaults here")
}
