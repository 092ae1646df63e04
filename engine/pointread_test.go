package engine

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// pointRecs makes batch i of the point read tests: records of varied
// shapes (keys or none, headers, null values, values from a few bytes to
// several anchor gaps long), so reads walk, anchor and decode every kind.
func pointRecs(i int, ts0 int64) []record.Record {
	n := 1 + i%23
	out := make([]record.Record, n)
	for j := range out {
		r := record.Record{Timestamp: ts0 + int64(j), Value: fmt.Appendf(nil, "b%d-r%d-", i, j)}
		switch (i + j) % 7 {
		case 1:
			r.Key = fmt.Appendf(nil, "k%d", j)
		case 2:
			r.Headers = []record.Header{{Key: "h", Value: []byte("x")}, {Key: "n"}}
		case 3:
			r.Value = nil
		case 4:
			r.Value = bytes.Repeat([]byte{byte('a' + j%26)}, 300+j*137)
		case 5:
			r.Value = bytes.Repeat([]byte{'z'}, 5000+i)
		}
		out[j] = r
	}
	return out
}

// firstAtOrAfter returns the first record of want with an offset >= off.
func firstAtOrAfter(want []record.Record, off int64) (record.Record, bool) {
	for _, r := range want {
		if r.Offset >= off {
			return r, true
		}
	}
	return record.Record{}, false
}

// checkPointReads reads every offset of [from, to) of p, in the order
// given, and compares each with the first record at or after it in want.
func checkPointReads(t *testing.T, p *Partition, want []record.Record, offsets []int64) {
	t.Helper()
	var r PointReader
	for _, off := range offsets {
		got, err := r.ReadRecord(p, off)
		w, ok := firstAtOrAfter(want, off)
		if !ok {
			require.ErrorIs(t, err, ErrOffsetOutOfRange, "offset %d", off)
			continue
		}
		require.NoError(t, err, "offset %d", off)
		assert.Equal(t, w, got.Record, "offset %d", off)
	}
}

// TestPointReadMatchesReadAll: every offset, read cold (each batch checked
// and remembered at its first read) and then warm (from the memo and its
// anchors, in another order), is the record a full read finds there, for
// uncompressed and compressed topics over several segments.
func TestPointReadMatchesReadAll(t *testing.T) {
	for _, tc := range []struct {
		codec    string
		segBytes int64
		os       bool // on the OS file system: warm reads from a mapping
	}{{"none", 96 << 10, false}, {"none", 96 << 10, true}, {"lz4", 6 << 10, true}} {
		t.Run(fmt.Sprintf("%s/os=%v", tc.codec, tc.os), func(t *testing.T) {
			cfg := testConfig()
			cfg.SegmentBytes = tc.segBytes
			require.NoError(t, cfg.Set("compression.type", tc.codec))
			fs, dir := vfs.FS(vfs.NewMem()), "t-0"
			if tc.os {
				fs, dir = vfs.OS, filepath.Join(t.TempDir(), "t-0")
			}
			p := openTest(t, fs, dir, cfg)
			defer p.Close()
			for i := range 60 {
				_, _, err := p.Append(pointRecs(i, 1_700_000_000_000+int64(i)*100))
				require.NoError(t, err)
			}
			require.Greater(t, len(p.Segments()), 2, "several segments")
			want := readAll(t, p)
			offsets := make([]int64, p.LogEndOffset())
			for i := range offsets {
				offsets[i] = int64(i)
			}
			checkPointReads(t, p, want, offsets)
			rand.New(rand.NewPCG(1, 2)).Shuffle(len(offsets), func(i, j int) { offsets[i], offsets[j] = offsets[j], offsets[i] })
			checkPointReads(t, p, want, offsets)
			var r PointReader
			_, err := r.ReadRecord(p, p.LogEndOffset())
			require.ErrorIs(t, err, ErrOffsetOutOfRange)
			_, err = r.ReadRecord(p, -1)
			require.ErrorIs(t, err, ErrOffsetOutOfRange)
		})
	}
}

// TestPointReadGaps: an offset compaction removed (inside a batch, between
// batches) reads as the next record, also across a segment's end.
func TestPointReadGaps(t *testing.T) {
	p := openTest(t, vfs.NewMem(), "/d/t-0", testConfig())
	defer p.Close()
	batch := func(offs ...int64) []byte {
		recs := make([]record.Record, len(offs))
		for i, o := range offs {
			recs[i] = record.Record{Offset: o, Timestamp: 1_700_000_000_000 + o, Value: bytes.Repeat([]byte{byte('a' + o%26)}, int(o%5)*900+1)}
		}
		raw, err := record.Encode(nil, record.NewBatchSpec(offs[0]), recs)
		require.NoError(t, err)
		return raw
	}
	for _, b := range [][]byte{batch(0, 2, 3, 9), batch(20, 21, 25, 26, 27, 40), batch(41)} {
		_, _, err := p.AppendAsFollower(b)
		require.NoError(t, err)
	}
	want := readAll(t, p)
	var offsets []int64
	for o := int64(0); o < p.LogEndOffset(); o++ {
		offsets = append(offsets, o)
	}
	checkPointReads(t, p, want, offsets) // cold
	checkPointReads(t, p, want, offsets) // warm
}

// TestPointReadCorruption: a batch whose bytes fail their CRC check is
// never served, whichever record of it is asked for, and the error names
// the segment and position; the batches around it read as before.
func TestPointReadCorruption(t *testing.T) {
	p := openTest(t, vfs.OS, filepath.Join(t.TempDir(), "t-0"), testConfig())
	defer p.Close()
	fillTest(t, p, 200, 10)
	want := readAll(t, p)
	snap := p.Snapshot()
	defer snap.Release()
	seg := snap.Segments[0]
	bad, err := seg.FindOffset(55)
	require.NoError(t, err)
	b, err := seg.ReadBatch(bad, nil)
	require.NoError(t, err)
	f, err := os.OpenFile(seg.LogPath(), os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{b.Raw[record.HeaderSize+3] ^ 0x20}, bad+record.HeaderSize+3)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	var r PointReader
	for range 2 {
		for o := b.BaseOffset; o <= b.LastOffset(); o++ {
			_, err := r.ReadRecord(p, o)
			require.ErrorIs(t, err, ErrCorrupt, "offset %d", o)
			assert.Contains(t, err.Error(), fmt.Sprintf("%s position %d", seg.LogPath(), bad))
		}
		checkPointReads(t, p, want, []int64{0, 49, b.LastOffset() + 1, 199})
	}
	_, ok := seg.memo().get(bad)
	assert.False(t, ok, "a bad batch is not remembered")
}

// TestPointReadNewSegmentSameName: the memo belongs to the Segment, not to
// its file name: a log truncated and restarted at the same offset has new
// batches at the same positions, which read as themselves.
func TestPointReadNewSegmentSameName(t *testing.T) {
	p := openTest(t, vfs.NewMem(), "/d/t-0", testConfig())
	defer p.Close()
	appendValues := func(prefix string) {
		recs := make([]record.Record, 30)
		for i := range recs {
			recs[i] = record.Record{Timestamp: 1_700_000_000_000, Value: fmt.Appendf(nil, "%s-%04d", prefix, i)}
		}
		_, _, err := p.Append(recs)
		require.NoError(t, err)
	}
	appendValues("old")
	var r PointReader
	got, err := r.ReadRecord(p, 7)
	require.NoError(t, err)
	assert.Equal(t, "old-0007", string(got.Value))
	require.NoError(t, p.TruncateFullyAndStartAt(0))
	appendValues("new")
	for range 2 {
		got, err = r.ReadRecord(p, 7)
		require.NoError(t, err)
		assert.Equal(t, "new-0007", string(got.Value))
	}
}

// TestMemoBudget: past the budget, memos are dropped whole (least recently
// used first) and reads stay right; a closed segment's memo is charged
// nothing.
func TestMemoBudget(t *testing.T) {
	old := memoBudget.Load()
	defer memoBudget.Store(old)
	base := memoUsed()
	memoBudget.Store(base + 4<<10)
	cfg := testConfig()
	cfg.SegmentBytes = 16 << 10
	p := openTest(t, vfs.NewMem(), "t-0", cfg)
	fillTest(t, p, 3000, 10)
	require.Greater(t, len(p.Segments()), 4)
	want := readAll(t, p)
	offsets := make([]int64, 0, 3000)
	for o := range int64(3000) {
		offsets = append(offsets, o)
	}
	checkPointReads(t, p, want, offsets)
	assert.LessOrEqual(t, memoUsed(), base+4<<10, "within the budget")
	checkPointReads(t, p, want, offsets)
	require.NoError(t, p.Close())
	assert.LessOrEqual(t, memoUsed(), base, "closed segments are charged nothing")
}

// TestReadBatchSkipsCheckOfRemembered: a batch the memo holds is not
// checked again; the sequential reader remembers what it checks when asked
// to, and checks a batch it does not hold.
func TestReadBatchSkipsCheckOfRemembered(t *testing.T) {
	p := openTest(t, vfs.OS, filepath.Join(t.TempDir(), "t-0"), testConfig())
	defer p.Close()
	fillTest(t, p, 100, 10)
	snap := p.Snapshot()
	defer snap.Release()
	seg := snap.Segments[0]
	starts := batchStarts(t, seg)
	rd := NewSegmentReader(SegmentReaderOptions{Remember: true})
	for _, pos := range starts[:5] {
		_, err := rd.Batch(seg, pos, seg.Size())
		require.NoError(t, err)
	}
	rd.Free()
	for i, pos := range starts {
		_, ok := seg.memo().get(pos)
		assert.Equal(t, i < 5, ok, "batch %d remembered", i)
	}
	// Damage a remembered batch and one that is not: the first is not
	// checked again (its bytes are taken as committed and unchanged), the
	// second fails its check.
	f, err := os.OpenFile(seg.LogPath(), os.O_RDWR, 0)
	require.NoError(t, err)
	for _, j := range []int{2, 7} {
		_, err = f.WriteAt([]byte{'#'}, starts[j]+record.HeaderSize+3)
		require.NoError(t, err)
	}
	require.NoError(t, f.Close())
	_, err = seg.ReadBatch(starts[2], nil)
	require.NoError(t, err)
	_, err = seg.ReadBatch(starts[7], nil)
	require.ErrorIs(t, err, ErrCorrupt)
	rd = NewSegmentReader(SegmentReaderOptions{})
	defer rd.Free()
	_, err = rd.Batch(seg, starts[2], seg.Size())
	require.NoError(t, err)
	_, err = rd.Batch(seg, starts[7], seg.Size())
	require.ErrorIs(t, err, ErrCorrupt)
	_, err = (&PointReader{}).ReadSegmentRecord(seg, 1_000)
	require.ErrorIs(t, err, io.EOF, "past the segment's records")
}

// TestPointReadMappedFileCut: a .log cut short behind the engine's back
// (below what it committed) makes a warm read from the mapping fail with
// an error naming the segment, never crash the process; reads go on with
// pread, which reports the short file.
func TestPointReadMappedFileCut(t *testing.T) {
	p := openTest(t, vfs.OS, filepath.Join(t.TempDir(), "t-0"), testConfig())
	defer p.Close()
	fillTest(t, p, 400, 10)
	var r PointReader
	for o := range int64(400) { // warm: remembered, anchored, mapped
		_, err := r.ReadRecord(p, o)
		require.NoError(t, err)
	}
	snap := p.Snapshot()
	defer snap.Release()
	seg := snap.Segments[0]
	m := seg.memo()
	m.mu.RLock()
	mapped := m.mapped != nil
	m.mu.RUnlock()
	require.True(t, mapped, "warm reads go through a mapping")
	require.NoError(t, os.Truncate(seg.LogPath(), 0))
	_, err := r.ReadRecord(p, 350)
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), seg.LogPath())
	_, err = r.ReadRecord(p, 351)
	require.Error(t, err, "pread of the cut file")
}

// TestPointReadActiveSegmentGrows: records appended to the active segment
// after it was mapped read back through the mapping.
func TestPointReadActiveSegmentGrows(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	p := openTest(t, vfs.OS, filepath.Join(t.TempDir(), "t-0"), cfg)
	defer p.Close()
	var r PointReader
	for round := range 5 {
		fillTestFrom(t, p, round*100, 100, 10)
		want := readAll(t, p)
		offsets := make([]int64, len(want))
		for i := range offsets {
			offsets[i] = int64(i)
		}
		for range 2 {
			for _, o := range offsets {
				got, err := r.ReadRecord(p, o)
				require.NoError(t, err)
				require.Equal(t, want[o], got.Record)
			}
		}
	}
	require.Len(t, p.Segments(), 1)
}

// fillTestFrom appends n records numbered from from, per per Append.
func fillTestFrom(t testing.TB, p *Partition, from, n, per int) {
	t.Helper()
	for i := from; i < from+n; i += per {
		_, _, err := p.Append(makeRecs(i, min(per, from+n-i), 1_700_000_000_000+int64(i)))
		require.NoError(t, err)
	}
}

// TestPointReadConcurrent: point readers on their own PointReaders read
// the right records while the partition grows and rolls and the memos are
// dropped for the budget, mapped and unmapped (run with -race).
func TestPointReadConcurrent(t *testing.T) {
	old := memoBudget.Load()
	defer memoBudget.Store(old)
	memoBudget.Store(memoUsed() + 16<<10)
	cfg := testConfig()
	cfg.SegmentBytes = 16 << 10
	p := openTest(t, vfs.OS, filepath.Join(t.TempDir(), "t-0"), cfg)
	defer p.Close()
	fillTest(t, p, 500, 10)
	done := make(chan struct{})
	errs := make(chan error, 4)
	for g := range 4 {
		go func() {
			var r PointReader
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				o := rng.Int64N(p.LogEndOffset())
				rec, err := r.ReadRecord(p, o)
				if err == nil && string(rec.Value) != fmt.Sprintf("value-%06d", o) {
					err = fmt.Errorf("offset %d read %q", o, rec.Value)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	fillTestFrom(t, p, 500, 3000, 10)
	close(done)
	for range 4 {
		require.NoError(t, <-errs)
	}
	require.Greater(t, len(p.Segments()), 2)
}
