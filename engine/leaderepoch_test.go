package engine

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/vfs"
	"github.com/topicfs/topicfs/internal/testutil"
)

// metadataRe is partition.metadata as Kafka writes it: two lines, no final
// newline, the id in URL-safe base64 without padding.
var metadataRe = regexp.MustCompile(`^version: 0\ntopic_id: ([A-Za-z0-9_-]{22})$`)

func readFileT(t *testing.T, fsys vfs.FS, path string) string {
	t.Helper()
	b, err := vfs.ReadFile(fsys, path)
	require.NoError(t, err, path)
	return string(b)
}

// TestNewTopicKafkaPartitionFiles: every partition of a new topic has a
// leader-epoch-checkpoint (epoch 0 from offset 0) and a partition.metadata
// with one random topic id for the whole topic, in Kafka's exact format;
// partitions added later get the same id, and both files stay as they are
// across a remount.
func TestNewTopicKafkaPartitionFiles(t *testing.T) {
	fsys := vfs.NewMem()
	d, err := OpenLogDir(fsys, "/data", ldOpts())
	require.NoError(t, err)
	tp, err := d.CreateTopic("orders", 3)
	require.NoError(t, err)
	require.NoError(t, tp.AddPartitions(4))
	_, err = d.CreateTopic("other", 1)
	require.NoError(t, err)

	var id string
	for p := range 4 {
		dir := d.partitionDir("orders", p)
		assert.Equal(t, "0\n1\n0 0\n", readFileT(t, fsys, filepath.Join(dir, LeaderEpochCheckpointFile)))
		m := metadataRe.FindStringSubmatch(readFileT(t, fsys, filepath.Join(dir, PartitionMetadataFile)))
		require.NotNil(t, m, "partition %d: partition.metadata in Kafka's format", p)
		if p == 0 {
			id = m[1]
		}
		assert.Equal(t, id, m[1], "partition %d: one id for the topic", p)
	}
	otherID, ok := ReadPartitionMetadata(fsys, d.partitionDir("other", 0))
	require.True(t, ok)
	assert.NotEqual(t, id, otherID.String(), "each topic its own id")
	p0, err := tp.Partition(0)
	require.NoError(t, err)
	assert.Equal(t, []EpochEntry{{0, 0}}, p0.LeaderEpochs())
	_, _, err = p0.Append(makeRecs(0, 5, 1000))
	require.NoError(t, err)
	require.NoError(t, d.Close())

	d, err = OpenLogDir(fsys, "/data", ldOpts())
	require.NoError(t, err)
	defer d.Close()
	for p := range 4 {
		dir := d.partitionDir("orders", p)
		assert.Equal(t, "0\n1\n0 0\n", readFileT(t, fsys, filepath.Join(dir, LeaderEpochCheckpointFile)))
		assert.Equal(t, "version: 0\ntopic_id: "+id, readFileT(t, fsys, filepath.Join(dir, PartitionMetadataFile)))
	}
}

// TestLeaderEpochCheckpointFollowsRetention: when retention deletes
// segments, the checkpoint's entries start at the new log start (the
// entry covering it raised to it, those before it dropped), as Kafka's
// truncateFromStart leaves them.
func TestLeaderEpochCheckpointFollowsRetention(t *testing.T) {
	fsys := vfs.NewMem()
	d, err := OpenLogDir(fsys, "/data", ldOpts())
	require.NoError(t, err)
	defer d.Close()
	tp, err := d.CreateTopic("t", 1)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	ckpt := filepath.Join(p.Dir(), LeaderEpochCheckpointFile)
	for i := range 3 {
		_, _, err = p.Append(makeRecs(i*4, 4, 1000))
		require.NoError(t, err)
		require.NoError(t, p.Roll())
	}
	_, err = p.DeleteOldestSegments(1, "test")
	require.NoError(t, err)
	require.Equal(t, int64(4), p.LogStartOffset())
	assert.Equal(t, "0\n1\n0 4\n", readFileT(t, fsys, ckpt))
	assert.Equal(t, []EpochEntry{{0, 4}}, p.LeaderEpochs())

	// A log that had several epochs (a Kafka broker's) loses those before
	// the new start.
	p.epochs.mu.Lock()
	require.NoError(t, p.writeEpochsLocked([]EpochEntry{{0, 4}, {2, 6}, {5, 10}}))
	p.epochs.mu.Unlock()
	_, err = p.DeleteOldestSegments(1, "test")
	require.NoError(t, err)
	require.Equal(t, int64(8), p.LogStartOffset())
	assert.Equal(t, "0\n2\n2 8\n5 10\n", readFileT(t, fsys, ckpt))
}

// TestLeaderEpochCheckpointCutAtOpen: an open cuts the entries to the log,
// as Kafka's loader does: those starting at or after the log end go, the
// first is raised to the log start.
func TestLeaderEpochCheckpointCutAtOpen(t *testing.T) {
	fsys := vfs.NewMem()
	d, err := OpenLogDir(fsys, "/data", ldOpts())
	require.NoError(t, err)
	tp, err := d.CreateTopic("t", 1)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	_, _, err = p.Append(makeRecs(0, 10, 1000))
	require.NoError(t, err)
	dir := p.Dir()
	require.NoError(t, d.Close())

	ckpt := filepath.Join(dir, LeaderEpochCheckpointFile)
	require.NoError(t, vfs.WriteFileAtomic(fsys, ckpt, []byte("0\n3\n1 0\n3 7\n4 10\n"), 0o644))
	d, err = OpenLogDir(fsys, "/data", ldOpts())
	require.NoError(t, err)
	assert.Equal(t, "0\n2\n1 0\n3 7\n", readFileT(t, fsys, ckpt), "epoch 4 started at the log end: gone")
	require.NoError(t, d.Close())

	// An unreadable file is left alone (nothing lost) and not kept.
	require.NoError(t, vfs.WriteFileAtomic(fsys, ckpt, []byte("7\nx\n"), 0o644))
	d, err = OpenLogDir(fsys, "/data", ldOpts())
	require.NoError(t, err)
	defer d.Close()
	tp, err = d.Topic("t")
	require.NoError(t, err)
	p, err = tp.Partition(0)
	require.NoError(t, err)
	assert.Nil(t, p.LeaderEpochs())
	_, err = p.DeleteOldestSegments(1, "test")
	require.NoError(t, err)
	assert.Equal(t, "7\nx\n", readFileT(t, fsys, ckpt))
}

func TestTruncateEpochs(t *testing.T) {
	e := []EpochEntry{{0, 0}, {2, 6}, {5, 10}}
	assert.Equal(t, e, TruncateEpochsFromStart(e, 0))
	assert.Equal(t, []EpochEntry{{0, 3}, {2, 6}, {5, 10}}, TruncateEpochsFromStart(e, 3))
	assert.Equal(t, []EpochEntry{{2, 6}, {5, 10}}, TruncateEpochsFromStart(e, 6))
	assert.Equal(t, []EpochEntry{{5, 12}}, TruncateEpochsFromStart(e, 12))
	assert.Equal(t, e, TruncateEpochsFromEnd(e, 11))
	assert.Equal(t, []EpochEntry{{0, 0}, {2, 6}}, TruncateEpochsFromEnd(e, 10))
	assert.Empty(t, TruncateEpochsFromEnd(e, 0))

	for _, bad := range []string{"1\n0\n", "0\n2\n0 0\n", "0\n1\n0\n", "0\n2\n3 5\n2 7\n", "0\n1\n-1 0\n"} {
		_, err := ParseLeaderEpochCheckpoint([]byte(bad))
		assert.ErrorIs(t, err, ErrCorrupt, "%q", bad)
	}
	got, err := ParseLeaderEpochCheckpoint([]byte("0\n2\n0 0\n3 1500\n"))
	require.NoError(t, err)
	assert.Equal(t, []EpochEntry{{0, 0}, {3, 1500}}, got)
	assert.Equal(t, "0\n2\n0 0\n3 1500\n", string(FormatLeaderEpochCheckpoint(got)))
}

// TestFixtureLeaderEpochCheckpointKept: the leader-epoch-checkpoint files a
// real Kafka broker wrote keep their entries across a read-write mount
// and a clean close, byte for byte; partition directories with no epoch
// get epoch 0 from their log end.
func TestFixtureLeaderEpochCheckpointKept(t *testing.T) {
	for _, set := range []string{"kafka271-zk-compacted-donaldy/kafka-logs", "kafka0110-zk-sharaweil/data"} {
		t.Run(set, func(t *testing.T) {
			dir := t.TempDir()
			testutil.CopyTree(t, testutil.KafkaFixture(t, set), dir)
			before := map[string]string{}
			ents, err := os.ReadDir(dir)
			require.NoError(t, err)
			for _, e := range ents {
				b, err := os.ReadFile(filepath.Join(dir, e.Name(), LeaderEpochCheckpointFile))
				if err == nil {
					before[e.Name()] = string(b)
				} else {
					require.True(t, errors.Is(err, fs.ErrNotExist) || !e.IsDir(), "%v", err)
				}
			}
			require.NotEmpty(t, before)

			d, err := OpenLogDir(vfs.OS, dir, ldOpts())
			require.NoError(t, err)
			for _, p := range d.Partitions() {
				name := filepath.Base(p.Dir())
				want, err := ParseLeaderEpochCheckpoint([]byte(before[name]))
				require.NoError(t, err)
				if len(want) == 0 {
					// No epoch known (no file, or Kafka emptied it): the
					// mount becomes leader at epoch 0 from the log end.
					want = []EpochEntry{{0, p.LogEndOffset()}}
					before[name] = string(FormatLeaderEpochCheckpoint(want))
				}
				assert.Equal(t, want, p.LeaderEpochs(), name)
			}
			require.NoError(t, d.Close())
			for name, want := range before {
				b, err := os.ReadFile(filepath.Join(dir, name, LeaderEpochCheckpointFile))
				require.NoError(t, err)
				assert.Equal(t, want, string(b), name)
			}
		})
	}
}
