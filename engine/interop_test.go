package engine

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/internal/testutil"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// interopBatch is a batch read back through the engine with its records.
type interopBatch struct {
	batch record.Batch
	recs  []record.Record
}

// interopRead reads every batch of a partition through Snapshot and
// Segment.ReadBatch (CRC-verified), oldest first.
func interopRead(t *testing.T, p *Partition) []interopBatch {
	t.Helper()
	snap := p.Snapshot()
	defer snap.Release()
	var out []interopBatch
	for _, seg := range snap.Segments {
		for pos := int64(0); pos < seg.Size(); {
			b, err := seg.ReadBatch(pos, nil)
			require.NoError(t, err, "%s position %d", seg.LogPath(), pos)
			recs, err := b.Records(nil)
			require.NoError(t, err, "%s position %d", seg.LogPath(), pos)
			b.Raw = nil // do not keep the buffer
			out = append(out, interopBatch{batch: b, recs: recs})
			pos += int64(b.Size())
		}
	}
	return out
}

func interopRecords(bs []interopBatch) []record.Record {
	var out []record.Record
	for _, b := range bs {
		out = append(out, b.recs...)
	}
	return out
}

func interopPartition(t *testing.T, d *LogDir, topic string, id int) *Partition {
	t.Helper()
	tp, err := d.Topic(topic)
	require.NoError(t, err)
	p, err := tp.Partition(id)
	require.NoError(t, err)
	return p
}

func interopPartitionIDs(t *testing.T, d *LogDir) map[string][]int {
	t.Helper()
	out := map[string][]int{}
	for _, tp := range d.Topics() {
		for _, p := range tp.Partitions() {
			out[tp.Name()] = append(out[tp.Name()], p.ID())
		}
	}
	return out
}

func interopSeq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// openFixtureReadOnly opens a fixture log dir read-only and checks, when the
// test ends, that nothing under it changed.
func openFixtureReadOnly(t *testing.T, dir string) *LogDir {
	t.Helper()
	path := testutil.KafkaFixture(t, dir)
	before := testutil.TreeState(t, path)
	opts := ldOpts()
	opts.ReadOnly = true
	d, err := OpenLogDir(vfs.OS, path, opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, d.Close())
		assert.Equal(t, before, testutil.TreeState(t, path), "a read-only open wrote nothing")
	})
	return d
}

func TestInteropKafka41KRaft(t *testing.T) {
	d := openFixtureReadOnly(t, "kafka41-kraft-nomanazeem/kafka-logs")
	ids := interopPartitionIDs(t, d)
	assert.Equal(t, map[string][]int{"__consumer_offsets": interopSeq(50), "demo-topic": interopSeq(3)}, ids)
	_, err := d.Topic(MetadataTopic)
	assert.ErrorIs(t, err, ErrUnknownTopic, "the KRaft metadata log is not a topic")

	p := interopPartition(t, d, "__consumer_offsets", 15)
	bs := interopRead(t, p)
	assert.Len(t, bs, 88)
	recs := interopRecords(bs)
	require.NotEmpty(t, recs)
	assert.EqualValues(t, 0, recs[0].Offset)
	assert.EqualValues(t, 255, recs[len(recs)-1].Offset)
	assert.EqualValues(t, 256, p.LogEndOffset())
	for _, b := range bs {
		assert.EqualValues(t, -1, b.batch.ProducerID)
		assert.EqualValues(t, 0, b.batch.BaseSequence, "broker-written quirk: pid -1 with baseSequence 0")
	}
	for _, id := range interopSeq(3) {
		p := interopPartition(t, d, "demo-topic", id)
		assert.Empty(t, interopRead(t, p))
		assert.EqualValues(t, 0, p.LogEndOffset())
	}
}

func TestInteropCP76LZ4LogAppendTime(t *testing.T) {
	d := openFixtureReadOnly(t, "cp76-kafka36-lz4-rjmfernandes/data")
	assert.Equal(t, map[string][]int{
		"__consumer_offsets":    {28, 29},
		"_confluent-command":    {0},
		"_confluent-monitoring": {0},
		"_confluent-controlcenter-7-6-0-1-KSTREAM-OUTEROTHER-0000000106-store-changelog": {0},
	}, interopPartitionIDs(t, d))
	tp, err := d.Topic("__consumer_offsets")
	require.NoError(t, err)
	_, err = tp.Partition(0)
	assert.ErrorIs(t, err, ErrUnknownPartition, "only 28 and 29 were copied")

	p := interopPartition(t, d, "_confluent-monitoring", 0)
	bs := interopRead(t, p)
	assert.Len(t, bs, 1951)
	recs := interopRecords(bs)
	assert.EqualValues(t, 0, recs[0].Offset)
	assert.EqualValues(t, 2826, recs[len(recs)-1].Offset)
	assert.EqualValues(t, 2827, p.LogEndOffset())
	for _, b := range bs {
		assert.Equal(t, record.LZ4, b.batch.Codec())
		require.True(t, b.batch.LogAppendTime())
		for _, r := range b.recs {
			require.Equal(t, b.batch.MaxTimestamp, r.Timestamp, "LogAppendTime: every record reads the batch's maxTimestamp")
		}
	}
	cmd := interopRead(t, interopPartition(t, d, "_confluent-command", 0))
	require.Len(t, cmd, 2)
	assert.EqualValues(t, []int64{2, 20}, []int64{cmd[0].batch.ProducerID, cmd[1].batch.ProducerID})
	cl := interopPartition(t, d, "_confluent-controlcenter-7-6-0-1-KSTREAM-OUTEROTHER-0000000106-store-changelog", 0)
	assert.Len(t, interopRead(t, cl), 487)
	assert.EqualValues(t, 487, cl.LogEndOffset())
}

func TestInteropKafka271CompactedUnclean(t *testing.T) {
	d := openFixtureReadOnly(t, "kafka271-zk-compacted-donaldy/kafka-logs")
	ids := interopPartitionIDs(t, d)
	assert.Equal(t, interopSeq(50), ids["__consumer_offsets"])
	assert.Equal(t, []int{0}, ids["myTopic"])
	assert.Equal(t, []int{0}, ids["test_topic"])
	assert.Equal(t, []int{0}, ids["test_topic_0603"])
	assert.Len(t, ids, 4)

	// Compaction removed offset 0: the file name is below the first offset.
	p28 := interopPartition(t, d, "__consumer_offsets", 28)
	recs := interopRecords(interopRead(t, p28))
	require.NotEmpty(t, recs)
	assert.EqualValues(t, 1, recs[0].Offset)
	assert.EqualValues(t, 3, p28.LogEndOffset())

	// Gaps and tombstones survive.
	recs = interopRecords(interopRead(t, interopPartition(t, d, "__consumer_offsets", 39)))
	var offs []int64
	tombstones := 0
	for _, r := range recs {
		offs = append(offs, r.Offset)
		if r.Value == nil {
			tombstones++
		}
	}
	assert.Equal(t, []int64{4, 16, 17}, offs[:3])
	assert.Positive(t, tombstones)

	// Retention emptied myTopic: one empty segment named after the log start.
	my := interopPartition(t, d, "myTopic", 0)
	assert.Empty(t, interopRead(t, my))
	assert.EqualValues(t, 38, my.LogEndOffset())
	assert.EqualValues(t, 38, my.LogStartOffset())
	assert.EqualValues(t, 12, interopPartition(t, d, "test_topic", 0).LogEndOffset())
}

func TestInteropKafka0110(t *testing.T) {
	d := openFixtureReadOnly(t, "kafka0110-zk-sharaweil/data")
	assert.Equal(t, map[string][]int{"test0": interopSeq(3), "mac_test": {0}}, interopPartitionIDs(t, d))
	want0 := []string{"1", "2", "3", "1", "1", "1", "", "", "2", "3", "3"}
	for id := range 3 {
		p := interopPartition(t, d, "test0", id)
		assert.EqualValues(t, 11, p.LogEndOffset())
		recs := interopRecords(interopRead(t, p))
		assert.Len(t, recs, 11)
		for i, r := range recs {
			assert.EqualValues(t, i, r.Offset)
			assert.Nil(t, r.Key, "console producer: null keys")
			assert.Regexp(t, `^[0-9]*$`, string(r.Value), "console producer values")
			if id == 0 {
				assert.Equal(t, want0[i], string(r.Value), "test0-0 offset %d", i)
			}
		}
		if id == 0 {
			assert.EqualValues(t, 1600054618983, recs[10].Timestamp, "the time index's final entry (1600054618983, 10)")
		}
	}
	mac := interopPartition(t, d, "mac_test", 0)
	assert.EqualValues(t, 78, mac.LogEndOffset())
	assert.Empty(t, interopRead(t, mac))
}

// TestInteropReadWriteCopy opens a copy of a Kafka directory read-write: the
// broker's clean-shutdown marker is honoured and consumed, and appends
// continue at the broker's log end.
func TestInteropReadWriteCopy(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "data")
	testutil.CopyTree(t, testutil.KafkaFixture(t, "kafka0110-zk-sharaweil/data"), dst)
	d, err := OpenLogDir(vfs.OS, dst, ldOpts())
	require.NoError(t, err)
	assert.False(t, ldExists(vfs.OS, filepath.Join(dst, KafkaCleanShutdownFile)))
	p := interopPartition(t, d, "test0", 1)
	first, _, err := p.Append([]record.Record{{Timestamp: -1, Value: []byte("after")}})
	require.NoError(t, err)
	assert.EqualValues(t, 11, first)
	require.NoError(t, d.Close())

	rp, err := ReadCheckpoint(vfs.OS, filepath.Join(dst, RecoveryPointCheckpointFile))
	require.NoError(t, err)
	assert.EqualValues(t, 12, rp[TopicPartition{Topic: "test0", Partition: 1}])
	assert.EqualValues(t, 78, rp[TopicPartition{Topic: "mac_test", Partition: 0}])
}
