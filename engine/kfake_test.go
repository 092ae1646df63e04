package engine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/index"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
	"github.com/topicfs/topicfs/internal/testutil/kfakelog"
)

// kfakeTimestamp makes every ninth record jump ahead (past the broker's
// clock, which stamps the transaction markers), so the largest timestamp so
// far often sits in an earlier batch than the latest one: the time index
// then names other offsets than the offset index.
func kfakeTimestamp(i int) int64 {
	if i%9 == 3 {
		return 4_000_000_000_000 + int64(i)*10
	}
	return 1_700_000_000_000 + int64(i)*10
}

// TestKfakeLogsThroughPartition opens partitions whose only segment is a
// log franz-go's producer and broker wrote (every codec; idempotent,
// transactional with COMMIT/ABORT markers, rewritten as LogAppendTime, and
// behind a KRaft-style LEADER_CHANGE control batch),
// without indexes, as Kafka's loader meets it: read-only, the engine reads
// what an independent decode reads; read-write, it rebuilds indexes that
// follow Kafka's rule (time index entries name the batch holding the
// largest timestamp so far, not the latest batch), answers time lookups
// like a scan, and appends after the broker's log end.
func TestKfakeLogsThroughPartition(t *testing.T) {
	for _, codec := range kfakelog.Codecs {
		for _, kind := range []string{"idempotent", "transactional", "logappendtime", "leaderchange"} {
			t.Run(codec+"/"+kind, func(t *testing.T) {
				log := kfakelog.Produce(t, kfakelog.Options{Codec: codec, Batches: 12, PerBatch: 4, Producers: 2,
					Transactional: kind == "transactional", Timestamp: kfakeTimestamp})
				raw := log.Raw
				switch kind {
				case "logappendtime":
					raw = kfakelog.LogAppendTime(t, raw, 1_800_000_000_000)
				case "leaderchange":
					raw = kfakelog.LeaderChangeFirst(t, raw, 1, 1, 1_700_000_000_000)
				}
				dir := filepath.Join(t.TempDir(), "t-0")
				require.NoError(t, os.MkdirAll(dir, 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(dir, "00000000000000000000.log"), raw, 0o644))
				want, leo := groundTruth(t, dir)

				p := openTest(t, vfs.OS, dir, testConfig(), func(o *PartitionOptions) { o.ReadOnly = true })
				assert.Equal(t, leo, p.LogEndOffset())
				all := readAll(t, p)
				assert.Equal(t, want, offsetsOf(all))
				checkKfakeValues(t, all, log.Sent)
				checkTimeLookups(t, p, all)
				require.NoError(t, p.Close())

				cfg := testConfig()
				cfg.IndexIntervalBytes = int64(len(raw) / 6) // an entry every few batches
				p = openTest(t, vfs.OS, dir, cfg)
				assert.Equal(t, want, offsetsOf(readAll(t, p)))
				checkIndexes(t, p)
				checkTimeLookups(t, p, readAll(t, p))
				first, _, err := p.Append(makeRecs(0, 3, 1_700_000_000_000))
				require.NoError(t, err)
				assert.Equal(t, leo, first)
				require.NoError(t, p.Close())
				if kind != "logappendtime" {
					assert.True(t, timeIndexLags(t, dir), "some time index entry names a batch the offset index skips")
				}
			})
		}
	}
}

// checkKfakeValues compares the data records read (control records
// skipped) with what the producers sent, in order.
func checkKfakeValues(t *testing.T, all []record.Record, sent []kfakelog.Record) {
	t.Helper()
	var got []record.Record
	for _, r := range all {
		if len(r.Headers) == 1 && r.Headers[0].Key == "n" { // every sent record has it; control records none
			got = append(got, r)
		}
	}
	require.Len(t, got, len(sent))
	for i, s := range sent {
		assert.Equal(t, s.Key, got[i].Key, "record %d", i)
		assert.Equal(t, s.Value, got[i].Value, "record %d", i)
	}
}

// timeIndexLags reports whether, in the rebuilt indexes of dir's first
// segment, some time index entry names an offset the offset index does not
// hold: the batch with the largest timestamp was not the latest batch when
// the entries were written.
func timeIndexLags(t *testing.T, dir string) bool {
	t.Helper()
	oi, err := index.OpenOffsetIndex(vfs.OS, filepath.Join(dir, "00000000000000000000.index"), 0, 10<<20, false)
	require.NoError(t, err)
	defer oi.Close()
	ti, err := index.OpenTimeIndex(vfs.OS, filepath.Join(dir, "00000000000000000000.timeindex"), 0, 10<<20, false)
	require.NoError(t, err)
	defer ti.Close()
	require.Positive(t, ti.Entries())
	indexed := map[int64]bool{}
	for i := range oi.Entries() {
		off, _ := oi.Entry(i)
		indexed[off] = true
	}
	for i := range ti.Entries() {
		if _, off := ti.Entry(i); !indexed[off] {
			return true
		}
	}
	return false
}
