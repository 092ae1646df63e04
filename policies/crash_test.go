package policies

import (
	"fmt"
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

// TestCleanerCrashAtEverySwapStep crashes the process at each mutating file
// operation of a cleaning (writing the .cleaned segment, its indexes, the
// renames to .swap, .deleted and back, the directory syncs, the checkpoint)
// and reopens what survived: the log holds either the old segments' records
// or the cleaned ones, never a mix, never a loss.
func TestCleanerCrashAtEverySwapStep(t *testing.T) {
	clk := newClock()
	base := vfs.NewMem()
	// The data directory exists and is durable before the test starts.
	require.NoError(t, base.MkdirAll("/data", 0o755))
	require.NoError(t, base.SyncDir("/"))
	func() {
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
		// One group: every sealed segment becomes one cleaned segment.
		tp, err := d.Topic("crash")
		require.NoError(t, err)
		require.NoError(t, tp.AlterConfig(map[string]string{"segment.bytes": "1048576"}))
	}()

	oldRecs := recordStrings(recordsOf(t, base.Crash(), clk))

	// clean opens a copy of base through an ErrorFS with inj installed for
	// the cleaning only, and returns the file system left behind.
	clean := func(inj vfs.Injector) (*vfs.MemFS, error) {
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
		s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t)})
		sw.Set(inj)
		_, cerr := s.CleanPartition(p, true)
		s.Stop()
		_ = d.Close() // fails after a crash; what counts is what was synced
		return mem, cerr
	}

	counter := vfs.NewCounter()
	mem, err := clean(counter)
	require.NoError(t, err)
	newRecs := recordStrings(recordsOf(t, mem.Crash(), clk))
	require.Less(t, len(newRecs), len(oldRecs), "the cleaning removed something")
	steps := counter.Count()
	require.Positive(t, steps)
	t.Logf("%d mutating operations in a cleaning; old %d records, new %d", steps, len(oldRecs), len(newRecs))

	for i := int64(0); i < steps; i++ {
		mem, _ := clean(vfs.CrashAt(i))
		got := recordStrings(recordsOf(t, mem.Crash(), clk))
		if len(got) == len(newRecs) {
			require.Equal(t, newRecs, got, "crash at op %d: the cleaned log", i)
		} else {
			require.Equal(t, oldRecs, got, "crash at op %d: the old log", i)
		}
	}
}
