package tools

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// TestSalvageRuleSameAtMountAndRepair: crash recovery (what a mount does at
// open) and check --repair decide alike what happens to a damaged range: a
// range of zeros only (space never written) is dropped, a range with any
// non-zero byte is kept aside byte for byte. Each case runs both on copies
// of the same damaged data dir and compares the .log and aside files they
// leave.
func TestSalvageRuleSameAtMountAndRepair(t *testing.T) {
	garbage := []byte("this is not a record batch at all, just garbage bytes")
	for _, tc := range []struct {
		name string
		// damage changes the bytes of the segments (oldest first) and
		// returns the aside file it expects (segment index, POS-END) with
		// its bytes, or ok false when the damage is dropped.
		damage  func(t *testing.T, logs [][]byte) (seg int, span engine.Span, ok bool)
		verb    string // in check's plan
		wantLog func(orig []byte, span engine.Span) []byte
	}{
		{"zero tail", func(t *testing.T, logs [][]byte) (int, engine.Span, bool) {
			n := len(logs) - 1
			end := int64(len(logs[n]))
			logs[n] = append(logs[n], make([]byte, 4096)...)
			return n, engine.Span{Pos: end, End: end + 4096}, false
		}, "would drop", func(orig []byte, s engine.Span) []byte { return orig[:s.Pos] }},
		{"garbage tail", func(t *testing.T, logs [][]byte) (int, engine.Span, bool) {
			n := len(logs) - 1
			end := int64(len(logs[n]))
			logs[n] = append(logs[n], garbage...)
			return n, engine.Span{Pos: end, End: end + int64(len(garbage))}, true
		}, "would move", func(orig []byte, s engine.Span) []byte { return orig[:s.Pos] }},
		{"zeroed batch in a sealed segment", func(t *testing.T, logs [][]byte) (int, engine.Span, bool) {
			pos := batchPositions(t, logs[1])
			bad := len(pos) / 2
			clear(logs[1][pos[bad]:pos[bad+1]])
			return 1, engine.Span{Pos: pos[bad], End: pos[bad+1]}, false
		}, "would drop", cutOut},
		{"bad CRC in a sealed segment", func(t *testing.T, logs [][]byte) (int, engine.Span, bool) {
			pos := batchPositions(t, logs[1])
			bad := len(pos) / 2
			logs[1][pos[bad]+40] ^= 0x08
			return 1, engine.Span{Pos: pos[bad], End: pos[bad+1]}, true
		}, "would move", cutOut},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, paths, _ := memDataDir(t, 0)
			logs, orig := make([][]byte, len(paths)), make([][]byte, len(paths))
			for i, p := range paths {
				orig[i] = readMem(t, base, p)
				logs[i] = slices.Clone(orig[i])
			}
			seg, span, aside := tc.damage(t, logs)
			for i, p := range paths {
				writeMem(t, base, p, logs[i])
			}
			// A crash: no clean-shutdown marker, recovery from offset 0.
			require.NoError(t, base.Remove("/d/"+engine.CleanShutdownFile))
			require.NoError(t, engine.WriteCheckpoint(base, "/d/"+engine.RecoveryPointCheckpointFile,
				map[engine.TopicPartition]int64{{Topic: "c", Partition: 0}: 0}))
			require.NoError(t, base.SyncDir("/d"))

			mounted := base.Crash()
			d, err := engine.OpenLogDir(mounted, "/d", engine.LogDirOptions{Logger: quiet()})
			require.NoError(t, err)
			require.NoError(t, d.Close())

			repaired := base.Crash()
			var out bytes.Buffer
			_, err = Check(&out, "/d", CheckOptions{FS: repaired})
			require.NoError(t, err)
			what := fmt.Sprintf("c-0: %s bytes %d..%d (%d bytes", tc.verb, span.Pos, span.End, span.End-span.Pos)
			assert.Contains(t, out.String(), what, "check's plan")
			out.Reset()
			rep, err := Check(&out, "/d", CheckOptions{Repair: true, FS: repaired})
			require.NoError(t, err)
			assert.Empty(t, rep.Problems(), out.String())

			want := map[string][]byte{}
			for i, p := range paths {
				want[filepath.Base(p)] = orig[i]
			}
			want[filepath.Base(paths[seg])] = tc.wantLog(orig[seg], span)
			if aside {
				name := fmt.Sprintf("%s%s%d-%d", filepath.Base(paths[seg]), engine.DamagedInfix, span.Pos, span.End)
				want[name] = logs[seg][span.Pos:span.End]
			}
			assert.Equal(t, want, logAndAsideFiles(t, mounted), "after recovery at mount")
			assert.Equal(t, want, logAndAsideFiles(t, repaired), "after check --repair")
		})
	}
}

// cutOut is a segment without the damaged span.
func cutOut(orig []byte, s engine.Span) []byte {
	return append(slices.Clone(orig[:s.Pos]), orig[s.End:]...)
}

// memDataDir is a cleanly closed data dir /d in memory with one partition
// c-0 of one-record batches (segment.bytes 1024), at least n records and
// three segments. It returns the .log paths, oldest first, and the values
// by offset.
func memDataDir(t *testing.T, n int) (*vfs.MemFS, []string, map[int64]string) {
	t.Helper()
	mem := vfs.NewMem()
	d, err := engine.OpenLogDir(mem, "/d", engine.LogDirOptions{Logger: quiet(),
		Overrides: map[string]map[string]string{"c": {"segment.bytes": "1024"}}})
	require.NoError(t, err)
	tp, err := d.CreateTopic("c", 1)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	for i := 0; i < n || len(p.Segments()) < 3; i++ {
		_, _, err := p.Append([]record.Record{{Timestamp: int64(1000 + i), Value: []byte(fmt.Sprintf("record %03d and some padding", i))}})
		require.NoError(t, err)
	}
	want := readAllValues(t, p)
	var paths []string
	for _, s := range p.Segments() {
		paths = append(paths, fmt.Sprintf("/d/c-0/%020d.log", s.BaseOffset))
	}
	require.NoError(t, d.Close())
	return mem, paths, want
}

// logAndAsideFiles returns the .log and .damaged- files of /d/c-0 with their bytes.
func logAndAsideFiles(t *testing.T, fsys vfs.FS) map[string][]byte {
	t.Helper()
	ents, err := fsys.ReadDir("/d/c-0")
	require.NoError(t, err)
	out := map[string][]byte{}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".log") || strings.Contains(e.Name(), engine.DamagedInfix) {
			out[e.Name()] = readMem(t, fsys, "/d/c-0/"+e.Name())
		}
	}
	return out
}

func readMem(t *testing.T, fsys vfs.FS, path string) []byte {
	t.Helper()
	data, err := vfs.ReadFile(fsys, path)
	require.NoError(t, err)
	return data
}

func writeMem(t *testing.T, fsys vfs.FS, path string, data []byte) {
	t.Helper()
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_TRUNC, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(data, 0)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
}
