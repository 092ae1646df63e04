package engine

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
	"github.com/topicfs/topicfs/internal/testutil"
)

func TestReadCheckpointFixtures(t *testing.T) {
	k41 := "kafka41-kraft-nomanazeem/kafka-logs"
	cp76 := "cp76-kafka36-lz4-rjmfernandes/data"
	dy := "kafka271-zk-compacted-donaldy/kafka-logs"
	sh := "kafka0110-zk-sharaweil/data"
	tests := []struct {
		file string
		n    int
		has  map[TopicPartition]int64
	}{
		{filepath.Join(k41, "recovery-point-offset-checkpoint"), 53, map[TopicPartition]int64{{"__consumer_offsets", 15}: 256, {"demo-topic", 1}: 0}},
		{filepath.Join(k41, "replication-offset-checkpoint"), 53, nil},
		{filepath.Join(k41, "log-start-offset-checkpoint"), 0, nil},
		{filepath.Join(k41, "cleaner-offset-checkpoint"), 0, nil},
		{filepath.Join(cp76, "recovery-point-offset-checkpoint"), 151, nil},
		{filepath.Join(cp76, "log-start-offset-checkpoint"), 2, nil},
		{filepath.Join(cp76, "cleaner-offset-checkpoint"), 0, nil},
		{filepath.Join(dy, "cleaner-offset-checkpoint"), 3, map[TopicPartition]int64{
			{"__consumer_offsets", 28}: 2, {"__consumer_offsets", 17}: 1, {"__consumer_offsets", 39}: 18}},
		{filepath.Join(dy, "recovery-point-offset-checkpoint"), 53, map[TopicPartition]int64{{"myTopic", 0}: 38}},
		{filepath.Join(sh, "recovery-point-offset-checkpoint"), 4, map[TopicPartition]int64{{"test0", 2}: 11, {"mac_test", 0}: 78}},
		{filepath.Join(sh, "no-such-checkpoint"), 0, nil},
	}
	for _, tc := range tests {
		t.Run(filepath.Base(filepath.Dir(tc.file))+"/"+filepath.Base(tc.file), func(t *testing.T) {
			m, err := ReadCheckpoint(vfs.OS, testutil.KafkaFixture(t, tc.file))
			require.NoError(t, err)
			assert.Len(t, m, tc.n)
			for tp, off := range tc.has {
				assert.Equal(t, off, m[tp], "%v", tp)
			}
		})
	}
}

func TestReadCheckpointFixtureRecoveryPoint(t *testing.T) {
	// Every topic of the kafka41 fixture must come back with its partitions.
	m, err := ReadCheckpoint(vfs.OS, testutil.KafkaFixture(t, "kafka41-kraft-nomanazeem/kafka-logs/recovery-point-offset-checkpoint"))
	require.NoError(t, err)
	topics := map[string]int{}
	for tp := range m {
		topics[tp.Topic]++
	}
	assert.Equal(t, 50, topics["__consumer_offsets"])
	assert.Equal(t, 3, topics["demo-topic"])
}

func TestReadCheckpointErrors(t *testing.T) {
	tests := []struct {
		name, data string
		n          int
		ok         bool
	}{
		{"empty", "", 0, true},
		{"version only", "0\n", 0, true},
		{"zero entries", "0\n0\n", 0, true},
		{"no final newline", "0\n1\nt 0 5", 1, true},
		{"crlf", "0\r\n1\r\nt 0 5\r\n", 1, true},
		{"tabs and spaces", "0\n1\nt \t 3   7\n", 1, true},
		{"wrong version", "1\n0\n", 0, false},
		{"version not a number", "x\n0\n", 0, false},
		{"count too high", "0\n2\nt 0 5\n", 0, false},
		{"count too low", "0\n1\nt 0 5\nt 1 6\n", 0, false},
		{"count not a number", "0\nmany\n", 0, false},
		{"two fields (leader-epoch format)", "0\n1\n0 0\n", 0, false},
		{"bad partition", "0\n1\nt x 5\n", 0, false},
		{"negative partition", "0\n1\nt -1 5\n", 0, false},
		{"bad offset", "0\n1\nt 0 5.5\n", 0, false},
		{"blank entry line", "0\n1\n\n", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := vfs.NewMem()
			f, err := m.OpenFile("/cp", os.O_CREATE|os.O_WRONLY, 0o644)
			require.NoError(t, err)
			_, err = f.Write([]byte(tc.data))
			require.NoError(t, err)
			require.NoError(t, f.Close())
			got, err := ReadCheckpoint(m, "/cp")
			if !tc.ok {
				require.ErrorIs(t, err, ErrCorrupt)
				assert.Contains(t, err.Error(), "/cp")
				return
			}
			require.NoError(t, err)
			assert.Len(t, got, tc.n)
		})
	}
}

func TestWriteCheckpointRoundTrip(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "recovery-point-offset-checkpoint")
	in := map[TopicPartition]int64{{"b", 1}: 20, {"a", 10}: 5, {"a", 2}: 7, {"__consumer_offsets", 28}: 2}
	require.NoError(t, WriteCheckpoint(vfs.OS, p, in))
	raw, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "0\n4\n__consumer_offsets 28 2\na 2 7\na 10 5\nb 1 20\n", string(raw))
	out, err := ReadCheckpoint(vfs.OS, p)
	require.NoError(t, err)
	assert.Equal(t, in, out)
	_, err = os.Stat(p + ".tmp")
	assert.ErrorIs(t, err, os.ErrNotExist)

	require.NoError(t, WriteCheckpoint(vfs.OS, p, nil))
	raw, err = os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "0\n0\n", string(raw))

	err = WriteCheckpoint(vfs.OS, p, map[TopicPartition]int64{{"has space", 0}: 1})
	assert.ErrorIs(t, err, ErrInvalidTopic)
}

func TestWriteCheckpointFaults(t *testing.T) {
	m := vfs.NewMem()
	require.NoError(t, WriteCheckpoint(m, "/cp", map[TopicPartition]int64{{"t", 0}: 1}))
	efs := vfs.NewErrorFS(m, vfs.FailOnPath("/cp.tmp", vfs.OpSync, syscall.EIO))
	err := WriteCheckpoint(efs, "/cp", map[TopicPartition]int64{{"t", 0}: 2})
	require.ErrorIs(t, err, syscall.EIO)
	got, err := ReadCheckpoint(m, "/cp")
	require.NoError(t, err)
	assert.Equal(t, int64(1), got[TopicPartition{"t", 0}], "old file kept")
	_, err = m.Stat("/cp.tmp")
	assert.ErrorIs(t, err, os.ErrNotExist, "tmp removed")

	efs = vfs.NewErrorFS(m, vfs.ShortWriteNth(0, 5, syscall.ENOSPC))
	err = WriteCheckpoint(efs, "/cp", map[TopicPartition]int64{{"t", 0}: 3})
	require.ErrorIs(t, err, syscall.ENOSPC)
	got, err = ReadCheckpoint(m, "/cp")
	require.NoError(t, err)
	assert.Equal(t, int64(1), got[TopicPartition{"t", 0}])
}

// TestWriteCheckpointCrash crashes at every file operation of a rewrite and
// checks the crashed file system holds the old checkpoint or the new one.
func TestWriteCheckpointCrash(t *testing.T) {
	oldM := map[TopicPartition]int64{{"t", 0}: 10, {"t", 1}: 11}
	newM := map[TopicPartition]int64{{"t", 0}: 20, {"t", 1}: 21, {"u", 0}: 5}
	setup := func() *vfs.MemFS {
		m := vfs.NewMem()
		require.NoError(t, m.MkdirAll("/data", 0o755))
		require.NoError(t, m.SyncDir("/"))
		require.NoError(t, WriteCheckpoint(m, "/data/cp", oldM))
		return m
	}
	counter := vfs.NewCounter()
	require.NoError(t, WriteCheckpoint(vfs.NewErrorFS(setup(), counter), "/data/cp", newM))
	n := counter.Count()
	require.Equal(t, int64(5), n, "create, write, sync, rename, syncdir")
	sawOld, sawNew := false, false
	for i := int64(0); i <= n; i++ {
		m := setup()
		err := WriteCheckpoint(vfs.NewErrorFS(m, vfs.CrashAt(i)), "/data/cp", newM)
		if i < n {
			require.ErrorIs(t, err, vfs.ErrInjectedCrash)
		} else {
			require.NoError(t, err)
		}
		got, err := ReadCheckpoint(m.Crash(), "/data/cp")
		require.NoError(t, err, "crash at op %d", i)
		switch {
		case assert.ObjectsAreEqual(oldM, got):
			sawOld = true
		case assert.ObjectsAreEqual(newM, got):
			sawNew = true
		default:
			t.Fatalf("crash at op %d: torn checkpoint %v", i, got)
		}
	}
	assert.True(t, sawOld)
	assert.True(t, sawNew)
}

// TestUnchangedCheckpointsNotRewritten: a checkpoint tick writes only the
// root checkpoint files whose content changed since it last wrote them
// (each write is a rename and two fsyncs).
func TestUnchangedCheckpointsNotRewritten(t *testing.T) {
	dir := t.TempDir()
	d, err := OpenLogDir(vfs.OS, dir, ldOpts())
	require.NoError(t, err)
	defer d.Close()
	tp, err := d.CreateTopic("t", 1)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	inode := func() uint64 {
		fi, err := os.Stat(filepath.Join(dir, RecoveryPointCheckpointFile))
		require.NoError(t, err)
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	require.NoError(t, d.Checkpoint())
	first := inode()
	require.NoError(t, d.Checkpoint())
	assert.Equal(t, first, inode(), "unchanged: not written again")
	_, _, err = p.Append([]record.Record{{Value: []byte("x")}})
	require.NoError(t, err)
	require.NoError(t, p.Flush())
	require.NoError(t, d.Checkpoint())
	assert.NotEqual(t, first, inode(), "the recovery point moved: written (a new file renamed over it)")
}
