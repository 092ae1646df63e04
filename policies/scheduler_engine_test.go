package policies

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"strings"
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

// dupLog writes n rounds over keys k0..k9 into p and rolls, so that a
// cleaning has something to drop.
func dupLog(t *testing.T, p *engine.Partition, rounds int) {
	t.Helper()
	for r := 0; r < rounds; r++ {
		for k := 0; k < 10; k++ {
			appendRecs(t, p, kv(fmt.Sprint("k", k), fmt.Sprintf("round %d value of some length", r)))
		}
	}
	require.NoError(t, p.Roll())
}

// TestCleanerConflictWithRetention: retention deletes a segment while a
// cleaning is about to swap; ReplaceSegments reports ErrConflict, the run
// is abandoned without advancing the cleaner checkpoint, and the next round
// cleans.
func TestCleanerConflictWithRetention(t *testing.T) {
	clk := newClock()
	mem := vfs.NewMem()
	d := openLogDir(t, mem, "/data", clk, map[string]string{
		"cleanup.policy": "compact,delete", "segment.bytes": "400", "retention.ms": "-1",
	})
	p := createPartition(t, d, "race", nil)
	dupLog(t, p, 5)
	s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), DedupeBufferSize: testBuffer})
	defer s.Stop()
	once := sync.Once{}
	s.setHook(func(ev string) {
		if ev == "replace" {
			once.Do(func() {
				_, err := p.DeleteOldestSegments(1, "test: racing retention")
				require.NoError(t, err)
			})
		}
	})
	before := p.FirstDirtyOffset()
	run, err := s.CleanPartition(p, true)
	require.ErrorIs(t, err, errAbandoned)
	require.ErrorIs(t, err, engine.ErrConflict)
	require.NotNil(t, run)
	assert.Contains(t, run.Outcome, "abandoned")
	assert.Equal(t, before, p.FirstDirtyOffset(), "checkpoint not advanced")
	for _, n := range listDir(t, mem, p.Dir()) {
		assert.False(t, strings.HasSuffix(n, ".cleaned") || strings.HasSuffix(n, ".swap"), "left %s", n)
	}
	st := s.State("race", 0)
	require.NotNil(t, st.LastCleaning)
	assert.Contains(t, st.LastCleaning.Outcome, "abandoned")

	run, err = s.CleanPartition(p, true)
	require.NoError(t, err)
	require.NotNil(t, run)
	assert.Equal(t, "done", run.Outcome)
	recs := readAll(t, p)
	keys := map[string]bool{}
	for _, r := range recs {
		assert.False(t, keys[string(r.Key)], "key %s once", r.Key)
		keys[string(r.Key)] = true
	}
}

// TestSchedulerStopAbandonsCleaning: Stop during a cleaning abandons it at
// the next batch; the log keeps its records and no .cleaned file remains.
func TestSchedulerStopAbandonsCleaning(t *testing.T) {
	clk := newClock()
	mem := vfs.NewMem()
	d := openLogDir(t, mem, "/data", clk, map[string]string{"cleanup.policy": "compact", "segment.bytes": "400"})
	p := createPartition(t, d, "stop", nil)
	dupLog(t, p, 5)
	before := readAll(t, p)
	s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), DedupeBufferSize: testBuffer})
	stopped := make(chan struct{})
	s.setHook(func(ev string) {
		if ev == "group" {
			go func() { s.Stop(); close(stopped) }()
			<-s.ctx.Done() // Stop has cancelled; the run notices at its next batch
		}
	})
	run, err := s.CleanPartition(p, true)
	<-stopped
	require.ErrorIs(t, err, errAbandoned)
	require.NotNil(t, run)
	assert.Equal(t, before, readAll(t, p))
	assert.Equal(t, int64(-1), p.FirstDirtyOffset())
	for _, n := range listDir(t, mem, p.Dir()) {
		assert.False(t, strings.HasSuffix(n, ".cleaned"), "left %s", n)
	}
}

// TestSchedulerBackgroundCleaning: a started scheduler with two cleaner
// threads compacts three dirty logs on its own, each once.
func TestSchedulerBackgroundCleaning(t *testing.T) {
	clk := newClock()
	d := openLogDir(t, vfs.NewMem(), "/data", clk, map[string]string{"cleanup.policy": "compact", "segment.bytes": "400"})
	var parts []*engine.Partition
	for i := 0; i < 3; i++ {
		p := createPartition(t, d, fmt.Sprint("bgc", i), nil)
		dupLog(t, p, 5)
		parts = append(parts, p)
	}
	s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), TickInterval: 2 * time.Millisecond,
		DedupeBufferSize: testBuffer, CleanerThreads: 2})
	s.Start()
	defer s.Stop()
	for i := range parts {
		// The run is recorded just after the checkpoint moves; wait for
		// the record (the test binary's -timeout bounds this).
		for s.State(fmt.Sprint("bgc", i), 0).Cleanings == 0 {
			time.Sleep(2 * time.Millisecond)
		}
	}
	for i, p := range parts {
		assert.Positive(t, p.FirstDirtyOffset())
		st := s.State(fmt.Sprint("bgc", i), 0)
		require.NotNil(t, st.LastCleaning)
		assert.Equal(t, "done", st.LastCleaning.Outcome)
		assert.Equal(t, int64(1), st.Cleanings)
		assert.Equal(t, int64(40), st.LastCleaning.RecordsDropped)
		assert.Len(t, readAll(t, p), 10)
	}
}

// TestSchedulerUnknownPartition: State and Lookup of what does not exist.
func TestSchedulerUnknownPartition(t *testing.T) {
	clk := newClock()
	d := openLogDir(t, vfs.NewMem(), "/data", clk, nil)
	createPartition(t, d, "known", nil)
	s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t)})
	defer s.Stop()
	_, ok := s.Lookup("nope", 0)
	assert.False(t, ok)
	_, ok = s.Lookup("known", 3)
	assert.False(t, ok)
	assert.Equal(t, -1, s.State("nope", 0).Partition)
	st, ok := s.Lookup("known", 0)
	assert.True(t, ok)
	assert.Equal(t, "known", st.Topic)
	assert.Equal(t, "delete", st.CleanupPolicy)
	assert.NotEmpty(t, st.Explanations)

	// A deleted topic's state is forgotten at the next pass.
	require.NoError(t, s.RunRetention())
	require.NoError(t, d.DeleteTopic("known"))
	require.NoError(t, s.RunRetention())
	s.mu.Lock()
	n := len(s.mu.parts)
	s.mu.Unlock()
	assert.Zero(t, n)
	_, ok = s.Lookup("known", 0)
	assert.False(t, ok)
}

// TestSchedulerSoak runs a started scheduler (retention and compaction on a
// compact,delete topic, fast ticks, a clock racing ahead) against a writer
// and readers: every read sees strictly increasing offsets and exactly the
// records appended at them, and the log end is what was appended.
func TestSchedulerSoak(t *testing.T) {
	clk := newClock()
	d := openLogDir(t, vfs.NewMem(), "/data", clk, map[string]string{
		"cleanup.policy": "compact,delete", "segment.bytes": "1024", "retention.bytes": "6000",
		"retention.check.interval.ms": "10", "delete.retention.ms": "50", "file.delete.delay.ms": "20",
		"min.cleanable.dirty.ratio": "0.2",
	})
	p := createPartition(t, d, "soak", nil)
	s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), TickInterval: time.Millisecond,
		DedupeBufferSize: testBuffer, CleanerThreads: 2})
	s.Start()
	defer s.Stop()
	m := &model{recs: map[int64]record.Record{}}
	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		defer done.Store(true)
		for i := 0; i < 3000; i++ {
			rec := record.Record{Key: fmt.Appendf(nil, "k%d", i%50), Value: fmt.Appendf(nil, "v%d", i), Timestamp: -1}
			if i%9 == 0 {
				rec.Value = nil
			}
			first, _, err := p.Append([]record.Record{rec})
			if !assert.NoError(t, err) {
				return
			}
			m.put(first, []record.Record{rec})
			clk.Advance(time.Millisecond)
		}
	}()
	for r := 0; r < 2; r++ {
		go func() {
			defer wg.Done()
			for !done.Load() {
				checkRead(t, m, readAll(t, p))
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int64(3000), p.LogEndOffset())
	st := s.State("soak", 0)
	t.Logf("cleanings %d, segments deleted %d, log start %d, last cleaning %+v", st.Cleanings, st.SegmentsDeleted, p.LogStartOffset(), st.LastCleaning)
	assert.Positive(t, st.SegmentsDeleted+st.Cleanings)
}

// TestSchedulerFlushMs: with flush.ms set, housekeeping flushes a partition
// once flush.ms has passed since its last flush, advancing the recovery
// point.
func TestSchedulerFlushMs(t *testing.T) {
	clk := newClock()
	d := openLogDir(t, vfs.NewMem(), "/data", clk, map[string]string{"flush.ms": "1000"})
	p := createPartition(t, d, "fl", nil)
	s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), DedupeBufferSize: testBuffer})
	defer s.Stop()
	require.NoError(t, s.RunRetention()) // first sight
	appendRecs(t, p, kv("a", "1"), kv("b", "2"))
	rp := p.RecoveryPoint()
	require.Less(t, rp, p.LogEndOffset())
	clk.Advance(500 * time.Millisecond)
	require.NoError(t, s.RunRetention())
	assert.Equal(t, rp, p.RecoveryPoint(), "not yet due")
	clk.Advance(600 * time.Millisecond)
	require.NoError(t, s.RunRetention())
	assert.Equal(t, p.LogEndOffset(), p.RecoveryPoint(), "flushed on flush.ms")
	assert.Equal(t, clk.Now(), s.State("fl", 0).LastFlush)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestCleanerProgressLog: a cleaning logs its progress every ProgressBytes.
func TestCleanerProgressLog(t *testing.T) {
	clk := newClock()
	d := openLogDir(t, vfs.NewMem(), "/data", clk, map[string]string{"cleanup.policy": "compact", "segment.bytes": "400"})
	p := createPartition(t, d, "prog", nil)
	dupLog(t, p, 5)
	var buf syncBuffer
	s := NewScheduler(d, Options{Now: clk.Now, Logger: slog.New(slog.NewTextHandler(&buf, nil)), ProgressBytes: 1000, DedupeBufferSize: testBuffer})
	defer s.Stop()
	_, err := s.CleanPartition(p, true)
	require.NoError(t, err)
	out := buf.String()
	assert.GreaterOrEqual(t, strings.Count(out, "cleaner progress"), 2, out)
	assert.Contains(t, out, "cleaned log")
}

// TestCleanerCorruptSegmentBacksOff: corruption found while cleaning fails
// the run (nothing changes), is reported in State, and the log is left alone
// for a while instead of failing at every tick.
func TestCleanerCorruptSegmentBacksOff(t *testing.T) {
	clk := newClock()
	mem := vfs.NewMem()
	d := openLogDir(t, mem, "/data", clk, map[string]string{"cleanup.policy": "compact", "segment.bytes": "400"})
	p := createPartition(t, d, "bad", nil)
	dupLog(t, p, 5)
	segs := p.Segments()
	f, err := mem.OpenFile(fmt.Sprintf("%s/%020d.log", p.Dir(), segs[1].BaseOffset), os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("garbage!"), 70) // inside the first batch's records: CRC mismatch
	require.NoError(t, err)
	require.NoError(t, f.Close())

	s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), DedupeBufferSize: testBuffer})
	defer s.Stop()
	runs, err := s.RunCleaner()
	require.ErrorIs(t, err, engine.ErrCorrupt)
	require.Len(t, runs, 1)
	assert.Equal(t, int64(-1), p.FirstDirtyOffset())
	st := s.State("bad", 0)
	assert.Contains(t, st.LastError, "clean")
	assert.Contains(t, st.CleanerExplanation, "not cleaned: the last cleaning failed")

	runs, err = s.RunCleaner()
	require.NoError(t, err)
	assert.Empty(t, runs, "backing off")
	clk.Advance(cleanerBackoff + time.Second)
	runs, err = s.RunCleaner()
	require.Error(t, err)
	assert.Len(t, runs, 1, "retried after the back-off")
}

// TestCleaningDoesNotBlockAppendsOrReads holds a cleaning in the middle of
// its work and appends, reads, rolls and runs retention meanwhile: none of
// it waits for the cleaner.
func TestCleaningDoesNotBlockAppendsOrReads(t *testing.T) {
	clk := newClock()
	d := openLogDir(t, vfs.NewMem(), "/data", clk, map[string]string{"cleanup.policy": "compact,delete", "segment.bytes": "400"})
	p := createPartition(t, d, "busy", nil)
	dupLog(t, p, 5)
	s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), DedupeBufferSize: testBuffer})
	defer s.Stop()
	inside, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.setHook(func(ev string) {
		if ev == "replace" {
			once.Do(func() { close(inside); <-release })
		}
	})
	done := make(chan error, 1)
	go func() { _, err := s.CleanPartition(p, true); done <- err }()
	<-inside
	leo := p.LogEndOffset()
	appendRecs(t, p, kv("during", "the cleaning"))
	assert.Equal(t, leo+1, p.LogEndOffset())
	recs := readAll(t, p)
	assert.Equal(t, "during", string(recs[len(recs)-1].Key))
	require.NoError(t, p.Roll())
	require.NoError(t, s.RunRetention())
	st := s.State("busy", 0)
	assert.True(t, st.Cleaning)
	assert.Equal(t, "the log is being cleaned now", st.CleanerExplanation)
	close(release)
	require.NoError(t, <-done)
	recs = readAll(t, p)
	assert.Equal(t, "during", string(recs[len(recs)-1].Key))
}

// TestSchedulerNoCleaner: with no cleaner thread (log.cleaner.threads=0,
// as in Kafka) a dirty compacted log is never cleaned, a forced cleaning
// is refused, retention still runs, and stats says why.
func TestSchedulerNoCleaner(t *testing.T) {
	clk := newClock()
	d := openLogDir(t, vfs.NewMem(), "/data", clk, map[string]string{
		"cleanup.policy": "compact,delete", "segment.bytes": "400", "retention.ms": "3600000",
	})
	p := createPartition(t, d, "dirty", nil)
	dupLog(t, p, 5)
	s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), CleanerThreads: -1, TickInterval: time.Millisecond})
	s.Start()
	defer s.Stop()
	runs, err := s.RunCleaner()
	require.NoError(t, err)
	assert.Empty(t, runs)
	_, err = s.CleanPartition(p, true)
	require.ErrorIs(t, err, ErrNoCleaner)
	st := s.State("dirty", 0)
	assert.Zero(t, st.Cleanings)
	assert.Contains(t, st.CleanerExplanation, "log.cleaner.threads=0")
	assert.Greater(t, st.DirtyRatio, 0.5, "dirty, and left so")

	clk.Advance(2 * time.Hour)
	require.NoError(t, s.RunRetention())
	assert.Empty(t, readAll(t, p), "retention runs without a cleaner")
}
