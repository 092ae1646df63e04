package engine

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// deleteDirs lists the -delete directories in the data directory.
func deleteDirs(t *testing.T, fsys vfs.FS, path string) []string {
	t.Helper()
	var out []string
	for _, n := range ldListDir(t, fsys, path) {
		if strings.HasSuffix(n, "-delete") {
			out = append(out, n)
		}
	}
	return out
}

// TestDeleteTopicWaitsFileDeleteDelay: a deleted topic's directories are
// renamed -delete at once and removed only file.delete.delay.ms later (the
// mount-wide value, as a broker's log manager uses its default), by the
// LogDir's clock.
func TestDeleteTopicWaitsFileDeleteDelay(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	fsys := vfs.NewMem()
	opts := ldOpts()
	opts.Now = clock.Now
	opts.Defaults = DefaultConfig()
	opts.Defaults.FileDeleteDelayMs = 60000
	d, err := OpenLogDir(fsys, "/data", opts)
	require.NoError(t, err)
	defer d.Close()
	tp, err := d.CreateTopic("gone", 2)
	require.NoError(t, err)
	// The topic's own delay does not apply to whole partitions.
	require.NoError(t, tp.AlterConfig(map[string]string{"file.delete.delay.ms": "0"}))
	require.NoError(t, d.DeleteTopic("gone"))

	pending := deleteDirs(t, fsys, "/data")
	require.Len(t, pending, 2, "renamed at once")
	assert.Equal(t, pending, d.PendingTopicDeletions())
	_, err = d.CreateTopic("gone", 1)
	require.NoError(t, err, "the name is free at once")

	clock.Advance(59 * time.Second)
	assert.Zero(t, d.RemoveDeletedTopics(clock.Now()))
	assert.Equal(t, pending, deleteDirs(t, fsys, "/data"), "kept until file.delete.delay.ms")
	clock.Advance(time.Second)
	assert.Equal(t, 2, d.RemoveDeletedTopics(clock.Now()))
	assert.Empty(t, deleteDirs(t, fsys, "/data"))
	assert.Empty(t, d.PendingTopicDeletions())
	assert.True(t, ldExists(fsys, "/data/gone-0"), "the new topic of that name is untouched")
}

// TestDeleteTopicZeroDelay: file.delete.delay.ms=0 removes the directories
// at once (Close waits for the background removal).
func TestDeleteTopicZeroDelay(t *testing.T) {
	fsys := vfs.NewMem()
	opts := ldOpts()
	opts.Defaults = DefaultConfig()
	opts.Defaults.FileDeleteDelayMs = 0
	d, err := OpenLogDir(fsys, "/data", opts)
	require.NoError(t, err)
	_, err = d.CreateTopic("gone", 1)
	require.NoError(t, err)
	require.NoError(t, d.DeleteTopic("gone"))
	assert.Empty(t, d.PendingTopicDeletions())
	require.NoError(t, d.Close())
	assert.Empty(t, deleteDirs(t, fsys, "/data"))
}

// TestRemountFinishesPendingDeletions: what a mount left waiting — a
// deleted topic's -delete directory and a partition's .deleted segment
// files — the next read-write open finds and finishes as a broker does at
// startup: .deleted files are unlinked at once (LogLoader), -delete
// directories file.delete.delay.ms after the open (LogManager).
func TestRemountFinishesPendingDeletions(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1_700_000_000_000)}
	fsys := vfs.NewMem()
	opts := ldOpts()
	opts.Now = clock.Now
	opts.Defaults = DefaultConfig()
	opts.Defaults.SegmentBytes = 200
	d, err := OpenLogDir(fsys, "/data", opts)
	require.NoError(t, err)
	_, err = d.CreateTopic("gone", 1)
	require.NoError(t, err)
	tp, err := d.CreateTopic("kept", 1)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	for i := 0; i < 10; i++ {
		_, _, err = p.Append([]record.Record{{Timestamp: -1, Value: []byte("some value of about forty bytes .........")}})
		require.NoError(t, err)
	}
	require.Greater(t, len(p.Segments()), 2)
	_, err = p.DeleteOldestSegments(1, "test")
	require.NoError(t, err)
	require.NoError(t, d.DeleteTopic("gone"))
	require.NoError(t, d.Close())

	keptDir := filepath.Join("/data", "kept-0")
	require.NotEmpty(t, deletedFiles(t, fsys, keptDir), "left by the closed mount")
	require.Len(t, deleteDirs(t, fsys, "/data"), 1, "left by the closed mount")

	clock.Advance(time.Hour)
	d, err = OpenLogDir(fsys, "/data", opts)
	require.NoError(t, err)
	defer d.Close()
	assert.Empty(t, deletedFiles(t, fsys, keptDir), ".deleted files go at open")
	pending := deleteDirs(t, fsys, "/data")
	require.Len(t, pending, 1)
	assert.Equal(t, pending, d.PendingTopicDeletions())
	clock.Advance(59 * time.Second)
	assert.Zero(t, d.RemoveDeletedTopics(clock.Now()), "the delay counts from the open")
	clock.Advance(time.Second)
	assert.Equal(t, 1, d.RemoveDeletedTopics(clock.Now()))
	assert.Empty(t, deleteDirs(t, fsys, "/data"))
}

func deletedFiles(t *testing.T, fsys vfs.FS, dir string) []string {
	t.Helper()
	var out []string
	for _, n := range ldListDir(t, fsys, dir) {
		if strings.HasSuffix(n, ".deleted") {
			out = append(out, n)
		}
	}
	return out
}

// TestPurgeDeletedUsesDelayAtDeletion: a .deleted segment waits the
// file.delete.delay.ms in force when it was deleted, as Kafka schedules
// its unlink then; a later change of the setting does not move it.
func TestPurgeDeletedUsesDelayAtDeletion(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1_000_000)}
	fs := vfs.NewMem()
	cfg := testConfig()
	cfg.SegmentBytes = 500
	cfg.FileDeleteDelayMs = 60000
	p := openTest(t, fs, "/d/t-0", cfg, func(o *PartitionOptions) { o.Now = clock.Now })
	defer p.Close()
	for i := 0; i < 20; i++ {
		_, _, err := p.Append(makeRecs(i*5, 5, 1))
		require.NoError(t, err)
	}
	_, err := p.DeleteOldestSegments(1, "test")
	require.NoError(t, err)
	first := deletedFiles(t, fs, "/d/t-0")
	require.NotEmpty(t, first)

	cfg.FileDeleteDelayMs = 1000
	p.SetConfig(cfg)
	clock.Advance(2 * time.Second)
	require.NoError(t, p.PurgeDeleted(clock.Now()))
	assert.Equal(t, first, deletedFiles(t, fs, "/d/t-0"), "a shorter delay set later does not shorten theirs")

	_, err = p.DeleteOldestSegments(1, "test") // deleted under the new 1 s delay
	require.NoError(t, err)
	require.Greater(t, len(deletedFiles(t, fs, "/d/t-0")), len(first))
	cfg.FileDeleteDelayMs = 3_600_000
	p.SetConfig(cfg)
	clock.Advance(time.Second)
	require.NoError(t, p.PurgeDeleted(clock.Now()))
	assert.Equal(t, first, deletedFiles(t, fs, "/d/t-0"), "a longer delay set later does not lengthen theirs")

	clock.Advance(57 * time.Second)
	require.NoError(t, p.PurgeDeleted(clock.Now()))
	assert.Empty(t, deletedFiles(t, fs, "/d/t-0"), "60 s after their deletion")
}
