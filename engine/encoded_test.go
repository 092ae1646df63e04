package engine

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// TestAppendEncodedMatchesAppendLines: lines encoded ahead and appended
// later make exactly the log AppendLines makes (same batches, bytes,
// segments: segment.bytes is small enough to roll inside a call), with
// LogAppendTime too, and it recovers after a crash.
func TestAppendEncodedMatchesAppendLines(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	clock := func(o *PartitionOptions) { o.Now = func() time.Time { return now } }
	for _, lat := range []bool{false, true} {
		cfg := DefaultConfig()
		cfg.SegmentBytes = 256 << 10
		if lat {
			cfg.MessageTimestampType = "LogAppendTime"
		}
		memA, memB := vfs.NewMem(), vfs.NewMem()
		a := openTest(t, memA, "/d/t-0", cfg, clock)
		b := openTest(t, memB, "/d/t-0", cfg, clock)
		var e EncodedLines
		for i, n := range []int{3000, 1, 7000} {
			lines := testLines(i*10000, n, 90, n/2, 20<<10)
			fa, la, err := a.AppendLines(lines, 16<<10)
			require.NoError(t, err)
			require.NoError(t, b.EncodeLines(&e, lines, 16<<10))
			fb, lb, err := b.AppendEncoded(&e)
			require.NoError(t, err)
			assert.Equal(t, []int64{fa, la}, []int64{fb, lb})
		}
		assert.Equal(t, a.LogEndOffset(), b.LogEndOffset())
		assert.Greater(t, len(b.Segments()), 3, "rolled")
		require.Equal(t, logBytes(t, memA, a), logBytes(t, memB, b))
		require.NoError(t, a.Close())
		require.NoError(t, b.Close())
		q := openTest(t, memB.Crash(), "/d/t-0", cfg)
		assert.Equal(t, b.LogEndOffset(), q.LogEndOffset())
		checkIndexes(t, q)
		require.NoError(t, q.Close())
	}
}

// TestAppendEncodedConfigChanged: a topic whose compression or timestamp
// type changed between encoding and appending gets the lines by its new
// rules; encoding on a compressed topic says ErrNotEncodable.
func TestAppendEncodedConfigChanged(t *testing.T) {
	cfg := DefaultConfig()
	p := openTest(t, vfs.NewMem(), "/d/t-0", cfg)
	defer p.Close()
	var e EncodedLines
	lines := testLines(0, 500, 50, 0, 0)
	require.NoError(t, p.EncodeLines(&e, lines, 4096))
	c2 := cfg
	c2.CompressionType = "zstd"
	p.SetConfig(c2)
	_, last, err := p.AppendEncoded(&e)
	require.NoError(t, err)
	assert.Equal(t, int64(499), last)
	for _, b := range batchesOf(t, p) {
		assert.Equal(t, record.Zstd, b.Codec())
	}
	assert.ErrorIs(t, p.EncodeLines(&e, lines, 4096), ErrNotEncodable)

	p.SetConfig(cfg)
	require.NoError(t, p.EncodeLines(&e, lines, 4096))
	c3 := cfg
	c3.MessageTimestampType = "LogAppendTime"
	p.SetConfig(c3)
	_, last, err = p.AppendEncoded(&e)
	require.NoError(t, err)
	assert.Equal(t, int64(999), last)
	bs := batchesOf(t, p)
	assert.True(t, bs[len(bs)-1].LogAppendTime())
	got := readAll(t, p)
	require.Len(t, got, 1000)
	want := bytes.Split(bytes.TrimSuffix(lines, []byte("\n")), []byte("\n"))
	for i, r := range got {
		require.Equal(t, want[i%500], r.Value)
	}
}

// twoSmallPartitions opens two partitions with max.message.bytes 4096,
// closed at the end of the test.
func twoSmallPartitions(t *testing.T) (p, q *Partition) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.MaxMessageBytes = 4096
	p = openTest(t, vfs.NewMem(), "/d/t-0", cfg)
	t.Cleanup(func() { p.Close() })
	q = openTest(t, vfs.NewMem(), "/d/t-1", cfg)
	t.Cleanup(func() { q.Close() })
	return p, q
}

// TestAppendEncodedRejects: a line over max.message.bytes, lines without a
// final newline, an empty or foreign EncodedLines append nothing.
func TestAppendEncodedRejects(t *testing.T) {
	p, q := twoSmallPartitions(t)
	var e EncodedLines
	require.ErrorIs(t, p.EncodeLines(&e, testLines(0, 10, 10, 5, 5000), 1024), ErrRecordTooLarge)
	_, _, err := p.AppendEncoded(&e)
	require.Error(t, err, "nothing encoded")
	require.Error(t, p.EncodeLines(&e, []byte("a\nb"), 1024))
	require.NoError(t, q.EncodeLines(&e, testLines(0, 10, 10, 0, 0), 1024))
	_, _, err = p.AppendEncoded(&e)
	require.Error(t, err, "encoded for another partition")
	assert.Zero(t, p.LogEndOffset())
	assert.Zero(t, q.LogEndOffset())
}

// TestEncodeLinesConcurrentWithAppends: encoding needs no lock; run under
// -race it shows encoding beside appends shares nothing unsafely.
func TestEncodeLinesConcurrentWithAppends(t *testing.T) {
	p := openTest(t, vfs.NewMem(), "/d/t-0", DefaultConfig())
	defer p.Close()
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Go(func() {
			var e EncodedLines
			for i := range 50 {
				lines := testLines(g*1000+i, 20, 30, 0, 0)
				if assert.NoError(t, p.EncodeLines(&e, lines, 512)) {
					_, _, err := p.AppendEncoded(&e)
					assert.NoError(t, err)
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(2*50*20), p.LogEndOffset())
	assert.Len(t, readAll(t, p), 2000)
}

// TestEncodeLinesAdds: several EncodeLines calls add to one EncodedLines
// (a failing one leaves it as it was; another partition's is refused) and
// AppendEncoded appends them all in order; the lines may change once
// EncodeLines returned.
func TestEncodeLinesAdds(t *testing.T) {
	p, q := twoSmallPartitions(t)
	var e EncodedLines
	first := testLines(0, 3, 10, 0, 0)
	require.NoError(t, p.EncodeLines(&e, first, 1024))
	copy(first, bytes.Repeat([]byte("#"), len(first))) // EncodeLines copied them
	require.ErrorIs(t, p.EncodeLines(&e, testLines(3, 4, 10, 2, 5000), 1024), ErrRecordTooLarge)
	require.Error(t, q.EncodeLines(&e, testLines(3, 1, 10, 0, 0), 1024), "another partition's lines")
	require.NoError(t, p.EncodeLines(&e, testLines(3, 2000, 10, 0, 0), 1024))
	_, last, err := p.AppendEncoded(&e)
	require.NoError(t, err)
	assert.Equal(t, int64(2002), last)
	got := readAll(t, p)
	require.Len(t, got, 2003)
	for i, r := range got {
		require.Equal(t, fmt.Sprintf("line-%06d", i), string(bytes.TrimRight(r.Value, ".")))
	}
}
