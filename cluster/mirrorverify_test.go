package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/vfs"
)

// readAllBatches reads a snapshot's segments as views do (through an
// engine.SegmentReader over the mirror segments); it returns the bytes of
// the batches read and the first error.
func readAllBatches(snap *backend.Snapshot) ([]byte, error) {
	rd := engine.NewSegmentReader(engine.SegmentReaderOptions{MinChunk: 256, MaxChunk: 1024})
	defer rd.Free()
	var out []byte
	for _, s := range snap.Segments {
		for pos, size := int64(0), s.Size(); pos < size; {
			b, err := rd.Batch(s, pos, size)
			if err != nil {
				return out, err
			}
			out = append(out, b.Raw...)
			pos += int64(b.Size())
		}
		rd.Free()
	}
	return out, nil
}

// TestMirrorCorruptBatchNeverServed: the fill verifies every batch before
// it writes any (AppendAsFollower), so a batch the cluster returns damaged
// fails the Snapshot (ErrCorrupt) and never reaches the copy: the copy
// ends before it, and the reader gets the error, never its bytes. The
// batches the fill wrote are marked verified in their segments (readers
// skip their CRC check); a copy reopened from disk has no such mark, so a
// byte damaged on disk since is found when read.
func TestMirrorCorruptBatchNeverServed(t *testing.T) {
	batches, want := fakeLog(t, 12)
	ctx := context.Background()
	dir := t.TempDir()
	opts := MirrorOptions{SegmentBytes: 700, Logger: quietLogger()}
	m, err := OpenMirror(vfs.OS, dir, opts)
	require.NoError(t, err)
	mp, err := m.Partition("c", "t", 0)
	require.NoError(t, err)

	bad := make([][]byte, len(batches))
	copy(bad, batches)
	k := len(bad) / 2
	bad[k] = bytes.Clone(bad[k])
	bad[k][len(bad[k])-1] ^= 0x40 // a record byte: the CRC no longer matches
	src := &fakeSource{batches: bad, maxBytes: 300, id: [16]byte{1}}
	_, err = mp.Snapshot(ctx, src, 0, src.hw())
	require.ErrorIs(t, err, backend.ErrCorrupt)
	_, end := mp.Range()
	assert.LessOrEqual(t, end, firstOffset(t, bad[k]), "nothing of the damaged batch was copied")

	good := &fakeSource{batches: batches, maxBytes: 300, id: [16]byte{1}}
	snap := snapshot(t, mp, good, 0, good.hw())
	checkRecords(t, want, visible(t, snap), 0)
	got, err := readAllBatches(snap)
	require.NoError(t, err)
	assert.Equal(t, bytes.Join(batches, nil), got)
	for _, s := range snap.Segments {
		es := s.(engine.SegmentBacked).EngineSegment()
		from, to := es.VerifiedBytes()
		assert.Zero(t, from)
		assert.GreaterOrEqual(t, to, s.Size(), "segment %d: the fill's batches are marked verified", s.BaseOffset())
	}
	snap.Release()
	require.NoError(t, m.Close())

	// Damage a byte of the closed copy on disk, then reopen it: the
	// reader finds it.
	logs, err := filepath.Glob(filepath.Join(dir, "c", "t-0", "*.log"))
	require.NoError(t, err)
	require.NotEmpty(t, logs)
	raw, err := os.ReadFile(logs[0])
	require.NoError(t, err)
	raw[len(raw)-1] ^= 0x40
	require.NoError(t, os.WriteFile(logs[0], raw, 0o644))
	m = newMirror(t, vfs.OS, dir, opts)
	mp, err = m.Partition("c", "t", 0)
	require.NoError(t, err)
	fetches := good.fetches.Load()
	snap = snapshot(t, mp, good, 0, good.hw())
	defer snap.Release()
	assert.Equal(t, fetches, good.fetches.Load(), "the clean copy is read from disk, not fetched again")
	_, err = readAllBatches(snap)
	assert.ErrorIs(t, err, engine.ErrCorrupt, "a byte damaged on disk reads as corruption")
}

// firstOffset is the base offset of the batch raw.
func firstOffset(t *testing.T, raw []byte) int64 {
	t.Helper()
	require.GreaterOrEqual(t, len(raw), 8)
	return int64(binary.BigEndian.Uint64(raw))
}
