package engine

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/vfs"
)

// TestOpenLogDirNewIsNotUnclean: a brand-new data directory logs new=true,
// not clean_shutdown=false (there was no shutdown); once it holds data, a
// clean close is reported as such, and a crash (no marker) as unclean.
func TestOpenLogDirNewIsNotUnclean(t *testing.T) {
	fsys := vfs.NewMem()
	var logs bytes.Buffer
	opts := LogDirOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	d, err := OpenLogDir(fsys, "/data", opts)
	require.NoError(t, err)
	assert.Contains(t, logs.String(), "new=true")
	assert.NotContains(t, logs.String(), "clean_shutdown")
	_, err = d.CreateTopic("t", 1)
	require.NoError(t, err)
	require.NoError(t, d.Close())

	logs.Reset()
	d, err = OpenLogDir(fsys, "/data", opts)
	require.NoError(t, err)
	assert.Contains(t, logs.String(), "clean_shutdown=true")
	assert.NotContains(t, logs.String(), "new=true")

	// Without Close the marker stays removed: the next open is unclean.
	logs.Reset()
	d2, err := OpenLogDir(fsys, "/data", LogDirOptions{Logger: opts.Logger, ReadOnly: true})
	require.NoError(t, err)
	assert.Contains(t, logs.String(), "clean_shutdown=false")
	require.NoError(t, d2.Close())
	require.NoError(t, d.Close())
}

// TestOpenCreatesDirsDurably: the data dir OpenLogDir creates and the
// partition dir OpenPartition creates (both through vfs.MkdirAllDurable)
// survive a crash right after the open returns.
func TestOpenCreatesDirsDurably(t *testing.T) {
	fsys := vfs.NewMem()
	d, err := OpenLogDir(fsys, "/srv/topicfs/data", ldOpts())
	require.NoError(t, err)
	assert.True(t, ldExists(fsys.Crash(), "/srv/topicfs/data"), "data dir and its new parents")
	require.NoError(t, d.Close())

	p := openTest(t, fsys, "/srv/other/t-0", DefaultConfig())
	assert.True(t, ldExists(fsys.Crash(), "/srv/other/t-0"), "partition dir and its new parent")
	require.NoError(t, p.Close())
}
