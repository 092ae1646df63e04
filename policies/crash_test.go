package policies

import (
	"fmt"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// recordsOf reopens a crashed file system and returns its records.
func recordsOf(t *testing.T, fs vfs.FS, clk *fakeClock) []record.Record {
	t.Helper()
	d, err := engine.OpenLogDir(fs, "/data", engine.LogDirOptions{
		Defaults: testConfig(t, nil), Logger: testLogger(t), Now: clk.Now,
	})
	require.NoError(t, err)
	defer func() { require.NoError(t, d.Close()) }()
	tp, err := d.Topic("crash")
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	return readAll(t, p)
}

func recordStrings(recs []record.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		v := "<tombstone>"
		if r.Value != nil {
			v = string(r.Value)
		}
		out[i] = fmt.Sprintf("%d %s=%s", r.Offset, r.Key, v)
	}
	return out
}

// crashBase builds a durable data directory holding topic "crash": 30
// records over 5 keys (with tombstones) in small segments plus an active
// one, then sets segment.bytes to groupBytes so that the cleaning groups
// the sealed segments by it.
func crashBase(t *testing.T, clk *fakeClock, groupBytes string) *vfs.MemFS {
	base := vfs.NewMem()
	// The data directory exists and is durable before the test starts.
	require.NoError(t, base.MkdirAll("/data", 0o755))
	require.NoError(t, base.SyncDir("/"))
	d, err := engine.OpenLogDir(base, "/data", engine.LogDirOptions{
		Defaults: testConfig(t, map[string]string{"segment.bytes": "300"}),
		Logger:   testLogger(t), Now: clk.Now,
	})
	require.NoError(t, err)
	defer func() { require.NoError(t, d.Close()) }()
	p := createPartition(t, d, "crash", map[string]string{"cleanup.policy": "compact"})
	for i := 0; i < 30; i++ {
		if i%7 == 3 {
			appendRecs(t, p, tomb(fmt.Sprint("k", i%5)))
		} else {
			appendRecs(t, p, kv(fmt.Sprint("k", i%5), fmt.Sprint("v", i)))
		}
	}
	require.NoError(t, p.Roll())
	appendRecs(t, p, kv("active", "x"))
	require.Greater(t, len(p.Segments()), 3)
	tp, err := d.Topic("crash")
	require.NoError(t, err)
	require.NoError(t, tp.AlterConfig(map[string]string{"segment.bytes": groupBytes}))
	return base
}

// cleanCopy opens a copy of base through an ErrorFS with inj installed for
// the cleaning only, cleans, calls live (if set) with the still-open
// partition, closes, and returns the file system left behind.
func cleanCopy(t *testing.T, base *vfs.MemFS, clk *fakeClock, inj vfs.Injector, live func(p *engine.Partition)) (*vfs.MemFS, error) {
	mem := base.Crash()
	sw := &vfs.Switchable{}
	d, err := engine.OpenLogDir(vfs.NewErrorFS(mem, sw), "/data", engine.LogDirOptions{
		Defaults: testConfig(t, nil), Logger: testLogger(t), Now: clk.Now,
	})
	require.NoError(t, err)
	tp, err := d.Topic("crash")
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), DedupeBufferSize: testBuffer})
	sw.Set(inj)
	_, cerr := s.CleanPartition(p, true)
	if live != nil {
		sw.Set(nil)
		live(p)
	}
	s.Stop()
	_ = d.Close() // fails after a crash; what counts is what was synced
	return mem, cerr
}

// TestCleanerCrashAtEverySwapStep crashes the process at each mutating file
// operation of a cleaning (writing the .cleaned segment, its indexes, the
// renames to .swap, .deleted and back, the directory syncs, the checkpoint)
// and reopens what survived: the log holds either the old segments' records
// or the cleaned ones, never a mix, never a loss.
func TestCleanerCrashAtEverySwapStep(t *testing.T) {
	clk := newClock()
	base := crashBase(t, clk, "1048576") // one group: all sealed segments become one
	oldRecs := recordStrings(recordsOf(t, base.Crash(), clk))

	counter := vfs.NewCounter()
	mem, err := cleanCopy(t, base, clk, counter, nil)
	require.NoError(t, err)
	newRecs := recordStrings(recordsOf(t, mem.Crash(), clk))
	require.Less(t, len(newRecs), len(oldRecs), "the cleaning removed something")
	steps := counter.Count()
	require.Positive(t, steps)
	t.Logf("%d mutating operations in a cleaning; old %d records, new %d", steps, len(oldRecs), len(newRecs))

	for i := int64(0); i < steps; i++ {
		mem, _ := cleanCopy(t, base, clk, vfs.CrashAt(i), nil)
		got := recordStrings(recordsOf(t, mem.Crash(), clk))
		if len(got) == len(newRecs) {
			require.Equal(t, newRecs, got, "crash at op %d: the cleaned log", i)
		} else {
			require.Equal(t, oldRecs, got, "crash at op %d: the old log", i)
		}
	}
}

// TestCleanerFailEveryStep fails (EIO, no crash) each mutating file
// operation of a cleaning in turn: the open partition keeps serving the old
// or the new records, so does a reopen, and a retry cleans.
func TestCleanerFailEveryStep(t *testing.T) {
	clk := newClock()
	base := crashBase(t, clk, "1048576")
	oldRecs := recordStrings(recordsOf(t, base.Crash(), clk))
	counter := vfs.NewCounter()
	mem, err := cleanCopy(t, base, clk, counter, nil)
	require.NoError(t, err)
	newRecs := recordStrings(recordsOf(t, mem.Crash(), clk))
	oldOrNew := func(i int64, got []string, what string) {
		t.Helper()
		if len(got) == len(newRecs) {
			require.Equal(t, newRecs, got, "fail at op %d: %s: the cleaned log", i, what)
		} else {
			require.Equal(t, oldRecs, got, "fail at op %d: %s: the old log", i, what)
		}
	}
	for i := int64(0); i < counter.Count(); i++ {
		mem, _ := cleanCopy(t, base, clk, vfs.FailNth(i, syscall.EIO), func(p *engine.Partition) {
			oldOrNew(i, recordStrings(readAll(t, p)), "live")
			_, err := NewScheduler(nil, Options{Now: clk.Now, Logger: testLogger(t), DedupeBufferSize: testBuffer}).CleanPartition(p, true)
			require.NoError(t, err, "fail at op %d: retry", i)
			require.Equal(t, newRecs, recordStrings(readAll(t, p)), "fail at op %d: retry cleans", i)
		})
		oldOrNew(i, recordStrings(recordsOf(t, mem.Crash(), clk)), "reopened")
	}
}

// TestCleanerCrashMultiGroup crashes at every operation of a cleaning that
// writes several groups (each swapped on its own): whatever survives holds
// only original records at their offsets, and every record of the fully
// cleaned log.
func TestCleanerCrashMultiGroup(t *testing.T) {
	clk := newClock()
	base := crashBase(t, clk, "600")
	oldRecs := recordStrings(recordsOf(t, base.Crash(), clk))
	counter := vfs.NewCounter()
	mem, err := cleanCopy(t, base, clk, counter, nil)
	require.NoError(t, err)
	newRecs := recordStrings(recordsOf(t, mem.Crash(), clk))
	old := map[string]bool{}
	for _, r := range oldRecs {
		old[r] = true
	}
	for i := int64(0); i < counter.Count(); i++ {
		mem, _ := cleanCopy(t, base, clk, vfs.CrashAt(i), nil)
		got := recordStrings(recordsOf(t, mem.Crash(), clk))
		have := map[string]bool{}
		for _, r := range got {
			require.True(t, old[r], "crash at op %d: %q is no original record", i, r)
			have[r] = true
		}
		for _, r := range newRecs {
			require.True(t, have[r], "crash at op %d: %q lost", i, r)
		}
	}
}
