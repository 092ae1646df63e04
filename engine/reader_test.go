package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// readerModes are the Reader configurations every test runs: the smallest
// buffer (many chunks, batches split across reads) and the default one,
// each with and without the prefetch goroutine.
var readerModes = []ReaderOptions{
	{BufferSize: MinReaderBufferSize},
	{BufferSize: MinReaderBufferSize, NoPrefetch: true},
	{BufferSize: MinReaderBufferSize, Buffers: 2},
	{BufferSize: MinReaderBufferSize, Buffers: 9},
	{},
	{NoPrefetch: true},
}

func modeName(o ReaderOptions) string {
	return fmt.Sprintf("buf=%d/buffers=%d/noprefetch=%v", o.BufferSize, o.Buffers, o.NoPrefetch)
}

// readWith reads the partition from offset from with a Reader and returns
// copies of the records (without headers), stopping at the first error
// (returned).
func readWith(t testing.TB, p *Partition, from int64, opts ReaderOptions) ([]record.Record, error) {
	t.Helper()
	r := p.NewReader(from, opts)
	defer func() { require.NoError(t, r.Close()) }()
	var out []record.Record
	var scratch []byte
	for {
		b, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		scratch, err = b.EachRecord(scratch, func(rec *record.Record) error {
			c := *rec
			c.Key = bytes.Clone(rec.Key)
			c.Value = bytes.Clone(rec.Value)
			c.Headers = nil
			out = append(out, c)
			return nil
		})
		require.NoError(t, err)
	}
}

func fillTest(t testing.TB, p *Partition, n, per int) {
	t.Helper()
	for i := 0; i < n; i += per {
		_, _, err := p.Append(makeRecs(i, min(per, n-i), 1_700_000_000_000+int64(i)))
		require.NoError(t, err)
	}
}

func TestReaderSegmentsAndCodecs(t *testing.T) {
	for _, codec := range []string{"none", "lz4", "zstd"} {
		t.Run(codec, func(t *testing.T) {
			cfg := testConfig()
			cfg.SegmentBytes = 16 << 10
			require.NoError(t, cfg.Set("compression.type", codec))
			p := openTest(t, vfs.NewMem(), "t-0", cfg)
			defer p.Close()
			fillTest(t, p, 6_000, 37)
			require.Greater(t, len(p.Segments()), 2, "several segments")
			want := readAll(t, p)
			require.Len(t, want, 6_000)
			for _, mode := range readerModes {
				got, err := readWith(t, p, 0, mode)
				require.NoError(t, err, modeName(mode))
				require.Equal(t, len(want), len(got), modeName(mode))
				assert.Equal(t, want, got, modeName(mode))
			}
		})
	}
}

func TestReaderFromOffset(t *testing.T) {
	p := openTest(t, vfs.NewMem(), "t-0", testConfig())
	defer p.Close()
	fillTest(t, p, 5_000, 10)
	leo := p.LogEndOffset()
	before := p.Stats().BytesRead
	for _, from := range []int64{0, 1, 9, 10, 11, 2_345, 2_999, 4_990, 4_999, leo} {
		for _, mode := range readerModes {
			got, err := readWith(t, p, from, mode)
			require.NoError(t, err)
			if from == leo {
				assert.Empty(t, got)
				continue
			}
			require.NotEmpty(t, got)
			// Whole batches: the first holds from, none starts later.
			assert.LessOrEqual(t, got[0].Offset, from, "from %d %s", from, modeName(mode))
			assert.Greater(t, got[0].Offset, from-10, "from %d %s", from, modeName(mode))
			assert.Equal(t, seq(got[0].Offset, leo), offsetsOf(got), "from %d %s", from, modeName(mode))
		}
	}
	assert.Greater(t, p.Stats().BytesRead, before, "reads are counted")

	for _, from := range []int64{-1, leo + 1} {
		_, err := readWith(t, p, from, ReaderOptions{})
		require.ErrorIs(t, err, ErrOffsetOutOfRange)
	}
}

func TestReaderBatchLargerThanBuffer(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 256 << 10
	p := openTest(t, vfs.NewMem(), "t-0", cfg)
	defer p.Close()
	small := makeRecs(0, 3, 1)
	big := []record.Record{{Timestamp: 5, Value: bytes.Repeat([]byte("B"), 3*MinReaderBufferSize)}}
	for range 3 {
		_, _, err := p.Append(small)
		require.NoError(t, err)
		_, _, err = p.Append(big)
		require.NoError(t, err)
		_, _, err = p.Append(big) // two big batches in a row
		require.NoError(t, err)
	}
	want := readAll(t, p)
	for _, mode := range readerModes {
		got, err := readWith(t, p, 0, mode)
		require.NoError(t, err, modeName(mode))
		assert.Equal(t, want, got, modeName(mode))
		got, err = readWith(t, p, 4, mode) // starting at the second big batch
		require.NoError(t, err, modeName(mode))
		assert.Equal(t, want[4:], got, modeName(mode))
	}
}

func TestReaderCorruptByte(t *testing.T) {
	for _, tc := range []struct {
		name      string
		at        int64 // offset in the bad batch
		set       func(byte) byte
		readAfter bool // the log after the bad batch is still framed
	}{
		{name: "record body", at: record.HeaderSize + 20, set: func(b byte) byte { return b ^ 0x40 }, readAfter: true},
		{name: "crc field", at: 18, set: func(b byte) byte { return b + 1 }, readAfter: true},
		{name: "attributes (codec)", at: 22, set: func(b byte) byte { return b | 3 }, readAfter: true},
		{name: "length zeroed", at: 11, set: func(byte) byte { return 0 }},
		{name: "magic", at: 16, set: func(byte) byte { return 7 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 3_000
			cfg := testConfig()
			cfg.SegmentBytes = 24 << 10
			dir := filepath.Join(t.TempDir(), "t-0")
			p := openTest(t, vfs.OS, dir, cfg)
			fillTest(t, p, n, 20)
			require.Greater(t, len(p.Segments()), 2)
			// Pick a batch in the middle of the second segment.
			snap := p.Snapshot()
			seg := snap.Segments[1]
			var pos, badBase int64
			var path string
			for q, i := int64(0), 0; ; i++ {
				b, err := seg.ReadBatch(q, nil)
				require.NoError(t, err)
				if i == 5 {
					pos, badBase, path = q, b.BaseOffset, seg.LogPath()
					break
				}
				q += int64(b.Size())
			}
			snap.Release()
			require.NoError(t, p.Close())

			f, err := os.OpenFile(path, os.O_RDWR, 0)
			require.NoError(t, err)
			one := []byte{0}
			if tc.name == "length zeroed" {
				_, err = f.WriteAt([]byte{0, 0, 0, 0}, pos+8)
				require.NoError(t, err)
			} else {
				_, err = f.ReadAt(one, pos+tc.at)
				require.NoError(t, err)
				one[0] = tc.set(one[0])
				_, err = f.WriteAt(one, pos+tc.at)
				require.NoError(t, err)
			}
			require.NoError(t, f.Close())

			p = openTest(t, vfs.OS, dir, cfg, func(o *PartitionOptions) { o.ReadOnly, o.CleanShutdown = true, true })
			defer p.Close()
			for _, mode := range readerModes {
				got, err := readWith(t, p, 0, mode)
				require.ErrorIs(t, err, ErrCorrupt, modeName(mode))
				assert.Contains(t, err.Error(), path)
				assert.Contains(t, err.Error(), fmt.Sprintf("position %d", pos))
				assert.Equal(t, seq(0, badBase), offsetsOf(got), "every record before the bad batch, none from it (%s)", modeName(mode))

				if tc.readAfter {
					got, err = readWith(t, p, badBase+20, mode)
					require.NoError(t, err)
					assert.Equal(t, seq(badBase+20, n), offsetsOf(got))
				}
			}
			assert.Positive(t, p.Stats().Corruptions)
		})
	}
}

func TestReaderTruncatedTail(t *testing.T) {
	// A segment whose size cuts a batch (as a reader of a torn file would
	// see it) is corruption, not a silent end.
	p := openTest(t, vfs.NewMem(), "t-0", testConfig())
	defer p.Close()
	fillTest(t, p, 100, 10)
	snap := p.Snapshot()
	seg := snap.Segments[len(snap.Segments)-1]
	size := seg.Size()
	seg.size.Store(size - 3)
	r := snap.NewReader(0, ReaderOptions{BufferSize: MinReaderBufferSize})
	var err error
	n := 0
	for err == nil {
		var b *record.Batch
		if b, err = r.Next(); err == nil {
			n += int(b.RecordCount)
		}
	}
	seg.size.Store(size)
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Equal(t, 90, n)
	require.NoError(t, r.Close())
}

func TestReaderConcurrentAppend(t *testing.T) {
	p := openTest(t, vfs.NewMem(), "t-0", testConfig())
	defer p.Close()
	fillTest(t, p, 2_000, 10)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for i := 2_000; ; i += 10 {
			select {
			case <-stop:
				return
			default:
			}
			if _, _, err := p.Append(makeRecs(i, 10, int64(i))); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for i := range 8 {
		mode := readerModes[i%len(readerModes)]
		snap := p.Snapshot()
		leo := snap.LogEndOffset
		r := snap.NewReader(0, mode)
		var offs []int64
		var scratch []byte
		for {
			b, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			scratch, err = b.EachRecord(scratch, func(rec *record.Record) error {
				offs = append(offs, rec.Offset)
				return nil
			})
			require.NoError(t, err)
		}
		require.NoError(t, r.Close())
		require.Equal(t, seq(0, leo), offs, "exactly the snapshot's records (%s)", modeName(mode))
	}
	close(stop)
	wg.Wait()
}

func TestReaderCloseReleasesSnapshot(t *testing.T) {
	p := openTest(t, vfs.NewMem(), "t-0", testConfig())
	defer p.Close()
	fillTest(t, p, 5_000, 10)
	for _, mode := range readerModes {
		snap := p.Snapshot()
		for _, s := range snap.Segments {
			require.Equal(t, int32(2), s.refs.Load())
		}
		r := snap.NewReader(0, mode)
		_, err := r.Next() // the prefetcher is now running
		require.NoError(t, err)
		require.NoError(t, r.Close())
		require.NoError(t, r.Close(), "idempotent")
		for _, s := range snap.Segments {
			assert.Equal(t, int32(1), s.refs.Load(), "only the partition's reference is left")
		}
		_, err = r.Next()
		require.ErrorIs(t, err, ErrClosed)
	}
	// Closing a reader that never read.
	r := p.NewReader(0, ReaderOptions{})
	require.NoError(t, r.Close())
	// Next after Close is ErrClosed even when the reader had reached the end.
	r = p.NewReader(0, ReaderOptions{})
	var err error
	for err == nil {
		_, err = r.Next()
	}
	require.ErrorIs(t, err, io.EOF)
	require.NoError(t, r.Close())
	_, err = r.Next()
	require.ErrorIs(t, err, ErrClosed)
}

func TestReaderKafkaFixtures(t *testing.T) {
	for _, fx := range fixturePartitions(t) {
		dir := fx.dir
		t.Run(fx.name, func(t *testing.T) {
			p := openTest(t, vfs.OS, dir, testConfig(), func(o *PartitionOptions) { o.ReadOnly = true })
			defer p.Close()
			want := readAll(t, p)
			for _, mode := range readerModes[:2] {
				got, err := readWith(t, p, p.LogStartOffset(), mode)
				require.NoError(t, err)
				assert.Equal(t, offsetsOf(want), offsetsOf(got), modeName(mode))
				if len(want) == len(got) {
					for i := range want {
						assert.Equal(t, want[i].Value, got[i].Value)
						assert.Equal(t, want[i].Key, got[i].Key)
					}
				}
			}
		})
	}
}

// BenchmarkReader reads every batch of a partition with a Reader, verifying
// it and decoding every record with EachRecord (compare
// BenchmarkReadSequential: ReadBatch + Records).
func BenchmarkReader(b *testing.B) {
	p := benchPartition(b)
	defer p.Close()
	var total int64
	for _, s := range p.Segments() {
		total += s.Size
	}
	modes := []ReaderOptions{
		{}, {BufferSize: DefaultReaderBufferSize, NoPrefetch: true},
		{BufferSize: 1 << 20, Buffers: 2}, {BufferSize: 256 << 10, Buffers: 4},
		{BufferSize: 128 << 10}, {BufferSize: 128 << 10, NoPrefetch: true},
	}
	for _, mode := range modes {
		b.Run(fmt.Sprintf("buf=%dKiB/buffers=%d/prefetch=%v", mode.BufferSize>>10, mode.Buffers, !mode.NoPrefetch), func(b *testing.B) {
			b.SetBytes(total)
			b.ReportAllocs()
			n, vb := 0, 0
			fn := func(r *record.Record) error { n++; vb += len(r.Value); return nil }
			var scratch []byte
			for b.Loop() {
				r := p.NewReader(0, mode)
				for {
					batch, err := r.Next()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					if scratch, err = batch.EachRecord(scratch, fn); err != nil {
						b.Fatal(err)
					}
				}
				if err := r.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// TestReaderSpinner: a side of the pipeline polls for the other's chunk,
// stops polling after spinMaxMisses timeouts in a row, then only probes
// every spinProbe waits, and polls again after a hit.
func TestReaderSpinner(t *testing.T) {
	ch := make(chan *segChunk, 1)
	var s spinner
	for i := range spinMaxMisses {
		spinPoll(&s, ch) // times out: nothing arrives
		assert.Equal(t, i+1, s.misses)
	}
	for s.waits%spinProbe != spinProbe-1 {
		spinPoll(&s, ch) // skipped: no poll, no miss counted
		assert.Equal(t, spinMaxMisses, s.misses)
	}
	spinPoll(&s, ch) // the probe polls again and times out
	assert.Equal(t, spinMaxMisses+1, s.misses)
	ch <- &segChunk{}
	s.waits = spinProbe - 1 // the next wait probes
	spinPoll(&s, ch)
	assert.Zero(t, s.misses, "a hit resets the misses")
	assert.NotNil(t, spinReceive(&s, ch))
	assert.Zero(t, s.misses)

	// With one P the other side cannot run while we poll: never poll.
	off := spinner{off: true}
	for range 2 * spinProbe {
		spinPoll(&off, ch)
	}
	assert.Zero(t, off.misses)
}

// sharedChunk returns a chunk loaded from the first segment of a fresh
// partition of n batches, the batches listed in bad with a flipped record
// byte in the file (their CRC fails), and the partition's snapshot
// (release it).
func sharedChunk(t *testing.T, n int, bad ...int) (*segChunk, *Snapshot) {
	t.Helper()
	p := openTest(t, vfs.OS, filepath.Join(t.TempDir(), "t-0"), testConfig())
	t.Cleanup(func() { p.Close() })
	fillTest(t, p, n*10, 10)
	snap := p.Snapshot()
	seg := snap.Segments[0]
	f, err := os.OpenFile(seg.LogPath(), os.O_RDWR, 0)
	require.NoError(t, err)
	for q, j := int64(0), 0; j < n; j++ {
		b, err := seg.ReadBatch(q, nil)
		require.NoError(t, err)
		if slices.Contains(bad, j) {
			_, err = f.WriteAt([]byte{b.Raw[record.HeaderSize+3] ^ 0x20}, q+record.HeaderSize+3)
			require.NoError(t, err)
		}
		q += int64(b.Size())
	}
	require.NoError(t, f.Close())
	c := &segChunk{}
	c.load(seg, 0, seg.Size(), 1<<20, &ownBuffers{size: 1 << 20}, nil, false)
	require.Len(t, c.batches, n)
	c.shared = true // as the prefetch goroutine sends it
	return c, snap
}

// TestReaderSharedVerification covers the CRC checks the caller and the
// prefetcher share: every batch is checked by exactly one side, the caller
// gets each outcome in order whoever checked it, and a bad batch is
// reported once, by the source's ReadBatch, with its segment and position.
func TestReaderSharedVerification(t *testing.T) {
	empty := make(chan *segChunk, 1)
	t.Run("prefetcher checks from the back, caller the rest", func(t *testing.T) {
		c, snap := sharedChunk(t, 6, 4)
		defer snap.Release()
		require.True(t, c.check(0)) // the caller's first batch
		require.True(t, c.check(1))
		assert.True(t, c.checkFromBack(empty), "finds batch 4 bad")
		assert.Equal(t, batchOK, c.state[5].Load())
		assert.Equal(t, batchBad, c.state[4].Load())
		assert.Equal(t, batchUnchecked, c.state[3].Load(), "stopped at the bad batch")
		require.True(t, c.check(2))
		require.True(t, c.check(3))
		assert.False(t, c.check(4))
		assert.False(t, c.check(4), "the stored outcome")
		seg := snap.Segments[0]
		assert.Zero(t, seg.stats.corruptions.Load(), "checks report nothing")

		r := NewSegmentReader(SegmentReaderOptions{})
		defer r.Free()
		r.src, r.cur = seg, c
		_, err := r.Batch(seg, c.pos[4], seg.Size())
		require.ErrorIs(t, err, ErrCorrupt)
		assert.Contains(t, err.Error(), fmt.Sprintf("%s position %d", seg.LogPath(), c.pos[4]))
		assert.Equal(t, int64(1), seg.stats.corruptions.Load())
		b, err := r.Batch(seg, c.pos[3], seg.Size())
		require.NoError(t, err, "a checked batch is returned from the chunk")
		assert.Equal(t, c.batches[3].Raw, b.Raw)
	})
	t.Run("prefetcher leaves its buffer wait to fill", func(t *testing.T) {
		c, snap := sharedChunk(t, 4, 2)
		defer snap.Release()
		free := make(chan *segChunk, 1)
		free <- &segChunk{}
		assert.False(t, c.checkFromBack(free), "a free buffer: reading comes first")
		for j := range 4 {
			assert.Equal(t, batchUnchecked, c.state[j].Load(), "nothing claimed")
		}
		require.True(t, c.check(0))
		require.True(t, c.check(1))
		require.False(t, c.check(2))
	})
	t.Run("caller claimed everything", func(t *testing.T) {
		c, snap := sharedChunk(t, 3)
		defer snap.Release()
		for j := range 3 {
			require.True(t, c.check(j))
		}
		assert.False(t, c.checkFromBack(empty))
		for j := range 3 {
			assert.Equal(t, batchOK, c.state[j].Load())
		}
	})
	t.Run("both at once", func(t *testing.T) {
		for round := range 200 {
			bad := round % 9 // 8: none bad
			c, snap := sharedChunk(t, 8, bad)
			var wg sync.WaitGroup
			wg.Go(func() { c.checkFromBack(empty) })
			first := -1
			for j := range 8 {
				if !c.check(j) {
					first = j
					break
				}
			}
			wg.Wait()
			if bad < 8 {
				assert.Equal(t, bad, first, "round %d", round)
			} else {
				assert.Equal(t, -1, first)
			}
			for j := range first + 1 {
				assert.Contains(t, []uint32{batchOK, batchBad}, c.state[j].Load(), "round %d: batch %d checked", round, j)
			}
			snap.Release()
		}
	})
}
