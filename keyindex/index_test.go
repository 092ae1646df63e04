package keyindex

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/backend/local"
	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
	"github.com/topicfs/topicfs/policies"
)

// testPartition opens a log directory on fs with the given topic settings
// and returns partition 0 of a new topic "t".
func testPartition(t testing.TB, fs vfs.FS, dir string, kv map[string]string) (*engine.LogDir, *local.Partition) {
	t.Helper()
	cfg, err := engine.DefaultConfig().Apply(kv)
	require.NoError(t, err)
	d, err := engine.OpenLogDir(fs, dir, engine.LogDirOptions{Defaults: cfg, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	b := local.New(d)
	tp, err := b.CreateTopic(context.Background(), "t", 1)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	return d, p.(*local.Partition)
}

func kv(key, value string) record.Record {
	return record.Record{Key: []byte(key), Value: []byte(value)}
}

func tombstone(key string) record.Record { return record.Record{Key: []byte(key)} }

func appendRecs(t testing.TB, p backend.Partition, recs ...record.Record) {
	t.Helper()
	_, _, err := p.AppendEach(context.Background(), [][]record.Record{recs})
	require.NoError(t, err)
}

func openIndex(t testing.TB, p backend.Partition, b *Budget) *Index {
	t.Helper()
	x := Open(p, b, slog.New(slog.DiscardHandler))
	t.Cleanup(x.Close)
	return x
}

// listed returns the keys List gives, sorted.
func listed(t testing.TB, x *Index) []string {
	t.Helper()
	var keys []string
	require.NoError(t, x.List(context.Background(), func(k []byte) error {
		keys = append(keys, string(k))
		return nil
	}))
	sort.Strings(keys)
	return keys
}

// checkModel asserts that every key of the model reads as the model says
// and that List gives exactly its live keys.
func checkModel(t *testing.T, x *Index, model map[string]*string, absent ...string) {
	t.Helper()
	ctx := context.Background()
	var live []string
	for k, v := range model {
		e, err := x.Lookup(ctx, Ref{Key: []byte(k)})
		if v == nil {
			assert.ErrorIs(t, err, ErrNotFound, "key %q is deleted", k)
			continue
		}
		live = append(live, k)
		if assert.NoError(t, err, "key %q", k) {
			assert.Equal(t, *v, string(e.Value), "key %q", k)
			assert.Equal(t, k, string(e.Key))
		}
	}
	for _, k := range absent {
		_, err := x.Lookup(ctx, Ref{Key: []byte(k)})
		assert.ErrorIs(t, err, ErrNotFound, "key %q was never written", k)
	}
	sort.Strings(live)
	assert.Equal(t, live, listed(t, x))
	assert.EqualValues(t, len(live), x.Stats().LiveKeys)
}

// TestIndexMatchesModel appends random puts, tombstones and keyless records
// across many small segments, some before the index opens and some after,
// and compares every key and the listing with a map after each round. The
// budget holds one minimal table, so the growing table spills to a file.
func TestIndexMatchesModel(t *testing.T) {
	_, p := testPartition(t, vfs.OS, t.TempDir(), map[string]string{"segment.bytes": "4096"})
	rng := rand.New(rand.NewPCG(1, 2))
	model := map[string]*string{}
	round := func(n int) {
		var recs []record.Record
		for range n {
			k := fmt.Sprintf("key-%d", rng.IntN(3000))
			switch r := rng.IntN(10); {
			case r == 0:
				recs = append(recs, tombstone(k))
				model[k] = nil
			case r == 1:
				recs = append(recs, record.Record{Value: []byte("keyless")})
			default:
				v := fmt.Sprintf("v%d", rng.Int())
				recs = append(recs, kv(k, v))
				model[k] = &v
			}
			if len(recs) == 50 {
				appendRecs(t, p, recs...)
				recs = nil
			}
		}
		if len(recs) > 0 {
			appendRecs(t, p, recs...)
		}
	}
	round(2000)
	b := NewBudget(MinMemoryBytes, t.TempDir())
	x := openIndex(t, p, b)
	for range 4 {
		checkModel(t, x, model, "never-written")
		round(1500)
	}
	checkModel(t, x, model)
	heap, spilled := b.Usage()
	assert.Zero(t, heap, "the minimal table was given back when the table grew")
	assert.Positive(t, spilled, "the table outgrew the budget and spilled")
	assert.True(t, x.Stats().Spilled)
}

// TestIndexWithoutRoomFails: a table that outgrows the budget with nowhere
// to spill fails its lookups with an error, not a wrong answer.
func TestIndexWithoutRoomFails(t *testing.T) {
	_, p := testPartition(t, vfs.NewMem(), "/data", nil)
	var recs []record.Record
	for i := range 2000 {
		recs = append(recs, kv(fmt.Sprint(i), "v"))
	}
	appendRecs(t, p, recs...)
	x := openIndex(t, p, NewBudget(MinMemoryBytes, ""))
	_, err := x.Lookup(context.Background(), Ref{Key: []byte("1")})
	require.ErrorIs(t, err, errSpill)
	assert.Contains(t, x.Stats().Err, "key.index.memory.bytes")
}

// TestIndexCollision: when a key's slot points at another key's record (as
// after a hash collision), Lookup answers from a scan, never with the other
// key's value.
func TestIndexCollision(t *testing.T) {
	_, p := testPartition(t, vfs.NewMem(), "/data", nil)
	appendRecs(t, p, kv("a", "1"), kv("b", "2"), kv("a", "3"), tombstone("c"), kv("c", "5"))
	x := openIndex(t, p, NewBudget(1<<20, ""))
	ctx := context.Background()
	_, err := x.Lookup(ctx, Ref{Key: []byte("a")})
	require.NoError(t, err)
	// Point a's slot at b's record, as if b had hashed to a's slot.
	x.mu.Lock()
	x.t.put(x.hash([]byte("a")), 1)
	x.mu.Unlock()
	e, err := x.Lookup(ctx, Ref{Key: []byte("a")})
	require.NoError(t, err)
	assert.Equal(t, "3", string(e.Value))
	assert.EqualValues(t, 2, e.Offset)
	// And a tombstone entry pointing at another key is checked the same way.
	x.mu.Lock()
	x.t.put(x.hash([]byte("c")), 3|tombBit)
	x.t.put(x.hash([]byte("a")), 3|tombBit)
	x.mu.Unlock()
	e, err = x.Lookup(ctx, Ref{Key: []byte("a")})
	require.NoError(t, err)
	assert.Equal(t, "3", string(e.Value))
	_, err = x.Lookup(ctx, Ref{Key: []byte("c")})
	assert.ErrorIs(t, err, ErrNotFound, "c's slot points at c's tombstone")
}

// TestIndexSurvivesCleaningAndRetention: compaction leaves every answer as
// it was; retention deleting a key's only record makes it absent.
func TestIndexSurvivesCleaningAndRetention(t *testing.T) {
	d, p := testPartition(t, vfs.NewMem(), "/data", map[string]string{
		"cleanup.policy": "compact", "segment.bytes": "1024", "delete.retention.ms": "0", "min.cleanable.dirty.ratio": "0.01",
	})
	model := map[string]*string{}
	for i := range 400 {
		k := fmt.Sprintf("k%d", i%40)
		v := fmt.Sprint(i)
		if i%13 == 0 {
			appendRecs(t, p, tombstone(k))
			model[k] = nil
			continue
		}
		appendRecs(t, p, kv(k, v))
		model[k] = &v
	}
	x := openIndex(t, p, NewBudget(1<<20, ""))
	checkModel(t, x, model)
	s := policies.NewScheduler(d, policies.Options{Logger: slog.New(slog.DiscardHandler)})
	run, err := s.CleanPartition(p.Engine(), true)
	require.NoError(t, err)
	require.NotNil(t, run)
	checkModel(t, x, model)

	require.NoError(t, p.Roll())
	_, err = p.DeleteOldestSegments(len(p.Segments())-1, "test")
	require.NoError(t, err)
	for k := range model {
		model[k] = nil // every record was below the new log start
	}
	require.NoError(t, x.Ready(context.Background()))
	assert.Zero(t, x.Stats().LiveKeys, "retention's deletions are swept from the table before any key is read")
	checkModel(t, x, model)
	appendRecs(t, p, kv("k1", "after"))
	after := "after"
	model["k1"] = &after
	checkModel(t, x, model)
}

// TestIndexHidesAbortedAndFollows: records of an aborted transaction are
// not indexed; records appended after the build are seen by the next
// lookup without waiting for the follower.
func TestIndexHidesAbortedAndFollows(t *testing.T) {
	_, p := testPartition(t, vfs.NewMem(), "/data", nil)
	appendRecs(t, p, kv("a", "1"))
	x := openIndex(t, p, NewBudget(1<<20, ""))
	ctx := context.Background()
	spec := record.NewBatchSpec(0)
	spec.Transactional, spec.ProducerID = true, 7
	raw, err := record.Encode(nil, spec, []record.Record{{Key: []byte("a"), Value: []byte("aborted"), Timestamp: time.Now().UnixMilli()}})
	require.NoError(t, err)
	_, _, err = p.AppendBatch(raw)
	require.NoError(t, err)
	spec.Transactional = false
	ctl, err := record.EncodeControlBatch(nil, spec, 0, time.Now().UnixMilli(), record.ControlAbort, 0)
	require.NoError(t, err)
	_, _, err = p.AppendBatch(ctl)
	require.NoError(t, err)
	e, err := x.Lookup(ctx, Ref{Key: []byte("a")})
	require.NoError(t, err)
	assert.Equal(t, "1", string(e.Value))
	for i := range 100 {
		appendRecs(t, p, kv("b", fmt.Sprint(i)))
		e, err := x.Lookup(ctx, Ref{Key: []byte("b")})
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint(i), string(e.Value))
	}
	assert.Equal(t, []string{"a", "b"}, listed(t, x))
}

// TestIndexLongKeys: a key too long for a file name is found by its digest
// name, and only by it.
func TestIndexLongKeys(t *testing.T) {
	_, p := testPartition(t, vfs.NewMem(), "/data", nil)
	long := string(slices.Repeat([]byte("x"), 300))
	appendRecs(t, p, kv(long, "big"), kv("short", "small"))
	x := openIndex(t, p, NewBudget(1<<20, ""))
	ref, err := ParseName(Name([]byte(long)))
	require.NoError(t, err)
	require.NotNil(t, ref.Digest)
	e, err := x.Lookup(context.Background(), ref)
	require.NoError(t, err)
	assert.Equal(t, "big", string(e.Value))
	assert.ElementsMatch(t, []string{long, "short"}, listed(t, x))
}

// TestIndexDropsCleanedTombstones: keys written and deleted, whose
// tombstones the cleaner then removed, do not keep the table growing.
func TestIndexDropsCleanedTombstones(t *testing.T) {
	d, p := testPartition(t, vfs.NewMem(), "/data", map[string]string{
		"cleanup.policy": "compact", "delete.retention.ms": "0", "min.cleanable.dirty.ratio": "0.01", "segment.bytes": "65536",
	})
	var recs []record.Record
	for i := range 5000 {
		recs = append(recs, kv(fmt.Sprint("old", i), "v"))
	}
	for i := range 5000 {
		recs = append(recs, tombstone(fmt.Sprint("old", i)))
	}
	for i := 0; i < len(recs); i += 500 {
		appendRecs(t, p, recs[i:i+500]...)
	}
	x := openIndex(t, p, NewBudget(1<<30, ""))
	require.NoError(t, x.Ready(context.Background()))
	slots := x.Stats().TableBytes
	s := policies.NewScheduler(d, policies.Options{Logger: slog.New(slog.DiscardHandler)})
	for range 3 {
		require.NoError(t, p.Roll())
		_, err := s.CleanPartition(p.Engine(), true)
		require.NoError(t, err)
		appendRecs(t, p, kv("tick", "x")) // a record past the cleaned ones, for the next roll
	}
	var left int
	for _, r := range readAllRecords(t, p) {
		if r.Value == nil {
			left++
		}
	}
	require.Less(t, left, 100, "the cleaner removed the tombstones")
	tick := "x"
	model := map[string]*string{"tick": &tick}
	for i := range 8000 {
		v := fmt.Sprint(i)
		model[fmt.Sprint("new", i)] = &v
		recs = append(recs[:0], kv(fmt.Sprint("new", i), v))
		appendRecs(t, p, recs...)
	}
	checkModel(t, x, model, "old1", "old4999")
	assert.Equal(t, slots, x.Stats().TableBytes, "the table made room by dropping cleaned tombstones, not by growing")
}

// readAllRecords reads every data record of p.
func readAllRecords(t *testing.T, p backend.Partition) []record.Record {
	t.Helper()
	var out []record.Record
	var sc scanner
	_, err := sc.scan(context.Background(), p, 0, func(r *record.Record) error {
		out = append(out, record.Record{Offset: r.Offset, Key: clone(r.Key), Value: clone(r.Value)})
		return nil
	})
	require.NoError(t, err)
	return out
}

// TestIndexConcurrent: lookups and listings from several goroutines while
// another appends (run with -race); every key written before a lookup
// started is found with a value at least as new.
func TestIndexConcurrent(t *testing.T) {
	_, p := testPartition(t, vfs.NewMem(), "/data", map[string]string{"segment.bytes": "8192"})
	x := openIndex(t, p, NewBudget(MinMemoryBytes*4, ""))
	ctx := context.Background()
	var written atomic.Int64 // the last record appended, -1 before the first
	written.Store(-1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 3000 {
			appendRecs(t, p, kv(fmt.Sprint("k", i%500), fmt.Sprint(i)))
			written.Store(int64(i))
		}
	}()
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; ; j++ {
				select {
				case <-done:
					return
				default:
				}
				w := written.Load()
				if w < 0 {
					continue
				}
				if g == 0 && j%50 == 0 {
					assert.NoError(t, x.List(ctx, func([]byte) error { return nil }))
					continue
				}
				i := w - w%500 + int64(j%500)
				if i > w {
					i -= 500
				}
				if i < 0 {
					continue
				}
				e, err := x.Lookup(ctx, Ref{Key: []byte(fmt.Sprint("k", i%500))})
				if assert.NoError(t, err) {
					v, _ := strconv.ParseInt(string(e.Value), 10, 64)
					assert.GreaterOrEqual(t, v, i, "key k%d", i%500)
				}
			}
		}()
	}
	wg.Wait()
}
