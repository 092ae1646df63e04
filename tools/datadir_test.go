package tools

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// TestCheckRefusesNonDataDirectories: check of a directory that holds no
// data directory files used to print OK and succeed.
func TestCheckRefusesNonDataDirectories(t *testing.T) {
	tmp := t.TempDir()
	mk := func(name string, files ...string) string {
		dir := filepath.Join(tmp, name)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		for _, f := range files {
			p := filepath.Join(dir, f)
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			if !strings.HasSuffix(f, "/") {
				require.NoError(t, os.WriteFile(p, nil, 0o644))
			}
		}
		return dir
	}
	for _, tc := range []struct {
		name, dir, says string
	}{
		{"empty", mk("empty"), "is empty"},
		{"config files", mk("etc", "passwd", "hosts", "X11/xorg.conf"), "not a data directory"},
		{"TOPIC-N directories without .log files", mk("lib", "python3-9/os.py", "rc-0/"), "not a data directory"},
		{"/etc", "/etc", "not a data directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, repair := range []bool{false, true} {
				var out bytes.Buffer
				_, err := Check(&out, tc.dir, CheckOptions{Repair: repair})
				require.ErrorIs(t, err, ErrNotDataDir)
				assert.Contains(t, err.Error(), tc.says)
				assert.Empty(t, out.String(), "nothing printed, no OK")
			}
			_, err := os.Stat(filepath.Join(tc.dir, engine.LockFile))
			assert.ErrorIs(t, err, os.ErrNotExist, "--repair left no .lock behind")
		})
	}

	// What identifies a data directory: any root file a broker or a mount
	// writes, or a partition directory holding a .log.
	for name, files := range map[string][]string{
		"meta.properties":      {"meta.properties"},
		"a checkpoint file":    {engine.RecoveryPointCheckpointFile},
		"a partition with log": {"orders-0/00000000000000000000.log"},
	} {
		var out bytes.Buffer
		rep, err := Check(&out, mk("data-"+strings.ReplaceAll(name, " ", "-"), files...), CheckOptions{})
		require.NoError(t, err, name)
		assert.Empty(t, rep.Problems(), name)
		assert.Contains(t, out.String(), "OK", name)
	}
}

// TestDumpMissingFileIsOneError: a missing file used to be reported as
// "segment name is not an offset", and twice.
func TestDumpMissingFileIsOneError(t *testing.T) {
	dir := t.TempDir()
	files := []string{filepath.Join(dir, "nope.log"), filepath.Join(dir, "00000000000000000000.timeindex"), dir}
	var out, errOut bytes.Buffer
	err := Dump(&out, &errOut, files, DumpOptions{})
	require.Error(t, err)
	assert.Equal(t, fmt.Sprintf("topicfs dump: %s: no such file or directory\ntopicfs dump: %s: no such file or directory\ntopicfs dump: %s: is a directory (name a segment, index or snapshot file)\n",
		files[0], files[1], dir), errOut.String())
	assert.NotContains(t, err.Error(), "not an offset")
}

// TestDumpActiveSegmentIndexes: the indexes of a live, active segment are
// preallocated and zero past their entries; an all-zero first slot used to
// be dumped as an entry (timestamp 0 at the base offset) and reported as a
// mismatch against the log.
func TestDumpActiveSegmentIndexes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	d, err := engine.OpenLogDir(vfs.OS, dir, engine.LogDirOptions{Logger: quiet(),
		Overrides: map[string]map[string]string{"few": {"index.interval.bytes": "100000"}, "many": {"index.interval.bytes": "100"}}})
	require.NoError(t, err)
	defer d.Close()
	for _, topic := range []string{"few", "many"} {
		tp, err := d.CreateTopic(topic, 1)
		require.NoError(t, err)
		p, err := tp.Partition(0)
		require.NoError(t, err)
		for i := range 30 {
			_, _, err := p.Append([]record.Record{
				{Timestamp: int64(1_700_000_000_000 + i*10), Value: []byte(fmt.Sprintf("line %d", i))},
				{Timestamp: int64(1_700_000_000_000 + i*10 + 1), Value: []byte(fmt.Sprintf("line %d.1", i))},
			})
			require.NoError(t, err)
		}
		require.NoError(t, p.Flush())
		stem := filepath.Join(dir, topic+"-0", "00000000000000000000")
		st, err := os.Stat(stem + ".timeindex")
		require.NoError(t, err)
		require.Greater(t, st.Size(), int64(12*20), "the active time index is preallocated")

		var out, errOut bytes.Buffer
		require.NoError(t, Dump(&out, &errOut, []string{stem + ".timeindex", stem + ".index"}, DumpOptions{}))
		assert.Empty(t, errOut.String(), "%s: no mismatch reported", topic)
		assert.NotContains(t, out.String(), "timestamp: 0 ")
		assert.NotContains(t, out.String(), "position: 0\n")
		if topic == "many" {
			assert.Contains(t, out.String(), "timestamp: 1700000000")
		}
	}
}

// TestCheckSaysDirectoryIsInUse: check of a data directory, or of one of its
// partitions, while a mount holds its lock says so on its first line (what
// it reads may change under it) and still checks; once the lock is released
// the line goes away.
func TestCheckSaysDirectoryIsInUse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	d, err := engine.OpenLogDir(vfs.OS, dir, engine.LogDirOptions{Logger: quiet()})
	require.NoError(t, err)
	tp, err := d.CreateTopic("live", 1)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	_, _, err = p.Append([]record.Record{{Timestamp: 1_700_000_000_000, Value: []byte("x")}})
	require.NoError(t, err)
	require.NoError(t, p.Flush())
	for _, target := range []string{dir, filepath.Join(dir, "live-0")} {
		var out bytes.Buffer
		rep, err := Check(&out, target, CheckOptions{})
		require.NoError(t, err)
		first, _, _ := strings.Cut(out.String(), "\n")
		assert.Contains(t, first, "in use by a running topicfs mount", target)
		assert.Len(t, rep.Partitions, 1, "it still checks")
	}
	require.NoError(t, d.Close())
	var out bytes.Buffer
	_, err = Check(&out, dir, CheckOptions{})
	require.NoError(t, err)
	assert.NotContains(t, out.String(), "in use")
}
