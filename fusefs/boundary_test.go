package fusefs

import (
	"context"
	"fmt"
	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/backend/local"
	"log/slog"
	"math/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// viewBoundaries are the buffer boundaries a view's reading crosses: a
// 4 KiB read, the index interval and the smallest log chunk (64 KiB), two
// intervals (the distance that makes a cursor seek, and a doubled chunk),
// the largest chunk (1 MiB) and twice that.
var viewBoundaries = []int{4 << 10, checkpointInterval, 2 * checkpointInterval, chunkMax, 2 * chunkMax}

// valueForBatch returns the value length whose record alone makes an
// uncompressed batch of size bytes (or the nearest below, where varint
// lengths step over size).
func valueForBatch(size int) int {
	n := max(size-record.HeaderSize-8, 0)
	for n > 0 && valueRecordSize(n) > int64(size) {
		n--
	}
	for valueRecordSize(n+1) <= int64(size) {
		n++
	}
	return n
}

// boundaryLog appends to p: small records in two batches, one record of
// valueLen bytes in a batch of its own, then a batch of small records,
// and returns the records with their offsets.
func boundaryLog(t testing.TB, p *engine.Partition, valueLen int) []record.Record {
	t.Helper()
	big := []byte(strings.Repeat("y", valueLen))
	for i := range big {
		big[i] = 'a' + byte(i%26)
	}
	var all []record.Record
	for _, batch := range [][]record.Record{
		{{Value: []byte("small-1")}, {Value: []byte("small-2")}},
		{{Value: []byte("small-3"), Key: []byte("k")}},
		{{Value: big}},
		{{Value: []byte("after-1")}, {Value: nil}, {Value: []byte("after-3")}},
	} {
		for i := range batch {
			batch[i].Timestamp = 1_700_000_000_000
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

// boundaryCases are the value lengths of the big record: records and
// batches just below, at and above every boundary.
func boundaryCases() []int {
	var lens []int
	for _, b := range viewBoundaries {
		for _, d := range []int{-1, 0, 1} {
			lens = append(lens, b+d-1, valueForBatch(b+d)) // a line of b+d bytes; a batch of b+d bytes
		}
	}
	return lens
}

// checkView reads st every way a reader does and compares with want:
// its size (what Getattr reports), whole reads in several buffer sizes,
// and reads at positions around the big record on fresh and shared
// cursors.
func checkView(t *testing.T, st *viewState, want []byte, bigStart, bigLen int) {
	t.Helper()
	require.Equal(t, int64(len(want)), st.size(), "size")
	bufSizes := []int{4 << 10, 128<<10 + 7, 1 << 20}
	if st.format.json {
		bufSizes = []int{4<<10 + 1, 1 << 20}
	}
	for _, bufSize := range bufSizes {
		var c cursor
		got := readWholeView(t, st, &c, make([]byte, bufSize), true)
		c.rd.free()
		require.Equal(t, len(want), len(got), "read in %d-byte reads", bufSize)
		require.True(t, string(want) == string(got), "read in %d-byte reads", bufSize)
	}
	var offs []int64
	for _, o := range []int{0, 1, bigStart - 1, bigStart, bigStart + 1, bigStart + bigLen/2,
		bigStart + 2*checkpointInterval + 1, bigStart + bigLen - 1, bigStart + bigLen, bigStart + bigLen + 1,
		len(want) - 4097, len(want) - 1} {
		if o >= 0 && o < len(want) {
			offs = append(offs, int64(o))
		}
	}
	var shared cursor
	defer shared.rd.free()
	for i, off := range offs {
		for _, n := range []int{1, 4099, 128 << 10} {
			if n == 128<<10 && i%3 != 0 {
				continue // (a long read at a third of the positions)
			}
			cur := &shared
			var fresh cursor
			if i%2 == 0 {
				cur = &fresh
			}
			dest := make([]byte, n)
			k, err := st.read(context.Background(), cur, dest, off)
			fresh.rd.free()
			require.NoError(t, err)
			end := min(int(off)+n, len(want))
			require.Equal(t, end-int(off), k, "read %d at %d", n, off)
			require.True(t, string(want[off:end]) == string(dest[:k]), "read %d at %d", n, off)
		}
	}
}

// TestViewsCrossBufferBoundaries: records and batches just below, at and
// above every buffer boundary, between small ones, read whole in several
// buffer sizes, sized, sought into, shown from an offset and, after a
// remount, from the saved sizes and indexes. A batch larger than the log
// chunk being loaded once came back at the wrong file position (the chunk
// forgot where it started when it grew), and a record longer than two
// index intervals made a seek into it loop forever.
func TestViewsCrossBufferBoundaries(t *testing.T) {
	formats := []viewFormat{{}, {json: true}}
	for _, valueLen := range boundaryCases() {
		t.Run(fmt.Sprintf("value-%d", valueLen), func(t *testing.T) {
			cfg := engine.DefaultConfig()
			cfg.MaxMessageBytes = 4 << 20
			data := t.TempDir()
			d, err := engine.OpenLogDir(vfs.OS, data, engine.LogDirOptions{Defaults: cfg})
			require.NoError(t, err)
			tp, err := d.CreateTopic("b", 1)
			require.NoError(t, err)
			p, err := tp.Partition(0)
			require.NoError(t, err)
			recs := boundaryLog(t, p, valueLen)
			bigOff := recs[3].Offset

			check := func(f *fsys, p *engine.Partition) {
				t.Helper()
				ps := newPartState(f, asPart(p))
				for _, format := range formats {
					for _, from := range []int64{0, bigOff, bigOff + 1} {
						st, err := newViewState(context.Background(), ps, format, snapshotFrom(ps.p, backend.FromStart), func(*backend.Snapshot) (int64, error) { return from, nil })
						require.NoError(t, err)
						want := renderAll(format, recs, from)
						before := renderAll(format, recs[:3], from)
						bigLen := len(format.appendRecord(nil, &recs[3]))
						checkView(t, st, want, len(before), bigLen)
						st.release()
					}
				}
			}
			quiet := slog.New(slog.DiscardHandler)
			f := newFsys(local.New(d), Options{Logger: quiet})
			check(f, p)
			f.sizes.write(f.cache, slog.LevelDebug)
			f.sizes.close()
			require.NoError(t, d.Close())

			// A remount: sizes and indexes come from the saved file.
			d, err = engine.OpenLogDir(vfs.OS, data, engine.LogDirOptions{Defaults: cfg})
			require.NoError(t, err)
			defer d.Close()
			tp, err = d.Topic("b")
			require.NoError(t, err)
			p, err = tp.Partition(0)
			require.NoError(t, err)
			f = newFsys(local.New(d), Options{Logger: quiet})
			defer f.sizes.close()
			readBefore := p.Stats().BytesRead
			st, err := newViewState(context.Background(), newPartState(f, asPart(p)), viewFormat{}, snapshotFrom(asPart(p), backend.FromStart), func(s *backend.Snapshot) (int64, error) { return 0, nil })
			require.NoError(t, err)
			assert.Equal(t, int64(len(renderAll(viewFormat{}, recs, 0))), st.size())
			st.release()
			assert.Zero(t, p.Stats().BytesRead-readBefore, "the size comes from the saved file")
			check(f, p)
		})
	}
}

// TestLogChunkBatchLargerThanChunk: a batch larger than the chunk being
// loaded, after small ones, is read whole and returned at its own
// position, whether it fits a pooled buffer or not.
func TestLogChunkBatchLargerThanChunk(t *testing.T) {
	for _, size := range []int{chunkMin + 1, 70000, chunkMax - 1, chunkMax + 1, 2*chunkMax + 3} {
		cfg := engine.DefaultConfig()
		cfg.MaxMessageBytes = 4 << 20
		p := openTestPartition(t, cfg)
		recs := boundaryLog(t, p, valueForBatch(size))
		snap := p.Snapshot()
		seg := snap.Segments[0]
		for _, prefetch := range []bool{false, true} {
			rd := logChunk{prefetch: prefetch}
			var got []record.Record
			for pos := int64(0); pos < seg.Size(); {
				b, err := rd.batch(seg, pos, seg.Size())
				require.NoError(t, err, "batch at %d (batch size %d)", pos, size)
				rs, err := b.Records(nil)
				require.NoError(t, err)
				got = append(got, rs...)
				pos += int64(b.Size())
			}
			rd.free()
			require.Len(t, got, len(recs), "batch size %d", size)
			for i := range recs {
				assert.Equal(t, string(recs[i].Value), string(got[i].Value), "record %d, batch size %d", i, size)
			}
		}
		snap.Release()
	}
}

// TestLogChunkPositionInsideBatch: a position inside a batch (as a
// damaged or hostile saved index could give) reads as corruption, never
// as a length taken from a record's bytes, whether or not the chunk
// already holds it.
func TestLogChunkPositionInsideBatch(t *testing.T) {
	cfg := engine.DefaultConfig()
	cfg.MaxMessageBytes = 4 << 20
	p := openTestPartition(t, cfg)
	boundaryLog(t, p, 70000)
	snap := p.Snapshot()
	defer snap.Release()
	seg := snap.Segments[0]
	size := seg.Size()
	rng := rand.New(rand.NewSource(3))
	rd := logChunk{prefetch: true}
	defer rd.free()
	var starts []int64
	for pos := int64(0); pos < size; {
		b, err := rd.batch(seg, pos, size)
		require.NoError(t, err)
		starts = append(starts, pos)
		pos += int64(b.Size())
	}
	isStart := func(pos int64) bool {
		for _, s := range starts {
			if s == pos {
				return true
			}
		}
		return false
	}
	for range 200 {
		pos := rng.Int63n(size)
		if isStart(pos) {
			continue
		}
		_, err := rd.batch(seg, pos, size) // the chunk may hold pos
		require.Error(t, err, "position %d", pos)
		var fresh logChunk
		_, err = fresh.batch(seg, pos, size) // a load at pos
		fresh.free()
		require.Error(t, err, "position %d", pos)
	}
	_, err := rd.batch(seg, size, size)
	require.Error(t, err, "at the limit")
	_, err = rd.batch(seg, -5, size)
	require.Error(t, err, "before the start")
}
