package policies

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// appendTxn appends a transactional data batch of producer pid, its first
// one, through AppendBatch (as a producer would send it) and returns its
// first offset.
func appendTxn(t *testing.T, p *engine.Partition, pid int64, recs ...record.Record) int64 {
	t.Helper()
	return appendTxnSeq(t, p, pid, 0, recs...)
}

// appendTxnSeq is appendTxn of a batch starting at sequence seq.
func appendTxnSeq(t *testing.T, p *engine.Partition, pid int64, seq int32, recs ...record.Record) int64 {
	t.Helper()
	spec := record.NewBatchSpec(0)
	spec.Transactional = true
	spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = pid, 0, seq
	for i := range recs {
		recs[i].Offset = int64(i)
		recs[i].Timestamp = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	}
	raw, err := record.Encode(nil, spec, recs)
	require.NoError(t, err)
	first, _, err := p.AppendBatch(raw)
	require.NoError(t, err)
	return first
}

func appendMarker(t *testing.T, p *engine.Partition, pid int64, typ int16) int64 {
	t.Helper()
	spec := record.NewBatchSpec(0)
	spec.ProducerID, spec.ProducerEpoch = pid, 0
	raw, err := record.EncodeControlBatch(nil, spec, 0, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), typ, 0)
	require.NoError(t, err)
	first, _, err := p.AppendBatch(raw)
	require.NoError(t, err)
	return first
}

// TestCleanerTransactions: batches of an aborted transaction are dropped;
// control records are never deduplicated by key; an ABORT marker stays
// while batches of its transaction remain, then gets a delete horizon, then
// goes after it.
func TestCleanerTransactions(t *testing.T) {
	clk := newClock()
	d := openLogDir(t, vfs.NewMem(), "/data", clk, map[string]string{
		"cleanup.policy": "compact", "delete.retention.ms": "1000",
	})
	p := createPartition(t, d, "txn", nil)
	s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), DedupeBufferSize: testBuffer})
	defer s.Stop()

	appendTxn(t, p, 7, kv("k1", "aborted"))        // 0
	appendTxn(t, p, 8, kv("k2", "committed"))      // 1
	abort := appendMarker(t, p, 7, controlAbort)   // 2
	commit := appendMarker(t, p, 8, controlCommit) // 3
	appendRecs(t, p, kv("k3", "plain"))            // 4
	require.NoError(t, p.Roll())
	// Producer 7 goes on in the active segment: its aborted batch is not its
	// last one, which the cleaner would keep (emptied) for it.
	appendTxnSeq(t, p, 7, 1, kv("k4", "later")) // 5
	appendMarker(t, p, 7, controlCommit)        // 6
	appendRecs(t, p, kv("active", "x"))         // 7

	run, err := s.CleanPartition(p, true)
	require.NoError(t, err)
	require.NotNil(t, run)
	var keys []string
	for _, r := range readAll(t, p) {
		keys = append(keys, string(r.Key))
	}
	assert.Equal(t, []string{"k2", "k3", "k4", "active"}, keys, "the aborted transaction's batch is gone")
	_, ok := findBatch(t, p, abort)
	assert.True(t, ok, "the ABORT marker stays while its transaction had batches this round")
	_, ok = findBatch(t, p, commit)
	assert.True(t, ok, "the COMMIT marker stays while its transaction has batches")

	// Next round: no batch of txn 7 left, so its marker gets a horizon...
	run, err = s.CleanPartition(p, true)
	require.NoError(t, err)
	require.NotNil(t, run)
	b := batchAt(t, p, abort)
	require.True(t, b.HasDeleteHorizon())
	assert.Equal(t, clk.Now().UnixMilli()+1000, b.DeleteHorizonMs())

	// ...and goes once the horizon has passed.
	clk.Advance(2 * time.Second)
	_, err = s.CleanPartition(p, true)
	require.NoError(t, err)
	_, ok = findBatch(t, p, abort)
	assert.False(t, ok, "the ABORT marker went after its horizon")
	_, ok = findBatch(t, p, commit)
	assert.True(t, ok, "the COMMIT marker stays: k2 of its transaction remains")
	assert.Equal(t, int64(8), p.LogEndOffset())
}

// TestCleanerOpenTransaction: a transaction without its marker yet may
// still abort, so a cleaning stops before it and does not let its records
// supersede older values; once it aborts, its batch goes and the older
// value survives.
func TestCleanerOpenTransaction(t *testing.T) {
	clk := newClock()
	d := openLogDir(t, vfs.NewMem(), "/data", clk, map[string]string{"cleanup.policy": "compact"})
	p := createPartition(t, d, "open", nil)
	s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), DedupeBufferSize: testBuffer})
	defer s.Stop()

	appendRecs(t, p, kv("k1", "old"))         // 0
	appendRecs(t, p, kv("k1", "committed"))   // 1
	open := appendTxn(t, p, 9, kv("k1", "x")) // 2: open transaction
	appendRecs(t, p, kv("k2", "a"))           // 3
	appendRecs(t, p, kv("k2", "b"))           // 4
	require.NoError(t, p.Roll())
	appendRecs(t, p, kv("active", "y")) // 5

	run, err := s.CleanPartition(p, true)
	require.NoError(t, err)
	require.NotNil(t, run)
	assert.Equal(t, open, run.OpenTxnOffset)
	assert.Equal(t, open, run.EndOffset, "cleaned up to the open transaction")
	assert.Equal(t, open, p.FirstDirtyOffset())
	var offs []int64
	for _, r := range readAll(t, p) {
		offs = append(offs, r.Offset)
	}
	assert.Equal(t, []int64{1, 2, 3, 4, 5}, offs, "k1@1 kept: k1@2 may abort; k2 not cleaned yet")
	assert.Contains(t, fmt.Sprint(s.State("open", 0).Explanations), "transaction is still open")

	// Now the open transaction sits at the first dirty offset: nothing can
	// be cleaned, and the scheduler leaves the log alone for a while.
	_, err = s.CleanPartition(p, true)
	require.ErrorIs(t, err, errOpenTxn)
	runs, err := s.RunCleaner()
	require.NoError(t, err)
	assert.Empty(t, runs)
	assert.Contains(t, s.State("open", 0).CleanerExplanation, "a transaction is open at offset 2")

	// The transaction aborts: its batch goes, k1@1 stays.
	appendMarker(t, p, 9, controlAbort) // 6
	require.NoError(t, p.Roll())
	_, err = s.CleanPartition(p, true)
	require.NoError(t, err)
	got := map[string]string{}
	for _, r := range readAll(t, p) {
		got[string(r.Key)] = string(r.Value)
	}
	assert.Equal(t, map[string]string{"k1": "committed", "k2": "b", "active": "y"}, got)
}
