package engine

import (
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// batchEpochs returns the partitionLeaderEpoch of every batch of p by its
// base offset.
func batchEpochs(t *testing.T, p *Partition) map[int64]int32 {
	t.Helper()
	snap := p.Snapshot()
	defer snap.Release()
	out := map[int64]int32{}
	for _, s := range snap.Segments {
		for pos := int64(0); ; {
			b, err := s.ReadBatch(pos, nil)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			out[b.BaseOffset] = b.PartitionLeaderEpoch
			pos += int64(b.Size())
		}
	}
	return out
}

// TestAppendsStampLatestEpoch: a partition whose leader-epoch-checkpoint
// ends at epoch 7 (as after a broker's leader elections) stamps 7 on every
// batch a local append writes, whatever the path (Append, AppendLines
// uncompressed and compressed, EncodeLines/AppendEncoded, AppendBatch over
// the producer's epoch), as the broker stamps its current leader epoch;
// batches written before keep theirs, and a follower's batch keeps the
// leader's epoch (no second stamp).
func TestAppendsStampLatestEpoch(t *testing.T) {
	mem := vfs.NewMem()
	d, err := OpenLogDir(mem, "/data", ldOpts())
	require.NoError(t, err)
	topic, err := d.CreateTopic("t", 1)
	require.NoError(t, err)
	p, err := topic.Partition(0)
	require.NoError(t, err)
	assert.Equal(t, int32(0), p.LatestEpoch(), "a new partition: epoch 0")
	_, _, err = p.Append(makeRecs(0, 10, 1000))
	require.NoError(t, err)
	require.NoError(t, d.Close())

	entries := []EpochEntry{{0, 0}, {4, 3}, {7, 8}}
	require.NoError(t, vfs.WriteFileAtomic(mem, filepath.Join("/data/t-0", LeaderEpochCheckpointFile), FormatLeaderEpochCheckpoint(entries), 0o644))
	d, err = OpenLogDir(mem, "/data", ldOpts())
	require.NoError(t, err)
	defer d.Close()
	topic, err = d.Topic("t")
	require.NoError(t, err)
	p, err = topic.Partition(0)
	require.NoError(t, err)
	require.Equal(t, entries, p.LeaderEpochs())
	require.Equal(t, int32(7), p.LatestEpoch())

	local := map[int64]bool{}
	first, _, err := p.Append(makeRecs(10, 3, 2000))
	require.NoError(t, err)
	local[first] = true
	first, _, err = p.AppendLines([]byte("a\nb\n"), 1<<10)
	require.NoError(t, err)
	local[first] = true
	var e EncodedLines
	require.NoError(t, p.EncodeLines(&e, []byte("c\nd\n"), 1<<10))
	first, _, err = p.AppendEncoded(&e)
	require.NoError(t, err)
	local[first] = true
	spec := plainSpec()
	spec.PartitionLeaderEpoch = 99 // what a client put there: the broker overwrites it
	first, _, err = p.AppendBatch(producerBatch(t, spec, makeRecs(0, 2, 3000)))
	require.NoError(t, err)
	local[first] = true
	require.NoError(t, topic.AlterConfig(map[string]string{"compression.type": "gzip"}))
	first, _, err = p.AppendLines([]byte("e\nf\n"), 1<<10)
	require.NoError(t, err)
	local[first] = true

	fspec := record.NewBatchSpec(p.LogEndOffset())
	fspec.PartitionLeaderEpoch = 5
	follower, _, err := p.AppendAsFollower(encodeFollower(t, fspec, 2))
	require.NoError(t, err)

	epochs := batchEpochs(t, p)
	for base, epoch := range epochs {
		switch {
		case base < 10:
			assert.Equal(t, int32(0), epoch, "batch %d appended before the checkpoint moved on", base)
		case base == follower:
			assert.Equal(t, int32(5), epoch, "the follower's batch keeps the leader's epoch")
		default:
			assert.True(t, local[base], "batch %d", base)
			assert.Equal(t, int32(7), epoch, "batch %d", base)
		}
	}
	assert.Len(t, epochs, 1+len(local)+1)
}
