package engine

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// batchPositions returns the file positions and sizes of seg's batches.
func batchPositions(t *testing.T, seg *Segment) (pos []int64, size []int) {
	t.Helper()
	for p := int64(0); p < seg.Size(); {
		b, err := seg.ReadBatch(p, nil)
		require.NoError(t, err)
		pos, size = append(pos, p), append(size, b.Size())
		p += int64(b.Size())
	}
	return pos, size
}

// TestMappedBatch: every batch of a segment read from the mapping is the
// batch ReadBatch reads (checked, then remembered); a position inside a
// batch, a limit that cuts a batch, a bad CRC and a file on a file system
// that cannot be mapped all leave it to the caller (ok false, no error).
func TestMappedBatch(t *testing.T) {
	p := openTest(t, vfs.OS, filepath.Join(t.TempDir(), "t-0"), testConfig())
	defer p.Close()
	for i := range 20 {
		_, _, err := p.Append(pointRecs(i, 1_700_000_000_000+int64(i)*100))
		require.NoError(t, err)
	}
	snap := p.Snapshot()
	defer snap.Release()
	seg := snap.Segments[0]
	pos, size := batchPositions(t, seg)
	for i, at := range pos {
		want, err := seg.ReadBatch(at, nil)
		require.NoError(t, err)
		calls := 0
		ok, err := seg.MappedBatch(at, seg.Size(), func(b record.Batch) error {
			calls++
			assert.Equal(t, want.Raw, b.Raw, "batch %d", i)
			assert.Equal(t, want.BaseOffset, b.BaseOffset)
			return nil
		})
		require.NoError(t, err)
		require.True(t, ok, "batch %d", i)
		require.Equal(t, 1, calls)
		assert.True(t, seg.checkedBefore(at, size[i]), "batch %d remembered", i)
	}
	called := func(b record.Batch) error { t.Fatalf("fn called for batch at %d", b.BaseOffset); return nil }
	ok, err := seg.MappedBatch(pos[1]+5, seg.Size(), called)
	require.NoError(t, err)
	assert.False(t, ok, "inside a batch")
	ok, err = seg.MappedBatch(pos[1], pos[1]+int64(size[1])-1, called)
	require.NoError(t, err)
	assert.False(t, ok, "a limit inside the batch")
	ok, err = seg.MappedBatch(pos[1], seg.Size()+1, called)
	require.NoError(t, err)
	assert.False(t, ok, "a limit past the committed size")

	// An error of fn is returned as it is.
	boom := bytes.ErrTooLarge
	ok, err = seg.MappedBatch(pos[0], seg.Size(), func(record.Batch) error { return boom })
	assert.True(t, ok)
	require.ErrorIs(t, err, boom)
}

// TestMappedBatchBadCRC: a batch whose bytes do not check is not handed
// over: ReadBatch reports it.
func TestMappedBatchBadCRC(t *testing.T) {
	p := openTest(t, vfs.OS, filepath.Join(t.TempDir(), "t-0"), testConfig())
	defer p.Close()
	fillTest(t, p, 100, 10)
	snap := p.Snapshot()
	defer snap.Release()
	seg := snap.Segments[0]
	pos, size := batchPositions(t, seg) // (ReadBatch remembers nothing)
	called := func(b record.Batch) error { t.Fatalf("fn called for batch at %d", b.BaseOffset); return nil }
	last := len(pos) - 1
	end := pos[last] + int64(size[last]) - 1
	f, err := os.OpenFile(seg.LogPath(), os.O_RDWR, 0)
	require.NoError(t, err)
	one := []byte{0}
	_, err = f.ReadAt(one, end)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{one[0] ^ 0xff}, end)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	ok, err := seg.MappedBatch(pos[last], seg.Size(), called)
	require.NoError(t, err)
	assert.False(t, ok, "a bad CRC")
	_, err = seg.ReadBatch(pos[last], nil)
	require.ErrorIs(t, err, ErrCorrupt, "ReadBatch reports it")
}

// TestMappedBatchNoMapping: a segment on a file system without mappings
// (MemFS) reads nothing in place.
func TestMappedBatchNoMapping(t *testing.T) {
	p := openTest(t, vfs.NewMem(), "/d/t-0", testConfig())
	defer p.Close()
	fillTest(t, p, 100, 10)
	snap := p.Snapshot()
	defer snap.Release()
	seg := snap.Segments[0]
	ok, err := seg.MappedBatch(0, seg.Size(), func(record.Batch) error { return nil })
	require.NoError(t, err)
	assert.False(t, ok)
}

// TestMappedBatchFileCut: a .log cut short behind the engine's back makes
// a read from the mapping fail with ErrCorrupt naming the segment, never
// crash the process.
func TestMappedBatchFileCut(t *testing.T) {
	p := openTest(t, vfs.OS, filepath.Join(t.TempDir(), "t-0"), testConfig())
	defer p.Close()
	fillTest(t, p, 400, 10)
	snap := p.Snapshot()
	defer snap.Release()
	seg := snap.Segments[0]
	pos, _ := batchPositions(t, seg)
	ok, err := seg.MappedBatch(0, seg.Size(), func(record.Batch) error { return nil })
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, os.Truncate(seg.LogPath(), 0))
	_, err = seg.MappedBatch(pos[len(pos)-1], seg.Size(), func(b record.Batch) error {
		t.Fatal("fn called on a cut file")
		return nil
	})
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), seg.LogPath())
}
