package cli

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
)

// TestMountConfigBrokerNames: mount.toml takes the broker-wide names an
// operator copies from a broker's server.properties, each as the default
// of its topic setting, in the topic setting's unit.
func TestMountConfigBrokerNames(t *testing.T) {
	mc, err := parseMountConfig("/etc/topicfs/mount.toml", []byte(`
"log.retention.hours" = 48
"log.retention.bytes" = 10485760
"log.segment.bytes" = 5242880
"log.roll.hours" = 2
"log.roll.jitter.hours" = 1
"log.index.size.max.bytes" = 1048576
"log.index.interval.bytes" = 1024
"log.retention.check.interval.ms" = 60000
"log.cleanup.policy" = "compact,delete"
"log.cleaner.min.cleanable.ratio" = 0.25
"log.cleaner.delete.retention.ms" = 3600000
"log.cleaner.min.compaction.lag.ms" = 1000
"log.cleaner.max.compaction.lag.ms" = 86400000
"log.segment.delete.delay.ms" = 30000
"log.flush.interval.messages" = 100
"log.flush.interval.ms" = 2000
"message.max.bytes" = 2000000
"log.message.timestamp.type" = "LogAppendTime"
`))
	require.NoError(t, err)
	want := engine.DefaultConfig()
	want.RetentionMs = 48 * 3_600_000
	want.RetentionBytes = 10485760
	want.SegmentBytes = 5242880
	want.SegmentMs = 2 * 3_600_000
	want.SegmentJitterMs = 3_600_000
	want.SegmentIndexBytes = 1048576
	want.IndexIntervalBytes = 1024
	want.RetentionCheckIntervalMs = 60000
	want.CleanupPolicy = "compact,delete"
	want.MinCleanableDirtyRatio = 0.25
	want.DeleteRetentionMs = 3600000
	want.MinCompactionLagMs = 1000
	want.MaxCompactionLagMs = 86400000
	want.FileDeleteDelayMs = 30000
	want.FlushMessages = 100
	want.FlushMs = 2000
	want.MaxMessageBytes = 2000000
	want.MessageTimestampType = "LogAppendTime"
	assert.Equal(t, want, mc.Defaults)
	assert.Contains(t, mc.Keys, "retention.ms", "keys are the topic settings' names")
	assert.NotContains(t, mc.Keys, "log.retention.hours")
}

// TestMountConfigBrokerPrecedence: as in Kafka, log.retention.ms wins over
// log.retention.minutes, which wins over log.retention.hours (and
// log.roll.ms over log.roll.hours); a negative retention time is -1.
func TestMountConfigBrokerPrecedence(t *testing.T) {
	for _, tc := range []struct {
		text string
		want int64
	}{
		{`"log.retention.hours" = 1`, 3_600_000},
		{"\"log.retention.hours\" = 1\n\"log.retention.minutes\" = 5\n", 300_000},
		{"\"log.retention.hours\" = 1\n\"log.retention.minutes\" = 5\n\"log.retention.ms\" = 777\n", 777},
		{"\"log.retention.hours\" = 1\n\"log.retention.ms\" = 777\n", 777},
		{`"log.retention.hours" = -1`, -1},
		{`"log.retention.minutes" = -5`, -1},
		{`"log.retention.ms" = -1`, -1},
	} {
		mc, err := parseMountConfig("m.toml", []byte(tc.text))
		require.NoError(t, err, tc.text)
		assert.Equal(t, tc.want, mc.Defaults.RetentionMs, tc.text)
	}
	mc, err := parseMountConfig("m.toml", []byte("\"log.roll.hours\" = 1\n\"log.roll.ms\" = 5000\n"))
	require.NoError(t, err)
	assert.Equal(t, int64(5000), mc.Defaults.SegmentMs)
	// Dotted TOML tables spell the same names.
	mc, err = parseMountConfig("m.toml", []byte("[log.retention]\nhours = 3\n"))
	require.NoError(t, err)
	assert.Equal(t, int64(3*3_600_000), mc.Defaults.RetentionMs)
}

// TestMountConfigBrokerNameErrors: a broker-wide name with a bad value, a
// setting given under both its names, or a broker-wide name in a topic
// table stops the mount with one line naming the key as written.
func TestMountConfigBrokerNameErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{`"log.retention.hours" = "x"`, `log.retention.hours="x": not an integer`},
		{`"log.retention.hours" = 3000000000`, `log.retention.hours="3000000000": not an integer of 32 bits`},
		{`"log.roll.hours" = 0`, `log.roll.hours="0" sets segment.ms=0, which must be at least 1`},
		{`"log.segment.bytes" = 13`, `log.segment.bytes="13" sets segment.bytes=13, which must be at least 14`},
		{`"log.cleanup.policy" = "shred"`, `log.cleanup.policy="shred" sets cleanup.policy=shred`},
		{`"log.cleaner.min.cleanable.ratio" = 2`, `log.cleaner.min.cleanable.ratio="2" sets min.cleanable.dirty.ratio=2, which must be between 0 and 1`},
		{"\"retention.ms\" = 1000\n\"log.retention.hours\" = 1\n", `retention.ms and log.retention.hours both set retention.ms; keep one`},
		{"\"max.message.bytes\" = 1000\n\"message.max.bytes\" = 2000\n", `max.message.bytes and message.max.bytes both set max.message.bytes`},
		{"[topics.orders]\n\"log.retention.hours\" = 1\n", `[topics.orders] key "log.retention.hours" is a broker-wide name, for the top level; a topic table takes retention.ms`},
	} {
		_, err := parseMountConfig("/etc/topicfs/mount.toml", []byte(tc.text))
		if assert.Error(t, err, tc.text) {
			assert.Contains(t, err.Error(), tc.want, tc.text)
			assert.Contains(t, err.Error(), "mount.toml")
			assert.NotContains(t, err.Error(), "engine:")
		}
	}
}

// TestBrokerNamesCoverTopicSettings: every topic setting whose default a
// broker sets under another name has it, and the names convert.
func TestBrokerNamesCoverTopicSettings(t *testing.T) {
	want := map[string][]string{
		"segment.bytes":               {"log.segment.bytes"},
		"segment.ms":                  {"log.roll.ms", "log.roll.hours"},
		"segment.jitter.ms":           {"log.roll.jitter.ms", "log.roll.jitter.hours"},
		"segment.index.bytes":         {"log.index.size.max.bytes"},
		"index.interval.bytes":        {"log.index.interval.bytes"},
		"retention.ms":                {"log.retention.ms", "log.retention.minutes", "log.retention.hours"},
		"retention.bytes":             {"log.retention.bytes"},
		"retention.check.interval.ms": {"log.retention.check.interval.ms"},
		"cleanup.policy":              {"log.cleanup.policy"},
		"min.cleanable.dirty.ratio":   {"log.cleaner.min.cleanable.ratio"},
		"delete.retention.ms":         {"log.cleaner.delete.retention.ms"},
		"min.compaction.lag.ms":       {"log.cleaner.min.compaction.lag.ms"},
		"max.compaction.lag.ms":       {"log.cleaner.max.compaction.lag.ms"},
		"file.delete.delay.ms":        {"log.segment.delete.delay.ms"},
		"flush.messages":              {"log.flush.interval.messages"},
		"flush.ms":                    {"log.flush.interval.ms"},
		"max.message.bytes":           {"message.max.bytes"},
		"message.timestamp.type":      {"log.message.timestamp.type"},
	}
	for _, name := range engine.ConfigNames() {
		assert.Equal(t, want[name], engine.BrokerNames(name), name)
	}
	// Durations in hours convert without overflow at Kafka's INT bound.
	mc, err := parseMountConfig("m.toml", []byte(`"log.retention.hours" = 2147483647`))
	require.NoError(t, err)
	assert.Equal(t, int64(math.MaxInt32)*3_600_000, mc.Defaults.RetentionMs)
}

// TestCleanerThreadsZero: log.cleaner.threads=0 runs no cleaner, as in
// Kafka (it used to run one), and then needs no offset map memory.
func TestCleanerThreadsZero(t *testing.T) {
	mc, err := parseMountConfig("m.toml", []byte("\"log.cleaner.threads\" = 0\n\"log.cleaner.dedupe.buffer.size\" = 68719476704\n"))
	require.NoError(t, err)
	assert.Equal(t, -1, schedulerThreads(mc.Defaults), "no cleaner thread")
	assert.NoError(t, mc.Defaults.CheckCleanerMemory(1<<30), "no offset map is allocated")
	mc, err = parseMountConfig("m.toml", []byte(`"log.cleaner.threads" = 3`))
	require.NoError(t, err)
	assert.Equal(t, 3, schedulerThreads(mc.Defaults))
	assert.Equal(t, 1, schedulerThreads(engine.DefaultConfig()))
}
