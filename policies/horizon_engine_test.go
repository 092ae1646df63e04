package policies

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/vfs"
)

// TestTombstoneHorizonSurvivesRemount: a quiet compacted topic whose
// tombstone's delete horizon passes after a remount still loses the
// tombstone: the pending horizon is kept in topicfs-delete-horizons, not
// only in the scheduler's memory of its last run.
func TestTombstoneHorizonSurvivesRemount(t *testing.T) {
	clk := newClock()
	fsys := vfs.NewMem()
	conf := map[string]string{"cleanup.policy": "compact", "delete.retention.ms": "60000"}
	d := openLogDir(t, fsys, "/data", clk, conf)
	p := createPartition(t, d, "quiet", nil)
	appendRecs(t, p, kv("a", "1"), kv("b", "1"))
	appendRecs(t, p, kv("a", "2"))
	appendRecs(t, p, tomb("b"))
	require.NoError(t, p.Roll())
	appendRecs(t, p, kv("c", "active"))

	s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), DedupeBufferSize: testBuffer})
	runs, err := s.RunCleaner()
	require.NoError(t, err)
	require.Len(t, runs, 1)
	horizon := clk.Now().UnixMilli() + 60000
	require.Equal(t, horizon, runs[0].EarliestHorizonMs)
	assert.Equal(t, horizon, p.PendingDeleteHorizon())
	s.Stop()
	require.NoError(t, d.Close())

	m, err := engine.ReadCheckpoint(fsys, filepath.Join("/data", engine.DeleteHorizonsFile))
	require.NoError(t, err)
	assert.Equal(t, map[engine.TopicPartition]int64{{Topic: "quiet", Partition: 0}: horizon}, m)

	// Remount; the horizon passes with nothing appended.
	d = openLogDir(t, fsys, "/data", clk, conf)
	tp, err := d.Topic("quiet")
	require.NoError(t, err)
	p, err = tp.Partition(0)
	require.NoError(t, err)
	assert.Equal(t, horizon, p.PendingDeleteHorizon())
	s = NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), DedupeBufferSize: testBuffer})
	defer s.Stop()

	clk.Advance(30 * time.Second)
	runs, err = s.RunCleaner()
	require.NoError(t, err)
	assert.Empty(t, runs, "before the horizon a quiet log is left alone")
	require.Len(t, readAll(t, p), 3)

	clk.Advance(31 * time.Second)
	runs, err = s.RunCleaner()
	require.NoError(t, err)
	require.Len(t, runs, 1, "the horizon passed: the scheduler cleans the quiet log")
	got := readAll(t, p)
	require.Len(t, got, 2)
	assert.Equal(t, int64(2), got[0].Offset) // a=2
	assert.Equal(t, int64(4), got[1].Offset) // c, active
	assert.Zero(t, p.PendingDeleteHorizon(), "no tombstone left pending")

	// Nothing pending: the file's entry goes at the next checkpoint.
	require.NoError(t, d.Checkpoint())
	m, err = engine.ReadCheckpoint(fsys, filepath.Join("/data", engine.DeleteHorizonsFile))
	require.NoError(t, err)
	assert.Empty(t, m)
}

// legacyV1 encodes one uncompressed magic-1 message as a log entry at
// offset (a nil value is a tombstone).
func legacyV1(offset, ts int64, key, value []byte) []byte {
	m := make([]byte, 4, 64)
	m = append(m, 1, 0) // magic 1, attributes: no codec, CreateTime
	m = binary.BigEndian.AppendUint64(m, uint64(ts))
	for _, f := range [][]byte{key, value} {
		if f == nil {
			m = binary.BigEndian.AppendUint32(m, 0xffffffff)
		} else {
			m = binary.BigEndian.AppendUint32(m, uint32(len(f)))
			m = append(m, f...)
		}
	}
	binary.BigEndian.PutUint32(m, crc32.ChecksumIEEE(m[4:]))
	e := binary.BigEndian.AppendUint64(nil, uint64(offset))
	e = binary.BigEndian.AppendUint32(e, uint32(len(m)))
	return append(e, m...)
}

// TestCleanerLegacyTombstonesSegmentTime: legacy (magic 1) tombstones have
// no delete horizon; the cleaner applies Kafka's segment-time rule to
// them: those of a segment last modified at least delete.retention.ms
// before the last segment of the clean part go, the others stay (before,
// every legacy tombstone was kept forever).
func TestCleanerLegacyTombstonesSegmentTime(t *testing.T) {
	clk := newClock()
	fsys := vfs.NewMem()
	fsys.SetClock(clk.Now)
	t0 := clk.Now().UnixMilli()
	dir := "/data/legacy-0"
	require.NoError(t, fsys.MkdirAll(dir, 0o755))
	write := func(name string, entries ...[]byte) {
		f, err := fsys.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_WRONLY, 0o644)
		require.NoError(t, err)
		for _, e := range entries {
			_, err = f.Write(e)
			require.NoError(t, err)
		}
		require.NoError(t, f.Sync())
		require.NoError(t, f.Close())
	}
	// Segment 0, last modified at t0: a=1 and a tombstone for b.
	write("00000000000000000000.log", legacyV1(0, t0, []byte("a"), []byte("1")), legacyV1(1, t0, []byte("b"), nil))
	// Segment 2, two minutes later: c=1 and a tombstone for x.
	clk.Advance(2 * time.Minute)
	write("00000000000000000002.log", legacyV1(2, t0, []byte("c"), []byte("1")), legacyV1(3, t0, []byte("x"), nil))
	require.NoError(t, engine.WriteCheckpoint(fsys, "/data/"+engine.CleanerOffsetCheckpointFile,
		map[engine.TopicPartition]int64{{Topic: "legacy", Partition: 0}: 4}))

	d := openLogDir(t, fsys, "/data", clk, map[string]string{
		"cleanup.policy": "compact", "delete.retention.ms": "60000", "min.cleanable.dirty.ratio": "0.01",
	})
	tp, err := d.Topic("legacy")
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	require.Equal(t, int64(4), p.FirstDirtyOffset())
	require.NoError(t, p.Roll())
	appendRecs(t, p, kv("c", "2")) // dirty: supersedes c=1
	require.NoError(t, p.Roll())
	appendRecs(t, p, kv("z", "active"))

	// The clean part ends with segment 2 (modified t0+2min), so the legacy
	// horizon is t0+1min: segment 0's tombstone goes, segment 2's stays.
	clk.Advance(time.Minute)
	s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), DedupeBufferSize: testBuffer})
	defer s.Stop()
	runs, err := s.RunCleaner()
	require.NoError(t, err)
	require.Len(t, runs, 1)
	require.Equal(t, "done", runs[0].Outcome)

	var offs []int64
	for _, r := range readAll(t, p) {
		offs = append(offs, r.Offset)
	}
	assert.Equal(t, []int64{0, 3, 4, 5}, offs, "a=1, x's tombstone (recent segment), c=2, z")
}
