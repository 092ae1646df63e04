package engine

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/topicfs/topicfs/engine/index"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
	"github.com/topicfs/topicfs/internal/testutil"
)

func TestAppendReadReopen(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig()
	cfg.SegmentBytes = 4096
	p := openTest(t, fs, "/d/t-0", cfg)
	for i := 0; i < 50; i++ {
		first, last, err := p.Append(makeRecs(i*20, 20, 1000+int64(i*20)))
		require.NoError(t, err)
		assert.Equal(t, int64(i*20), first)
		assert.Equal(t, int64(i*20+19), last)
	}
	assert.Equal(t, int64(1000), p.LogEndOffset())
	assert.Equal(t, int64(0), p.LogStartOffset())
	assert.Greater(t, len(p.Segments()), 1, "segment.bytes forces rolls")
	got := readAll(t, p)
	require.Equal(t, seq(0, 1000), offsetsOf(got))
	assert.Equal(t, "value-000123", string(got[123].Value))
	assert.Equal(t, "k123", string(got[123].Key))
	assert.Equal(t, int64(1123), got[123].Timestamp)
	st := p.Stats()
	assert.Equal(t, int64(1000), st.RecordsAppended)
	assert.Equal(t, int64(50), st.BatchesAppended)
	require.NoError(t, p.Close())
	_, _, err := p.Append(makeRecs(0, 1, 0))
	require.ErrorIs(t, err, ErrClosed)

	p = openTest(t, fs, "/d/t-0", cfg)
	defer p.Close()
	assert.Equal(t, int64(1000), p.LogEndOffset())
	assert.Equal(t, int64(1000), p.RecoveryPoint())
	require.Equal(t, seq(0, 1000), offsetsOf(readAll(t, p)))
	_, _, err = p.Append(makeRecs(1000, 1, time.Now().UnixMilli()))
	require.NoError(t, err)
	assert.Equal(t, int64(1001), p.LogEndOffset())
	checkIndexes(t, p)
}

func TestAppendTimestamps(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(5_000_000)}
	cfg := testConfig()
	p := openTest(t, vfs.NewMem(), "/d/t-0", cfg, func(o *PartitionOptions) { o.Now = clock.Now })
	defer p.Close()
	_, _, err := p.Append([]record.Record{{Timestamp: -1, Value: []byte("now")}, {Timestamp: 42, Value: []byte("given")}})
	require.NoError(t, err)
	cfg.MessageTimestampType = "LogAppendTime"
	p.SetConfig(cfg)
	_, _, err = p.Append([]record.Record{{Timestamp: 42, Value: []byte("overridden")}})
	require.NoError(t, err)
	got := readAll(t, p)
	require.Len(t, got, 3)
	assert.Equal(t, int64(5_000_000), got[0].Timestamp)
	assert.Equal(t, int64(42), got[1].Timestamp)
	assert.Equal(t, int64(5_000_000), got[2].Timestamp)
}

func TestAppendSplitsAtMaxMessageBytes(t *testing.T) {
	cfg := testConfig()
	cfg.MaxMessageBytes = 1000
	p := openTest(t, vfs.NewMem(), "/d/t-0", cfg)
	defer p.Close()
	recs := make([]record.Record, 40)
	for i := range recs {
		recs[i] = record.Record{Timestamp: 1, Value: bytes.Repeat([]byte{'a' + byte(i%26)}, 100)}
	}
	first, last, err := p.Append(recs)
	require.NoError(t, err)
	assert.Equal(t, int64(0), first)
	assert.Equal(t, int64(39), last)
	snap := p.Snapshot()
	defer snap.Release()
	batches := 0
	s := snap.Segments[0]
	for pos := int64(0); pos < s.Size(); {
		b, err := s.ReadBatch(pos, nil)
		require.NoError(t, err)
		assert.LessOrEqual(t, b.Size(), 1000)
		pos += int64(b.Size())
		batches++
	}
	assert.Greater(t, batches, 4)
	assert.Equal(t, seq(0, 40), offsetsOf(readAll(t, p)))

	// One record too large on its own: nothing of the call is appended.
	big := append(makeRecs(0, 3, 1), record.Record{Value: make([]byte, 2000)})
	_, _, err = p.Append(big)
	require.ErrorIs(t, err, ErrRecordTooLarge)
	assert.Equal(t, int64(40), p.LogEndOffset())
}

func TestAppendCodecs(t *testing.T) {
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		t.Run(codec, func(t *testing.T) {
			cfg := testConfig()
			cfg.CompressionType = codec
			p := openTest(t, vfs.NewMem(), "/d/t-0", cfg)
			defer p.Close()
			for i := 0; i < 20; i++ {
				_, _, err := p.Append(makeRecs(i*50, 50, int64(i*50)))
				require.NoError(t, err)
			}
			got := readAll(t, p)
			require.Equal(t, seq(0, 1000), offsetsOf(got))
			assert.Equal(t, "value-000777", string(got[777].Value))
			snap := p.Snapshot()
			b, err := snap.Segments[0].ReadBatch(0, nil)
			snap.Release()
			require.NoError(t, err)
			c, _ := record.ParseCodec(codec)
			assert.Equal(t, c, b.Codec())
			checkIndexes(t, p)
		})
	}
}

// producerBatch encodes a batch as a producer would send it.
func producerBatch(t testing.TB, spec record.BatchSpec, recs []record.Record) []byte {
	t.Helper()
	for i := range recs {
		recs[i].Offset = int64(i)
	}
	spec.BaseOffset = 0
	raw, err := record.Encode(nil, spec, recs)
	require.NoError(t, err)
	return raw
}

func plainSpec() record.BatchSpec {
	return record.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, PartitionLeaderEpoch: -1,
		DeleteHorizonMs: -1, LastOffsetDelta: -1}
}

func TestAppendBatch(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(9_000_000)}
	cfg := testConfig()
	p := openTest(t, vfs.NewMem(), "/d/t-0", cfg, func(o *PartitionOptions) { o.Now = clock.Now })
	defer p.Close()
	raw := producerBatch(t, plainSpec(), makeRecs(0, 5, 100))
	orig := bytes.Clone(raw)
	first, last, err := p.AppendBatch(raw)
	require.NoError(t, err)
	assert.Equal(t, []int64{0, 4}, []int64{first, last})
	first, last, err = p.AppendBatch(raw)
	require.NoError(t, err)
	assert.Equal(t, []int64{5, 9}, []int64{first, last})
	assert.Equal(t, orig, raw, "AppendBatch does not modify its argument")

	// A bad CRC is refused.
	bad := bytes.Clone(raw)
	bad[len(bad)-1] ^= 1
	_, _, err = p.AppendBatch(bad)
	require.ErrorIs(t, err, ErrCorrupt)
	// Too large.
	cfg.MaxMessageBytes = 50
	p.SetConfig(cfg)
	_, _, err = p.AppendBatch(raw)
	require.ErrorIs(t, err, ErrRecordTooLarge)
	// segment.bytes caps it too, and the error names the bound applied.
	segmentBytes := cfg.SegmentBytes
	cfg.MaxMessageBytes, cfg.SegmentBytes = 1<<20, 60
	p.SetConfig(cfg)
	_, _, err = p.AppendBatch(raw)
	require.ErrorIs(t, err, ErrRecordTooLarge)
	assert.Contains(t, err.Error(), "limit 60")
	// LogAppendTime and recompression.
	cfg.MaxMessageBytes, cfg.SegmentBytes = 1<<20, segmentBytes
	cfg.MessageTimestampType = "LogAppendTime"
	cfg.CompressionType = "lz4"
	p.SetConfig(cfg)
	_, _, err = p.AppendBatch(raw)
	require.NoError(t, err)
	got := readAll(t, p)
	require.Equal(t, seq(0, 15), offsetsOf(got))
	assert.Equal(t, int64(100), got[0].Timestamp)
	assert.Equal(t, int64(9_000_000), got[14].Timestamp)
	snap := p.Snapshot()
	defer snap.Release()
	pos, err := snap.Segments[0].FindOffset(10)
	require.NoError(t, err)
	b, err := snap.Segments[0].ReadBatch(pos, nil)
	require.NoError(t, err)
	assert.Equal(t, record.LZ4, b.Codec())
	assert.True(t, b.LogAppendTime())
	assert.Equal(t, int32(0), b.PartitionLeaderEpoch)
}

// txnSpec is the spec of a transactional batch of producer pid.
func txnSpec(pid int64) record.BatchSpec {
	s := plainSpec()
	s.ProducerID, s.ProducerEpoch, s.BaseSequence, s.Transactional = pid, 0, 0, true
	return s
}

// txnSeq is txnSpec with the producer's batch starting at sequence seq.
func txnSeq(pid int64, seq int32) record.BatchSpec {
	s := txnSpec(pid)
	s.BaseSequence = seq
	return s
}

// txnMarker encodes a control batch of producer pid (typ 0 ABORT, 1 COMMIT).
func txnMarker(t testing.TB, pid int64, typ int16) []byte {
	raw, err := record.EncodeControlBatch(nil, txnSpec(pid), 0, 1, typ, 0)
	require.NoError(t, err)
	return raw
}

// TestTransactions: ABORT markers append txn index entries with the first
// offset of the producer's open transaction; COMMIT markers do not.
func TestTransactions(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig()
	p := openTest(t, fs, "/d/t-0", cfg)
	txn := txnSpec
	marker := func(pid int64, typ int16) []byte { return txnMarker(t, pid, typ) }
	app := func(raw []byte) int64 {
		first, _, err := p.AppendBatch(raw)
		require.NoError(t, err)
		return first
	}
	a1 := app(producerBatch(t, txn(7), makeRecs(0, 3, 1))) // 0..2
	app(producerBatch(t, txn(8), makeRecs(0, 2, 1)))       // 3..4
	app(producerBatch(t, txnSeq(7, 3), makeRecs(0, 2, 1))) // 5..6
	abort7 := app(marker(7, 0))                            // 7
	app(marker(8, 1))                                      // 8 commit
	app(producerBatch(t, txn(9), makeRecs(0, 1, 1)))       // 9
	abort9 := app(marker(9, 0))                            // 10
	snap := p.Snapshot()
	got := snap.Segments[0].AbortedTxns()
	snap.Release()
	require.Len(t, got, 2)
	assert.Equal(t, int64(7), got[0].ProducerID)
	assert.Equal(t, a1, got[0].FirstOffset)
	assert.Equal(t, abort7, got[0].LastOffset)
	assert.Equal(t, int64(3), got[0].LastStableOffset, "producer 8's open transaction holds the LSO")
	assert.Equal(t, abort9, got[1].LastOffset)
	assert.Equal(t, int64(9), got[1].FirstOffset)
	assert.Equal(t, int64(11), got[1].LastStableOffset)

	// A transaction open across a restart keeps its first offset.
	open10 := app(producerBatch(t, txn(11), makeRecs(0, 2, 1))) // 11..12
	require.NoError(t, p.Close())
	p = openTest(t, fs, "/d/t-0", cfg)
	first, _, err := p.AppendBatch(marker(11, 0))
	require.NoError(t, err)
	snap = p.Snapshot()
	all := snap.Segments[0].AbortedTxns()
	snap.Release()
	require.Len(t, all, 3)
	assert.Equal(t, index.AbortedTxn{ProducerID: 11, FirstOffset: open10, LastOffset: first, LastStableOffset: first + 1}, all[2])
	got = all
	require.NoError(t, p.Close())

	// Recovery rebuilds the same txn index.
	for _, name := range []string{"/d/t-0/00000000000000000000.txnindex", "/d/t-0/00000000000000000000.index"} {
		require.NoError(t, fs.Remove(name))
	}
	p = openTest(t, fs, "/d/t-0", cfg)
	defer p.Close()
	snap = p.Snapshot()
	defer snap.Release()
	assert.Equal(t, got, snap.Segments[0].AbortedTxns())
	_, err = fs.Stat("/d/t-0/00000000000000000000.txnindex")
	require.NoError(t, err)
}

// indexedPartition builds a partition with many equal batches in one
// segment, so the offset index has many entries.
func indexedPartition(t *testing.T, cfg Config, batches, perBatch int) *Partition {
	t.Helper()
	p := openTest(t, vfs.NewMem(), "/d/t-0", cfg)
	for i := 0; i < batches; i++ {
		_, _, err := p.Append(makeRecs(i*perBatch, perBatch, int64(i)))
		require.NoError(t, err)
	}
	return p
}

func TestFindOffset(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.SegmentIndexBytes = 1 << 16
	cfg.IndexIntervalBytes = 500
	p := indexedPartition(t, cfg, 200, 5) // offsets 0..999, ~120-byte batches
	defer p.Close()
	snap := p.Snapshot()
	defer snap.Release()
	require.Len(t, snap.Segments, 1)
	s := snap.Segments[0]
	require.NoError(t, s.loadIndexes())
	oidx := s.mu.oidx
	require.Greater(t, oidx.Entries(), 10)
	firstEntry, _ := oidx.Entry(0)
	lastEntry, _ := oidx.Entry(oidx.Entries() - 1)
	midEntry, _ := oidx.Entry(oidx.Entries() / 2)
	cases := []struct {
		name   string
		target int64
	}{
		{"log start", 0},
		{"before the first entry", firstEntry - 3},
		{"exact entry", midEntry},
		{"first record of the batch after an entry", midEntry + 1},
		{"between entries", midEntry + 7},
		{"exact last entry", lastEntry},
		{"after the last entry", min(lastEntry+3, 999)},
		{"last offset", 999},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := p.Stats().BytesRead
			pos, err := s.FindOffset(tc.target)
			require.NoError(t, err)
			read := p.Stats().BytesRead - before
			b, err := s.ReadBatch(pos, nil)
			require.NoError(t, err)
			assert.LessOrEqual(t, b.BaseOffset, tc.target)
			assert.GreaterOrEqual(t, b.LastOffset(), tc.target)
			// At most one index interval of headers (plus the batch found).
			assert.LessOrEqual(t, read, int64(peekSize)*(cfg.IndexIntervalBytes/100+3), "bounded scan")
		})
	}
	pos, err := s.FindOffset(1000)
	require.NoError(t, err)
	assert.Equal(t, s.Size(), pos, "past the end")
}

func TestOffsetForTime(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 3000
	cfg.IndexIntervalBytes = 200
	p := openTest(t, vfs.NewMem(), "/d/t-0", cfg)
	defer p.Close()
	// Out-of-order timestamps, within and across batches.
	pattern := []int64{100, 50, 300, 200, 250, 400, 390, 380, 1000, 600, 700, 2000, 10, 1500}
	var all []record.Record
	for i := 0; i < 60; i++ {
		recs := makeRecs(i*3, 3, 0)
		for j := range recs {
			recs[j].Timestamp = pattern[(i*3+j)%len(pattern)] + int64(i*37)
		}
		_, _, err := p.Append(recs)
		require.NoError(t, err)
		all = append(all, recs...)
	}
	require.Greater(t, len(p.Segments()), 2)
	brute := func(ts int64) int64 {
		for i, r := range all {
			if r.Timestamp >= ts {
				return int64(i)
			}
		}
		return int64(len(all))
	}
	for ts := int64(0); ts <= 4300; ts += 7 {
		got, err := p.OffsetForTime(ts)
		require.NoError(t, err)
		require.Equal(t, brute(ts), got, "timestamp %d", ts)
	}
	checkIndexes(t, p)
}

func TestRollConditions(t *testing.T) {
	type step struct {
		ts      int64 // record timestamp
		advance time.Duration
	}
	cases := []struct {
		name  string
		cfg   func(c *Config)
		raw   int32 // > 0: AppendBatch with this lastOffsetDelta; -1: AppendBatch (timestamps kept)
		steps []step
		want  []int64 // segment bases after the steps
		why   RollReason
	}{
		{"segment.bytes", func(c *Config) { c.SegmentBytes = 300 }, 0,
			[]step{{1, 0}, {2, 0}, {3, 0}, {4, 0}, {5, 0}}, []int64{0, 2, 4}, RollSize},
		{"segment.ms by record timestamps", func(c *Config) { c.SegmentMs = 1000 }, 0,
			[]step{{1000, 0}, {1500, 0}, {2000, 0}, {2001, 0}, {2600, 0}, {3200, 0}}, []int64{0, 3, 5}, RollTime},
		{"segment.ms by append time (records without timestamps get now)", func(c *Config) { c.SegmentMs = 1000 }, 0,
			[]step{{-1, 0}, {-1, 500 * time.Millisecond}, {-1, 600 * time.Millisecond}}, []int64{0, 2}, RollTime},
		{"segment.ms by segment age when batches have no timestamp", func(c *Config) { c.SegmentMs = 1000 }, -1,
			[]step{{-1, 0}, {-1, 500 * time.Millisecond}, {-1, 400 * time.Millisecond}, {-1, 200 * time.Millisecond}}, []int64{0, 3}, RollTime},
		{"max.compaction.lag.ms caps segment.ms", func(c *Config) {
			c.SegmentMs = 100000
			c.CleanupPolicy = "compact"
			c.MaxCompactionLagMs = 500
		}, 0, []step{{1000, 0}, {1400, 0}, {1600, 0}}, []int64{0, 2}, RollTime},
		{"full offset index", func(c *Config) {
			c.SegmentIndexBytes = 8 * 3 // 3 entries (the time index stays empty: no timestamps)
			c.IndexIntervalBytes = 1
		}, -1, []step{{-1, 0}, {-1, 0}, {-1, 0}, {-1, 0}, {-1, 0}, {-1, 0}}, []int64{0, 4}, RollIndexFull},
		{"full time index", func(c *Config) {
			c.SegmentIndexBytes = 12 * 3 // 3 slots, full at 2 (one kept for the roll)
			c.IndexIntervalBytes = 1
		}, 0, []step{{1, 0}, {2, 0}, {3, 0}, {4, 0}, {5, 0}}, []int64{0, 3}, RollIndexFull},
		{"relative offset overflow", nil, math.MaxInt32, []step{{1, 0}, {2, 0}}, []int64{0, math.MaxInt32 + 1}, RollOffsetOverflow},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{t: time.UnixMilli(1_000_000)}
			cfg := testConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			p := openTest(t, vfs.NewMem(), "/d/t-0", cfg, func(o *PartitionOptions) { o.Now = clock.Now })
			defer p.Close()
			for i, st := range tc.steps {
				clock.Advance(st.advance)
				recs := []record.Record{{Timestamp: st.ts, Value: bytes.Repeat([]byte("x"), 80)}}
				var err error
				if tc.raw != 0 {
					spec := plainSpec()
					spec.LastOffsetDelta = max(tc.raw, -1)
					_, _, err = p.AppendBatch(producerBatch(t, spec, recs))
				} else {
					_, _, err = p.Append(recs)
				}
				require.NoError(t, err, "step %d", i)
			}
			var bases []int64
			for _, s := range p.Segments() {
				bases = append(bases, s.BaseOffset)
			}
			assert.Equal(t, tc.want, bases)
			st := p.Stats()
			assert.Equal(t, int64(len(tc.want)-1), st.Rolls)
			assert.Equal(t, tc.why, st.LastRollReason, "every roll has its reason")
			assert.Equal(t, clock.Now(), st.LastRollTime)
		})
	}
}

func TestSegmentJitter(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentMs = 1000
	cfg.SegmentJitterMs = 300
	cfg.SegmentBytes = 200
	p := openTest(t, vfs.NewMem(), "/d/t-0", cfg)
	defer p.Close()
	for i := 0; i < 30; i++ {
		_, _, err := p.Append(makeRecs(i, 3, 1))
		require.NoError(t, err)
	}
	snap := p.Snapshot()
	defer snap.Release()
	distinct := map[int64]bool{}
	for _, s := range snap.Segments {
		assert.GreaterOrEqual(t, s.w.rollJitterMs, int64(0))
		assert.Less(t, s.w.rollJitterMs, int64(300))
		distinct[s.w.rollJitterMs] = true
	}
	assert.Greater(t, len(distinct), 1, "jitter is drawn per segment")
}

// TestNoRollWithoutAppend: as on a broker, a segment rolls only when an
// append finds it due. A quiet active segment past segment.ms stays the
// active one (retention deletes it itself when it expires); the next
// append rolls it, with reason "time".
func TestNoRollWithoutAppend(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1_000_000)}
	cfg := testConfig()
	cfg.SegmentMs = 1000
	p := openTest(t, vfs.NewMem(), "/d/t-0", cfg, func(o *PartitionOptions) { o.Now = clock.Now })
	defer p.Close()
	_, _, err := p.Append(makeRecs(0, 2, -1))
	require.NoError(t, err)
	clock.Advance(time.Hour)
	require.Len(t, p.Segments(), 1, "nothing rolls a quiet segment")
	assert.Zero(t, p.Stats().Rolls)
	assert.Empty(t, p.Stats().LastRollReason)

	_, _, err = p.Append(makeRecs(2, 1, -1))
	require.NoError(t, err)
	segs := p.Segments()
	require.Len(t, segs, 2)
	assert.Equal(t, int64(2), segs[1].BaseOffset)
	assert.True(t, segs[1].Active)
	assert.Equal(t, int64(1_000_000), segs[0].MaxTimestamp)
	assert.Equal(t, RollTime, p.Stats().LastRollReason)

	// Roll on an empty active segment is a no-op, and no roll.
	require.NoError(t, p.Roll())
	require.NoError(t, p.Roll())
	assert.Len(t, p.Segments(), 3)
	assert.Equal(t, int64(2), p.Stats().Rolls)
	assert.Equal(t, RollRequested, p.Stats().LastRollReason)
}

func TestDeleteOldestSegments(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1_000_000)}
	fs := vfs.NewMem()
	cfg := testConfig()
	cfg.SegmentBytes = 500
	p := openTest(t, fs, "/d/t-0", cfg, func(o *PartitionOptions) { o.Now = clock.Now })
	defer p.Close()
	for i := 0; i < 20; i++ {
		_, _, err := p.Append(makeRecs(i*5, 5, 1))
		require.NoError(t, err)
	}
	segs := p.Segments()
	require.Greater(t, len(segs), 4)
	snap := p.Snapshot() // a reader that keeps the old segments

	n, err := p.DeleteOldestSegments(2, "test")
	require.NoError(t, err)
	assert.Equal(t, segs[0].Size+segs[1].Size, n)
	assert.Equal(t, segs[2].BaseOffset, p.LogStartOffset())
	assert.Equal(t, seq(segs[2].BaseOffset, 100), offsetsOf(readAll(t, p)))
	assert.Equal(t, int64(2), p.Stats().SegmentsDeleted)

	// Files are renamed, not gone; the old reader still reads them.
	assert.True(t, strings.HasSuffix(snap.Segments[0].LogPath(), ".log.deleted"))
	b, err := snap.Segments[0].ReadBatch(0, nil)
	require.NoError(t, err)
	assert.Equal(t, int64(0), b.BaseOffset)

	// Not yet due.
	clock.Advance(30 * time.Second)
	require.NoError(t, p.PurgeDeleted(clock.Now()))
	_, err = fs.Stat(snap.Segments[0].LogPath())
	require.NoError(t, err)
	clock.Advance(31 * time.Second)
	require.NoError(t, p.PurgeDeleted(clock.Now()))
	_, err = fs.Stat(snap.Segments[0].LogPath())
	require.ErrorIs(t, err, errNotExist)
	// An unlinked file stays readable through the open descriptor.
	_, err = snap.Segments[0].ReadBatch(0, nil)
	require.NoError(t, err)
	snap.Release()

	// Deleting everything rolls first and keeps an empty active segment.
	_, err = p.DeleteOldestSegments(1000, "everything")
	require.NoError(t, err)
	segs = p.Segments()
	require.Len(t, segs, 1)
	assert.Equal(t, int64(100), segs[0].BaseOffset)
	assert.Equal(t, int64(100), p.LogStartOffset())
	assert.Equal(t, int64(100), p.LogEndOffset())
	first, _, err := p.Append(makeRecs(0, 1, 1))
	require.NoError(t, err)
	assert.Equal(t, int64(100), first)
	assert.Equal(t, int64(100), segs[0].BaseOffset)
}

func TestSubscribe(t *testing.T) {
	p := openTest(t, vfs.NewMem(), "/d/t-0", testConfig())
	defer p.Close()
	ch, cancel := p.Subscribe()
	ch2, cancel2 := p.Subscribe()
	defer cancel2()
	for i := 0; i < 5; i++ { // never blocks, even if nobody reads
		_, _, err := p.Append(makeRecs(i, 1, 1))
		require.NoError(t, err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("no notification")
	}
	select {
	case <-ch:
		t.Fatal("notifications coalesce into one")
	default:
	}
	cancel()
	cancel()
	_, _, err := p.Append(makeRecs(5, 1, 1))
	require.NoError(t, err)
	select {
	case <-ch:
		t.Fatal("cancelled subscriber notified")
	default:
	}
	<-ch2
}

// TestConcurrentAppendRead runs appenders, snapshot readers, subscribers,
// rolls, deletions and flushes at once (meaningful under -race).
func TestConcurrentAppendRead(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 2000
	cfg.FileDeleteDelayMs = 0
	p := openTest(t, vfs.NewMem(), "/d/t-0", cfg)
	defer p.Close()
	const total = 3000
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 16)
	var replaced atomic.Int64
	var cleanerDone atomic.Bool // the cleaner gave up: do not wait for it
	wg.Add(1)
	go func() { // writer
		defer wg.Done()
		defer close(stop)
		for i := 0; i < total/10; i++ {
			if _, _, err := p.Append(makeRecs(i*10, 10, int64(i))); err != nil {
				errs <- err
				return
			}
			// Halfway, let the cleaner swap at least once while readers run.
			for i == total/20 && replaced.Load() == 0 && !cleanerDone.Load() {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() { // tailing reader: every offset, in order, exactly once
			defer wg.Done()
			ch, cancel := p.Subscribe()
			defer cancel()
			next := int64(0)
			var recs []record.Record
			for next < total {
				snap := p.Snapshot()
				if next < snap.LogStartOffset {
					next = snap.LogStartOffset // retention overtook us
				}
				i := snap.SegmentFor(next)
				for ; i < len(snap.Segments); i++ {
					s := snap.Segments[i]
					pos, err := s.FindOffset(next)
					if err != nil {
						errs <- err
						break
					}
					for {
						b, err := s.ReadBatch(pos, nil)
						if errors.Is(err, io.EOF) {
							break
						}
						if err != nil {
							errs <- err
							break
						}
						recs, _ = b.Records(recs[:0])
						for _, rec := range recs {
							if rec.Offset < next {
								continue
							}
							if rec.Offset != next || string(rec.Value) != fmt.Sprintf("value-%06d", next) {
								errs <- fmt.Errorf("read offset %d %q, want %d", rec.Offset, rec.Value, next)
								snap.Release()
								return
							}
							next++
						}
						pos += int64(b.Size())
					}
				}
				snap.Release()
				if next < total {
					select {
					case <-ch:
					case <-time.After(50 * time.Millisecond):
					}
				}
			}
		}()
	}
	wg.Add(1)
	go func() { // a "cleaner" that rewrites the two oldest sealed segments byte for byte
		defer wg.Done()
		defer cleanerDone.Store(true)
		for {
			select {
			case <-stop:
				return
			default:
			}
			err := copyOldestSegments(p)
			if err == nil {
				replaced.Add(1)
			} else if !errors.Is(err, ErrConflict) && !errors.Is(err, errNotEnough) {
				errs <- err
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	wg.Add(1)
	go func() { // housekeeping
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if len(p.Segments()) > 6 {
				if _, err := p.DeleteOldestSegments(1, "test"); err != nil {
					errs <- err
				}
			}
			if err := p.PurgeDeleted(time.Now().Add(time.Hour)); err != nil {
				errs <- err
			}
			if err := p.Flush(); err != nil {
				errs <- err
			}
			if _, err := p.OffsetForTime(100); err != nil {
				errs <- err
			}
			time.Sleep(time.Millisecond)
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assert.Equal(t, int64(total), p.LogEndOffset())
	assert.Positive(t, replaced.Load(), "the cleaner swapped segments under the readers")
}

func TestFlushAdvancesRecoveryPoint(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(1_000_000)}
	cfg := testConfig()
	p := openTest(t, vfs.NewMem(), "/d/t-0", cfg, func(o *PartitionOptions) { o.Now = clock.Now })
	defer p.Close()
	_, _, err := p.Append(makeRecs(0, 10, 1))
	require.NoError(t, err)
	assert.Equal(t, int64(0), p.RecoveryPoint())
	flushes := p.Stats().Flushes
	require.NoError(t, p.Flush())
	assert.Equal(t, int64(10), p.RecoveryPoint())
	assert.Equal(t, flushes+1, p.Stats().Flushes)
	require.NoError(t, p.Flush()) // nothing to do
	assert.Equal(t, flushes+1, p.Stats().Flushes)

	// flush.messages
	cfg.FlushMessages = 3
	p.SetConfig(cfg)
	_, _, err = p.Append(makeRecs(10, 2, 1))
	require.NoError(t, err)
	assert.Equal(t, int64(10), p.RecoveryPoint())
	_, _, err = p.Append(makeRecs(12, 1, 1))
	require.NoError(t, err)
	assert.Equal(t, int64(13), p.RecoveryPoint())

	// flush.ms, checked at append time
	cfg.FlushMessages = math.MaxInt64
	cfg.FlushMs = 1000
	p.SetConfig(cfg)
	_, _, err = p.Append(makeRecs(13, 1, 1))
	require.NoError(t, err)
	assert.Equal(t, int64(13), p.RecoveryPoint())
	clock.Advance(1001 * time.Millisecond)
	_, _, err = p.Append(makeRecs(14, 1, 1))
	require.NoError(t, err)
	assert.Equal(t, int64(15), p.RecoveryPoint())
}

// TestDiskFull: a failed write leaves the log consistent and appendable.
func TestDiskFull(t *testing.T) {
	sw := &vfs.Switchable{}
	fs := vfs.NewErrorFS(vfs.NewMem(), sw)
	p := openTest(t, fs, "/d/t-0", testConfig())
	defer p.Close()
	_, _, err := p.Append(makeRecs(0, 5, 1))
	require.NoError(t, err)
	sw.Set(vfs.ShortWriteNth(0, 10, enospc))
	_, _, err = p.Append(makeRecs(5, 5, 1))
	require.ErrorIs(t, err, enospc)
	sw.Set(nil)
	assert.Equal(t, int64(5), p.LogEndOffset())
	first, _, err := p.Append(makeRecs(5, 5, 1))
	require.NoError(t, err)
	assert.Equal(t, int64(5), first)
	assert.Equal(t, seq(0, 10), offsetsOf(readAll(t, p)))
}

func TestReadBatchCorruption(t *testing.T) {
	fs := vfs.NewMem()
	p := openTest(t, fs, "/d/t-0", testConfig())
	defer p.Close()
	_, _, err := p.Append(makeRecs(0, 5, 1))
	require.NoError(t, err)
	_, _, err = p.Append(makeRecs(5, 5, 1))
	require.NoError(t, err)
	snap := p.Snapshot()
	defer snap.Release()
	s := snap.Segments[0]
	b, err := s.ReadBatch(0, nil)
	require.NoError(t, err)
	pos := int64(b.Size())
	f, err := fs.OpenFile(s.LogPath(), 2, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{0xff}, pos+70)
	require.NoError(t, err)
	f.Close()
	_, err = s.ReadBatch(pos, nil)
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Contains(t, err.Error(), "00000000000000000000.log")
	assert.Contains(t, err.Error(), fmt.Sprint(pos))
	assert.Equal(t, int64(1), p.Stats().Corruptions)
}

// TestSealedIndexesLoadLazily: opening and describing a partition does not
// keep sealed segments' indexes in memory; a lookup loads them.
func TestSealedIndexesLoadLazily(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig()
	cfg.SegmentBytes = 2000
	fillPartition(t, fs, "/d/t-0", cfg, 40)
	p := openTest(t, fs, "/d/t-0", cfg, func(o *PartitionOptions) { o.CleanShutdown = true })
	defer p.Close()
	infos := p.Segments()
	require.Greater(t, len(infos), 3)
	for i, si := range infos[:len(infos)-1] {
		assert.Equal(t, infos[i+1].BaseOffset, si.NextOffset)
		assert.Positive(t, si.MaxTimestamp)
	}
	snap := p.Snapshot()
	defer snap.Release()
	loaded := func(s *Segment) bool {
		s.mu.RLock()
		defer s.mu.RUnlock()
		return s.mu.loaded
	}
	for _, s := range snap.Segments[:len(snap.Segments)-1] {
		assert.False(t, loaded(s), "segment %d", s.BaseOffset())
	}
	assert.True(t, loaded(snap.Segments[len(snap.Segments)-1]), "the active segment is open")
	s := snap.Segments[1]
	pos, err := s.FindOffset(s.BaseOffset() + 25)
	require.NoError(t, err)
	assert.Positive(t, pos)
	assert.True(t, loaded(s))
}

func TestFlushErrorKeepsRecoveryPoint(t *testing.T) {
	sw := &vfs.Switchable{}
	p := openTest(t, vfs.NewErrorFS(vfs.NewMem(), sw), "/d/t-0", testConfig())
	defer p.Close()
	_, _, err := p.Append(makeRecs(0, 5, 1))
	require.NoError(t, err)
	sw.Set(vfs.FailOnPath(".log", vfs.OpSync, syscall.EIO))
	require.ErrorIs(t, p.Flush(), syscall.EIO)
	assert.Equal(t, int64(0), p.RecoveryPoint())
	sw.Set(nil)
	require.NoError(t, p.Flush())
	assert.Equal(t, int64(5), p.RecoveryPoint())
}

func TestSnapshotOutlivesClose(t *testing.T) {
	p := openTest(t, vfs.NewMem(), "/d/t-0", testConfig())
	_, _, err := p.Append(makeRecs(0, 5, 1))
	require.NoError(t, err)
	snap := p.Snapshot()
	require.NoError(t, p.Close())
	require.NoError(t, p.Close(), "Close is idempotent")
	b, err := snap.Segments[0].ReadBatch(0, nil)
	require.NoError(t, err)
	assert.Equal(t, int32(5), b.RecordCount)
	buf := make([]byte, 100)
	n, err := snap.Segments[0].ReadAt(buf, snap.Segments[0].Size()-10)
	assert.Equal(t, 10, n)
	assert.ErrorIs(t, err, io.EOF)
	snap.Release()
	snap.Release() // idempotent
	empty := p.Snapshot()
	assert.Empty(t, empty.Segments)
	empty.Release()
}

func TestAppendBatchRejectsLegacy(t *testing.T) {
	p := openTest(t, vfs.NewMem(), "/d/t-0", testConfig())
	defer p.Close()
	b, err := os.ReadFile(testutil.KafkaFixture(t, "kafka-go-fetch-v1v2-gzip-segmentio/extracted/v1-v1/00000000000000000000.log"))
	require.NoError(t, err)
	batch, err := record.ReadAt(bytes.NewReader(b), 0, int64(len(b)), nil)
	require.NoError(t, err)
	_, _, err = p.AppendBatch(batch.Raw)
	require.ErrorIs(t, err, record.ErrUnsupported)
	assert.Equal(t, int64(0), p.LogEndOffset())
}

func TestReadOnlyRefusesWrites(t *testing.T) {
	fs := vfs.NewMem()
	fillPartition(t, fs, "/d/t-0", testConfig(), 3)
	p := openTest(t, fs, "/d/t-0", testConfig(), func(o *PartitionOptions) { o.ReadOnly = true; o.CleanShutdown = true })
	defer p.Close()
	_, _, err := p.AppendBatch(producerBatch(t, plainSpec(), makeRecs(0, 1, 1)))
	require.ErrorIs(t, err, ErrReadOnly)
	require.ErrorIs(t, p.Roll(), ErrReadOnly)
	_, err = p.DeleteOldestSegments(1, "x")
	require.ErrorIs(t, err, ErrReadOnly)
	_, err = p.NewCleanedSegment(0)
	require.ErrorIs(t, err, ErrReadOnly)
	require.ErrorIs(t, p.ReplaceSegments(nil, nil), ErrReadOnly)
	require.NoError(t, p.Flush())
	assert.Equal(t, seq(0, 30), offsetsOf(readAll(t, p)))
}

var errNotEnough = errors.New("not enough segments")

// copyOldestSegments replaces the two oldest sealed segments with one
// cleaned segment holding the same batches.
func copyOldestSegments(p *Partition) error {
	snap := p.Snapshot()
	defer snap.Release()
	if len(snap.Segments) < 4 {
		return errNotEnough
	}
	old := snap.Segments[:2]
	w, err := p.NewCleanedSegment(old[0].BaseOffset())
	if err != nil {
		return err
	}
	for _, s := range old {
		for pos := int64(0); pos < s.Size(); {
			b, err := s.ReadBatch(pos, nil)
			if err != nil {
				w.Abort()
				return err
			}
			if err := w.AppendBatch(b.Raw); err != nil {
				w.Abort()
				return err
			}
			pos += int64(b.Size())
		}
	}
	if err := w.Finish(); err != nil {
		w.Abort()
		return err
	}
	if err := p.ReplaceSegments([]int64{old[0].BaseOffset(), old[1].BaseOffset()}, []*SegmentWriter{w}); err != nil {
		w.Abort()
		return err
	}
	return nil
}

// TestLoadedIndexesAreBounded: reading every segment of a long log keeps at
// most the indexLRU's bound of sealed segments' indexes loaded, and lookups
// still answer after an eviction.
func TestLoadedIndexesAreBounded(t *testing.T) {
	const bound = 16
	fs := vfs.NewMem()
	cfg := testConfig()
	cfg.SegmentBytes = 400
	fillPartition(t, fs, "/d/t-0", cfg, 80)
	lru := newIndexLRU(bound)
	p := openTest(t, fs, "/d/t-0", cfg, func(o *PartitionOptions) { o.indexes = lru }) // unclean: recovery rebuilds them all
	defer p.Close()
	snap := p.Snapshot()
	defer snap.Release()
	require.Greater(t, len(snap.Segments), 2*bound)
	countLoaded := func() int {
		n := 0
		for _, s := range snap.Segments[:len(snap.Segments)-1] {
			s.mu.RLock()
			if s.mu.loaded {
				n++
			}
			s.mu.RUnlock()
		}
		return n
	}
	assert.LessOrEqual(t, countLoaded(), bound)
	for round := 0; round < 2; round++ {
		for _, s := range snap.Segments {
			_, err := s.FindOffset(s.BaseOffset() + 5)
			require.NoError(t, err)
			_, _, err = s.FindTimestamp(0)
			require.NoError(t, err)
		}
		assert.LessOrEqual(t, countLoaded(), bound)
		assert.Equal(t, bound, lru.stats().Segments)
	}
	checkIndexes(t, p)
}

// TestActiveBaseOffset: the active segment's base moves with each roll,
// everything below it is sealed, and a closed partition has none.
func TestActiveBaseOffset(t *testing.T) {
	p := openTest(t, vfs.NewMem(), "/d", testConfig())
	base, ok := p.ActiveBaseOffset()
	require.True(t, ok)
	assert.Equal(t, int64(0), base)
	_, _, err := p.Append(makeRecs(0, 5, 1000))
	require.NoError(t, err)
	require.NoError(t, p.Roll())
	base, ok = p.ActiveBaseOffset()
	require.True(t, ok)
	assert.Equal(t, int64(5), base)
	segs := p.Segments()
	for _, s := range segs {
		assert.Equal(t, s.BaseOffset >= base, s.Active, "segment %d", s.BaseOffset)
	}
	require.NoError(t, p.Close())
	_, ok = p.ActiveBaseOffset()
	assert.False(t, ok)
}
