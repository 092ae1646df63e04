package policies

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// idemBatch encodes a batch of idempotent producer pid (epoch 0) starting
// at sequence seq, stamped at the test clock's start.
func idemBatch(t *testing.T, pid int64, seq int32, recs ...record.Record) []byte {
	t.Helper()
	spec := record.NewBatchSpec(0)
	spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = pid, 0, seq
	for i := range recs {
		recs[i].Offset = int64(i)
		recs[i].Timestamp = newClock().Now().UnixMilli()
	}
	raw, err := record.Encode(nil, spec, recs)
	require.NoError(t, err)
	return raw
}

// TestCleanerKeepsProducersLastBatch: compaction removes every record of
// an idempotent producer's batch (later values supersede them), but the
// batch stays, emptied, because it holds the producer's last record (as
// Kafka's cleaner retains it): the producer's sequence survives in the log.
// With the producer snapshots gone, the state rebuilt from the log still
// knows the producer, so a batch that skips sequences is refused.
func TestCleanerKeepsProducersLastBatch(t *testing.T) {
	clk := newClock()
	mem := vfs.NewMem()
	d := openLogDir(t, mem, "/data", clk, map[string]string{"cleanup.policy": "compact"})
	p := createPartition(t, d, "idem", nil)
	s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), DedupeBufferSize: testBuffer})
	defer s.Stop()

	_, _, err := p.AppendBatch(idemBatch(t, 5, 0, kv("k1", "v1"), kv("k2", "v1"))) // 0..1
	require.NoError(t, err)
	appendRecs(t, p, kv("k1", "v2"), kv("k2", "v2")) // 2..3
	require.NoError(t, p.Roll())
	appendRecs(t, p, kv("active", "x")) // 4

	run, err := s.CleanPartition(p, true)
	require.NoError(t, err)
	require.NotNil(t, run)
	var vals []string
	for _, r := range readAll(t, p) {
		vals = append(vals, string(r.Key)+"="+string(r.Value))
	}
	assert.Equal(t, []string{"k1=v2", "k2=v2", "active=x"}, vals)
	b, ok := findBatch(t, p, 1)
	require.True(t, ok, "the producer's last batch is kept")
	assert.Equal(t, []int64{0, 1, 5, 0, 1}, []int64{b.BaseOffset, b.LastOffset(), b.ProducerID,
		int64(b.BaseSequence), int64(b.LastSequence())})
	assert.Zero(t, b.RecordCount, "emptied")
	s.Stop()
	require.NoError(t, d.Close())

	// Lose the producer snapshots and the clean-shutdown marker: the state
	// is rebuilt from the log.
	ents, err := mem.ReadDir("/data/idem-0")
	require.NoError(t, err)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".snapshot") {
			require.NoError(t, mem.Remove(filepath.Join("/data/idem-0", e.Name())))
		}
	}
	require.NoError(t, mem.Remove(filepath.Join("/data", engine.CleanShutdownFile)))
	d = openLogDir(t, mem, "/data", clk, map[string]string{"cleanup.policy": "compact"})
	tp, err := d.Topic("idem")
	require.NoError(t, err)
	p, err = tp.Partition(0)
	require.NoError(t, err)
	require.Len(t, p.Producers(), 1)
	assert.Equal(t, int32(1), p.Producers()[0].LastSequence)
	_, _, err = p.AppendBatch(idemBatch(t, 5, 5, kv("k3", "v")))
	require.ErrorIs(t, err, engine.ErrOutOfOrderSequence)
	first, _, err := p.AppendBatch(idemBatch(t, 5, 2, kv("k3", "v")))
	require.NoError(t, err)
	assert.Equal(t, int64(5), first)
}
