package tools

import (
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/vfs"
)

// memValues reads partition c-0 of the data dir /d on fsys read-only:
// offset -> value.
func memValues(t *testing.T, fsys vfs.FS) map[int64]string {
	t.Helper()
	d, err := engine.OpenLogDir(fsys, "/d", engine.LogDirOptions{Logger: quiet(), ReadOnly: true})
	require.NoError(t, err)
	defer d.Close()
	p, err := interopTopicPartition(d, "c", 0)
	require.NoError(t, err)
	return readAllValues(t, p)
}

// TestRepairCrashAtEveryStep crashes check --repair at every file-system
// operation (keeping only what was durable) and runs it again on what
// survived: whatever the crash point, the second run leaves a clean
// directory holding every intact record at its offset.
func TestRepairCrashAtEveryStep(t *testing.T) {
	mem, logs, want := memDataDir(t, 40)
	require.Greater(t, len(logs), 2)
	victim := logs[1]
	victimBase, _, _ := engine.ParseSegmentName(filepath.Base(victim))
	data := readMem(t, mem, victim)
	pos := batchPositions(t, data)
	bad := len(pos) / 2
	data[pos[bad]+40] ^= 0x08
	writeMem(t, mem, victim, data)
	delete(want, victimBase+int64(bad)) // one record per batch
	base := mem.Crash()

	counter := vfs.NewCounter()
	_, err := Check(io.Discard, "/d", CheckOptions{Repair: true, FS: vfs.NewErrorFS(base.Crash(), counter)})
	require.NoError(t, err)
	n := counter.Count()
	require.Greater(t, n, int64(10))
	for i := range n {
		img := base.Crash()
		_, err := Check(io.Discard, "/d", CheckOptions{Repair: true, FS: vfs.NewErrorFS(img, vfs.CrashAt(i))})
		require.Error(t, err, "crash at operation %d of %d", i, n)
		after := img.Crash()
		rep, err := Check(io.Discard, "/d", CheckOptions{Repair: true, FS: after})
		require.NoError(t, err, "repair again after a crash at operation %d", i)
		require.Empty(t, rep.Problems(), "crash at operation %d", i)
		require.Equal(t, want, memValues(t, after), "crash at operation %d: every intact record at its offset", i)
		aside := fmt.Sprintf("%s.damaged-%d-%d", victim, pos[bad], pos[bad+1])
		moved, err := vfs.ReadFile(after, aside)
		require.NoError(t, err, "crash at operation %d", i)
		require.Equal(t, data[pos[bad]:pos[bad+1]], moved, "crash at operation %d: the damaged bytes, under their plain name", i)
	}
	t.Logf("check --repair crashed at each of its %d file-system operations; every rerun recovered everything intact", n)
}
