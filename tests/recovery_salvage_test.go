package tests

// Crash recovery keeps intact data around damage (issue #17): after a
// kill -9, a flipped bit in a sealed segment past the recovery point and
// garbage after the active segment's last batch, the remounted filesystem
// serves every intact record at its offset (only the damaged batch's are
// gone), keeps the damaged bytes in .damaged- files beside the segments,
// logs what it moved, and appends continue at the old log end.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRecoveryAfterKillKeepsIntactRecords(t *testing.T) {
	m := startMount(t, mountOpts{Config: corruptionConfig})
	m.Sh(t, `mkdir $MNT/c`)
	lines := corruptionLines(400)
	writeLines(t, m.Path("c", "append"), lines, 8) // fsynced, batch by batch
	require.Equal(t, lines, linesOf(m.Sh(t, `cat $MNT/c/0/records`)))
	m.Kill()

	partDir := filepath.Join(m.Data, "c-0")
	logs := segmentFiles(t, partDir, ".log")
	require.GreaterOrEqual(t, len(logs), 4, "segment.bytes=4096 rolled several segments: %v", logs)
	victim := logs[1] // sealed and fsynced
	batches := logBatches(t, victim)
	require.GreaterOrEqual(t, len(batches), 3, "%s holds several batches", victim)
	bad, after := batches[len(batches)/2], batches[len(batches)/2+1]
	data, err := os.ReadFile(victim)
	require.NoError(t, err)
	data[bad.Pos+bad.Size-5] ^= 0x10 // one bit in the records
	require.NoError(t, os.WriteFile(victim, data, 0o644))

	active := logs[len(logs)-1]
	activeSize := salvagedSize(t, active)
	garbage := []byte("torn write: not a record batch at all")
	f, err := os.OpenFile(active, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write(garbage)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	// The recovery point is checkpointed every minute; without one (a
	// crash before the first) the whole partition is scanned.
	if err := os.Remove(filepath.Join(m.Data, "recovery-point-offset-checkpoint")); !os.IsNotExist(err) {
		require.NoError(t, err)
	}
	later := map[string][]byte{}
	for _, l := range logs[2 : len(logs)-1] {
		later[l], err = os.ReadFile(l)
		require.NoError(t, err)
	}

	m.Remount()
	want := append(append([]string(nil), lines[:bad.Base]...), lines[after.Base:]...)
	require.Equal(t, want, linesOf(m.Sh(t, `cat $MNT/c/0/records`)), "every record but the damaged batch's")
	for l, b := range later {
		got, err := os.ReadFile(l)
		require.NoError(t, err)
		assert.Equal(t, b, got, "%s is untouched", filepath.Base(l))
	}
	aside, err := os.ReadFile(fmt.Sprintf("%s.damaged-%d-%d", victim, bad.Pos, bad.Pos+bad.Size))
	require.NoError(t, err, "the damaged batch is kept aside")
	assert.Equal(t, data[bad.Pos:bad.Pos+bad.Size], aside)
	tail, err := os.ReadFile(fmt.Sprintf("%s.damaged-%d-%d", active, activeSize, activeSize+int64(len(garbage))))
	require.NoError(t, err, "the cut tail is kept aside")
	assert.Equal(t, garbage, tail)
	assert.Equal(t, activeSize, salvagedSize(t, active), "the active segment is cut after its last batch")

	log := m.Stderr()
	assert.Contains(t, log, "moving damaged bytes of a segment aside")
	assert.Contains(t, log, filepath.Base(victim))
	assert.Contains(t, log, fmt.Sprintf("offsets %d..%d lost, between intact offsets %d and %d",
		bad.Base, after.Base-1, bad.Base-1, after.Base))

	m.Sh(t, `echo after-recovery >> $MNT/c/0/append`)
	recs, err := readJSONL(m.Path("c", "0", "records.jsonl"))
	require.NoError(t, err)
	last := recs[len(recs)-1]
	v, _ := last.ValueString()
	assert.Equal(t, "after-recovery", v)
	assert.Equal(t, int64(len(lines)), last.Offset, "the next append continues at the old log end")
	m.Stop()

	res := runCheck(t, m.Data)
	if !res.Missing {
		assert.Equal(t, 0, res.Code, "the recovered data dir checks clean (the aside files are warnings): %s", res)
		assert.Contains(t, res.Stdout+res.Stderr, strings.TrimSuffix(filepath.Base(victim), ".log"))
	}
}

func salvagedSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Size()
}
