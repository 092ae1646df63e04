package engine

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
	"github.com/topicfs/topicfs/internal/testutil"
	"github.com/topicfs/topicfs/internal/testutil/kfakelog"
)

// producerTs is the timestamp of the test producers' records: the clock
// of producerClock, so that no producer expires.
const producerTs = 1_700_000_000_000

func producerClock() *fakeClock { return &fakeClock{t: time.UnixMilli(producerTs)} }

// idemBatch encodes n records of producer pid with epoch and sequences
// from seq (transactional when txn).
func idemBatch(t testing.TB, pid int64, epoch int16, seq int32, n int, txn bool) []byte {
	t.Helper()
	spec := plainSpec()
	spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence, spec.Transactional = pid, epoch, seq, txn
	return producerBatch(t, spec, makeRecs(0, n, producerTs))
}

// endMarker encodes a COMMIT (typ 1) or ABORT (0) marker of producer pid
// from coordinator epoch coord.
func endMarker(t testing.TB, pid int64, epoch int16, typ int16, coord int32) []byte {
	t.Helper()
	spec := txnSpec(pid)
	spec.ProducerEpoch = epoch
	raw, err := record.EncodeControlBatch(nil, spec, 0, producerTs, typ, coord)
	require.NoError(t, err)
	return raw
}

// appendOK appends raw with AppendBatch and returns its offsets.
func appendOK(t testing.TB, p *Partition, raw []byte) [2]int64 {
	t.Helper()
	first, last, err := p.AppendBatch(raw)
	require.NoError(t, err)
	return [2]int64{first, last}
}

// TestAppendBatchProducerRules: Kafka's checks of a producer's batch. A
// retry of one of the producer's last five batches is stored once, the
// caller gets the offsets of the original; an older retry, a gap or a new
// epoch not starting at 0 is out of order; an older epoch is fenced; a
// plain batch during the producer's transaction and a marker of an older
// coordinator are refused. Nothing refused is stored.
func TestAppendBatchProducerRules(t *testing.T) {
	p := openTest(t, vfs.NewMem(), "/d/t-0", testConfig(), func(o *PartitionOptions) { o.Now = producerClock().Now })
	defer p.Close()
	for i := range 6 {
		assert.Equal(t, [2]int64{int64(2 * i), int64(2*i + 1)}, appendOK(t, p, idemBatch(t, 1, 0, int32(2*i), 2, false)))
	}
	leo := p.LogEndOffset()
	for i := 1; i < 6; i++ {
		assert.Equal(t, [2]int64{int64(2 * i), int64(2*i + 1)}, appendOK(t, p, idemBatch(t, 1, 0, int32(2*i), 2, false)),
			"a retry of batch %d gets its offsets", i)
	}
	assert.Equal(t, leo, p.LogEndOffset(), "retries are stored once")

	refuse := func(raw []byte, want error, why string) {
		t.Helper()
		_, _, err := p.AppendBatch(raw)
		require.ErrorIs(t, err, want, why)
		require.ErrorIs(t, err, backend.ErrInvalidRecord)
		assert.Equal(t, leo, p.LogEndOffset(), "%s: nothing stored", why)
	}
	refuse(idemBatch(t, 1, 0, 0, 2, false), ErrOutOfOrderSequence, "the sixth batch back is no longer known")
	refuse(idemBatch(t, 1, 0, 10, 1, false), ErrOutOfOrderSequence, "a sequence range no batch had")
	refuse(idemBatch(t, 1, 0, 13, 1, false), ErrOutOfOrderSequence, "a gap")
	refuse(idemBatch(t, 1, 1, 12, 1, false), ErrOutOfOrderSequence, "a new epoch starts at 0")
	assert.Equal(t, [2]int64{12, 12}, appendOK(t, p, idemBatch(t, 1, 0, 12, 1, false)))
	assert.Equal(t, [2]int64{13, 13}, appendOK(t, p, idemBatch(t, 1, 1, 0, 1, false)))
	leo = p.LogEndOffset()
	refuse(idemBatch(t, 1, 0, 13, 1, false), ErrInvalidProducerEpoch, "the old epoch is fenced")
	refuse(endMarker(t, 1, 0, record.ControlCommit, 0), ErrInvalidProducerEpoch, "its markers too")
	assert.Equal(t, [2]int64{14, 14}, appendOK(t, p, idemBatch(t, 2, 0, 100, 1, false)), "an unknown producer starts anywhere")

	assert.Equal(t, [2]int64{15, 16}, appendOK(t, p, idemBatch(t, 3, 0, 0, 2, true)))
	leo = p.LogEndOffset()
	refuse(idemBatch(t, 3, 0, 2, 1, false), ErrInvalidTxnState, "a plain batch during the transaction")
	assert.Equal(t, [2]int64{17, 17}, appendOK(t, p, endMarker(t, 3, 0, record.ControlCommit, 5)))
	leo = p.LogEndOffset()
	refuse(endMarker(t, 3, 0, record.ControlAbort, 4), ErrCoordinatorFenced, "a marker of an older coordinator")

	assert.Equal(t, []ProducerEntry{
		{ProducerID: 1, Epoch: 1, LastSequence: 0, LastOffset: 13, OffsetDelta: 0, Timestamp: producerTs, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
		{ProducerID: 2, Epoch: 0, LastSequence: 100, LastOffset: 14, OffsetDelta: 0, Timestamp: producerTs, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
		{ProducerID: 3, Epoch: 0, LastSequence: 1, LastOffset: 16, OffsetDelta: 1, Timestamp: producerTs, CoordinatorEpoch: 5, CurrentTxnFirstOffset: -1},
	}, p.Producers())
}

// TestKfakeBatchesThroughAppendBatch: the batches real clients (franz-go's
// idempotent and transactional producers, through kfake) sent, appended
// one by one as a broker receives them, all pass the checks; retrying any
// of them afterwards stores nothing and answers with its offsets.
func TestKfakeBatchesThroughAppendBatch(t *testing.T) {
	for _, txn := range []bool{false, true} {
		log := kfakelog.Produce(t, kfakelog.Options{Codec: "lz4", Batches: 9, PerBatch: 3, Producers: 2, Transactional: txn})
		cfg := testConfig()
		cfg.CompressionType = "producer"
		p := openTest(t, vfs.NewMem(), "/d/t-0", cfg, func(o *PartitionOptions) { o.Now = producerClock().Now })
		batches := splitRaw(t, log.Raw)
		var got [][2]int64
		for _, raw := range batches {
			got = append(got, appendOK(t, p, raw))
		}
		leo := p.LogEndOffset()
		assert.Equal(t, leo, p.LastStableOffset(), "every transaction ended")
		assert.Len(t, p.Producers(), 2)
		tail := max(len(batches)-4, 0)
		for i := tail; i < len(batches); i++ {
			b, err := record.Parse(batches[i])
			require.NoError(t, err)
			if b.IsControl() {
				continue
			}
			assert.Equal(t, got[i], appendOK(t, p, batches[i]), "retry of batch %d", i)
		}
		assert.Equal(t, leo, p.LogEndOffset())
		require.NoError(t, p.Close())
	}
}

// TestLastStableOffset: a transactional batch holds the last stable
// offset (the partition's, and its Snapshot's) at its first offset while
// later records are appended; readers of the active segment stop there
// (SizeBelow); the COMMIT marker lets it go to the log end. An open
// transaction is still open after a clean reopen (the producer snapshot)
// and after a crash (rebuilt from the log).
func TestLastStableOffset(t *testing.T) {
	mem := vfs.NewMem()
	clock := producerClock()
	p := openTest(t, mem, "/d/t-0", testConfig(), func(o *PartitionOptions) { o.Now = clock.Now })
	appendOK(t, p, idemBatch(t, 1, 0, 0, 2, false)) // 0..1
	assert.Equal(t, int64(2), p.LastStableOffset())
	txnPos := p.Segments()[0].Size
	appendOK(t, p, idemBatch(t, 7, 0, 0, 3, true))    // 2..4, open
	_, _, err := p.Append(makeRecs(0, 3, producerTs)) // 5..7
	require.NoError(t, err)
	check := func(p *Partition, lso, leo int64) {
		t.Helper()
		assert.Equal(t, lso, p.LastStableOffset())
		snap := p.Snapshot()
		defer snap.Release()
		assert.Equal(t, []int64{lso, leo}, []int64{snap.LastStableOffset, snap.LogEndOffset})
		size, err := snap.Segments[0].SizeBelow(snap.LastStableOffset)
		require.NoError(t, err)
		if lso < leo {
			assert.Equal(t, txnPos, size, "read up to the transaction's first batch")
		} else {
			assert.Equal(t, snap.Segments[0].Size(), size)
		}
	}
	check(p, 2, 8)
	require.NoError(t, p.Close())

	p = openTest(t, mem, "/d/t-0", testConfig(), func(o *PartitionOptions) { o.Now = clock.Now; o.CleanShutdown = true })
	check(p, 2, 8)
	assert.Equal(t, map[int64]int64{7: 2}, p.OpenTransactions())
	require.NoError(t, p.Flush())
	p = openTest(t, mem.Crash(), "/d/t-0", testConfig(), func(o *PartitionOptions) { o.Now = clock.Now })
	check(p, 2, 8)

	appendOK(t, p, endMarker(t, 7, 0, record.ControlCommit, 0)) // 8
	check(p, 9, 9)
	assert.Empty(t, p.OpenTransactions())
	require.NoError(t, p.Close())
}

// snapshotNames lists the .snapshot files of dir.
func snapshotNames(t testing.TB, fs vfs.FS, dir string) []string {
	t.Helper()
	ents, err := fs.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), snapshotSuffix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// readSnapshotFile parses dir's snapshot at off.
func readSnapshotFile(t testing.TB, fs vfs.FS, dir string, off int64) []ProducerEntry {
	t.Helper()
	data, err := vfs.ReadFile(fs, filepath.Join(dir, segmentName(off)+snapshotSuffix))
	require.NoError(t, err)
	entries, err := ParseProducerSnapshot(data)
	require.NoError(t, err)
	return entries
}

// TestProducerSnapshotFiles: a roll writes the producer state below the
// new segment to <base>.snapshot, Close the state at the log end; a
// clean reopen starts from it (the last batch of each producer is known:
// its retry is a duplicate). Retention deletes a segment's snapshot with
// it, and a flush keeps no snapshot Kafka would not keep.
func TestProducerSnapshotFiles(t *testing.T) {
	mem := vfs.NewMem()
	clock := producerClock()
	dir := "/d/t-0"
	p := openTest(t, mem, dir, testConfig(), func(o *PartitionOptions) { o.Now = clock.Now })
	appendOK(t, p, idemBatch(t, 1, 0, 0, 2, false)) // 0..1
	require.NoError(t, p.Roll())
	assert.Equal(t, []string{"00000000000000000002.snapshot"}, snapshotNames(t, mem, dir))
	assert.Equal(t, []ProducerEntry{{ProducerID: 1, Epoch: 0, LastSequence: 1, LastOffset: 1, OffsetDelta: 1,
		Timestamp: producerTs + 1, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1}}, readSnapshotFile(t, mem, dir, 2))
	appendOK(t, p, idemBatch(t, 1, 0, 2, 3, false)) // 2..4
	appendOK(t, p, idemBatch(t, 9, 2, 0, 1, true))  // 5, open
	want := p.Producers()
	require.NoError(t, p.Close())
	assert.Equal(t, want, readSnapshotFile(t, mem, dir, 6), "Close writes the state at the log end")

	p = openTest(t, mem, dir, testConfig(), func(o *PartitionOptions) { o.Now = clock.Now; o.CleanShutdown = true })
	assert.Equal(t, want, p.Producers())
	assert.Equal(t, [2]int64{2, 4}, appendOK(t, p, idemBatch(t, 1, 0, 2, 3, false)), "the last batch is known")
	assert.Equal(t, int64(5), p.LastStableOffset())

	// Six more rolls: retention deletes the two oldest segments and their
	// snapshots; a flush then keeps those at or above the base of the
	// segment before the active one (and of the one below the recovery
	// point).
	for i := range 6 {
		appendOK(t, p, idemBatch(t, 1, 0, int32(5+i), 1, false))
		require.NoError(t, p.Roll())
	}
	_, err := p.DeleteOldestSegments(2, "test")
	require.NoError(t, err)
	require.NoError(t, p.PurgeDeleted(clock.Now().Add(time.Hour)))
	require.NoError(t, p.Flush())
	segs := p.Segments()
	keep := segs[len(segs)-2].BaseOffset
	for _, name := range snapshotNames(t, mem, dir) {
		off, _, ok := ParseSegmentName(name)
		require.True(t, ok)
		assert.GreaterOrEqual(t, off, keep, name)
	}
	assert.Equal(t, []string{segmentName(keep) + snapshotSuffix, segmentName(segs[len(segs)-1].BaseOffset) + snapshotSuffix},
		snapshotNames(t, mem, dir))
	require.NoError(t, p.Close())
}

// TestProducerStateRecovery: after a crash the producer state comes from
// the latest snapshot at or below where recovery scans, plus the batches
// after it: the sealed segments are not read again. Without snapshots it
// is rebuilt from the whole log, and ends the same.
func TestProducerStateRecovery(t *testing.T) {
	mem := vfs.NewMem()
	clock := producerClock()
	dir := "/d/t-0"
	cfg := testConfig()
	p := openTest(t, mem, dir, cfg, func(o *PartitionOptions) { o.Now = clock.Now })
	for i := range 40 {
		appendOK(t, p, idemBatch(t, int64(1+i%3), 0, int32(i/3*4), 4, i%3 == 2))
		if i%3 == 2 {
			appendOK(t, p, endMarker(t, 3, 0, record.ControlCommit, 0))
		}
		if i%5 == 4 {
			require.NoError(t, p.Roll())
		}
	}
	appendOK(t, p, idemBatch(t, 3, 0, 52, 2, true)) // open at the end
	want := p.Producers()
	rp := p.Segments()[len(p.Segments())-1].BaseOffset
	require.NoError(t, p.Flush())
	var sealed int64
	for _, s := range p.Segments()[:len(p.Segments())-1] {
		sealed += s.Size
	}
	crashed := mem.Crash()
	open := func(fs vfs.FS) *Partition {
		return openTest(t, fs, dir, cfg, func(o *PartitionOptions) { o.Now = clock.Now; o.RecoveryPoint = rp })
	}

	q := open(crashed)
	assert.Equal(t, want, q.Producers())
	assert.Less(t, q.Stats().BytesRead, sealed/4, "the sealed segments were not scanned again")
	assert.Equal(t, p.OpenTransactions(), q.OpenTransactions())
	require.NoError(t, q.Close())

	crashed = mem.Crash()
	for _, name := range snapshotNames(t, crashed, dir) {
		require.NoError(t, crashed.Remove(filepath.Join(dir, name)))
	}
	q = open(crashed)
	assert.Equal(t, want, q.Producers(), "rebuilt from the whole log")
	assert.GreaterOrEqual(t, q.Stats().BytesRead, sealed)
	require.NoError(t, q.Close())
}

// TestProducerSnapshotTorn: a snapshot whose bytes a crash damaged fails
// its CRC; the open falls back to an older one and the batches after it,
// and deletes the damaged file as Kafka does.
func TestProducerSnapshotTorn(t *testing.T) {
	mem := vfs.NewMem()
	clock := producerClock()
	dir := "/d/t-0"
	p := openTest(t, mem, dir, testConfig(), func(o *PartitionOptions) { o.Now = clock.Now })
	appendOK(t, p, idemBatch(t, 1, 0, 0, 2, false))
	require.NoError(t, p.Roll())
	appendOK(t, p, idemBatch(t, 1, 0, 2, 2, false))
	want := p.Producers()
	require.NoError(t, p.Close())
	path := filepath.Join(dir, segmentName(4)+snapshotSuffix)
	data, err := vfs.ReadFile(mem, path)
	require.NoError(t, err)
	data[len(data)-1] ^= 0xff
	require.NoError(t, vfs.WriteFileAtomic(mem, path, data, 0o644))

	p = openTest(t, mem, dir, testConfig(), func(o *PartitionOptions) { o.Now = clock.Now; o.CleanShutdown = true })
	defer p.Close()
	assert.Equal(t, want, p.Producers())
	assert.Equal(t, [2]int64{2, 3}, appendOK(t, p, idemBatch(t, 1, 0, 2, 2, false)), "the retry is known")
	got, err := vfs.ReadFile(mem, path)
	require.NoError(t, err)
	assert.NotEqual(t, data, got, "the damaged snapshot is gone (a new one took its name)")
}

// TestProducerSnapshotFixtures: every producer snapshot a real broker
// wrote (testdata/kafka-real, and the extra corpus when set) parses, and
// encodes back to the same bytes; Kafka 2.7.1's myTopic-0 snapshot holds
// its three idempotent producers. A copy of Kafka 0.11's clean data
// directory opens from its snapshots at the log end, which stay as they
// are.
func TestProducerSnapshotFixtures(t *testing.T) {
	n := 0
	for set, root := range testutil.KafkaFixtureRoots(t) {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, snapshotSuffix) {
				return err
			}
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			entries, err := ParseProducerSnapshot(data)
			require.NoError(t, err, "%s: %s", set, path)
			assert.Equal(t, data, AppendProducerSnapshot(nil, entries), "%s: %s", set, path)
			n++
			return nil
		})
		require.NoError(t, err)
	}
	assert.GreaterOrEqual(t, n, 12, "the snapshots of testdata/kafka-real")

	data, err := os.ReadFile(testutil.KafkaFixture(t, "kafka271-zk-compacted-donaldy/kafka-logs/myTopic-0/00000000000000000038.snapshot"))
	require.NoError(t, err)
	entries, err := ParseProducerSnapshot(data)
	require.NoError(t, err)
	assert.Equal(t, []ProducerEntry{
		{ProducerID: 4001, Epoch: 0, LastSequence: 11, LastOffset: 11, OffsetDelta: 2, Timestamp: 1670068129797, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
		{ProducerID: 4002, Epoch: 0, LastSequence: 11, LastOffset: 23, OffsetDelta: 11, Timestamp: 1670068739452, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
		{ProducerID: 4003, Epoch: 0, LastSequence: 13, LastOffset: 37, OffsetDelta: 13, Timestamp: 1670071262224, CoordinatorEpoch: -1, CurrentTxnFirstOffset: -1},
	}, entries)
	assert.Equal(t, int32(9), entries[0].FirstSequence())

	dst := filepath.Join(t.TempDir(), "data")
	testutil.CopyTree(t, testutil.KafkaFixture(t, "kafka0110-zk-sharaweil/data"), dst)
	snapPath := filepath.Join(dst, "test0-0", "00000000000000000011.snapshot")
	before, err := os.ReadFile(snapPath)
	require.NoError(t, err)
	d, err := OpenLogDir(vfs.OS, dst, ldOpts())
	require.NoError(t, err)
	p := interopPartition(t, d, "test0", 0)
	assert.Empty(t, p.Producers())
	assert.Equal(t, []int64{11, 11}, []int64{p.LastStableOffset(), p.LogEndOffset()})
	require.NoError(t, d.Close())
	after, err := os.ReadFile(snapPath)
	require.NoError(t, err)
	assert.Equal(t, before, after)
}
