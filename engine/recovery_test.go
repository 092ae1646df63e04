package engine

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
	"github.com/topicfs/topicfs/internal/testutil"
)

// checkIndexes verifies that every offset- and time-index entry of every
// segment points at a real batch, and that FindOffset finds every offset.
func checkIndexes(t *testing.T, p *Partition) {
	t.Helper()
	snap := p.Snapshot()
	defer snap.Release()
	for _, s := range snap.Segments {
		require.NoError(t, s.loadIndexes())
		type batchInfo struct{ last, maxTs int64 }
		batches := map[int64]batchInfo{} // position -> batch
		byLast := map[int64]batchInfo{}
		var buf []byte
		for pos := int64(0); ; {
			b, err := s.ReadBatch(pos, buf)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			buf = b.Raw
			batches[pos] = batchInfo{b.LastOffset(), b.MaxTimestamp}
			byLast[b.LastOffset()] = batchInfo{b.LastOffset(), b.MaxTimestamp}
			pos += int64(b.Size())
		}
		s.mu.RLock()
		oidx, tidx := s.mu.oidx, s.mu.tidx
		s.mu.RUnlock()
		if oidx != nil {
			for i := 0; i < oidx.Entries(); i++ {
				off, pos := oidx.Entry(i)
				bi, ok := batches[pos]
				require.True(t, ok, "segment %d index entry %d: position %d is not a batch start", s.base, i, pos)
				require.Equal(t, bi.last, off, "segment %d index entry %d", s.base, i)
			}
		}
		if tidx != nil {
			for i := 0; i < tidx.Entries(); i++ {
				ts, off := tidx.Entry(i)
				bi, ok := byLast[off]
				require.True(t, ok, "segment %d time index entry %d: offset %d is not a batch end", s.base, i, off)
				require.Equal(t, bi.maxTs, ts, "segment %d time index entry %d", s.base, i)
			}
		}
	}
	// present: inside some batch's [base, last] (no decoding needed; a
	// compacted batch's inner gaps still belong to it).
	type span struct{ base, last int64 }
	var spans []span
	for _, s := range snap.Segments {
		var buf []byte
		for pos := int64(0); ; {
			b, err := s.ReadBatch(pos, buf)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			buf = b.Raw
			spans = append(spans, span{b.BaseOffset, b.LastOffset()})
			pos += int64(b.Size())
		}
	}
	present := func(o int64) bool {
		i, _ := slices.BinarySearchFunc(spans, o, func(sp span, o int64) int { return cmp.Compare(sp.last, o) })
		return i < len(spans) && spans[i].base <= o
	}
	step := max(1, (snap.LogEndOffset-snap.LogStartOffset)/300) // bounded cost on big logs
	for o := snap.LogStartOffset; o < snap.LogEndOffset; o += step {
		s := snap.Segments[snap.SegmentFor(o)]
		pos, err := s.FindOffset(o)
		require.NoError(t, err)
		if pos == s.Size() && !present(o) {
			continue // compacted away at the end of a segment
		}
		b, err := s.ReadBatch(pos, nil)
		require.NoError(t, err, "offset %d", o)
		require.GreaterOrEqual(t, b.LastOffset(), o, "offset %d", o)
		if present(o) && b.Magic >= 2 {
			require.LessOrEqual(t, b.BaseOffset, o, "offset %d found in batch %d..%d", o, b.BaseOffset, b.LastOffset())
		}
	}
}

// fillPartition appends n batches of 10 records and closes the partition.
func fillPartition(t *testing.T, fs vfs.FS, dir string, cfg Config, n int) {
	t.Helper()
	p := openTest(t, fs, dir, cfg)
	for i := 0; i < n; i++ {
		_, _, err := p.Append(makeRecs(i*10, 10, 1_000_000+int64(i*10)))
		require.NoError(t, err)
	}
	require.NoError(t, p.Close())
}

// segmentFiles lists the partition's segment base names, oldest first.
func segmentLogs(t *testing.T, fs vfs.FS, dir string) []string {
	t.Helper()
	ents, err := fs.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".log") {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

func fileSize(t *testing.T, fs vfs.FS, path string) int64 {
	t.Helper()
	fi, err := fs.Stat(path)
	require.NoError(t, err)
	return fi.Size()
}

// lastBatchPos returns the position of the last batch of a .log file.
func lastBatchPos(t *testing.T, fs vfs.FS, path string) (pos, size int64) {
	t.Helper()
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	require.NoError(t, err)
	defer f.Close()
	end, err := f.Size()
	require.NoError(t, err)
	for p := int64(0); p < end; {
		h, _, err := peekAt(f, p, end)
		require.NoError(t, err)
		pos, size = p, h.size
		p += h.size
	}
	return pos, size
}

// writeIndex replaces an index file with 6 entries made by fill.
func writeIndex(t *testing.T, fs vfs.FS, path string, entrySize int, fill func(i int, e []byte)) {
	t.Helper()
	b := make([]byte, 6*entrySize)
	for i := 0; i < 6; i++ {
		fill(i, b[i*entrySize:(i+1)*entrySize])
	}
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	require.NoError(t, err)
	_, err = f.WriteAt(b, 0)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
}

func modifyFile(t *testing.T, fs vfs.FS, path string, fn func(f vfs.File, size int64)) {
	t.Helper()
	f, err := fs.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	size, err := f.Size()
	require.NoError(t, err)
	fn(f, size)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
}

func TestRecoveryDamage(t *testing.T) {
	const batches = 60 // 600 records, several segments
	type fsMaker func(t *testing.T) (vfs.FS, string)
	fss := map[string]fsMaker{
		"mem": func(t *testing.T) (vfs.FS, string) { return vfs.NewMem(), "/data/t-0" },
		"os":  func(t *testing.T) (vfs.FS, string) { return vfs.OS, filepath.Join(t.TempDir(), "t-0") },
	}
	cases := []struct {
		name  string
		clean bool // reopen as after a clean shutdown
		// damage returns the expected log end offset.
		damage func(t *testing.T, fs vfs.FS, dir string) int64
	}{
		{"truncated last batch", false, func(t *testing.T, fs vfs.FS, dir string) int64 {
			logs := segmentLogs(t, fs, dir)
			last := logs[len(logs)-1]
			pos, _ := lastBatchPos(t, fs, last)
			modifyFile(t, fs, last, func(f vfs.File, size int64) { require.NoError(t, f.Truncate(size-7)) })
			_ = pos
			return batches*10 - 10
		}},
		{"garbage after the last batch", false, func(t *testing.T, fs vfs.FS, dir string) int64 {
			logs := segmentLogs(t, fs, dir)
			modifyFile(t, fs, logs[len(logs)-1], func(f vfs.File, size int64) {
				_, err := f.WriteAt([]byte("this is not a record batch at all, just garbage bytes"), size)
				require.NoError(t, err)
			})
			return batches * 10
		}},
		{"zero-filled tail", false, func(t *testing.T, fs vfs.FS, dir string) int64 {
			logs := segmentLogs(t, fs, dir)
			modifyFile(t, fs, logs[len(logs)-1], func(f vfs.File, size int64) { require.NoError(t, f.Truncate(size+4096)) })
			return batches * 10
		}},
		{"flipped bit in the last segment", false, func(t *testing.T, fs vfs.FS, dir string) int64 {
			logs := segmentLogs(t, fs, dir)
			last := logs[len(logs)-1]
			pos, size := lastBatchPos(t, fs, last)
			modifyFile(t, fs, last, func(f vfs.File, _ int64) {
				b := make([]byte, 1)
				_, err := f.ReadAt(b, pos+size-3)
				require.NoError(t, err)
				b[0] ^= 0x10
				_, err = f.WriteAt(b, pos+size-3)
				require.NoError(t, err)
			})
			return batches*10 - 10
		}},
		{"deleted .index", true, func(t *testing.T, fs vfs.FS, dir string) int64 {
			logs := segmentLogs(t, fs, dir)
			require.NoError(t, fs.Remove(strings.TrimSuffix(logs[0], ".log")+".index"))
			require.NoError(t, fs.Remove(strings.TrimSuffix(logs[len(logs)-1], ".log")+".index"))
			return batches * 10
		}},
		{"truncated .timeindex", true, func(t *testing.T, fs vfs.FS, dir string) int64 {
			logs := segmentLogs(t, fs, dir)
			for _, l := range logs {
				ti := strings.TrimSuffix(l, ".log") + ".timeindex"
				modifyFile(t, fs, ti, func(f vfs.File, size int64) {
					if size > 5 {
						require.NoError(t, f.Truncate(size-5))
					}
				})
			}
			return batches * 10
		}},
		{"corrupt .index entries", true, func(t *testing.T, fs vfs.FS, dir string) int64 {
			logs := segmentLogs(t, fs, dir)
			ix := strings.TrimSuffix(logs[0], ".log") + ".index"
			modifyFile(t, fs, ix, func(f vfs.File, size int64) {
				require.Positive(t, size)
				// An entry pointing before the previous one: insane.
				_, err := f.WriteAt([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1}, size)
				require.NoError(t, err)
			})
			return batches * 10
		}},
		{"index entries past the end of the log", true, func(t *testing.T, fs vfs.FS, dir string) int64 {
			for _, l := range segmentLogs(t, fs, dir) {
				writeIndex(t, fs, strings.TrimSuffix(l, ".log")+".index", 8, func(i int, e []byte) {
					binary.BigEndian.PutUint32(e, uint32(i+1))
					binary.BigEndian.PutUint32(e[4:], uint32(1<<30+i))
				})
			}
			return batches * 10
		}},
		{"index entries inside batches", true, func(t *testing.T, fs vfs.FS, dir string) int64 {
			for _, l := range segmentLogs(t, fs, dir) {
				writeIndex(t, fs, strings.TrimSuffix(l, ".log")+".index", 8, func(i int, e []byte) {
					binary.BigEndian.PutUint32(e, uint32(10*i+15))
					binary.BigEndian.PutUint32(e[4:], uint32(100*i+37))
				})
			}
			return batches * 10
		}},
		{"index random garbage", true, func(t *testing.T, fs vfs.FS, dir string) int64 {
			rng := rand.New(rand.NewPCG(1, 2))
			for _, l := range segmentLogs(t, fs, dir) {
				writeIndex(t, fs, strings.TrimSuffix(l, ".log")+".index", 8, func(i int, e []byte) {
					for j := range e {
						e[j] = byte(rng.IntN(256))
					}
				})
			}
			return batches * 10
		}},
		{"time index random garbage", true, func(t *testing.T, fs vfs.FS, dir string) int64 {
			rng := rand.New(rand.NewPCG(3, 4))
			for _, l := range segmentLogs(t, fs, dir) {
				writeIndex(t, fs, strings.TrimSuffix(l, ".log")+".timeindex", 12, func(i int, e []byte) {
					for j := range e {
						e[j] = byte(rng.IntN(256))
					}
				})
			}
			return batches * 10
		}},
		{"time index offsets past the segment", true, func(t *testing.T, fs vfs.FS, dir string) int64 {
			for _, l := range segmentLogs(t, fs, dir) {
				writeIndex(t, fs, strings.TrimSuffix(l, ".log")+".timeindex", 12, func(i int, e []byte) {
					binary.BigEndian.PutUint64(e, uint64(1_000_000+i))
					binary.BigEndian.PutUint32(e[8:], uint32(100000+i))
				})
			}
			return batches * 10
		}},
		{"preallocated zero-tailed indexes", true, func(t *testing.T, fs vfs.FS, dir string) int64 {
			for _, l := range segmentLogs(t, fs, dir) {
				for _, suf := range []string{".index", ".timeindex"} {
					modifyFile(t, fs, strings.TrimSuffix(l, ".log")+suf, func(f vfs.File, size int64) {
						require.NoError(t, f.Truncate(size+12*1024))
					})
				}
			}
			return batches * 10
		}},
		{"empty directory", false, func(t *testing.T, fs vfs.FS, dir string) int64 {
			require.NoError(t, fs.RemoveAll(dir))
			require.NoError(t, fs.MkdirAll(dir, 0o755))
			return 0
		}},
	}
	for fsName, mk := range fss {
		for _, tc := range cases {
			t.Run(fsName+"/"+tc.name, func(t *testing.T) {
				fs, dir := mk(t)
				cfg := testConfig()
				cfg.SegmentBytes = 8 << 10
				fillPartition(t, fs, dir, cfg, batches)
				want := tc.damage(t, fs, dir)
				p := openTest(t, fs, dir, cfg, func(o *PartitionOptions) { o.CleanShutdown = tc.clean })
				defer p.Close()
				assert.Equal(t, want, p.LogEndOffset())
				got := readAll(t, p)
				require.Equal(t, seq(0, want), offsetsOf(got))
				for i, r := range got {
					require.Equal(t, fmt.Sprintf("value-%06d", i), string(r.Value))
				}
				checkIndexes(t, p)
				// The partition keeps working.
				first, _, err := p.Append(makeRecs(int(want), 3, 5))
				require.NoError(t, err)
				assert.Equal(t, want, first)
				require.NoError(t, p.Close())
				// And reopens after a clean close without scanning.
				p2 := openTest(t, fs, dir, cfg, func(o *PartitionOptions) { o.CleanShutdown = true })
				defer p2.Close()
				assert.Equal(t, want+3, p2.LogEndOffset())
				checkIndexes(t, p2)
			})
		}
	}
}

// TestRecoveryReadOnly damages a log and opens it read-only: the log is cut
// in memory only, the files are untouched.
func TestRecoveryReadOnly(t *testing.T) {
	fs := vfs.NewMem()
	dir := "/data/t-0"
	cfg := testConfig()
	cfg.SegmentBytes = 8 << 10
	fillPartition(t, fs, dir, cfg, 30)
	logs := segmentLogs(t, fs, dir)
	last := logs[len(logs)-1]
	modifyFile(t, fs, last, func(f vfs.File, size int64) { require.NoError(t, f.Truncate(size-3)) })
	require.NoError(t, fs.Remove(strings.TrimSuffix(logs[0], ".log")+".index"))
	before := map[string]int64{}
	ents, _ := fs.ReadDir(dir)
	for _, e := range ents {
		before[e.Name()] = fileSize(t, fs, filepath.Join(dir, e.Name()))
	}

	p := openTest(t, fs, dir, cfg, func(o *PartitionOptions) { o.ReadOnly = true })
	assert.Equal(t, int64(290), p.LogEndOffset())
	require.Equal(t, seq(0, 290), offsetsOf(readAll(t, p)))
	checkIndexes(t, p)
	_, _, err := p.Append(makeRecs(0, 1, 1))
	require.ErrorIs(t, err, ErrReadOnly)
	require.NoError(t, p.Close())

	after := map[string]int64{}
	ents, _ = fs.ReadDir(dir)
	for _, e := range ents {
		after[e.Name()] = fileSize(t, fs, filepath.Join(dir, e.Name()))
	}
	assert.Equal(t, before, after, "a read-only open changes no file")
}

func TestReadOnlyMissingDirectory(t *testing.T) {
	p := openTest(t, vfs.NewMem(), "/nope/t-0", testConfig(), func(o *PartitionOptions) {
		o.ReadOnly = true
		o.LogStartOffset = 42
	})
	defer p.Close()
	assert.Equal(t, int64(42), p.LogStartOffset())
	assert.Equal(t, int64(42), p.LogEndOffset())
	assert.Empty(t, readAll(t, p))
}

// TestLogStartOffsetCheckpoint: the checkpoint is clamped to the first
// segment; a checkpoint above the log end empties the log.
func TestLogStartOffsetCheckpoint(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig()
	fillPartition(t, fs, "/d/t-0", cfg, 5)
	p := openTest(t, fs, "/d/t-0", cfg, func(o *PartitionOptions) { o.LogStartOffset = 7; o.CleanShutdown = true })
	assert.Equal(t, int64(7), p.LogStartOffset())
	require.NoError(t, p.Close())
	p = openTest(t, fs, "/d/t-0", cfg, func(o *PartitionOptions) { o.LogStartOffset = 100 })
	assert.Equal(t, int64(100), p.LogStartOffset())
	assert.Equal(t, int64(100), p.LogEndOffset())
	first, _, err := p.Append(makeRecs(0, 1, 1))
	require.NoError(t, err)
	assert.Equal(t, int64(100), first)
	require.NoError(t, p.Close())
}

// expectedValue is what crash tests append at offset o.
func crashBatch(i int) []record.Record { return makeRecs(i*5, 5, 1_000_000+int64(i*5)) }

// TestCrashAtEverySyncPoint appends batches with flushes through ErrorFS
// over MemFS, crashes at every mutating file operation, and reopens what
// survived: the recovered log must be a prefix of what was appended, ending
// on a batch boundary, holding every record acknowledged by a completed
// Flush, with indexes that answer correctly.
func TestCrashAtEverySyncPoint(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 10
	cfg.IndexIntervalBytes = 100
	const dir = "/data/t-0"
	scenario := func(fs vfs.FS) (acked int64) {
		p, err := OpenPartition(fs, dir, "t", 0, PartitionOptions{Config: cfg, RecoveryPoint: -1,
			LogStartOffset: -1, FirstDirty: -1, Logger: quietLogger()})
		if err != nil {
			return 0
		}
		defer p.Close()
		for i := 0; i < 24; i++ {
			_, last, err := p.Append(crashBatch(i))
			if err != nil {
				return acked
			}
			if i%4 == 3 {
				if p.Flush() != nil {
					return acked
				}
				acked = last + 1
			}
		}
		return acked
	}
	counter := vfs.NewCounter()
	full := scenario(vfs.NewErrorFS(vfs.NewMem(), counter))
	require.Equal(t, int64(120), full)
	n := counter.Count()
	require.Greater(t, n, int64(20))
	for i := int64(0); i < n; i++ {
		mem := vfs.NewMem()
		acked := scenario(vfs.NewErrorFS(mem, vfs.CrashAt(i)))
		crashed := mem.Crash()
		p, err := OpenPartition(crashed, dir, "t", 0, PartitionOptions{Config: cfg, RecoveryPoint: -1,
			LogStartOffset: -1, FirstDirty: -1, Logger: quietLogger()})
		require.NoError(t, err, "crash at op %d", i)
		leo := p.LogEndOffset()
		require.GreaterOrEqual(t, leo, acked, "crash at op %d lost acknowledged records", i)
		require.Zero(t, leo%5, "crash at op %d: log ends inside a batch", i)
		got := readAll(t, p)
		require.Equal(t, seq(0, leo), offsetsOf(got), "crash at op %d", i)
		for j, r := range got {
			require.Equal(t, fmt.Sprintf("value-%06d", j), string(r.Value))
		}
		checkIndexes(t, p)
		_, _, err = p.Append(crashBatch(int(leo / 5)))
		require.NoError(t, err)
		require.NoError(t, p.Close())
	}
}

// buildCleaned writes one cleaned segment holding every other batch of the
// given sealed segments and returns it with the expected surviving offsets.
func buildCleaned(t *testing.T, p *Partition, bases []int64) (*SegmentWriter, []int64) {
	t.Helper()
	snap := p.Snapshot()
	defer snap.Release()
	w, err := p.NewCleanedSegment(bases[0])
	require.NoError(t, err)
	var kept []int64
	i := 0
	for _, s := range snap.Segments {
		if !slices.Contains(bases, s.BaseOffset()) {
			continue
		}
		for pos := int64(0); pos < s.Size(); {
			b, err := s.ReadBatch(pos, nil)
			require.NoError(t, err)
			if i%2 == 0 || pos+int64(b.Size()) == s.Size() {
				require.NoError(t, w.AppendBatch(b.Raw))
				for o := b.BaseOffset; o <= b.LastOffset(); o++ {
					kept = append(kept, o)
				}
			}
			i++
			pos += int64(b.Size())
		}
	}
	require.NoError(t, w.Finish())
	return w, kept
}

func TestReplaceSegments(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig()
	cfg.SegmentBytes = 2 << 10
	fillPartition(t, fs, "/d/t-0", cfg, 30)
	p := openTest(t, fs, "/d/t-0", cfg, func(o *PartitionOptions) { o.CleanShutdown = true })
	defer p.Close()
	segs := p.Segments()
	require.Greater(t, len(segs), 4)
	old := []int64{segs[0].BaseOffset, segs[1].BaseOffset, segs[2].BaseOffset}

	// A reader holding the old segments keeps reading them.
	snap := p.Snapshot()
	before := readAll(t, p)

	w, kept := buildCleaned(t, p, old)
	require.NoError(t, p.ReplaceSegments(old, []*SegmentWriter{w}))
	got := offsetsOf(readAll(t, p))
	want := append(kept, seq(segs[3].BaseOffset, p.LogEndOffset())...)
	assert.Equal(t, want, got)
	checkIndexes(t, p)
	assert.Len(t, p.Segments(), len(segs)-2)

	// Old files are .deleted, the snapshot still reads them.
	var n int
	for _, s := range snap.Segments[:3] {
		assert.True(t, strings.HasSuffix(s.LogPath(), ".deleted"))
		for pos := int64(0); pos < s.Size(); {
			b, err := s.ReadBatch(pos, nil)
			require.NoError(t, err)
			pos += int64(b.Size())
			n += int(b.RecordCount)
		}
	}
	assert.Equal(t, int(segs[3].BaseOffset), n)
	snap.Release()
	_ = before

	// A second replace of the same old segments conflicts.
	w2, err := p.NewCleanedSegment(old[0])
	require.NoError(t, err)
	require.NoError(t, w2.Finish())
	require.ErrorIs(t, p.ReplaceSegments(old, []*SegmentWriter{w2}), ErrConflict)
	require.NoError(t, w2.Abort())

	// PurgeDeleted after file.delete.delay.ms unlinks the .deleted files.
	require.NoError(t, p.PurgeDeleted(p.now().Add(-1)))
	ents, _ := fs.ReadDir("/d/t-0")
	hasDeleted := false
	for _, e := range ents {
		hasDeleted = hasDeleted || strings.HasSuffix(e.Name(), ".deleted")
	}
	assert.True(t, hasDeleted)
	require.NoError(t, p.PurgeDeleted(p.now().Add(61e9)))
	ents, _ = fs.ReadDir("/d/t-0")
	for _, e := range ents {
		assert.False(t, strings.HasSuffix(e.Name(), ".deleted"), e.Name())
		assert.False(t, strings.HasSuffix(e.Name(), ".cleaned"), e.Name())
	}

	// Reopen: same content.
	require.NoError(t, p.Close())
	p2 := openTest(t, fs, "/d/t-0", cfg)
	defer p2.Close()
	assert.Equal(t, want, offsetsOf(readAll(t, p2)))
}

// TestCrashDuringReplace crashes at every file operation of a cleaning
// (writing .cleaned, renaming to .swap, .deleted, final names): recovery
// must roll back to the old segments or complete the swap, never mix them.
func TestCrashDuringReplace(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 2 << 10
	const dir = "/d/t-0"
	setup := func(t *testing.T, fs vfs.FS) (all, cleaned []int64) {
		fillPartition(t, fs, dir, cfg, 30)
		p := openTest(t, fs, dir, cfg, func(o *PartitionOptions) { o.CleanShutdown = true })
		all = offsetsOf(readAll(t, p))
		segs := p.Segments()
		old := []int64{segs[0].BaseOffset, segs[1].BaseOffset, segs[2].BaseOffset}
		w, kept := buildCleaned(t, p, old)
		require.NoError(t, w.Abort())
		require.NoError(t, p.Close())
		return all, append(kept, seq(segs[3].BaseOffset, int64(len(all)))...)
	}
	run := func(fs vfs.FS) {
		p, err := OpenPartition(fs, dir, "t", 0, PartitionOptions{Config: cfg, RecoveryPoint: -1, LogStartOffset: -1,
			FirstDirty: -1, CleanShutdown: true, Logger: quietLogger()})
		if err != nil {
			return
		}
		defer p.Close()
		segs := p.Segments()
		old := []int64{segs[0].BaseOffset, segs[1].BaseOffset, segs[2].BaseOffset}
		snap := p.Snapshot()
		defer snap.Release()
		w, err := p.NewCleanedSegment(old[0])
		if err != nil {
			return
		}
		i := 0
		for _, s := range snap.Segments[:3] {
			for pos := int64(0); pos < s.Size(); {
				b, err := s.ReadBatch(pos, nil)
				if err != nil {
					return
				}
				if i%2 == 0 || pos+int64(b.Size()) == s.Size() {
					if w.AppendBatch(b.Raw) != nil {
						return
					}
				}
				i++
				pos += int64(b.Size())
			}
		}
		if w.Finish() != nil {
			w.Abort()
			return
		}
		_ = p.ReplaceSegments(old, []*SegmentWriter{w})
	}

	base := vfs.NewMem()
	all, cleaned := setup(t, base)
	counter := vfs.NewCounter()
	run(vfs.NewErrorFS(base.Crash(), counter))
	n := counter.Count()
	require.Greater(t, n, int64(5))
	sawOld, sawNew := false, false
	for i := int64(0); i < n; i++ {
		mem := base.Crash() // a durable copy of the set-up log
		run(vfs.NewErrorFS(mem, vfs.CrashAt(i)))
		p := openTest(t, mem.Crash(), dir, cfg)
		got := offsetsOf(readAll(t, p))
		switch {
		case slices.Equal(got, all):
			sawOld = true
		case slices.Equal(got, cleaned):
			sawNew = true
		default:
			t.Fatalf("crash at op %d: recovered %d offsets, neither the old log nor the cleaned one", i, len(got))
		}
		checkIndexes(t, p)
		require.NoError(t, p.Close())
	}
	assert.True(t, sawOld, "some crash points roll back")
	assert.True(t, sawNew, "some crash points complete the swap")
}

// TestRecoverySwapFiles sets up the leftovers of a crash by hand.
func TestRecoverySwapFiles(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 2 << 10
	const dir = "/d/t-0"
	prepare := func(t *testing.T) (vfs.FS, []int64, []int64, []int64) {
		fs := vfs.NewMem()
		fillPartition(t, fs, dir, cfg, 30)
		p := openTest(t, fs, dir, cfg, func(o *PartitionOptions) { o.CleanShutdown = true })
		all := offsetsOf(readAll(t, p))
		segs := p.Segments()
		old := []int64{segs[0].BaseOffset, segs[1].BaseOffset, segs[2].BaseOffset}
		w, kept := buildCleaned(t, p, old)
		// Leave the .cleaned files on disk: close the writer's files only.
		w.closed = true
		require.NoError(t, w.log.Close())
		require.NoError(t, p.Close())
		return fs, all, append(kept, seq(segs[3].BaseOffset, int64(len(all)))...), old
	}
	rename := func(t *testing.T, fs vfs.FS, from, to string) {
		ents, err := fs.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), from) {
				require.NoError(t, fs.Rename(filepath.Join(dir, e.Name()), filepath.Join(dir, strings.TrimSuffix(e.Name(), from)+to)))
			}
		}
	}
	t.Run("cleaned files are rolled back", func(t *testing.T) {
		fs, all, _, _ := prepare(t)
		p := openTest(t, fs, dir, cfg)
		defer p.Close()
		assert.Equal(t, all, offsetsOf(readAll(t, p)))
		checkIndexes(t, p)
	})
	t.Run("swap files complete the swap", func(t *testing.T) {
		fs, _, cleaned, _ := prepare(t)
		rename(t, fs, ".cleaned", ".swap")
		p := openTest(t, fs, dir, cfg)
		defer p.Close()
		assert.Equal(t, cleaned, offsetsOf(readAll(t, p)))
		checkIndexes(t, p)
		ents, _ := fs.ReadDir(dir)
		for _, e := range ents {
			assert.False(t, strings.HasSuffix(e.Name(), ".swap"), e.Name())
		}
	})
	t.Run("read-only: swaps applied in memory, files untouched", func(t *testing.T) {
		fs, _, cleaned, _ := prepare(t)
		rename(t, fs, ".cleaned", ".swap")
		listing := func() []string {
			ents, err := fs.ReadDir(dir)
			require.NoError(t, err)
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			return names
		}
		before := listing()
		p := openTest(t, fs, dir, cfg, func(o *PartitionOptions) { o.ReadOnly = true })
		assert.Equal(t, cleaned, offsetsOf(readAll(t, p)))
		checkIndexes(t, p)
		require.NoError(t, p.Close())
		assert.Equal(t, before, listing())
	})
	t.Run("swap files with old segments half deleted", func(t *testing.T) {
		fs, _, cleaned, old := prepare(t)
		rename(t, fs, ".cleaned", ".swap")
		name := filepath.Join(dir, segmentName(old[1])+".log")
		require.NoError(t, fs.Rename(name, name+".deleted"))
		p := openTest(t, fs, dir, cfg)
		defer p.Close()
		assert.Equal(t, cleaned, offsetsOf(readAll(t, p)))
	})
	t.Run("swap of an unfinished split is dropped", func(t *testing.T) {
		fs, all, _, old := prepare(t)
		// A .swap at or above the lowest .cleaned base belongs to a split.
		src := filepath.Join(dir, segmentName(old[0])+".log.cleaned")
		f, err := fs.OpenFile(src, os.O_RDONLY, 0)
		require.NoError(t, err)
		size, _ := f.Size()
		buf := make([]byte, size)
		_, _ = f.ReadAt(buf, 0)
		f.Close()
		g, err := fs.OpenFile(filepath.Join(dir, segmentName(old[1])+".log.swap"), os.O_RDWR|os.O_CREATE, 0o644)
		require.NoError(t, err)
		_, _ = g.WriteAt(buf, 0)
		g.Close()
		p := openTest(t, fs, dir, cfg)
		defer p.Close()
		assert.Equal(t, all, offsetsOf(readAll(t, p)))
	})
	t.Run("deleted and orphaned files are removed", func(t *testing.T) {
		fs, all, _, _ := prepare(t)
		for _, n := range []string{"00000000000000099999.index", "00000000000000099999.timeindex", "00000000000000000000.log.deleted"} {
			f, err := fs.OpenFile(filepath.Join(dir, n), os.O_RDWR|os.O_CREATE, 0o644)
			require.NoError(t, err)
			f.Close()
		}
		p := openTest(t, fs, dir, cfg)
		defer p.Close()
		assert.Equal(t, all, offsetsOf(readAll(t, p)))
		for _, n := range []string{"00000000000000099999.index", "00000000000000099999.timeindex", "00000000000000000000.log.deleted"} {
			_, err := fs.Stat(filepath.Join(dir, n))
			assert.ErrorIs(t, err, os.ErrNotExist, n)
		}
	})
}

// FuzzRecoverSegment opens arbitrary bytes as a partition's only .log
// (writable and read-only): opening never panics, and every record the
// recovered log returns comes from a batch whose CRC passed.
func FuzzRecoverSegment(f *testing.F) {
	var seed []byte
	for i := 0; i < 4; i++ {
		recs := makeRecs(i*3, 3, int64(i))
		for j := range recs {
			recs[j].Offset = int64(i*3 + j)
		}
		spec := plainSpec()
		spec.BaseOffset = int64(i * 3)
		if i == 2 {
			spec.Codec = record.Gzip
		}
		var err error
		seed, err = record.Encode(seed, spec, recs)
		require.NoError(f, err)
	}
	f.Add(seed)
	f.Add(seed[:len(seed)-5])
	f.Add(append(bytes.Clone(seed), make([]byte, 100)...))
	f.Add([]byte{})
	f.Add([]byte("garbage that is not a batch"))
	for _, name := range []string{
		"kafka0110-zk-sharaweil/data/test0-0/00000000000000000000.log",
		"kafka-go-fetch-v1v2-gzip-segmentio/extracted/v1-v1c-v2-v2c-v2b-v2b-v2b-v2bc-v1b-v1bc/00000000000000000000.log",
		"cp76-kafka36-lz4-rjmfernandes/data/_confluent-command-0/00000000000000000000.log",
	} {
		if b, ok := testutil.KafkaFixtureFile(f, name); ok {
			f.Add(b)
		}
	}
	cfg := testConfig()
	cfg.IndexIntervalBytes = 64
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, ro := range []bool{false, true} {
			fs := vfs.NewMem()
			require.NoError(t, fs.MkdirAll("/d/t-0", 0o755))
			w, err := fs.OpenFile("/d/t-0/00000000000000000000.log", os.O_RDWR|os.O_CREATE, 0o644)
			require.NoError(t, err)
			_, err = w.WriteAt(data, 0)
			require.NoError(t, err)
			require.NoError(t, w.Close())
			p, err := OpenPartition(fs, "/d/t-0", "t", 0, PartitionOptions{Config: cfg, RecoveryPoint: -1,
				LogStartOffset: -1, FirstDirty: -1, ReadOnly: ro, Logger: quietLogger()})
			require.NoError(t, err)
			snap := p.Snapshot()
			var recs []record.Record
			next := int64(0)
			for _, s := range snap.Segments {
				for pos := int64(0); ; {
					b, err := s.ReadBatch(pos, nil) // verifies the CRC
					if errors.Is(err, io.EOF) {
						break
					}
					require.NoError(t, err, "recovered data must be valid")
					require.NoError(t, b.Verify())
					recs, err = b.Records(recs[:0])
					if err == nil {
						for _, r := range recs {
							_ = r
						}
					}
					require.GreaterOrEqual(t, b.LastOffset(), next)
					next = b.NextOffset()
					pos += int64(b.Size())
				}
			}
			assert.Equal(t, max(next, 0), max(p.LogEndOffset(), 0))
			snap.Release()
			if !ro {
				_, _, err = p.Append(makeRecs(0, 1, 1))
				require.NoError(t, err)
			}
			require.NoError(t, p.Close())
		}
	})
}

// TestReplaceSegmentsErrors fails each file operation of ReplaceSegments in
// turn (without crashing): the live partition and a reopened one read
// either the old log or the cleaned one, and the cleaner's Abort after the
// error never destroys data.
func TestReplaceSegmentsErrors(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 2 << 10
	const dir = "/d/t-0"
	for n := int64(0); ; n++ {
		mem := vfs.NewMem()
		sw := &vfs.Switchable{}
		fs := vfs.NewErrorFS(mem, sw)
		fillPartition(t, fs, dir, cfg, 30)
		p := openTest(t, fs, dir, cfg, func(o *PartitionOptions) { o.CleanShutdown = true })
		all := offsetsOf(readAll(t, p))
		segs := p.Segments()
		old := []int64{segs[0].BaseOffset, segs[1].BaseOffset, segs[2].BaseOffset}
		w, kept := buildCleaned(t, p, old)
		cleaned := append(kept, seq(segs[3].BaseOffset, int64(len(all)))...)
		counter := vfs.NewCounter()
		sw.Set(vfs.InjectorFunc(func(op vfs.Op) *vfs.Fault {
			counter.Inject(op)
			if op.Kind.Mutating() && counter.Count()-1 == n {
				return &vfs.Fault{Err: syscall.EIO}
			}
			return nil
		}))
		err := p.ReplaceSegments(old, []*SegmentWriter{w})
		sw.Set(nil)
		if err == nil && counter.Count() <= n {
			require.NoError(t, p.Close())
			require.Greater(t, n, int64(6), "rename and sync points tried")
			break // every operation was tried
		}
		if err != nil {
			require.NoError(t, w.Abort())
		}
		live := offsetsOf(readAll(t, p))
		assert.True(t, slices.Equal(live, all) || slices.Equal(live, cleaned), "op %d: live partition reads a mix", n)
		require.NoError(t, p.Close())
		p2 := openTest(t, fs, dir, cfg)
		got := offsetsOf(readAll(t, p2))
		assert.True(t, slices.Equal(got, all) || slices.Equal(got, cleaned), "op %d: reopened partition reads a mix", n)
		if err == nil {
			assert.Equal(t, cleaned, got, "op %d", n)
		}
		checkIndexes(t, p2)
		require.NoError(t, p2.Close())
	}
}

// TestRecoveryLogsProgress: a long recovery reports its progress.
func TestRecoveryLogsProgress(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig()
	cfg.SegmentBytes = 300
	fillPartition(t, fs, "/d/t-0", cfg, 120) // one batch per segment
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil))
	p := openTest(t, fs, "/d/t-0", cfg, func(o *PartitionOptions) { o.Logger = logger })
	defer p.Close()
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	assert.Contains(t, out, "recovering partition")
	assert.Contains(t, out, "segments=50")
	assert.Contains(t, out, "recovered partition")
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestParseSegmentName(t *testing.T) {
	type parsed struct {
		base int64
		ext  string
		ok   bool
	}
	for name, want := range map[string]parsed{
		"00000000000000000042.log.deleted":     {42, "log.deleted", true},
		"00000000000000000000.snapshot":        {0, "snapshot", true},
		"09223372036854775807.log":             {math.MaxInt64, "log", true},
		"42.log":                               {42, "log", true}, // Kafka takes any length
		"00000000000000000007.log.damaged-0-9": {7, "log.damaged-0-9", true},
		"+0000000000000000042.log":             {}, // digits only: no sign
		"-0000000000000000001.log":             {},
		"99999999999999999999.log":             {}, // past int64
		".log":                                 {},
		"00000000000000000042":                 {},
		"leader-epoch-checkpoint":              {},
		"partition.metadata":                   {},
	} {
		base, ext, ok := ParseSegmentName(name)
		assert.Equal(t, want, parsed{base, ext, ok}, name)
	}
}
