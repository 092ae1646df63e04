package policies

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// model is what the writer appended: offset → record, append-only.
type model struct {
	mu   sync.Mutex
	recs map[int64]record.Record
}

func (m *model) put(first int64, recs []record.Record) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, r := range recs {
		r.Offset = first + int64(i)
		m.recs[r.Offset] = r
	}
}

func (m *model) get(off int64) (record.Record, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[off]
	return r, ok
}

// latestBelow returns, for each key, the offset of its latest record below end.
func (m *model) latestBelow(end int64) map[string]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int64{}
	for off, r := range m.recs {
		if off >= end {
			continue
		}
		if cur, ok := out[string(r.Key)]; !ok || off > cur {
			out[string(r.Key)] = off
		}
	}
	return out
}

func sameRecord(t testing.TB, want, got record.Record) {
	t.Helper()
	require.Equal(t, want.Offset, got.Offset)
	require.Equal(t, string(want.Key), string(got.Key), "key at offset %d", got.Offset)
	require.Equal(t, want.Value == nil, got.Value == nil, "tombstone-ness at offset %d", got.Offset)
	require.True(t, bytes.Equal(want.Value, got.Value), "value at offset %d", got.Offset)
}

// checkRead verifies what a reader sees at any time: offsets strictly
// increase and every record is exactly the one appended at its offset.
func checkRead(t testing.TB, m *model, recs []record.Record) {
	t.Helper()
	for i, r := range recs {
		if i > 0 {
			require.Greater(t, r.Offset, recs[i-1].Offset, "offsets strictly increase")
		}
		if want, ok := m.get(r.Offset); ok {
			sameRecord(t, want, r)
		}
	}
}

// horizons remembers, for each tombstone offset, the delete horizon the
// first cleaning that kept it must have set (the clock then + 10 s).
type horizons map[int64]int64

// checkCleaned verifies the log right after a completed cleaning that
// reached end at time nowMs: below end every key appears at most once, as
// its latest record below end; a value is never missing, and a tombstone is
// missing only once the horizon set by the first cleaning that kept it has
// passed; from end on nothing was dropped.
func checkCleaned(t testing.TB, p *engine.Partition, m *model, recs []record.Record, logStart, end, nowMs int64, hz horizons) {
	t.Helper()
	checkRead(t, m, recs)
	latest := m.latestBelow(end)
	seen := map[string]int64{}
	present := map[int64]bool{}
	for _, r := range recs {
		present[r.Offset] = true
		if r.Offset >= end {
			continue
		}
		k := string(r.Key)
		prev, dup := seen[k]
		require.False(t, dup, "key %q at offsets %d and %d below the cleaned end %d", k, prev, r.Offset, end)
		seen[k] = r.Offset
		require.Equal(t, latest[k], r.Offset, "key %q: only its latest record below %d survives", k, end)
	}
	for k, off := range latest {
		if off < logStart {
			continue
		}
		want, _ := m.get(off)
		if want.Value != nil {
			require.True(t, present[off], "latest value of key %q at offset %d lost", k, off)
			continue
		}
		h, ok := hz[off]
		switch {
		case present[off] && !ok:
			// Kept by a cleaning: its batch has a horizon, set by this
			// cleaning or an earlier one that rewrote its segment.
			b, found := findBatch(t, p, off)
			require.True(t, found)
			require.True(t, b.HasDeleteHorizon(), "kept tombstone at offset %d has a delete horizon", off)
			require.LessOrEqual(t, b.DeleteHorizonMs(), nowMs+10_000)
			hz[off] = b.DeleteHorizonMs()
		case !present[off]:
			require.True(t, ok, "tombstone of key %q at offset %d dropped at its first cleaning", k, off)
			require.GreaterOrEqual(t, nowMs, h, "tombstone of key %q at offset %d dropped before its horizon", k, off)
		}
	}
	// Nothing from end on was dropped (up to what the reader saw).
	if len(recs) > 0 {
		last := recs[len(recs)-1].Offset
		for off := end; off <= last; off++ {
			if _, ok := m.get(off); ok {
				require.True(t, present[off], "record at offset %d past the cleaned end %d dropped", off, end)
			}
		}
	}
}

// TestCleanerModel: thousands of random puts and deletes over a few hundred
// keys, with compaction at random moments while a writer appends and
// readers read. After each cleaning the log read through the engine holds
// for every key its latest value or its tombstone, offsets strictly
// increase, and every surviving record keeps its original offset. With a
// small dedupe buffer the map fills and cleanings stop part way.
func TestCleanerModel(t *testing.T) {
	for _, tc := range []struct {
		name   string
		buffer int64
	}{
		{"big map", 1 << 20},
		{"map fills", OffsetMapSlotSize * 120},
	} {
		t.Run(tc.name, func(t *testing.T) { testCleanerModel(t, tc.buffer) })
	}
}

func testCleanerModel(t *testing.T, buffer int64) {
	const (
		keys   = 300
		writes = 4000
	)
	clk := newClock()
	d := openLogDir(t, vfs.NewMem(), "/data", clk, map[string]string{
		"cleanup.policy": "compact", "segment.bytes": "4096", "delete.retention.ms": "10000",
		"min.cleanable.dirty.ratio": "0.01",
	})
	p := createPartition(t, d, "model", nil)
	s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), DedupeBufferSize: buffer, CleanerThreads: 1})
	defer s.Stop()
	m := &model{recs: map[int64]record.Record{}}
	rng := rand.New(rand.NewPCG(1, uint64(buffer)))

	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // writer
		defer wg.Done()
		defer done.Store(true)
		wr := rand.New(rand.NewPCG(2, 3))
		for i := 0; i < writes; {
			n := 1 + wr.IntN(5)
			recs := make([]record.Record, n)
			for j := range recs {
				k := fmt.Appendf(nil, "key-%03d", wr.IntN(keys))
				if wr.IntN(6) == 0 {
					recs[j] = record.Record{Key: k, Timestamp: -1}
				} else {
					recs[j] = record.Record{Key: k, Value: fmt.Appendf(nil, "v%d", i+j), Timestamp: -1}
				}
			}
			first, _, err := p.Append(recs)
			if !assert.NoError(t, err) {
				return
			}
			m.put(first, recs)
			i += n
		}
	}()
	for r := 0; r < 2; r++ { // readers
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !done.Load() {
				checkRead(t, m, readAll(t, p))
			}
		}()
	}

	cleanings := 0
	hz := horizons{}
	for !done.Load() {
		time.Sleep(time.Duration(rng.IntN(2000)) * time.Microsecond)
		clk.Advance(time.Duration(rng.IntN(3000)) * time.Millisecond)
		run, err := s.CleanPartition(p, rng.IntN(2) == 0)
		require.NoError(t, err)
		if run == nil {
			continue
		}
		cleanings++
		checkCleaned(t, p, m, readAll(t, p), p.LogStartOffset(), run.EndOffset, clk.Now().UnixMilli(), hz)
	}
	wg.Wait()
	require.Positive(t, cleanings)

	// Final: roll, clean everything (the map may need several runs), pass
	// the horizon, clean again: exactly one record per live key remains.
	require.NoError(t, p.Roll())
	for i := 0; ; i++ {
		require.Less(t, i, 100)
		run, err := s.CleanPartition(p, false)
		require.NoError(t, err)
		if run == nil {
			break
		}
		checkCleaned(t, p, m, readAll(t, p), p.LogStartOffset(), run.EndOffset, clk.Now().UnixMilli(), hz)
	}
	clk.Advance(11 * time.Second)
	run, err := s.CleanPartition(p, true)
	require.NoError(t, err)
	require.NotNil(t, run)
	assert.Zero(t, run.TombstonesKept, "every tombstone passed its horizon")

	latest := m.latestBelow(p.LogEndOffset())
	var want []int64
	for _, off := range latest {
		if r, _ := m.get(off); r.Value != nil {
			want = append(want, off)
		}
	}
	got := readAll(t, p)
	checkRead(t, m, got)
	var gotOffs []int64
	for _, r := range got {
		gotOffs = append(gotOffs, r.Offset)
		assert.NotNil(t, r.Value, "no tombstone left at offset %d", r.Offset)
	}
	assert.ElementsMatch(t, want, gotOffs, "exactly each live key's latest value")
	t.Logf("%d cleanings, %d live keys, %d segments", cleanings, len(want), len(p.Segments()))
}

// TestCleanerTombstoneHorizon: the first cleaning that keeps a tombstone
// sets its batch's delete horizon; a cleaning before the horizon keeps it;
// one after drops it. Values superseded by it go at the first cleaning.
func TestCleanerTombstoneHorizon(t *testing.T) {
	clk := newClock()
	d := openLogDir(t, vfs.NewMem(), "/data", clk, map[string]string{
		"cleanup.policy": "compact", "delete.retention.ms": "60000",
	})
	p := createPartition(t, d, "tomb", nil)
	s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), DedupeBufferSize: testBuffer})
	defer s.Stop()

	appendRecs(t, p, kv("a", "1"), kv("b", "1"))
	appendRecs(t, p, kv("a", "2"))
	appendRecs(t, p, tomb("b"))
	require.NoError(t, p.Roll())
	appendRecs(t, p, kv("c", "active")) // the active segment is never cleaned

	st := s.State("tomb", 0)
	assert.InDelta(t, 1.0, st.DirtyRatio, 1e-9)
	runs, err := s.RunCleaner()
	require.NoError(t, err)
	require.Len(t, runs, 1)
	run := runs[0]
	assert.Equal(t, "done", run.Outcome)
	assert.Equal(t, int64(4), run.EndOffset)
	assert.Equal(t, int64(1), run.TombstonesKept)
	assert.Equal(t, clk.Now().UnixMilli()+60000, run.EarliestHorizonMs)

	got := readAll(t, p)
	require.Len(t, got, 3)
	assert.Equal(t, int64(2), got[0].Offset) // a=2
	assert.Equal(t, int64(3), got[1].Offset) // b tombstone
	assert.Nil(t, got[1].Value)
	assert.Equal(t, int64(4), got[2].Offset) // c, active
	assertHorizon(t, p, 3, clk.Now().UnixMilli()+60000)

	st = s.State("tomb", 0)
	assert.Equal(t, int64(4), st.FirstDirtyOffset)
	assert.Contains(t, st.CleanerExplanation, "everything dirty sits in the active segment")
	assert.Contains(t, fmt.Sprint(st.Explanations), "kept until their delete horizon")

	// Before the horizon: nothing to clean, and a forced run keeps it.
	clk.Advance(30 * time.Second)
	runs, err = s.RunCleaner()
	require.NoError(t, err)
	assert.Empty(t, runs)
	run, err = s.CleanPartition(p, true)
	require.NoError(t, err)
	require.NotNil(t, run)
	assert.Len(t, readAll(t, p), 3)

	// After the horizon the scheduler cleans on its own and drops it.
	clk.Advance(31 * time.Second)
	runs, err = s.RunCleaner()
	require.NoError(t, err)
	require.Len(t, runs, 1)
	got = readAll(t, p)
	require.Len(t, got, 2)
	assert.Equal(t, int64(2), got[0].Offset)
	assert.Equal(t, int64(4), got[1].Offset)
	assert.Equal(t, int64(5), p.LogEndOffset())
}

// assertHorizon checks the delete horizon of the batch holding off.
func assertHorizon(t *testing.T, p *engine.Partition, off, horizon int64) {
	t.Helper()
	snap := p.Snapshot()
	defer snap.Release()
	for _, s := range snap.Segments {
		for pos := int64(0); pos < s.Size(); {
			b, err := s.ReadBatch(pos, nil)
			require.NoError(t, err)
			if b.BaseOffset <= off && off <= b.LastOffset() {
				require.True(t, b.HasDeleteHorizon(), "batch at %d has a horizon", b.BaseOffset)
				assert.Equal(t, horizon, b.DeleteHorizonMs())
				return
			}
			pos += int64(b.Size())
		}
	}
	t.Fatalf("offset %d not found", off)
}

// TestCleanerBatchRules: a batch whose records all survive is copied byte
// for byte; a partly kept batch keeps its base offset, last offset,
// producer fields and codec; an emptied batch goes unless it ends the round.
func TestCleanerBatchRules(t *testing.T) {
	clk := newClock()
	d := openLogDir(t, vfs.NewMem(), "/data", clk, map[string]string{"cleanup.policy": "compact", "compression.type": "gzip"})
	p := createPartition(t, d, "rules", nil)
	s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), DedupeBufferSize: testBuffer})
	defer s.Stop()

	appendRecs(t, p, kv("keep1", "x"), kv("keep2", "y"))                     // 0-1: copied whole
	appendRecs(t, p, kv("a", "old"), kv("b", "old"))                         // 2-3: emptied → dropped
	appendRecs(t, p, kv("c", "old"), kv("d", "new"))                         // 4-5: partly kept
	appendRecs(t, p, kv("a", "new"), kv("b", "new"))                         // 6-7: kept
	appendRecs(t, p, kv("c", "new"))                                         // 8
	appendRecs(t, p, record.Record{Value: []byte("keyless"), Timestamp: -1}) // 9: last of the round, emptied → kept empty
	rawBefore := batchRaw(t, p, 0)
	require.NoError(t, p.Roll())
	appendRecs(t, p, kv("e", "active")) // 10, active

	run, err := s.CleanPartition(p, true)
	require.NoError(t, err)
	require.NotNil(t, run)
	assert.Equal(t, int64(10), run.EndOffset)

	var offs []int64
	for _, r := range readAll(t, p) {
		offs = append(offs, r.Offset)
	}
	assert.Equal(t, []int64{0, 1, 5, 6, 7, 8, 10}, offs)
	assert.Equal(t, rawBefore, batchRaw(t, p, 0), "an untouched batch is copied byte for byte")

	b := batchAt(t, p, 5)
	assert.Equal(t, int64(4), b.BaseOffset, "base offset kept")
	assert.Equal(t, int64(5), b.LastOffset())
	assert.Equal(t, record.Gzip, b.Codec(), "codec kept")
	assert.Equal(t, int64(-1), b.ProducerID)
	require.NoError(t, b.Verify())
	_, ok := findBatch(t, p, 2)
	assert.False(t, ok, "an emptied batch is dropped")

	e := batchAt(t, p, 9)
	assert.Equal(t, int32(0), e.RecordCount, "the round's last batch is kept empty")
	assert.Equal(t, record.HeaderSize, e.Size())
	assert.Equal(t, int64(9), e.BaseOffset)
	assert.Equal(t, int64(9), e.LastOffset())
	assert.Equal(t, int64(11), p.LogEndOffset())
	assert.Equal(t, int64(6), run.RecordsKept)
	assert.Equal(t, int64(4), run.RecordsDropped)
}

func findBatch(t testing.TB, p *engine.Partition, off int64) (record.Batch, bool) {
	t.Helper()
	snap := p.Snapshot()
	defer snap.Release()
	for _, s := range snap.Segments {
		for pos := int64(0); pos < s.Size(); {
			b, err := s.ReadBatch(pos, nil)
			require.NoError(t, err)
			if b.BaseOffset <= off && off <= b.LastOffset() {
				return b, true
			}
			pos += int64(b.Size())
		}
	}
	return record.Batch{}, false
}

func batchAt(t *testing.T, p *engine.Partition, off int64) record.Batch {
	t.Helper()
	b, ok := findBatch(t, p, off)
	require.True(t, ok, "batch holding %d", off)
	return b
}

func batchRaw(t *testing.T, p *engine.Partition, off int64) []byte {
	t.Helper()
	b := batchAt(t, p, off)
	return append([]byte(nil), b.Raw...)
}

// TestCleanerLeavesUnchangedSegments: a segment whose batches all survive
// as they are, and that merges with nothing, is not rewritten.
func TestCleanerLeavesUnchangedSegments(t *testing.T) {
	clk := newClock()
	mem := vfs.NewMem()
	d := openLogDir(t, mem, "/data", clk, map[string]string{"cleanup.policy": "compact", "segment.bytes": "200"})
	p := createPartition(t, d, "same", nil)
	for i := 0; i < 6; i++ {
		appendRecs(t, p, kv(fmt.Sprint("a", i), "value of some forty bytes ..........."))
	}
	require.NoError(t, p.Roll())
	s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), DedupeBufferSize: testBuffer})
	defer s.Stop()
	run, err := s.CleanPartition(p, true)
	require.NoError(t, err)
	require.NotNil(t, run)
	assert.Equal(t, run.SegmentsIn, run.SegmentsUnchanged, "unique keys: nothing to rewrite")
	assert.Zero(t, run.RecordsDropped)
	assert.Equal(t, run.BytesIn, run.BytesOut)

	// New keys plus one overwrite: only the segment holding a0 changes.
	before := p.Segments()
	appendRecs(t, p, kv("a0", "new"))
	appendRecs(t, p, kv("b", "new"))
	require.NoError(t, p.Roll())
	run, err = s.CleanPartition(p, true)
	require.NoError(t, err)
	require.NotNil(t, run)
	assert.Equal(t, int64(1), run.RecordsDropped)
	assert.Equal(t, run.SegmentsIn-1, run.SegmentsUnchanged)
	after := p.Segments()
	assert.Equal(t, before[1:len(before)-1], after[1:len(before)-1], "untouched segments kept as they were")
	assert.Less(t, after[0].Size, before[0].Size)
}

// TestCleanerRebuildKeepsLogAppendTimeAndCodec: a partly kept lz4 batch of
// a LogAppendTime topic is rebuilt with the same codec, timestamp type and
// max timestamp.
func TestCleanerRebuildKeepsLogAppendTimeAndCodec(t *testing.T) {
	clk := newClock()
	d := openLogDir(t, vfs.NewMem(), "/data", clk, map[string]string{
		"cleanup.policy": "compact", "compression.type": "lz4", "message.timestamp.type": "LogAppendTime",
	})
	p := createPartition(t, d, "lat", nil)
	appendRecs(t, p, kv("a", "1"), kv("b", "1"), kv("c", "1")) // 0-2
	before := batchAt(t, p, 0)
	require.True(t, before.LogAppendTime())
	clk.Advance(time.Minute)
	appendRecs(t, p, kv("b", "2")) // 3
	require.NoError(t, p.Roll())
	s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), DedupeBufferSize: testBuffer})
	defer s.Stop()
	run, err := s.CleanPartition(p, true)
	require.NoError(t, err)
	require.NotNil(t, run)
	assert.Equal(t, int64(1), run.BatchesRebuilt)
	b := batchAt(t, p, 0)
	require.NoError(t, b.Verify())
	assert.Equal(t, record.LZ4, b.Codec())
	assert.True(t, b.LogAppendTime())
	assert.Equal(t, before.MaxTimestamp, b.MaxTimestamp)
	assert.Equal(t, int64(0), b.BaseOffset)
	assert.Equal(t, int64(2), b.LastOffset())
	recs, err := b.Records(nil)
	require.NoError(t, err)
	require.Len(t, recs, 2)
	assert.Equal(t, int64(2), recs[1].Offset)
	assert.Equal(t, before.MaxTimestamp, recs[0].Timestamp)
}

// TestCleanerMinCompactionLag: segments holding records younger than
// min.compaction.lag.ms are not cleaned yet, and State says why.
func TestCleanerMinCompactionLag(t *testing.T) {
	clk := newClock()
	d := openLogDir(t, vfs.NewMem(), "/data", clk, map[string]string{
		"cleanup.policy": "compact", "min.compaction.lag.ms": "1800000",
	})
	p := createPartition(t, d, "lag", nil)
	s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), DedupeBufferSize: testBuffer})
	defer s.Stop()
	appendRecs(t, p, kv("k", "1"), kv("k", "2")) // 0-1, old
	require.NoError(t, p.Roll())
	clk.Advance(time.Hour)
	young := appendRecs(t, p, kv("k", "3"), kv("k", "4")) // 2-3, young
	require.NoError(t, p.Roll())

	runs, err := s.RunCleaner()
	require.NoError(t, err)
	require.Len(t, runs, 1)
	assert.Equal(t, young, runs[0].EndOffset, "cleaning stops before the young segment")
	var offs []int64
	for _, r := range readAll(t, p) {
		offs = append(offs, r.Offset)
	}
	assert.Equal(t, []int64{1, 2, 3}, offs, "k@0 superseded within the old segment; the young ones untouched")
	st := s.State("lag", 0)
	assert.Contains(t, st.CleanerExplanation, "younger than min.compaction.lag.ms=1800000")

	clk.Advance(time.Hour)
	runs, err = s.RunCleaner()
	require.NoError(t, err)
	require.Len(t, runs, 1)
	offs = offs[:0]
	for _, r := range readAll(t, p) {
		offs = append(offs, r.Offset)
	}
	assert.Equal(t, []int64{3}, offs)
}

// TestCleanerMaxCompactionLag: a log below min.cleanable.dirty.ratio is
// still cleaned once a dirty record has waited past max.compaction.lag.ms.
func TestCleanerMaxCompactionLag(t *testing.T) {
	clk := newClock()
	d := openLogDir(t, vfs.NewMem(), "/data", clk, map[string]string{
		"cleanup.policy": "compact", "max.compaction.lag.ms": "3600000",
	})
	p := createPartition(t, d, "maxlag", nil)
	s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), DedupeBufferSize: testBuffer})
	defer s.Stop()
	for i := 0; i < 50; i++ {
		appendRecs(t, p, kv(fmt.Sprint("unique", i), "a value of some length ............"))
	}
	require.NoError(t, p.Roll())
	_, err := s.CleanPartition(p, true) // everything so far is clean
	require.NoError(t, err)
	appendRecs(t, p, kv("unique1", "new")) // a small dirty segment
	require.NoError(t, p.Roll())

	runs, err := s.RunCleaner()
	require.NoError(t, err)
	assert.Empty(t, runs, "dirty ratio far below 0.5")
	assert.Contains(t, s.State("maxlag", 0).CleanerExplanation, "not above min.cleanable.dirty.ratio")

	clk.Advance(2 * time.Hour)
	assert.Contains(t, s.State("maxlag", 0).CleanerExplanation, "past max.compaction.lag.ms")
	runs, err = s.RunCleaner()
	require.NoError(t, err)
	require.Len(t, runs, 1)
	assert.Equal(t, int64(1), runs[0].RecordsDropped)
}
