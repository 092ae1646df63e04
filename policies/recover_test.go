package policies

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/vfs"
	"github.com/topicfs/topicfs/internal/panics"
)

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// panicIn makes task panic for topic until the test ends.
func panicIn(t *testing.T, task, topic string) {
	hook := func(tk, tp string, partition int) {
		if tk == task && tp == topic {
			panic("injected panic in " + task)
		}
	}
	panicHook.Store(&hook)
	t.Cleanup(func() { panicHook.Store(nil) })
}

// retentionLogs makes topics whose retention.bytes lets retention delete
// their oldest segments.
func retentionLogs(t *testing.T, clk *fakeClock, topics ...string) (*engine.LogDir, []*engine.Partition) {
	d := openLogDir(t, vfs.NewMem(), "/data", clk, map[string]string{
		"segment.bytes": "1024", "retention.bytes": "2048", "retention.check.interval.ms": "1",
	})
	var parts []*engine.Partition
	for _, topic := range topics {
		p := createPartition(t, d, topic, nil)
		for i := 0; i < 100; i++ {
			appendRecs(t, p, kv(fmt.Sprint(i), "some value of forty bytes or so ......"))
		}
		parts = append(parts, p)
	}
	return d, parts
}

// TestPanicInHousekeepingStopsOnePartition: a panic in the housekeeping of
// one partition is logged with its stack and counted, stops that
// partition's policies (stats say why and since when) and leaves the
// other partition's retention running, then and in later passes.
func TestPanicInHousekeepingStopsOnePartition(t *testing.T) {
	clk := newClock()
	d, parts := retentionLogs(t, clk, "boom", "calm")
	boom, calm := parts[0], parts[1]
	logs := &lockedBuf{}
	s := NewScheduler(d, Options{Now: clk.Now, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	defer s.Stop()
	before := panics.CountOf("policies", "housekeeping")
	panicIn(t, "housekeeping", "boom")

	err := s.RunRetention()
	var perr *panics.Error
	require.True(t, errors.As(err, &perr), "the pass reports the panic: %v", err)
	assert.Positive(t, calm.LogStartOffset(), "the other partition's retention ran")
	assert.Zero(t, boom.LogStartOffset())
	assert.Equal(t, before+1, panics.CountOf("policies", "housekeeping"))
	out := logs.String()
	assert.Contains(t, out, "where=policies op=housekeeping")
	assert.Contains(t, out, "topic=boom partition=0")
	assert.Contains(t, out, "policies.(*Scheduler).guard", "the log holds the stack")

	st := s.State("boom", 0)
	require.NotNil(t, st.PoliciesStopped)
	assert.Equal(t, "panic: injected panic in housekeeping", st.PoliciesStopped.Reason)
	assert.Equal(t, "housekeeping", st.PoliciesStopped.Task)
	assert.Equal(t, clk.Now(), st.PoliciesStopped.At)
	assert.Contains(t, st.Explanations[0], "stopped at 2026-01-01T00:00:00Z after a panic: injected panic in housekeeping")
	assert.Contains(t, st.LastError, "injected panic")
	js, err := json.Marshal(st)
	require.NoError(t, err)
	assert.Contains(t, string(js), `"policies_stopped":{"reason":"panic: injected panic in housekeeping","task":"housekeeping","at":"2026-01-01T00:00:00Z"}`)
	assert.Nil(t, s.State("calm", 0).PoliciesStopped)

	// Stopped stays stopped (until a remount), also without the fault;
	// the other partition goes on.
	panicHook.Store(nil)
	for i := 0; i < 100; i++ {
		appendRecs(t, boom, kv("more", "some value of forty bytes or so ......"))
		appendRecs(t, calm, kv("more", "some value of forty bytes or so ......"))
	}
	start := calm.LogStartOffset()
	clk.Advance(time.Second)
	require.NoError(t, s.RunRetention())
	assert.Greater(t, calm.LogStartOffset(), start)
	assert.Zero(t, boom.LogStartOffset())
	assert.Equal(t, before+1, panics.CountOf("policies", "housekeeping"))
}

// TestPanicInBackgroundHousekeeping: the same in the scheduler's own
// loop: it survives the panic and keeps retaining the other partition.
func TestPanicInBackgroundHousekeeping(t *testing.T) {
	clk := newClock()
	d, parts := retentionLogs(t, clk, "boom", "calm")
	boom, calm := parts[0], parts[1]
	s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), TickInterval: 2 * time.Millisecond})
	panicIn(t, "housekeeping", "boom")
	s.Start()
	defer s.Stop()
	// The test binary's -timeout bounds this.
	for calm.LogStartOffset() == 0 || s.State("boom", 0).PoliciesStopped == nil {
		clk.Advance(time.Millisecond)
		time.Sleep(2 * time.Millisecond)
	}
	assert.Zero(t, boom.LogStartOffset())
}

// TestPanicInCleaningStopsOnePartition: a cleaning that panics halfway
// stops its partition's policies; its cleaner thread goes back to work
// (the one thread cleans the next partition), and the stopped partition is
// neither picked again nor cleanable on demand.
func TestPanicInCleaningStopsOnePartition(t *testing.T) {
	clk := newClock()
	d := openLogDir(t, vfs.NewMem(), "/data", clk, map[string]string{"cleanup.policy": "compact", "segment.bytes": "400"})
	boom := createPartition(t, d, "boom", nil)
	calm := createPartition(t, d, "calm", nil)
	dupLog(t, boom, 5)
	dupLog(t, calm, 5)
	s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), DedupeBufferSize: testBuffer, CleanerThreads: 1})
	defer s.Stop()
	var once atomic.Bool
	s.setHook(func(event string) {
		if event == "group" && once.CompareAndSwap(false, true) {
			panic("injected panic while cleaning")
		}
	})
	before := panics.CountOf("policies", "cleaner")

	run, err := s.CleanPartition(boom, false)
	var perr *panics.Error
	require.True(t, errors.As(err, &perr), "%v", err)
	assert.Nil(t, run)
	assert.Equal(t, before+1, panics.CountOf("policies", "cleaner"))
	st := s.State("boom", 0)
	require.NotNil(t, st.PoliciesStopped)
	assert.Equal(t, "cleaner", st.PoliciesStopped.Task)
	assert.False(t, st.Cleaning)
	assert.Len(t, readAll(t, boom), 50, "the panicked cleaning changed nothing readable")

	runs, err := s.RunCleaner()
	require.NoError(t, err)
	require.Len(t, runs, 1, "only the other partition is cleaned")
	assert.Equal(t, "done", runs[0].Outcome)
	assert.Len(t, readAll(t, calm), 10)
	_, err = s.CleanPartition(boom, true)
	assert.ErrorIs(t, err, errStopped)
}
