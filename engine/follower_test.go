package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/index"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
	"github.com/topicfs/topicfs/internal/testutil/kfakelog"
)

// splitRaw cuts a log's bytes into its batches.
func splitRaw(t testing.TB, raw []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for len(raw) > 0 {
		require.GreaterOrEqual(t, len(raw), record.LogOverhead)
		size := record.LogOverhead + int(binary.BigEndian.Uint32(raw[8:]))
		require.LessOrEqual(t, size, len(raw))
		out = append(out, raw[:size])
		raw = raw[size:]
	}
	return out
}

// followerBatches returns a copy of every batch of p, in order.
func followerBatches(t testing.TB, p *Partition) []record.Batch {
	t.Helper()
	snap := p.Snapshot()
	defer snap.Release()
	var out []record.Batch
	for _, s := range snap.Segments {
		for pos := int64(0); pos < s.Size(); {
			b, err := s.ReadBatch(pos, nil) // a fresh buffer each: b.Raw stays valid
			require.NoError(t, err)
			out = append(out, b)
			pos += int64(b.Size())
		}
	}
	return out
}

// abortedByProducer gathers the aborted transactions of p's txn indexes.
func abortedByProducer(p *Partition) map[int64][]index.AbortedTxn {
	snap := p.Snapshot()
	defer snap.Release()
	out := map[int64][]index.AbortedTxn{}
	for _, s := range snap.Segments {
		for _, a := range s.AbortedTxns() {
			out[a.ProducerID] = append(out[a.ProducerID], a)
		}
	}
	return out
}

// checkAbortedAsSent checks, record by record, that the txn indexes hide
// exactly the records the producers sent in aborted transactions.
func checkAbortedAsSent(t *testing.T, p *Partition, sent []kfakelog.Record) {
	t.Helper()
	ab := abortedByProducer(p)
	var hidden []bool
	for _, b := range followerBatches(t, p) {
		if b.IsControl() {
			continue
		}
		recs, err := b.Records(nil)
		require.NoError(t, err)
		for _, r := range recs {
			h := false
			for _, a := range ab[b.ProducerID] {
				h = h || (b.IsTransactional() && r.Offset >= a.FirstOffset && r.Offset <= a.LastOffset)
			}
			hidden = append(hidden, h)
		}
	}
	require.Len(t, hidden, len(sent))
	for i, s := range sent {
		assert.Equal(t, s.Aborted, hidden[i], "record %d", i)
	}
}

// TestAppendAsFollowerKeepsBatches: logs franz-go's producers and broker
// wrote (every codec, transactions that commit and abort) are appended as
// a follower, a few batches per call, into small segments: the segments
// hold the same bytes (offsets, epochs, timestamps, CRCs untouched), the
// indexes point at batches, the txn indexes hide exactly the aborted
// records, and all of it survives a reopen.
func TestAppendAsFollowerKeepsBatches(t *testing.T) {
	for _, codec := range kfakelog.Codecs {
		t.Run(codec, func(t *testing.T) {
			log := kfakelog.Produce(t, kfakelog.Options{Codec: codec, Batches: 15, PerBatch: 5, Producers: 2, Transactional: true})
			batches := splitRaw(t, log.Raw)
			cfg := testConfig()
			cfg.SegmentBytes = int64(len(log.Raw) / 4) // several rolls
			cfg.CompressionType = "gzip"               // a follower does not recompress
			cfg.MessageTimestampType = "LogAppendTime" // nor restamp
			mem := vfs.NewMem()
			p := openTest(t, mem, "/d/t-0", cfg)
			for i, n := 0, 1; i < len(batches); i, n = i+n, n%3+1 {
				chunk := bytes.Join(batches[i:min(i+n, len(batches))], nil)
				b0, err := record.Parse(batches[i])
				require.NoError(t, err)
				first, last, err := p.AppendAsFollower(chunk)
				require.NoError(t, err)
				assert.Equal(t, b0.BaseOffset, first)
				assert.Equal(t, p.LogEndOffset()-1, last)
			}
			assert.Greater(t, len(p.Segments()), 2)
			assert.Equal(t, log.Raw, logBytes(t, mem, p))
			checkIndexes(t, p)
			checkKfakeValues(t, readAll(t, p), log.Sent)
			checkAbortedAsSent(t, p, log.Sent)
			assert.Empty(t, p.OpenTransactions())
			require.NoError(t, p.Close())

			crashed := mem.Crash()
			q := openTest(t, crashed, "/d/t-0", cfg)
			defer q.Close()
			assert.Equal(t, log.Raw, logBytes(t, crashed, q))
			checkAbortedAsSent(t, q, log.Sent)
		})
	}
}

// followerBatch encodes one v2 batch of n records at base for the tests.
func encodeFollower(t testing.TB, spec record.BatchSpec, n int) []byte {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Offset: spec.BaseOffset + int64(i), Timestamp: 1_700_000_000_000 + spec.BaseOffset + int64(i),
			Value: fmt.Appendf(nil, "v%d", spec.BaseOffset+int64(i))}
	}
	out, err := record.Encode(nil, spec, recs)
	require.NoError(t, err)
	return out
}

func plainBatch(t testing.TB, base int64, n int) []byte {
	return encodeFollower(t, record.NewBatchSpec(base), n)
}

// TestAppendAsFollowerGaps: offsets may jump (compaction leaves gaps), even
// past what one segment's relative offsets can hold; a lookup in a gap
// lands on the next batch; leader epochs and timestamps stay as sent.
func TestAppendAsFollowerGaps(t *testing.T) {
	p := openTest(t, vfs.NewMem(), "/d/t-0", testConfig())
	defer p.Close()
	spec := record.NewBatchSpec(5)
	spec.PartitionLeaderEpoch = 7
	raw := bytes.Join([][]byte{encodeFollower(t, spec, 3), plainBatch(t, 100, 2)}, nil)
	first, last, err := p.AppendAsFollower(raw)
	require.NoError(t, err)
	assert.Equal(t, []int64{5, 101}, []int64{first, last})
	far := int64(math.MaxInt32) + 1000
	_, last, err = p.AppendAsFollower(plainBatch(t, far, 4))
	require.NoError(t, err)
	assert.Equal(t, far+3, last)
	assert.Equal(t, far+4, p.LogEndOffset())
	assert.Equal(t, []int64{5, 6, 7, 100, 101, far, far + 1, far + 2, far + 3}, offsetsOf(readAll(t, p)))
	segs := p.Segments()
	require.Len(t, segs, 2, "the far batch starts a segment of its own")
	assert.Equal(t, far, segs[1].BaseOffset)
	checkIndexes(t, p)

	snap := p.Snapshot()
	defer snap.Release()
	s := snap.Segments[0]
	pos, err := s.FindOffset(50)
	require.NoError(t, err)
	b, err := s.ReadBatch(pos, nil)
	require.NoError(t, err)
	assert.Equal(t, int64(100), b.BaseOffset)
	b, err = s.ReadBatch(0, nil)
	require.NoError(t, err)
	assert.Equal(t, int32(7), b.PartitionLeaderEpoch)
	assert.Equal(t, int64(1_700_000_000_007), b.MaxTimestamp)
}

// TestAppendAsFollowerRefuses: batches below the log end, overlapping
// each other, damaged, cut short or in a legacy format are refused whole:
// nothing of the call is appended.
func TestAppendAsFollowerRefuses(t *testing.T) {
	p := openTest(t, vfs.NewMem(), "/d/t-0", testConfig())
	defer p.Close()
	_, _, err := p.AppendAsFollower(plainBatch(t, 10, 5))
	require.NoError(t, err)
	good := plainBatch(t, 20, 2)
	corrupt := bytes.Clone(good)
	corrupt[len(corrupt)-1] ^= 1
	legacy := make([]byte, 12+14)
	binary.BigEndian.PutUint32(legacy[8:], 14)
	cases := map[string]struct {
		raw  []byte
		want error
	}{
		"below the log end":  {bytes.Join([][]byte{good, plainBatch(t, 14, 1)}, nil), ErrOffsetOutOfRange},
		"overlap":            {bytes.Join([][]byte{good, plainBatch(t, 21, 1)}, nil), ErrOffsetOutOfRange},
		"first below end":    {plainBatch(t, 12, 1), ErrOffsetOutOfRange},
		"crc":                {bytes.Join([][]byte{good, corrupt}, nil), ErrCorrupt},
		"cut short":          {bytes.Join([][]byte{good, plainBatch(t, 30, 1)}, nil)[:len(good)+40], ErrCorrupt},
		"header cut":         {append(bytes.Clone(good), 0, 0, 0), ErrCorrupt},
		"negative length":    {append(bytes.Clone(good), 0, 0, 0, 0, 0, 0, 0, 40, 0xff, 0xff, 0xff, 0xff), ErrCorrupt},
		"legacy message set": {legacy, record.ErrUnsupported},
	}
	for name, c := range cases {
		_, _, err := p.AppendAsFollower(c.raw)
		assert.ErrorIs(t, err, c.want, name)
		assert.Equal(t, int64(15), p.LogEndOffset(), name)
	}
	assert.Equal(t, seq(10, 15), offsetsOf(readAll(t, p)))
	first, last, err := p.AppendAsFollower(nil)
	require.NoError(t, err)
	assert.Equal(t, []int64{15, 14}, []int64{first, last})

	ro := openTest(t, vfs.NewMem(), "/d/t-0", testConfig(), func(o *PartitionOptions) { o.ReadOnly = true })
	_, _, err = ro.AppendAsFollower(good)
	assert.ErrorIs(t, err, ErrReadOnly)
	assert.ErrorIs(t, ro.TruncateFullyAndStartAt(3), ErrReadOnly)
	require.NoError(t, p.Close())
	_, _, err = p.AppendAsFollower(good)
	assert.ErrorIs(t, err, ErrClosed)
	assert.ErrorIs(t, p.TruncateFullyAndStartAt(3), ErrClosed)
}

// txnBatch is a transactional batch (or marker) of producer pid.
func txnBatch(t testing.TB, base, pid int64, n int, marker int16) []byte {
	t.Helper()
	spec := record.NewBatchSpec(base)
	spec.Transactional, spec.ProducerID, spec.ProducerEpoch = true, pid, 0
	if marker < 0 {
		spec.BaseSequence = 0
		return encodeFollower(t, spec, n)
	}
	spec.Control = true
	val := []byte{0, 0, 0, 0, 0, 0}
	key := []byte{0, 0, 0, byte(marker)}
	out, err := record.Encode(nil, spec, []record.Record{{Offset: base, Timestamp: 1_700_000_000_000, Key: key, Value: val}})
	require.NoError(t, err)
	return out
}

// TestTruncateFullyAndStartAt: the log restarts empty at any offset (above
// or below the old one); a snapshot taken before keeps reading the old
// segments; open transactions are forgotten; the restart survives a crash
// after the next Flush.
func TestTruncateFullyAndStartAt(t *testing.T) {
	mem := vfs.NewMem()
	cfg := testConfig()
	cfg.SegmentBytes = 300
	cfg.FileDeleteDelayMs = 0
	p := openTest(t, mem, "/d/t-0", cfg)
	defer p.Close()
	for base := int64(0); base < 40; base += 4 {
		_, _, err := p.AppendAsFollower(plainBatch(t, base, 4))
		require.NoError(t, err)
	}
	_, _, err := p.AppendAsFollower(txnBatch(t, 40, 9, 2, -1)) // an open transaction
	require.NoError(t, err)
	assert.Equal(t, map[int64]int64{9: 40}, p.OpenTransactions())
	old := p.Snapshot()
	require.Greater(t, len(old.Segments), 2)

	require.NoError(t, p.TruncateFullyAndStartAt(500))
	assert.Equal(t, []int64{500, 500}, []int64{p.LogStartOffset(), p.LogEndOffset()})
	assert.Empty(t, p.OpenTransactions())
	segs := p.Segments()
	require.Len(t, segs, 1)
	assert.Equal(t, []int64{500, 500, 0}, []int64{segs[0].BaseOffset, segs[0].NextOffset, segs[0].Size})
	assert.Empty(t, readAll(t, p))
	require.NoError(t, p.PurgeDeleted(p.now()))
	var got []int64
	for _, s := range old.Segments {
		for pos := int64(0); pos < s.Size(); {
			b, err := s.ReadBatch(pos, nil)
			require.NoError(t, err, "a snapshot reads its segments after the truncation")
			got = append(got, b.BaseOffset)
			pos += int64(b.Size())
		}
	}
	old.Release()
	assert.Len(t, got, 11)

	_, _, err = p.AppendAsFollower(plainBatch(t, 499, 1))
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
	// The ABORT of the transaction begun before the truncation completes no
	// transaction of this log (its records are not here): as in Kafka, it
	// adds no txn index entry.
	_, _, err = p.AppendAsFollower(bytes.Join([][]byte{plainBatch(t, 500, 2), txnBatch(t, 502, 9, 0, 0)}, nil))
	require.NoError(t, err)
	assert.Empty(t, abortedByProducer(p))
	first, _, err := p.Append(makeRecs(0, 1, 1))
	require.NoError(t, err)
	assert.Equal(t, int64(503), first)

	require.NoError(t, p.TruncateFullyAndStartAt(7)) // below the old start
	require.NoError(t, p.Flush())
	q := openTest(t, mem.Crash(), "/d/t-0", cfg)
	defer q.Close()
	assert.Equal(t, []int64{7, 7}, []int64{q.LogStartOffset(), q.LogEndOffset()})
	require.NoError(t, p.TruncateFullyAndStartAt(7)) // at the active segment's own base
	_, _, err = p.AppendAsFollower(plainBatch(t, 7, 3))
	require.NoError(t, err)
	assert.Equal(t, seq(7, 10), offsetsOf(readAll(t, p)))
	assert.ErrorIs(t, p.TruncateFullyAndStartAt(-1), ErrOffsetOutOfRange)
}

// TestOpenTransactionsAcrossAppends: a transaction is open from its first
// batch to its marker, per producer; COMMIT adds no txn index entry.
func TestOpenTransactionsAcrossAppends(t *testing.T) {
	p := openTest(t, vfs.NewMem(), "/d/t-0", testConfig())
	defer p.Close()
	steps := []struct {
		raw  []byte
		open map[int64]int64
	}{
		{txnBatch(t, 0, 1, 2, -1), map[int64]int64{1: 0}},
		{txnBatch(t, 2, 2, 2, -1), map[int64]int64{1: 0, 2: 2}},
		{txnBatch(t, 4, 1, 2, -1), map[int64]int64{1: 0, 2: 2}},
		{txnBatch(t, 6, 1, 0, 1), map[int64]int64{2: 2}},
		{txnBatch(t, 7, 2, 0, 0), map[int64]int64{}},
	}
	for i, s := range steps {
		_, _, err := p.AppendAsFollower(s.raw)
		require.NoError(t, err)
		assert.Equal(t, s.open, p.OpenTransactions(), "step %d", i)
	}
	assert.Equal(t, map[int64][]index.AbortedTxn{2: {{ProducerID: 2, FirstOffset: 2, LastOffset: 7, LastStableOffset: 8}}}, abortedByProducer(p))
}

// TestFollowerCrashAtEveryOp: whatever operation a crash stops at, the
// reopened log holds whole batches with the bytes that were appended (never
// a damaged one), at least those a flush acknowledged, starting where the
// last completed truncation restarted it; aborted records stay hidden.
func TestFollowerCrashAtEveryOp(t *testing.T) {
	log := kfakelog.Produce(t, kfakelog.Options{Codec: "lz4", Batches: 9, PerBatch: 3, Producers: 2, Transactional: true})
	batches := splitRaw(t, log.Raw)
	byBase := map[int64][]byte{}
	for _, b := range batches {
		byBase[int64(binary.BigEndian.Uint64(b))] = b
	}
	restart := int64(binary.BigEndian.Uint64(batches[len(batches)/2]))
	cfg := testConfig()
	cfg.SegmentBytes = int64(len(log.Raw) / 5)
	const dir = "/d/t-0"
	type outcome struct{ acked, start int64 }
	scenario := func(fs vfs.FS) (o outcome) {
		p, err := OpenPartition(fs, dir, "t", 0, PartitionOptions{Config: cfg, RecoveryPoint: -1,
			LogStartOffset: -1, FirstDirty: -1, Logger: quietLogger()})
		if err != nil {
			return o
		}
		defer p.Close()
		for i, b := range batches {
			if int64(binary.BigEndian.Uint64(b)) == restart {
				if p.TruncateFullyAndStartAt(restart) != nil || p.Flush() != nil {
					return o
				}
				o = outcome{acked: restart, start: restart}
			}
			if _, _, err := p.AppendAsFollower(b); err != nil {
				return o
			}
			if i%2 == 1 {
				if p.Flush() != nil {
					return o
				}
				o.acked = p.LogEndOffset()
			}
		}
		return o
	}
	counter := vfs.NewCounter()
	scenario(vfs.NewErrorFS(vfs.NewMem(), counter))
	for i := range counter.Count() {
		mem := vfs.NewMem()
		o := scenario(vfs.NewErrorFS(mem, vfs.CrashAt(i)))
		p := openTest(t, mem.Crash(), dir, cfg)
		require.GreaterOrEqual(t, p.LogEndOffset(), o.acked, "crash at op %d lost acknowledged batches", i)
		require.GreaterOrEqual(t, p.LogStartOffset(), o.start, "crash at op %d", i)
		for _, b := range followerBatches(t, p) {
			require.Equal(t, byBase[b.BaseOffset], b.Raw, "crash at op %d: batch %d", i, b.BaseOffset)
		}
		checkIndexes(t, p)
		require.NoError(t, p.Close())
	}
}

// TestAppendAsFollowerReadsBack: every batch appended (with a gap after
// each) reads back through ReadBatch at the position FindOffset gives for
// its first and last offsets.
func TestAppendAsFollowerReadsBack(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1000
	p := openTest(t, vfs.NewMem(), "/d/t-0", cfg)
	defer p.Close()
	var want [][]byte
	for base := int64(3); base < 300; base += 7 {
		b := plainBatch(t, base, 5)
		want = append(want, b)
		_, _, err := p.AppendAsFollower(b)
		require.NoError(t, err)
	}
	snap := p.Snapshot()
	defer snap.Release()
	require.Greater(t, len(snap.Segments), 1)
	for _, w := range want {
		base := int64(binary.BigEndian.Uint64(w))
		for _, off := range []int64{base, base + 4} {
			s := snap.Segments[snap.SegmentFor(off)]
			pos, err := s.FindOffset(off)
			require.NoError(t, err)
			b, err := s.ReadBatch(pos, nil)
			require.NoError(t, err)
			assert.Equal(t, w, b.Raw, "offset %d", off)
		}
	}
}

// TestFollowerCleanReopenKeepsTransactions: Close makes the active
// segment's txn index and the producer snapshot durable (a power loss
// right after keeps them): the open transactions are known after a clean
// reopen, and (given back as well) make a later ABORT hide the transaction
// from its first offset.
func TestFollowerCleanReopenKeepsTransactions(t *testing.T) {
	mem := vfs.NewMem()
	p := openTest(t, mem, "/d/t-0", testConfig())
	raw := bytes.Join([][]byte{txnBatch(t, 0, 5, 2, -1), txnBatch(t, 2, 6, 2, -1), txnBatch(t, 4, 6, 0, 0)}, nil)
	_, _, err := p.AppendAsFollower(raw)
	require.NoError(t, err)
	open := p.OpenTransactions()
	assert.Equal(t, map[int64]int64{5: 0}, open)
	require.NoError(t, p.Close())

	q := openTest(t, mem.Crash(), "/d/t-0", testConfig(), func(o *PartitionOptions) { o.CleanShutdown = true })
	defer q.Close()
	want := map[int64][]index.AbortedTxn{6: {{ProducerID: 6, FirstOffset: 2, LastOffset: 4, LastStableOffset: 0}}}
	assert.Equal(t, want, abortedByProducer(q))
	assert.Equal(t, open, q.OpenTransactions(), "the producer snapshot Close wrote holds them")
	assert.ErrorIs(t, q.SetOpenTransactions(map[int64]int64{5: 5}), ErrOffsetOutOfRange)
	require.NoError(t, q.SetOpenTransactions(open))
	_, _, err = q.AppendAsFollower(txnBatch(t, 5, 5, 0, 0))
	require.NoError(t, err)
	want[5] = []index.AbortedTxn{{ProducerID: 5, FirstOffset: 0, LastOffset: 5, LastStableOffset: 6}}
	assert.Equal(t, want, abortedByProducer(q))
}
