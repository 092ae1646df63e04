package fusefs

import (
	"bytes"
	"context"
	"fmt"
	"github.com/topicfs/topicfs/backend"
	"io"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// openTestPartition opens a partition in a temporary directory.
func openTestPartition(t testing.TB, cfg engine.Config) *engine.Partition {
	t.Helper()
	p, err := engine.OpenPartition(vfs.OS, filepath.Join(t.TempDir(), "v-0"), "v", 0,
		engine.PartitionOptions{Config: cfg, RecoveryPoint: -1, LogStartOffset: -1, FirstDirty: -1})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return p
}

// viewRecordsFixture appends n records of varied shapes and returns them.
func viewRecordsFixture(t testing.TB, p *engine.Partition, n int) []record.Record {
	t.Helper()
	rng := rand.New(rand.NewSource(1))
	var all []record.Record
	for len(all) < n {
		batch := make([]record.Record, 1+rng.Intn(40))
		for i := range batch {
			v := fmt.Appendf(nil, "value-%d-", len(all)+i)
			for range rng.Intn(300) {
				v = append(v, 'a'+byte(rng.Intn(26)))
			}
			r := record.Record{Timestamp: 1_700_000_000_000 + int64(len(all)+i), Value: v}
			if rng.Intn(3) == 0 {
				r.Key = []byte(fmt.Sprintf("k%d", rng.Intn(10)))
			}
			if rng.Intn(20) == 0 {
				r.Value = nil
			}
			batch[i] = r
		}
		first, _, err := p.Append(batch)
		require.NoError(t, err)
		for i := range batch {
			batch[i].Offset = first + int64(i)
		}
		all = append(all, batch...)
	}
	return all
}

func renderAll(f viewFormat, recs []record.Record, from int64) []byte {
	var out []byte
	for i := range recs {
		if recs[i].Offset >= from {
			out = f.appendRecord(out, &recs[i])
		}
	}
	return out
}

func TestViewStateReadsAndSeeks(t *testing.T) {
	cfg := engine.DefaultConfig()
	cfg.SegmentBytes = 100 << 10 // several segments, each with a few checkpoints
	p := openTestPartition(t, cfg)
	recs := viewRecordsFixture(t, p, 2500)
	require.Greater(t, len(p.Segments()), 3)
	f := newFsys(nil, Options{})
	ps := newPartState(f, asPart(p))
	formats := []viewFormat{{}, {printKey: true, separator: "=", nullMarker: "NULL"}, {json: true}}
	for _, format := range formats {
		for _, from := range []int64{0, 17, 1234, int64(len(recs)) - 1, int64(len(recs))} {
			t.Run(fmt.Sprintf("%+v/from-%d", format, from), func(t *testing.T) {
				st, err := newViewState(context.Background(), ps, format, snapshotFrom(ps.p, backend.FromStart), func(*backend.Snapshot) (int64, error) { return from, nil })
				require.NoError(t, err)
				defer st.release()
				want := renderAll(format, recs, from)
				require.Equal(t, int64(len(want)), st.size())
				// Sequential reads in odd chunk sizes.
				var c cursor
				got := readWholeView(t, st, &c, make([]byte, 7777), true)
				require.Equal(t, string(want), string(got))
				// Random seeks, each on a fresh cursor and on a shared one.
				rng := rand.New(rand.NewSource(from))
				var shared cursor
				for i := 0; i < 20 && len(want) > 0; i++ {
					off := rng.Int63n(int64(len(want)))
					n := 1 + rng.Intn(20000)
					dest := make([]byte, n)
					cur := &shared
					if i%2 == 0 {
						cur = &cursor{}
					}
					k, err := st.read(context.Background(), cur, dest, off)
					require.NoError(t, err)
					assert.Equal(t, string(want[off:min(int(off)+n, len(want))]), string(dest[:k]), "read %d at %d", n, off)
				}
			})
		}
	}
}

func TestViewStateGrowsAndKeepsDeletedSegments(t *testing.T) {
	cfg := engine.DefaultConfig()
	cfg.SegmentBytes = 16 << 10
	cfg.FileDeleteDelayMs = 0
	p := openTestPartition(t, cfg)
	recs := viewRecordsFixture(t, p, 1000)
	f := newFsys(nil, Options{})
	ps := newPartState(f, asPart(p))
	st, err := newViewState(context.Background(), ps, viewFormat{}, snapshotFrom(ps.p, backend.FromStart), func(s *backend.Snapshot) (int64, error) { return s.Offsets.LogStart, nil })
	require.NoError(t, err)
	defer st.release()
	want := renderAll(viewFormat{}, recs, 0)
	require.Equal(t, int64(len(want)), st.size())

	// Retention deletes most segments; the state still reads them.
	n := len(p.Segments()) - 1
	_, err = p.DeleteOldestSegments(n, "test")
	require.NoError(t, err)
	require.NoError(t, p.PurgeDeleted(time.Now().Add(time.Hour)))
	more := viewRecordsFixture(t, p, 500)
	oldSize, newSize, err := st.refresh(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(len(want)), oldSize)
	want = append(want, renderAll(viewFormat{}, more, 0)...)
	assert.Equal(t, int64(len(want)), newSize)
	var c cursor
	got := make([]byte, len(want)+100)
	k, err := st.read(context.Background(), &c, got, 0)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got[:k]))

	// A new state starts at the new log start.
	st2, err := newViewState(context.Background(), ps, viewFormat{}, snapshotFrom(ps.p, backend.FromStart), func(s *backend.Snapshot) (int64, error) { return s.Offsets.LogStart, nil })
	require.NoError(t, err)
	defer st2.release()
	assert.Less(t, st2.size(), st.size())
}

func TestSeekReadsOneInterval(t *testing.T) {
	cfg := engine.DefaultConfig()
	cfg.SegmentBytes = 512 << 10
	p := openTestPartition(t, cfg)
	viewRecordsFixture(t, p, 8000)
	f := newFsys(nil, Options{})
	ps := newPartState(f, asPart(p))
	st, err := newViewState(context.Background(), ps, viewFormat{}, snapshotFrom(ps.p, backend.FromStart), func(s *backend.Snapshot) (int64, error) { return 0, nil })
	require.NoError(t, err)
	defer st.release()
	size := st.size()
	before := p.Stats().BytesRead
	dest := make([]byte, 8192)
	var c cursor
	_, err = st.read(context.Background(), &c, dest, size-8192)
	require.NoError(t, err)
	read := p.Stats().BytesRead - before
	t.Logf("view of %d records is %d bytes; a seek to the end read %d bytes of the log", p.LogEndOffset(), size, read)
	assert.Less(t, read, int64(3*checkpointInterval), "a seek renders at most about one checkpoint interval")
}

// randomRecord is a record of random shape: null or binary keys and values,
// control characters, headers with repeated or invalid keys.
func randomRecord(rng *rand.Rand) record.Record {
	bytesOf := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			switch rng.Intn(4) {
			case 0:
				b[i] = byte(rng.Intn(256))
			case 1:
				b[i] = byte(rng.Intn(32))
			default:
				b[i] = 'a' + byte(rng.Intn(26))
			}
		}
		return b
	}
	r := record.Record{Offset: rng.Int63(), Timestamp: rng.Int63() - rng.Int63()}
	if rng.Intn(4) > 0 {
		r.Key = bytesOf(rng.Intn(20))
	}
	if rng.Intn(8) > 0 {
		r.Value = bytesOf(rng.Intn(200))
	}
	for range rng.Intn(4) {
		h := record.Header{Key: string(bytesOf(rng.Intn(6)))}
		if rng.Intn(3) > 0 {
			h.Value = bytesOf(rng.Intn(30))
		}
		r.Headers = append(r.Headers, h)
	}
	return r
}

var testFormats = []viewFormat{
	{},
	{nullMarker: "NULL"},
	{printKey: true, separator: "\t"},
	{printKey: true, separator: " => ", nullMarker: "(null)"},
	{json: true},
}

func TestRecordBoundAndRenderedLen(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	worst := record.Record{Offset: math.MinInt64, Timestamp: math.MinInt64, Key: []byte{0, 1, 2, 0x1f}, Value: []byte("\x00\x01\"\\"),
		Headers: []record.Header{{Key: "\x00", Value: []byte{0x01}}, {Key: "\x00", Value: []byte{0xff}}}}
	recs := []record.Record{{}, worst, {Key: []byte{0xff}, Value: []byte{0xfe, 0xfd}}}
	for range 2000 {
		recs = append(recs, randomRecord(rng))
	}
	var scratch []byte
	for _, f := range testFormats {
		for i := range recs {
			out := f.appendRecord(nil, &recs[i])
			assert.Equal(t, len(out), f.measure(&recs[i], &scratch), "%+v record %d: measure", f, i)
			assert.LessOrEqual(t, len(out), f.recordBound(&recs[i]), "%+v record %d", f, i)
			if n, ok := f.renderedLen(&recs[i]); ok {
				assert.Equal(t, len(out), n, "%+v record %d", f, i)
				assert.Equal(t, n, f.recordBound(&recs[i]))
			} else {
				assert.True(t, f.json)
			}
		}
	}
}

func FuzzRecordBound(f *testing.F) {
	f.Add([]byte("k"), []byte("v"), "h", []byte("x"), false, false)
	f.Add([]byte{0xff}, []byte{0, 1, 2}, "\x00", []byte{0xfe}, true, true)
	f.Add([]byte(nil), []byte("\"\\\n"), "", []byte(nil), true, false)
	f.Fuzz(func(t *testing.T, key, value []byte, hkey string, hval []byte, nullKey, twoHeaders bool) {
		r := record.Record{Key: key, Value: value, Offset: -1, Timestamp: math.MinInt64}
		if nullKey {
			r.Key = nil
		}
		r.Headers = []record.Header{{Key: hkey, Value: hval}}
		if twoHeaders {
			r.Headers = append(r.Headers, r.Headers[0])
		}
		noHeaders := r
		noHeaders.Headers = nil
		var scratch []byte
		for _, vf := range testFormats {
			out := vf.appendRecord(nil, &r)
			if b := vf.recordBound(&r); len(out) > b {
				t.Fatalf("%+v: rendered %d bytes, bound %d", vf, len(out), b)
			}
			for _, r := range []*record.Record{&r, &noHeaders} {
				if n, want := vf.measure(r, &scratch), len(vf.appendRecord(nil, r)); n != want {
					t.Fatalf("%+v: measured %d bytes, rendered %d", vf, n, want)
				}
			}
		}
	})
}

func TestPutPlainMatchesAppendRecord(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	recs := make([]record.Record, 300)
	for i := range recs {
		recs[i] = randomRecord(rng)
	}
	for _, f := range testFormats {
		if f.json {
			continue
		}
		var want []byte
		for i := range recs {
			want = f.appendRecord(want, &recs[i])
		}
		for _, room := range []int{0, 1, 2, 17, 100, 1000, 4096, len(want) - 1, len(want), len(want) + 5} {
			t.Run(fmt.Sprintf("%+v/room-%d", f, room), func(t *testing.T) {
				// Rendered after 3 bytes already in dst, in chunks of room.
				dst := make([]byte, 3+room)
				var got []byte
				for i := 0; i < len(recs); {
					n, m := f.putPlain(dst, 3, recs[i:])
					if m == 0 {
						// The next record does not fit at all.
						k, _ := f.renderedLen(&recs[i])
						require.Greater(t, k, room)
						got = f.appendRecord(got, &recs[i])
						i++
						continue
					}
					if i+m < len(recs) {
						k, _ := f.renderedLen(&recs[i+m])
						assert.Greater(t, k, len(dst)-n, "it stops only at a record that does not fit")
					}
					got = append(got, dst[3:n]...)
					i += m
				}
				assert.Equal(t, string(want), string(got))
			})
		}
	}
}

func TestViewStateTinyReads(t *testing.T) {
	cfg := engine.DefaultConfig()
	cfg.SegmentBytes = 32 << 10
	p := openTestPartition(t, cfg)
	recs := viewRecordsFixture(t, p, 300)
	ps := newPartState(newFsys(nil, Options{}), asPart(p))
	for _, format := range testFormats {
		st, err := newViewState(context.Background(), ps, format, snapshotFrom(ps.p, backend.FromStart), func(*backend.Snapshot) (int64, error) { return 5, nil })
		require.NoError(t, err)
		want := renderAll(format, recs, 5)
		for _, size := range []int{1, 3, 64, 1000} {
			var c cursor
			got := readWholeView(t, st, &c, make([]byte, size), true)
			assert.Equal(t, string(want), string(got), "%+v in %d-byte reads", format, size)
			c.rd.free()
		}
		st.release()
	}
}

// readWholeView reads st from the start to its end through c in
// len(buf)-byte reads, failing on any error, and returns the bytes read
// when keep is set (benchmarks pass false: nothing is appended).
func readWholeView(tb testing.TB, st *viewState, c *cursor, buf []byte, keep bool) []byte {
	tb.Helper()
	var got []byte
	for off := int64(0); ; {
		n, err := st.read(context.Background(), c, buf, off)
		require.NoError(tb, err)
		if n == 0 {
			return got
		}
		if keep {
			got = append(got, buf[:n]...)
		}
		off += int64(n)
	}
}

// appendBigBatches appends n batches of count records with values of
// valueLen bytes and returns their plain rendering.
func appendBigBatches(t testing.TB, p *engine.Partition, n, count, valueLen int) []byte {
	t.Helper()
	var want []byte
	for b := range n {
		recs := make([]record.Record, count)
		for i := range recs {
			v := make([]byte, valueLen)
			for j := range v {
				v[j] = 'a' + byte((b+i+j)%26)
			}
			recs[i] = record.Record{Timestamp: -1, Value: v}
			want = append(append(want, v...), '\n')
		}
		_, _, err := p.Append(recs)
		require.NoError(t, err)
	}
	return want
}

func TestLogChunkMatchesReadBatch(t *testing.T) {
	cfg := engine.DefaultConfig()
	cfg.MaxMessageBytes = 8 << 20
	cfg.SegmentBytes = 64 << 20
	p := openTestPartition(t, cfg)
	appendBigBatches(t, p, 30, 1000, 100) // 30 batches of ~109 KB
	appendBigBatches(t, p, 2, 1, 3<<20)   // batches larger than a chunk
	appendBigBatches(t, p, 200, 3, 10)    // small ones
	snap := p.Snapshot()
	defer snap.Release()
	seg := snap.Segments[0]
	size := seg.Size()
	for _, prefetch := range []bool{false, true} {
		rd := logChunk{prefetch: prefetch}
		n := 0
		for pos := int64(0); pos < size; n++ {
			want, err := seg.ReadBatch(pos, nil)
			require.NoError(t, err)
			got, err := rd.batch(seg, pos, size)
			require.NoError(t, err)
			require.Equal(t, want.Raw, got.Raw, "batch at %d", pos)
			pos += int64(got.Size())
		}
		assert.Equal(t, 232, n)
		rd.free()
	}

	// A damaged batch: the chunk reader stops where ReadBatch does, with
	// its error, and still serves the batches before it.
	pos30 := int64(0)
	for range 20 {
		b, err := seg.ReadBatch(pos30, nil)
		require.NoError(t, err)
		pos30 += int64(b.Size())
	}
	file, err := os.OpenFile(seg.LogPath(), os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = file.WriteAt([]byte{0xee}, pos30+500)
	require.NoError(t, err)
	require.NoError(t, file.Close())
	_, wantErr := seg.ReadBatch(pos30, nil)
	require.ErrorIs(t, wantErr, engine.ErrCorrupt)
	rd := logChunk{prefetch: true}
	defer rd.free()
	pos := int64(0)
	for range 20 {
		b, err := rd.batch(seg, pos, size)
		require.NoError(t, err)
		pos += int64(b.Size())
	}
	_, err = rd.batch(seg, pos, size)
	require.ErrorIs(t, err, engine.ErrCorrupt)
	assert.Equal(t, wantErr.Error(), err.Error())
}

func TestCatLargeViewReadsAhead(t *testing.T) {
	m := newTestMount(t, mountOpts{})
	m.sh(t, `mkdir $MNT/big`)
	p := m.partition(t, "big", 0)
	want := appendBigBatches(t, p, 60, 1000, 99) // ~6 MB: several read-ahead rounds
	assert.Equal(t, "1048576\n", m.sh(t, `stat -c %o $MNT/big/0/records`), "views ask for 1 MiB reads")
	got, err := os.ReadFile(m.path("big", "0", "records"))
	require.NoError(t, err)
	require.Equal(t, len(want), len(got))
	require.True(t, bytes.Equal(want, got), "cat of a large view")
	assert.Equal(t, string(want), m.sh(t, `cat $MNT/big/0/records`))
	assert.Equal(t, string(want[:3<<20]), m.sh(t, `dd if=$MNT/big/0/records bs=1M count=3 status=none`))
	// Reads that stop half way (the handle's read ahead is dropped at
	// close), and a reader that grows with the view.
	m.sh(t, `head -c 2500000 $MNT/big/0/records >/dev/null`)
	f, err := os.Open(m.path("big", "0", "records"))
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, 1<<20)
	var read []byte
	for len(read) < 3<<20 {
		n, err := f.Read(buf)
		require.NoError(t, err)
		read = append(read, buf[:n]...)
	}
	more := appendBigBatches(t, p, 5, 1000, 99)
	want = append(want, more...)
	rest, err := io.ReadAll(f)
	require.NoError(t, err)
	read = append(read, rest...)
	require.True(t, bytes.Equal(want, read), "a reader sees what was appended while it read (%d bytes, want %d)", len(read), len(want))
}

// Seeks in the middle of a sequential read (read ahead and the .log loader
// running, segments of 2.5 MiB so chunks cross them) serve the bytes at
// the new position, and sequential reading resumes from there.
func TestViewReadAheadAcrossSeeks(t *testing.T) {
	m := newTestMount(t, mountOpts{config: map[string]string{"segment.bytes": "2621440"}})
	m.sh(t, `mkdir $MNT/big`)
	p := m.partition(t, "big", 0)
	want := appendBigBatches(t, p, 90, 1000, 99) // ~9 MB over 4 segments
	require.Greater(t, len(p.Snapshot().Segments), 3)
	f, err := os.Open(m.path("big", "0", "records"))
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, 1<<20)
	readAt := func(off int64) {
		t.Helper()
		n, err := f.ReadAt(buf, off)
		if err != nil {
			require.ErrorIs(t, err, io.EOF)
		}
		end := min(off+int64(len(buf)), int64(len(want)))
		require.Equal(t, int(end-off), n, "bytes at %d", off)
		require.True(t, bytes.Equal(want[off:end], buf[:n]), "bytes at %d", off)
	}
	for _, off := range []int64{
		0, 1 << 20, 2 << 20, 3 << 20, // sequential: read ahead starts
		0, 1 << 20, 2 << 20, // back to the start
		6<<20 + 12345, 7<<20 + 12345, 8<<20 + 12345, // forward, unaligned
		4 << 20, 5 << 20, // back again, then on to the end
		6 << 20, 7 << 20, 8 << 20, 9 << 20,
	} {
		if off < int64(len(want)) {
			readAt(off)
		}
	}
}

// TestByOffsetInsideBigBatches: views starting inside batches of 1000
// records have the size and bytes of the rendering from their first
// record, at the first open (measured) and at the next (a recent answer),
// and reading them from their start seeks to that batch.
func TestByOffsetInsideBigBatches(t *testing.T) {
	cfg := engine.DefaultConfig()
	cfg.SegmentBytes = 1 << 20 // several segments
	p := openTestPartition(t, cfg)
	all := appendBigBatches(t, p, 25, 1000, 100)
	require.Greater(t, len(p.Segments()), 2)
	ps := newPartState(newFsys(nil, Options{}), asPart(p))
	rng := rand.New(rand.NewSource(3))
	for _, from := range []int64{0, 1, 999, 1000, 1001, 12345, 24999, int64(rng.Intn(25000)), int64(rng.Intn(25000))} {
		want := all[from*101:]
		for round := range 2 {
			st, err := newViewState(context.Background(), ps, viewFormat{}, snapshotFrom(ps.p, from), func(*backend.Snapshot) (int64, error) { return from, nil })
			require.NoError(t, err)
			require.Equal(t, int64(len(want)), st.size(), "from %d round %d", from, round)
			before := p.Stats().BytesRead
			var c cursor
			dest := make([]byte, 64<<10)
			k, err := st.read(context.Background(), &c, dest, 0)
			require.NoError(t, err)
			require.Equal(t, string(want[:min(len(want), len(dest))]), string(dest[:k]), "from %d round %d", from, round)
			assert.Less(t, p.Stats().BytesRead-before, int64(3*110_000), "one or two batches read")
			off := rng.Int63n(int64(len(want)))
			k, err = st.read(context.Background(), &c, dest[:777], off)
			require.NoError(t, err)
			require.Equal(t, string(want[off:min(int(off)+777, len(want))]), string(dest[:k]))
			c.rd.free()
			st.release()
		}
	}
}
