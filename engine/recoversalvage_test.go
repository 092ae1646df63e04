package engine

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// salvageFixture is a data dir with one partition c-0 of three segments,
// closed cleanly; its records are "value-NNNNNN" at offset N, one batch of
// one record per append.
type salvageFixture struct {
	fs   vfs.FS
	root string
	dir  string
	logs []string // .log paths, oldest first
	want map[int64]string
	leo  int64
}

func newSalvageFixture(t *testing.T, fs vfs.FS, root string) *salvageFixture {
	t.Helper()
	d, err := OpenLogDir(fs, root, LogDirOptions{Logger: quietLogger(),
		Overrides: map[string]map[string]string{"c": {"segment.bytes": "2048", "index.interval.bytes": "200"}}})
	require.NoError(t, err)
	tp, err := d.CreateTopic("c", 1)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	f := &salvageFixture{fs: fs, root: root, dir: filepath.Join(root, "c-0"), want: map[int64]string{}}
	for i := 0; len(p.Segments()) < 3 || i < 60; i++ {
		first, _, err := p.Append(makeRecs(i, 1, 1_000_000+int64(i)))
		require.NoError(t, err)
		require.Equal(t, int64(i), first)
		f.want[first] = fmt.Sprintf("value-%06d", i)
	}
	f.leo = p.LogEndOffset()
	require.NoError(t, d.Close())
	f.logs = segmentLogs(t, fs, f.dir)
	require.Len(t, f.logs, 3)
	return f
}

// crashed makes the next open recover c-0 from the start of segment
// `from`: no clean-shutdown marker, the recovery point at its base.
func (f *salvageFixture) crashed(t *testing.T, from int) {
	t.Helper()
	require.NoError(t, f.fs.Remove(filepath.Join(f.root, CleanShutdownFile)))
	base, _, _ := ParseSegmentName(filepath.Base(f.logs[from]))
	require.NoError(t, WriteCheckpoint(f.fs, filepath.Join(f.root, RecoveryPointCheckpointFile),
		map[TopicPartition]int64{{Topic: "c", Partition: 0}: base}))
}

// damageMiddle flips one bit inside the CRC-covered part of the middle
// batch of segment k and drops its record from want. It returns the
// damaged .log's bytes, its batch positions (and size) and the batch's index.
func (f *salvageFixture) damageMiddle(t *testing.T, k int) (data []byte, pos []int64, bad int) {
	t.Helper()
	data = readFile(t, f.fs, f.logs[k])
	pos = batches(t, data)
	bad = len(pos) / 2
	data[pos[bad]+40] ^= 0x08
	writeFile(t, f.fs, f.logs[k], data)
	base, _, _ := ParseSegmentName(filepath.Base(f.logs[k]))
	delete(f.want, base+int64(bad)) // one record per batch
	return data, pos, bad
}

// files returns every file of the partition directory with its bytes.
func (f *salvageFixture) files(t *testing.T) map[string][]byte {
	t.Helper()
	ents, err := f.fs.ReadDir(f.dir)
	require.NoError(t, err)
	out := map[string][]byte{}
	for _, e := range ents {
		out[e.Name()] = readFile(t, f.fs, filepath.Join(f.dir, e.Name()))
	}
	return out
}

// batches returns the positions of the batches of a .log file, and its size.
func batches(t *testing.T, data []byte) []int64 {
	t.Helper()
	var out []int64
	for pos := int64(0); pos < int64(len(data)); {
		b, err := record.ReadAt(bytes.NewReader(data), pos, int64(len(data)), nil)
		require.NoError(t, err)
		out = append(out, pos)
		pos += int64(b.Size())
	}
	return append(out, int64(len(data)))
}

func readFile(t *testing.T, fs vfs.FS, path string) []byte {
	t.Helper()
	data, err := vfs.ReadFile(fs, path)
	require.NoError(t, err)
	return data
}

func writeFile(t *testing.T, fs vfs.FS, path string, data []byte) {
	t.Helper()
	w, err := fs.OpenFile(path, os.O_RDWR|os.O_TRUNC, 0)
	require.NoError(t, err)
	_, err = w.WriteAt(data, 0)
	require.NoError(t, err)
	require.NoError(t, w.Sync())
	require.NoError(t, w.Close())
}

// openC opens the data dir and returns partition c-0.
func openC(t *testing.T, fs vfs.FS, root string, logger *slog.Logger) (*LogDir, *Partition) {
	t.Helper()
	d, err := OpenLogDir(fs, root, LogDirOptions{Logger: logger})
	require.NoError(t, err)
	tp, err := d.Topic("c")
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	return d, p
}

// valuesByOffset reads every record of p: offset -> value.
func valuesByOffset(t *testing.T, p *Partition) map[int64]string {
	t.Helper()
	out := map[int64]string{}
	for _, r := range readAll(t, p) {
		out[r.Offset] = string(r.Value)
	}
	return out
}

func logBuffer() (*slog.Logger, func() string) {
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil))
	return logger, func() string { mu.Lock(); defer mu.Unlock(); return buf.String() }
}

func salvageFSs() map[string]func(t *testing.T) (vfs.FS, string) {
	return map[string]func(t *testing.T) (vfs.FS, string){
		"mem": func(t *testing.T) (vfs.FS, string) { return vfs.NewMem(), "/d" },
		"os":  func(t *testing.T) (vfs.FS, string) { return vfs.OS, t.TempDir() },
	}
}

// TestRecoveryKeepsIntactBatchesAroundDamage: one flipped bit in the middle
// of a segment past the recovery point used to truncate the segment there
// and delete every later segment. Now only the damaged batch moves aside:
// every other record is readable at its offset, the other segments are
// byte for byte the same, and appends continue at the old log end.
func TestRecoveryKeepsIntactBatchesAroundDamage(t *testing.T) {
	for name, mk := range salvageFSs() {
		for _, victim := range []int{1, 2} { // a sealed segment, the active one
			t.Run(fmt.Sprintf("%s/segment %d", name, victim), func(t *testing.T) {
				fs, root := mk(t)
				f := newSalvageFixture(t, fs, root)
				orig := map[string][]byte{}
				for _, l := range f.logs {
					orig[l] = readFile(t, fs, l)
				}
				data, pos, bad := f.damageMiddle(t, victim)
				base, _, _ := ParseSegmentName(filepath.Base(f.logs[victim]))
				lost := base + int64(bad)
				want := f.want
				f.crashed(t, 1)

				logger, logs := logBuffer()
				d, p := openC(t, fs, root, logger)
				assert.Equal(t, want, valuesByOffset(t, p), "every intact record at its offset")
				assert.Equal(t, f.leo, p.LogEndOffset())
				checkIndexes(t, p)
				for i, l := range f.logs {
					if i != victim {
						assert.Equal(t, orig[l], readFile(t, fs, l), "segment %d unchanged", i)
					}
				}
				aside := fmt.Sprintf("%s.damaged-%d-%d", f.logs[victim], pos[bad], pos[bad+1])
				assert.Equal(t, data[pos[bad]:pos[bad+1]], readFile(t, fs, aside), "the aside file holds the damaged bytes")
				assert.Equal(t, append(bytes.Clone(orig[f.logs[victim]][:pos[bad]]), orig[f.logs[victim]][pos[bad+1]:]...),
					readFile(t, fs, f.logs[victim]), "the segment holds its intact batches, unchanged")
				out := logs()
				assert.Contains(t, out, "moving damaged bytes of a segment aside")
				assert.Contains(t, out, fmt.Sprintf("bytes=%d..%d", pos[bad], pos[bad+1]))
				assert.Contains(t, out, fmt.Sprintf("offset %d lost, between intact offsets %d and %d", lost, lost-1, lost+1))
				assert.Contains(t, out, filepath.Base(f.logs[victim]))

				first, _, err := p.Append(makeRecs(0, 2, 5))
				require.NoError(t, err)
				assert.Equal(t, f.leo, first, "appends continue at the old log end")
				require.NoError(t, d.Close())

				// A reopen, clean or not, finds nothing more to do.
				f.crashed(t, 0)
				d, p = openC(t, fs, root, quietLogger())
				defer d.Close()
				assert.Equal(t, f.leo+2, p.LogEndOffset())
				checkIndexes(t, p)
				want[f.leo], want[f.leo+1] = "value-000000", "value-000001"
				assert.Equal(t, want, valuesByOffset(t, p))
			})
		}
	}
}

// TestRecoveryKeepsTheCutTailAside: garbage after the last batch of the
// active segment is cut, as before, but its bytes are kept aside; a
// zero-filled tail (space extended but never written) is just dropped.
func TestRecoveryKeepsTheCutTailAside(t *testing.T) {
	for name, mk := range salvageFSs() {
		t.Run(name, func(t *testing.T) {
			fs, root := mk(t)
			f := newSalvageFixture(t, fs, root)
			last := f.logs[2]
			orig := readFile(t, fs, last)
			garbage := []byte("this is not a record batch at all, just garbage bytes")
			writeFile(t, fs, last, append(bytes.Clone(orig), garbage...))
			f.crashed(t, 2)

			logger, logs := logBuffer()
			d, p := openC(t, fs, root, logger)
			assert.Equal(t, f.want, valuesByOffset(t, p))
			assert.Equal(t, f.leo, p.LogEndOffset())
			assert.Equal(t, orig, readFile(t, fs, last), "truncated after its last batch")
			aside := fmt.Sprintf("%s.damaged-%d-%d", last, len(orig), len(orig)+len(garbage))
			assert.Equal(t, garbage, readFile(t, fs, aside))
			assert.Contains(t, logs(), fmt.Sprintf("the log ends after intact offset %d", f.leo-1))
			first, _, err := p.Append(makeRecs(0, 1, 5))
			require.NoError(t, err)
			assert.Equal(t, f.leo, first)
			require.NoError(t, d.Close())

			// A zero-filled tail leaves no aside file.
			now := readFile(t, fs, last)
			writeFile(t, fs, last, append(bytes.Clone(now), make([]byte, 4096)...))
			f.crashed(t, 2)
			d, p = openC(t, fs, root, quietLogger())
			defer d.Close()
			assert.Equal(t, now, readFile(t, fs, last))
			assert.Equal(t, f.leo+1, p.LogEndOffset())
			ents, err := fs.ReadDir(f.dir)
			require.NoError(t, err)
			var asides []string
			for _, e := range ents {
				if strings.Contains(e.Name(), DamagedInfix) {
					asides = append(asides, e.Name())
				}
			}
			assert.Equal(t, []string{filepath.Base(aside)}, asides, "no aside file for zeros")
		})
	}
}

// TestRecoveryDamagedTailOfASealedSegment: the last batch of a sealed
// segment is damaged: that segment is cut (its bytes aside), the later one
// stays, and the offsets of the lost batch are a gap.
func TestRecoveryDamagedTailOfASealedSegment(t *testing.T) {
	fs, root := vfs.NewMem(), "/d"
	f := newSalvageFixture(t, fs, root)
	data := readFile(t, fs, f.logs[1])
	pos := batches(t, data)
	n := len(pos) - 1
	data[pos[n]-3] ^= 0x10 // in the last batch's records
	writeFile(t, fs, f.logs[1], data)
	next, _, _ := ParseSegmentName(filepath.Base(f.logs[2]))
	delete(f.want, next-1)
	later := readFile(t, fs, f.logs[2])
	f.crashed(t, 1)

	d, p := openC(t, fs, root, quietLogger())
	defer d.Close()
	assert.Equal(t, f.want, valuesByOffset(t, p))
	assert.Equal(t, f.leo, p.LogEndOffset())
	assert.Equal(t, data[:pos[n-1]], readFile(t, fs, f.logs[1]))
	assert.Equal(t, data[pos[n-1]:], readFile(t, fs, fmt.Sprintf("%s.damaged-%d-%d", f.logs[1], pos[n-1], pos[n])))
	assert.Equal(t, later, readFile(t, fs, f.logs[2]))
	checkIndexes(t, p)
}

// TestRecoveryReadOnlyReadsAroundDamage: a read-only open changes no file
// but reads every intact record, also those after the damage.
func TestRecoveryReadOnlyReadsAroundDamage(t *testing.T) {
	fs, root := vfs.NewMem(), "/d"
	f := newSalvageFixture(t, fs, root)
	f.damageMiddle(t, 1)
	f.crashed(t, 0)
	before := f.files(t)

	d, err := OpenLogDir(fs, root, LogDirOptions{Logger: quietLogger(), ReadOnly: true})
	require.NoError(t, err)
	tp, err := d.Topic("c")
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	assert.Equal(t, f.want, valuesByOffset(t, p))
	assert.Equal(t, f.leo, p.LogEndOffset())
	checkIndexes(t, p)
	require.NoError(t, d.Close())
	assert.Equal(t, before, f.files(t), "a read-only open changes no file")
}

// TestRecoverySalvageCrashAtEveryStep crashes the recovering open at every
// file-system operation (keeping only what was durable) and opens what
// survived: whatever the crash point, every intact record is readable at
// its offset, the damaged bytes are in their aside file under its plain
// name, and no .repairing file is left.
func TestRecoverySalvageCrashAtEveryStep(t *testing.T) {
	mem := vfs.NewMem()
	f := newSalvageFixture(t, mem, "/d")
	data, pos, bad := f.damageMiddle(t, 1)
	f.crashed(t, 1)
	img := mem.Crash()
	aside := fmt.Sprintf("%s.damaged-%d-%d", f.logs[1], pos[bad], pos[bad+1])

	open := func(fs vfs.FS) error {
		d, err := OpenLogDir(fs, "/d", LogDirOptions{Logger: quietLogger()})
		if err != nil {
			return err
		}
		return d.Close()
	}
	counter := vfs.NewCounter()
	require.NoError(t, open(vfs.NewErrorFS(img.Crash(), counter)))
	n := counter.Count()
	require.Greater(t, n, int64(10))
	for i := range n {
		run := img.Crash()
		_ = open(vfs.NewErrorFS(run, vfs.CrashAt(i))) // fails from operation i on
		after := run.Crash()
		d, p := openC(t, after, "/d", quietLogger())
		require.Equal(t, f.want, valuesByOffset(t, p), "crash at operation %d: every intact record at its offset", i)
		require.Equal(t, f.leo, p.LogEndOffset(), "crash at operation %d", i)
		require.Equal(t, data[pos[bad]:pos[bad+1]], readFile(t, after, aside), "crash at operation %d: the damaged bytes, under their plain name", i)
		_, err := after.Stat(f.logs[1] + RepairingSuffix)
		require.ErrorIs(t, err, os.ErrNotExist, "crash at operation %d", i)
		first, _, err := p.Append(makeRecs(0, 1, 5))
		require.NoError(t, err)
		require.Equal(t, f.leo, first, "crash at operation %d", i)
		require.NoError(t, d.Close())
	}
	t.Logf("the recovering open crashed at each of its %d file-system operations; every reopen kept everything intact", n)
}

// TestRecoverySalvageRebuildsTheTxnIndex: the transaction state a salvaged
// segment's second scan starts from is the one before the segment, so the
// aborted transactions keep their first offsets.
func TestRecoverySalvageRebuildsTheTxnIndex(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig()
	p := openTest(t, fs, "/d/t-0", cfg)
	abort := func(pid int64) []byte { return txnMarker(t, pid, 0) }
	for _, raw := range [][]byte{
		producerBatch(t, txnSpec(7), makeRecs(0, 3, 1)), // 0..2
		abort(7), // 3
		producerBatch(t, txnSeq(7, 3), makeRecs(4, 2, 1)), // 4..5
		producerBatch(t, plainSpec(), makeRecs(6, 1, 1)),  // 6: damaged below
		producerBatch(t, plainSpec(), makeRecs(7, 1, 1)),  // 7
		abort(7), // 8
	} {
		_, _, err := p.AppendBatch(raw)
		require.NoError(t, err)
	}
	snap := p.Snapshot()
	want := snap.Segments[0].AbortedTxns()
	snap.Release()
	require.Len(t, want, 2)
	require.Equal(t, int64(4), want[1].FirstOffset)
	require.NoError(t, p.Close())

	log := segmentLogs(t, fs, "/d/t-0")[0]
	data := readFile(t, fs, log)
	pos := batches(t, data)
	data[pos[3]+40] ^= 0x08
	writeFile(t, fs, log, data)
	p = openTest(t, fs, "/d/t-0", cfg)
	defer p.Close()
	assert.Equal(t, []int64{0, 1, 2, 3, 4, 5, 7, 8}, offsetsOf(readAll(t, p)))
	snap = p.Snapshot()
	defer snap.Release()
	assert.Equal(t, want, snap.Segments[0].AbortedTxns())
}

// TestRecoveryWholeSegmentDamaged: a sealed segment with no intact batch
// left becomes empty (its bytes aside); readers skip it, the later segment
// stays and appends continue at the old log end.
func TestRecoveryWholeSegmentDamaged(t *testing.T) {
	fs, root := vfs.NewMem(), "/d"
	f := newSalvageFixture(t, fs, root)
	data := readFile(t, fs, f.logs[1])
	junk := bytes.Repeat([]byte("no batch here "), len(data)/14+1)[:len(data)]
	writeFile(t, fs, f.logs[1], junk)
	from, _, _ := ParseSegmentName(filepath.Base(f.logs[1]))
	to, _, _ := ParseSegmentName(filepath.Base(f.logs[2]))
	for o := from; o < to; o++ {
		delete(f.want, o)
	}
	f.crashed(t, 0)

	logger, logs := logBuffer()
	d, p := openC(t, fs, root, logger)
	defer d.Close()
	assert.Equal(t, f.want, valuesByOffset(t, p))
	assert.Equal(t, f.leo, p.LogEndOffset())
	assert.Empty(t, readFile(t, fs, f.logs[1]))
	assert.Equal(t, junk, readFile(t, fs, fmt.Sprintf("%s.damaged-0-%d", f.logs[1], len(junk))))
	assert.Contains(t, logs(), fmt.Sprintf("offsets %d..%d lost, between intact offsets %d and %d", from, to-1, from-1, to))
	checkIndexes(t, p)
	first, _, err := p.Append(makeRecs(0, 1, 5))
	require.NoError(t, err)
	assert.Equal(t, f.leo, first)
}
