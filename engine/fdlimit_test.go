package engine

import (
	"log/slog"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/topicfs/topicfs/engine/vfs"
)

// TestCreateTopicChecksFileLimit: a topic with more partitions than the
// open-file limit (RLIMIT_NOFILE) can hold open fails at once with EMFILE
// and a warning naming ulimit -n, creates no directory and loses no topic;
// one that fits is created. Not parallel: it lowers the process's limit.
func TestCreateTopicChecksFileLimit(t *testing.T) {
	var old unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_NOFILE, &old))
	path := filepath.Join(t.TempDir(), "data")
	warns := &warnCounter{}
	d, err := OpenLogDir(vfs.OS, path, LogDirOptions{Logger: slog.New(warns)})
	require.NoError(t, err)
	defer d.Close()
	low := old
	low.Cur = 400
	require.NoError(t, unix.Setrlimit(unix.RLIMIT_NOFILE, &low))
	t.Cleanup(func() { _ = unix.Setrlimit(unix.RLIMIT_NOFILE, &old) })

	_, err = d.CreateTopic("wide", 1000)
	require.ErrorIs(t, err, syscall.EMFILE)
	assert.Contains(t, err.Error(), "ulimit -n")
	require.NotEmpty(t, warns.Messages())
	assert.Contains(t, warns.Messages()[len(warns.Messages())-1], "ulimit -n")
	matches, err := filepath.Glob(filepath.Join(path, "wide-*"))
	require.NoError(t, err)
	assert.Empty(t, matches, "no partition directory is left")

	tp, err := d.CreateTopic("narrow", 10)
	require.NoError(t, err)
	assert.Equal(t, 10, tp.NumPartitions())
	require.ErrorIs(t, tp.AddPartitions(1000), syscall.EMFILE)
	assert.Equal(t, 10, tp.NumPartitions())
}
