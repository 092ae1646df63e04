package engine

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// diskBytes returns a file's size and the bytes of disk blocks it holds.
func diskBytes(t *testing.T, path string) (size, held int64) {
	t.Helper()
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(path, &st))
	return st.Size, st.Blocks * 512
}

// reservedBytes is how many bytes of disk blocks a file holds past its end.
func reservedBytes(t *testing.T, path string) int64 {
	size, held := diskBytes(t, path)
	return held - (size+4095)/4096*4096
}

// The active segment holds blocks reserved past its end while it is
// appended to; sealing, closing and reopening after a crash free them, and
// the bytes and offsets are those of the appends.
func TestPreallocatedActiveSegment(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	cfg := DefaultConfig()
	cfg.SegmentBytes = 64 << 20
	clock := &fakeClock{t: time.UnixMilli(1_000_000)}
	// No write goroutine (the default): the reservations follow the 1 MiB
	// runs, not when the write goroutine was idle.
	p := openTest(t, vfs.OS, dir, cfg, func(o *PartitionOptions) { o.Now = clock.Now })
	value := bytes.Repeat([]byte("v"), 1024)
	recs := make([]record.Record, 2000)
	for i := range recs {
		recs[i] = record.Record{Timestamp: -1, Value: value}
	}
	reserved := func(path string) int64 { return reservedBytes(t, path) }
	_, _, err := p.Append(recs)
	require.NoError(t, err)
	first := p.active().LogPath()
	assert.Greater(t, reserved(first), int64(512<<10), "blocks reserved past the end of the active segment")

	require.NoError(t, p.Roll())
	assert.Less(t, reserved(first), int64(64<<10), "sealing frees the reserved blocks")
	_, _, err = p.Append(recs)
	require.NoError(t, err)
	active := p.active().LogPath()
	require.NotEqual(t, first, active)
	assert.Greater(t, reserved(active), int64(512<<10), "the new active segment reserves its own")
	end := p.LogEndOffset()
	require.NoError(t, p.Close())
	assert.Less(t, reserved(active), int64(64<<10), "closing frees the reserved blocks")

	// A crash leaves the reservation behind: reopening frees it.
	size, _ := diskBytes(t, active)
	f, err := vfs.OS.OpenFile(active, os.O_RDWR, 0)
	require.NoError(t, err)
	require.NoError(t, vfs.Allocate(f, size, 2<<20))
	require.NoError(t, f.Close())
	require.GreaterOrEqual(t, reserved(active), int64(2<<20))
	p = openTest(t, vfs.OS, dir, cfg)
	defer p.Close()
	size2, _ := diskBytes(t, active)
	assert.Equal(t, size, size2)
	assert.Less(t, reserved(active), int64(64<<10), "recovery frees the blocks a crash left reserved")
	assert.Equal(t, end, p.LogEndOffset())
	got := readAll(t, p)
	require.Len(t, got, int(end))
	for i, r := range got {
		require.Equal(t, int64(i), r.Offset)
		require.Equal(t, value, r.Value)
	}
}

// No blocks are reserved past segment.bytes: the segment rolls there.
func TestPreallocationStopsAtSegmentBytes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	cfg := DefaultConfig()
	cfg.SegmentBytes = 3 << 19
	p := openTest(t, vfs.OS, dir, cfg)
	defer p.Close()
	recs := make([]record.Record, 1000)
	for i := range recs {
		recs[i] = record.Record{Timestamp: -1, Value: bytes.Repeat([]byte("v"), 1024)}
	}
	_, _, err := p.Append(recs)
	require.NoError(t, err)
	require.Len(t, p.list(), 1)
	path := p.active().LogPath()
	size, _ := diskBytes(t, path)
	assert.Greater(t, reservedBytes(t, path), int64(64<<10), "blocks reserved past the end")
	assert.LessOrEqual(t, reservedBytes(t, path), cfg.SegmentBytes-(size+4095)/4096*4096+4096, "none past segment.bytes")
}
