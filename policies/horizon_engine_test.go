package policies

import (
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
