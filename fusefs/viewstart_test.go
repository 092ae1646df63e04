package fusefs

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// TestByOffsetFirstReadTakesTheMeasuredChunk: the first READ of a view
// opened inside a batch renders from the chunk its measure read (no byte
// of that batch read again), from its first record, in every READ size,
// and the READs after it go on exactly where it stopped.
func TestByOffsetFirstReadTakesTheMeasuredChunk(t *testing.T) {
	cfg := engine.DefaultConfig()
	cfg.SegmentBytes = 1 << 20
	p := openTestPartition(t, cfg)
	all := appendBigBatches(t, p, 12, 1000, 100)
	rng := rand.New(rand.NewSource(5))
	for _, from := range []int64{0, 1, 998, 999, 1000, 4321, 11999, int64(rng.Intn(12000))} {
		want := all[from*101:]
		left := (999 - from%1000 + 1) * 101 // rendered bytes of from's batch from from on
		for _, size := range []int{1, 100, 101, 150, 4096, 64 << 10, 300_000} {
			// A mount of its own: the measure is not a recent answer.
			ps := newPartState(newFsys(nil, Options{}), asPart(p))
			st, err := newViewState(context.Background(), ps, viewFormat{}, snapshotFrom(ps.p, from), func(*backend.Snapshot) (int64, error) { return from, nil })
			require.NoError(t, err)
			require.Equal(t, int64(len(want)), st.size())
			var c cursor
			dest := make([]byte, size)
			before := p.Stats().BytesRead
			k, err := st.read(context.Background(), &c, dest, 0)
			require.NoError(t, err)
			require.Equal(t, string(want[:min(len(want), size)]), string(dest[:k]), "from %d, %d-byte READ", from, size)
			if int64(size) <= left && !segmentBase(p, from) { // (a view from a segment's start reads it from there)
				assert.Equal(t, before, p.Stats().BytesRead, "from %d, %d-byte READ: nothing read again", from, size)
			}
			got := append([]byte(nil), dest[:k]...)
			got = append(got, readWholeViewFrom(t, st, &c, dest, int64(k))...)
			require.Equal(t, string(want), string(got), "from %d in %d-byte READs", from, size)
			c.rd.free()
			st.release()
		}
	}
}

// segmentBase reports whether a segment of p starts at offset off.
func segmentBase(p *engine.Partition, off int64) bool {
	for _, s := range p.Segments() {
		if s.BaseOffset == off {
			return true
		}
	}
	return false
}

// readWholeViewFrom reads st from off to its end through c in len(buf)-byte
// reads and returns the bytes read.
func readWholeViewFrom(tb testing.TB, st *viewState, c *cursor, buf []byte, off int64) []byte {
	tb.Helper()
	var got []byte
	for {
		n, err := st.read(context.Background(), c, buf, off)
		require.NoError(tb, err)
		if n == 0 {
			return got
		}
		got = append(got, buf[:n]...)
		off += int64(n)
	}
}

// TestByOffsetStartRecordsOfEveryShape: views of records of every shape
// (keys, nulls, headers, long values: some only the decoding path renders)
// read the same whatever the READ size, from any start and in every
// format, on the OS's file system and on MemFS.
func TestByOffsetStartRecordsOfEveryShape(t *testing.T) {
	for _, mem := range []bool{false, true} {
		t.Run(fmt.Sprintf("memfs=%v", mem), func(t *testing.T) { testStartRecordsOfEveryShape(t, mem) })
	}
}

func testStartRecordsOfEveryShape(t *testing.T, mem bool) {
	cfg := engine.DefaultConfig()
	cfg.SegmentBytes = 64 << 10
	var p *engine.Partition
	if mem {
		var err error
		p, err = engine.OpenPartition(vfs.NewMem(), "/d/v-0", "v", 0,
			engine.PartitionOptions{Config: cfg, RecoveryPoint: -1, LogStartOffset: -1, FirstDirty: -1})
		require.NoError(t, err)
		t.Cleanup(func() { p.Close() })
	} else {
		p = openTestPartition(t, cfg)
	}
	recs := viewRecordsFixture(t, p, 1500)
	// Records with headers: putPlainRaw leaves them to the decoding path.
	hdr := []record.Record{{Timestamp: 1, Value: []byte("h1"), Headers: []record.Header{{Key: "k", Value: []byte("v")}}},
		{Timestamp: 2, Value: []byte("plain")}, {Timestamp: 3, Value: nil}, {Timestamp: 4, Value: []byte("h2"), Headers: []record.Header{{Key: "x"}}}}
	first, _, err := p.Append(hdr)
	require.NoError(t, err)
	for i := range hdr {
		hdr[i].Offset = first + int64(i)
	}
	recs = append(recs, hdr...)
	ps := newPartState(newFsys(nil, Options{}), asPart(p))
	rng := rand.New(rand.NewSource(9))
	for _, format := range testFormats {
		for _, from := range []int64{0, 3, int64(rng.Intn(len(recs))), int64(rng.Intn(len(recs))), first, first + 1, first + 3} {
			want := renderAll(format, recs, from)
			st, err := newViewState(context.Background(), ps, format, snapshotFrom(ps.p, from), func(*backend.Snapshot) (int64, error) { return from, nil })
			require.NoError(t, err)
			require.Equal(t, int64(len(want)), st.size(), "%+v from %d", format, from)
			for _, size := range []int{2, 333, 64 << 10} {
				var c cursor
				got := readWholeViewFrom(t, st, &c, make([]byte, size), 0)
				require.Equal(t, string(want), string(got), "%+v from %d in %d-byte READs", format, from, size)
				c.rd.free()
			}
			st.release()
		}
	}
}

// TestByOffsetMeasureReadsTheBatchOnce: after a remount (the segment's
// index saved, nothing remembered of its batches), stat of a view that
// starts inside a batch reads that batch's bytes once and nothing else:
// no header read to find it first.
func TestByOffsetMeasureReadsTheBatchOnce(t *testing.T) {
	data := t.TempDir()
	m := newTestMountAt(t, data, false)
	m.sh(t, `mkdir $MNT/b`)
	appendBigBatches(t, m.partition(t, "b", 0), 12, 1000, 100)
	m.sh(t, `stat $MNT/b/0/records >/dev/null`) // measured and indexed
	m.unmount()

	m = newTestMountAt(t, data, false)
	p := m.partition(t, "b", 0)
	snap := p.Snapshot()
	defer snap.Release()
	require.Len(t, snap.Segments, 1)
	seg := snap.Segments[0]
	for _, from := range []int64{2500, 7777, 11001} {
		pos, err := seg.FindOffset(from)
		require.NoError(t, err)
		b, err := seg.ReadBatch(pos, nil)
		require.NoError(t, err)
		before := p.Stats().BytesRead
		got := m.sh(t, fmt.Sprintf(`stat -c %%s $MNT/b/0/by-offset/%d`, from))
		assert.Equal(t, fmt.Sprint((12000-from)*101)+"\n", got, "from %d", from)
		assert.Equal(t, int64(b.Size()), p.Stats().BytesRead-before, "from %d: the batch, once", from)
	}
}
