package record

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/internal/testutil/kfakelog"
)

// kfakeLogFile writes raw into a temporary .log and returns its path.
func kfakeLogFile(t *testing.T, raw []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "00000000000000000000.log")
	require.NoError(t, os.WriteFile(p, raw, 0o644))
	return p
}

// TestKfakeLogsEveryCodec decodes batches that franz-go's producer encoded
// and its in-process broker stored, in every codec, from two idempotent
// producers and from transactional ones (with the broker's COMMIT and
// ABORT markers), and the same logs rewritten as a LogAppendTime topic
// stores them: each batch verifies, carries the codec and producer state
// the producer sent, and yields exactly the records sent, in order.
func TestKfakeLogsEveryCodec(t *testing.T) {
	for ci, codec := range kfakelog.Codecs {
		for _, txn := range []bool{false, true} {
			name := codec
			if txn {
				name += "/transactional"
			}
			t.Run(name, func(t *testing.T) {
				log := kfakelog.Produce(t, kfakelog.Options{Codec: codec, Batches: 6, PerBatch: 5, Producers: 2, Transactional: txn})
				bs := readFixture(t, kfakeLogFile(t, log.Raw))
				checkFixtureLog(t, kfakeLogFile(t, log.Raw))
				checkKfakeBatches(t, bs, log, Codec(ci), txn, -1)

				const appendTime = 1_800_000_000_000
				lat := kfakelog.LogAppendTime(t, log.Raw, appendTime)
				checkFixtureLog(t, kfakeLogFile(t, lat))
				checkKfakeBatches(t, readFixture(t, kfakeLogFile(t, lat)), log, Codec(ci), txn, appendTime)
			})
		}
	}
}

// checkKfakeBatches compares decoded batches with what kfakelog sent;
// appendTime >= 0 means the log was rewritten as LogAppendTime.
func checkKfakeBatches(t *testing.T, bs []fixtureBatch, log kfakelog.Log, codec Codec, txn bool, appendTime int64) {
	t.Helper()
	var data []Record
	type pidEpoch struct {
		id    int64
		epoch int16
	}
	seq := map[pidEpoch]int32{} // producer -> next sequence
	pids := map[int64]bool{}
	markers, dataBatches, compressed := 0, 0, 0
	next := int64(0)
	for _, b := range bs {
		require.Equal(t, next, b.BaseOffset, "batches are contiguous")
		next = b.NextOffset()
		assert.Equal(t, txn, b.IsTransactional())
		assert.GreaterOrEqual(t, b.ProducerID, int64(0), "idempotent producer id")
		if b.IsControl() {
			require.True(t, txn, "control batches only end transactions")
			typ, err := b.ControlType()
			require.NoError(t, err)
			want := ControlCommit
			if markers%3 == 2 {
				want = ControlAbort
			}
			assert.Equal(t, want, typ, "marker %d", markers)
			assert.False(t, b.LogAppendTime())
			markers++
			continue
		}
		// kgo sends a batch uncompressed when compressing fails or does
		// not shrink it; the filler makes that rare, not impossible.
		if b.Codec() == codec {
			compressed++
		} else {
			assert.Equal(t, None, b.Codec())
		}
		if b.Codec() == LZ4 {
			assert.Equal(t, []byte{0x04, 0x22, 0x4D, 0x18}, b.Raw[HeaderSize:HeaderSize+4], "an LZ4 frame")
		}
		dataBatches++
		// Sequences continue per producer id and epoch (a transactional
		// producer may bump its epoch when a transaction ends).
		pe := pidEpoch{b.ProducerID, b.ProducerEpoch}
		assert.Equal(t, seq[pe], b.BaseSequence, "sequences continue per producer")
		seq[pe] = b.BaseSequence + b.RecordCount
		pids[b.ProducerID] = true
		if appendTime >= 0 {
			assert.True(t, b.LogAppendTime())
			assert.Equal(t, appendTime, b.MaxTimestamp)
		}
		data = append(data, b.Recs...)
	}
	assert.Len(t, pids, 2, "two producers")
	assert.GreaterOrEqual(t, dataBatches, 6, "a batch per flush at least")
	assert.GreaterOrEqual(t, compressed, dataBatches/2, "most batches in the codec asked for")
	if txn {
		assert.Equal(t, 6, markers, "one marker per transaction")
	}
	require.Len(t, data, len(log.Sent))
	for i, s := range log.Sent {
		r := data[i]
		assert.Equal(t, s.Key, r.Key, "record %d", i)
		assert.Equal(t, s.Value, r.Value, "record %d", i)
		require.Len(t, r.Headers, len(s.Headers))
		for j, h := range s.Headers {
			assert.Equal(t, h.Key, r.Headers[j].Key)
			assert.Equal(t, h.Value, r.Headers[j].Value)
		}
		if appendTime >= 0 {
			assert.Equal(t, appendTime, r.Timestamp, "record %d reads the append time", i)
		} else {
			assert.Equal(t, s.Timestamp, r.Timestamp, "record %d", i)
		}
	}
}

// TestKfakeLogLeaderChangeFirst reads a log that starts, as a KRaft leader's
// does, with a LEADER_CHANGE control batch (built with kmsg) followed by
// franz-go's LZ4 batches one offset up.
func TestKfakeLogLeaderChangeFirst(t *testing.T) {
	log := kfakelog.Produce(t, kfakelog.Options{Codec: "lz4", Batches: 3, PerBatch: 4})
	raw := kfakelog.LeaderChangeFirst(t, log.Raw, 1, 7, 1_700_000_000_000)
	path := kfakeLogFile(t, raw)
	checkFixtureLog(t, path)
	bs := readFixture(t, path)
	require.GreaterOrEqual(t, len(bs), 4, "the marker, then a batch per flush at least")
	lc := bs[0]
	assert.Equal(t, int64(0), lc.BaseOffset)
	assert.True(t, lc.IsControl())
	assert.False(t, lc.IsTransactional())
	assert.Equal(t, int64(-1), lc.ProducerID)
	assert.Equal(t, int32(1), lc.PartitionLeaderEpoch)
	typ, err := lc.ControlType()
	require.NoError(t, err)
	assert.Equal(t, ControlLeaderChange, typ)
	var offs []int64
	for _, b := range bs[1:] {
		assert.False(t, b.IsControl())
		for _, r := range b.Recs {
			offs = append(offs, r.Offset)
		}
	}
	require.Len(t, offs, len(log.Sent))
	for i, o := range offs {
		assert.Equal(t, int64(i+1), o)
	}
}
