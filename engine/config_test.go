package engine

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/record"
)

// The ARCHITECTURE.md table, in order: name and default as Get prints it.
var configTable = []struct{ name, def string }{
	{"segment.bytes", "1073741824"},
	{"segment.ms", "604800000"},
	{"segment.jitter.ms", "0"},
	{"segment.index.bytes", "10485760"},
	{"index.interval.bytes", "4096"},
	{"retention.ms", "604800000"},
	{"retention.bytes", "-1"},
	{"retention.check.interval.ms", "300000"},
	{"cleanup.policy", "delete"},
	{"min.cleanable.dirty.ratio", "0.5"},
	{"delete.retention.ms", "86400000"},
	{"min.compaction.lag.ms", "0"},
	{"max.compaction.lag.ms", "9223372036854775807"},
	{"file.delete.delay.ms", "60000"},
	{"flush.messages", "9223372036854775807"},
	{"flush.ms", "9223372036854775807"},
	{"compression.type", "producer"},
	{"max.message.bytes", "1048588"},
	{"message.timestamp.type", "CreateTime"},
	{"num.partitions", "1"},
	{"log.cleaner.threads", "1"},
	{"log.cleaner.dedupe.buffer.size", "134217728"},
	{"log.cleaner.io.buffer.load.factor", "0.9"},
	{"log.index.mapped.max.segments", "1024"},
	{"batch.size", "16384"},
	{"linger.ms", "5"},
	{"parse.key", "false"},
	{"key.separator", "\t"},
	{"null.marker", ""},
	{"print.key", "false"},
	{"cursor.start", "earliest"},
	{"key.index.memory.bytes", "67108864"},
}

func TestConfigDefaultsAndNames(t *testing.T) {
	c := DefaultConfig()
	var names []string
	var want strings.Builder
	for _, row := range configTable {
		names = append(names, row.name)
		got, err := c.Get(row.name)
		require.NoError(t, err)
		assert.Equal(t, row.def, got, row.name)
		want.WriteString(row.name + "=" + row.def + "\n")
	}
	assert.Equal(t, names, ConfigNames())
	assert.Equal(t, want.String(), c.String())
	assert.Equal(t, reflect.TypeOf(Config{}).NumField(), len(ConfigNames()), "every field has a name")
}

// TestConfigEveryNameHasItsOwnField sets each name to a non-default value
// and checks exactly one field changed.
func TestConfigEveryNameHasItsOwnField(t *testing.T) {
	alt := map[string]string{
		"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.25", "compression.type": "zstd",
		"message.timestamp.type": "LogAppendTime", "parse.key": "true", "print.key": "true",
		"key.separator": ":", "null.marker": "NULL", "cursor.start": "latest", "key.index.memory.bytes": "77777",
		"log.cleaner.threads": "7", "log.cleaner.dedupe.buffer.size": "7777777", "log.cleaner.io.buffer.load.factor": "0.75",
	}
	seen := map[int]string{}
	for _, name := range ConfigNames() {
		c := DefaultConfig()
		v, ok := alt[name]
		if !ok {
			v = "7777"
		}
		require.NoError(t, c.Set(name, v), name)
		got, err := c.Get(name)
		require.NoError(t, err)
		assert.Equal(t, v, got, name)
		d, cv := reflect.ValueOf(DefaultConfig()), reflect.ValueOf(c)
		changed := -1
		for i := 0; i < d.NumField(); i++ {
			if !reflect.DeepEqual(d.Field(i).Interface(), cv.Field(i).Interface()) {
				assert.Equal(t, -1, changed, "%s changed two fields", name)
				changed = i
			}
		}
		require.NotEqual(t, -1, changed, name)
		assert.Empty(t, seen[changed], "%s and %s share a field", name, seen[changed])
		seen[changed] = name
	}
}

func TestConfigSetValidation(t *testing.T) {
	tests := []struct {
		name, key, value string
		ok               bool
		want             string // Get after a successful Set; "" = value
	}{
		{"segment.bytes min", "segment.bytes", "14", true, ""},
		{"segment.bytes below min", "segment.bytes", "13", false, ""},
		{"segment.bytes above int32", "segment.bytes", "2147483648", false, ""},
		{"segment.bytes not a number", "segment.bytes", "1GB", false, ""},
		{"spaces trimmed", "segment.bytes", " 2048 ", true, "2048"},
		{"segment.index.bytes min: one time-index entry", "segment.index.bytes", "12", true, ""},
		{"segment.index.bytes Kafka min holds no time-index entry", "segment.index.bytes", "4", false, ""},
		{"segment.index.bytes too small", "segment.index.bytes", "11", false, ""},
		{"segment.ms zero", "segment.ms", "0", false, ""},
		{"retention.ms forever", "retention.ms", "-1", true, ""},
		{"retention.ms -2", "retention.ms", "-2", false, ""},
		{"retention.bytes any", "retention.bytes", "-5", true, ""},
		{"policy compact,delete", "cleanup.policy", "compact,delete", true, ""},
		{"policy delete,compact", "cleanup.policy", "delete,compact", true, ""},
		{"policy spaced", "cleanup.policy", "compact, delete", true, "compact,delete"},
		{"policy unknown", "cleanup.policy", "archive", false, ""},
		{"policy empty", "cleanup.policy", "", false, ""},
		{"policy twice", "cleanup.policy", "delete,delete", false, ""},
		{"ratio 0", "min.cleanable.dirty.ratio", "0", true, ""},
		{"ratio -0 reads back as 0", "min.cleanable.dirty.ratio", "-0", true, "0"},
		{"ratio 1", "min.cleanable.dirty.ratio", "1", true, ""},
		{"ratio above 1", "min.cleanable.dirty.ratio", "1.01", false, ""},
		{"ratio negative", "min.cleanable.dirty.ratio", "-0.1", false, ""},
		{"ratio NaN", "min.cleanable.dirty.ratio", "NaN", false, ""},
		{"compression none", "compression.type", "none", true, ""},
		{"compression uncompressed", "compression.type", "uncompressed", true, ""},
		{"compression case", "compression.type", "LZ4", true, "lz4"},
		{"compression brotli", "compression.type", "brotli", false, ""},
		{"timestamp type", "message.timestamp.type", "LogAppendTime", true, ""},
		{"timestamp type bad", "message.timestamp.type", "Now", false, ""},
		{"bool true", "parse.key", "true", true, ""},
		{"bool upper", "print.key", "TRUE", true, "true"},
		{"bool yes", "parse.key", "yes", false, ""},
		{"separator empty", "key.separator", "", false, ""},
		{"separator newline", "key.separator", "\n", false, ""},
		{"separator literal", "key.separator", " => ", true, ""},
		{"null marker empty", "null.marker", "", true, ""},
		{"max.compaction.lag.ms 0", "max.compaction.lag.ms", "0", false, ""},
		{"flush.messages 0", "flush.messages", "0", false, ""},
		{"num.partitions 0", "num.partitions", "0", false, ""},
		{"cleaner threads 0", "log.cleaner.threads", "0", true, ""},
		{"unknown", "segment.size", "1", false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			err := c.Set(tc.key, tc.value)
			if !tc.ok {
				require.ErrorIs(t, err, ErrInvalidConfig)
				assert.Contains(t, err.Error(), tc.key)
				assert.Equal(t, DefaultConfig(), c, "unchanged on error")
				return
			}
			require.NoError(t, err)
			want := tc.want
			if want == "" {
				want = tc.value
			}
			got, err := c.Get(tc.key)
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
}

func TestConfigApply(t *testing.T) {
	c := DefaultConfig()
	out, err := c.Apply(map[string]string{"segment.bytes": "4096", "cleanup.policy": "compact"})
	require.NoError(t, err)
	assert.Equal(t, int64(4096), out.SegmentBytes)
	assert.True(t, out.Compact())
	assert.Equal(t, DefaultConfig(), c, "receiver untouched")

	out, err = out.Apply(map[string]string{"segment.bytes": "8192", "retention.ms": "x", "nope": "1"})
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "retention.ms")
	assert.Contains(t, err.Error(), "nope")
	assert.Equal(t, int64(4096), out.SegmentBytes, "all or nothing")

	_, err = c.Get("nope")
	assert.True(t, errors.Is(err, ErrInvalidConfig))
}

func TestConfigHelpers(t *testing.T) {
	tests := []struct {
		kv                    map[string]string
		codec                 record.Codec
		compact, del, appTime bool
	}{
		{map[string]string{}, record.None, false, true, false},
		{map[string]string{"compression.type": "uncompressed"}, record.None, false, true, false},
		{map[string]string{"compression.type": "none"}, record.None, false, true, false},
		{map[string]string{"compression.type": "gzip", "cleanup.policy": "compact"}, record.Gzip, true, false, false},
		{map[string]string{"compression.type": "snappy", "cleanup.policy": "delete,compact"}, record.Snappy, true, true, false},
		{map[string]string{"compression.type": "lz4", "message.timestamp.type": "LogAppendTime"}, record.LZ4, false, true, true},
		{map[string]string{"compression.type": "zstd"}, record.Zstd, false, true, false},
	}
	for _, tc := range tests {
		c, err := DefaultConfig().Apply(tc.kv)
		require.NoError(t, err)
		assert.Equal(t, tc.codec, c.Codec(), "%v", tc.kv)
		assert.Equal(t, tc.compact, c.Compact(), "%v", tc.kv)
		assert.Equal(t, tc.del, c.Delete(), "%v", tc.kv)
		assert.Equal(t, tc.appTime, c.LogAppendTime(), "%v", tc.kv)
	}
	assert.True(t, DefaultConfig().KeepsProducerCodec())

	// The record bound is max.message.bytes, capped by segment.bytes.
	assert.Equal(t, DefaultConfig().MaxMessageBytes, DefaultConfig().MaxRecordBytes())
	small, err := DefaultConfig().Apply(map[string]string{"segment.bytes": "1000", "max.message.bytes": "5000"})
	require.NoError(t, err)
	assert.Equal(t, int64(1000), small.MaxRecordBytes())

	assert.True(t, IsTopicSetting("retention.ms"))
	assert.True(t, IsTopicSetting("print.key"))
	assert.False(t, IsTopicSetting("log.cleaner.threads"))
	assert.False(t, IsTopicSetting("log.cleaner.dedupe.buffer.size"))
	assert.False(t, IsTopicSetting("log.cleaner.io.buffer.load.factor"))
	assert.False(t, IsTopicSetting("log.index.mapped.max.segments"))
	assert.False(t, IsTopicSetting("key.index.memory.bytes"))
	assert.False(t, IsTopicSetting("no.such.setting"))
}
