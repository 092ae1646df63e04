package policies

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

const mib = 1 << 20

// TestRetentionOperatorScenario is the scenario: segment.bytes
// 5 MiB, retention.bytes 10 MiB, 20 MiB written. After a retention pass at
// most retention.bytes + segment.bytes remain, the oldest segments became
// .deleted and vanish after file.delete.delay.ms, and reading starts at the
// new log start offset.
func TestRetentionOperatorScenario(t *testing.T) {
	clk := newClock()
	dir := t.TempDir()
	fs := vfs.OS
	d := openLogDir(t, fs, dir, clk, map[string]string{
		"segment.bytes":        strconv.Itoa(5 * mib),
		"retention.bytes":      strconv.Itoa(10 * mib),
		"retention.ms":         "-1",
		"file.delete.delay.ms": "60000",
	})
	p := createPartition(t, d, "ops", nil)

	value := bytes.Repeat([]byte("x"), 1000)
	var written int64
	for i := 0; written < 20*mib; i++ {
		recs := make([]record.Record, 100)
		for j := range recs {
			recs[j] = record.Record{Key: fmt.Appendf(nil, "k%d", i*100+j), Value: value, Timestamp: -1}
			written += int64(len(value) + 10)
		}
		appendRecs(t, p, recs...)
	}
	before := p.Segments()
	require.GreaterOrEqual(t, len(before), 4, "20 MiB in 5 MiB segments")
	leo := p.LogEndOffset()

	s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), DedupeBufferSize: testBuffer})
	defer s.Stop()
	require.NoError(t, s.RunRetention())

	after := p.Segments()
	var total int64
	for _, si := range after {
		total += si.Size
	}
	assert.LessOrEqual(t, total, int64(15*mib), "at most retention.bytes + segment.bytes remain")
	assert.Less(t, len(after), len(before))
	assert.Equal(t, leo, p.LogEndOffset(), "retention never loses the end")
	assert.Equal(t, after[0].BaseOffset, p.LogStartOffset(), "log start moves to the first remaining segment")

	pdir := p.Dir()
	names := listDir(t, fs, pdir)
	deleted := len(before) - len(after)
	assert.Equal(t, deleted, countSuffix(names, ".log.deleted"), "deleted segments wait as .deleted: %v", names)

	st := s.State("ops", 0)
	assert.Equal(t, int64(deleted), st.SegmentsDeleted)
	assert.Positive(t, st.BytesDeleted)
	assert.Contains(t, st.LastDeletionReason, "retention.bytes")

	recs := readAll(t, p)
	require.NotEmpty(t, recs)
	assert.Equal(t, p.LogStartOffset(), recs[0].Offset, "reading starts at the new log start offset")
	assert.Equal(t, leo-1, recs[len(recs)-1].Offset)

	// Before file.delete.delay.ms nothing is unlinked; after, everything is.
	clk.Advance(59 * time.Second)
	require.NoError(t, s.RunRetention())
	assert.Equal(t, deleted, countSuffix(listDir(t, fs, pdir), ".log.deleted"))
	clk.Advance(2 * time.Second)
	require.NoError(t, s.RunRetention())
	names = listDir(t, fs, pdir)
	assert.Zero(t, countSuffix(names, ".deleted"), "purged after file.delete.delay.ms: %v", names)
	for _, si := range before[:deleted] {
		_, err := fs.Stat(filepath.Join(pdir, fmt.Sprintf("%020d.log", si.BaseOffset)))
		assert.Error(t, err)
	}
}

// TestRetentionTime deletes segments whose largest timestamp is older than
// retention.ms, by the injected clock, and keeps the active segment.
func TestRetentionTime(t *testing.T) {
	clk := newClock()
	d := openLogDir(t, vfs.NewMem(), "/data", clk, map[string]string{
		"segment.bytes": "1024", "retention.ms": "3600000",
	})
	p := createPartition(t, d, "timed", nil)
	for i := 0; i < 60; i++ {
		appendRecs(t, p, kv(fmt.Sprint(i), "some value of forty bytes or so ......"))
	}
	old := len(p.Segments())
	require.Greater(t, old, 2)

	s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), DedupeBufferSize: testBuffer})
	defer s.Stop()
	clk.Advance(59 * time.Minute)
	require.NoError(t, s.RunRetention())
	assert.Len(t, p.Segments(), old, "nothing older than retention.ms yet")

	clk.Advance(2 * time.Minute)
	appendRecs(t, p, kv("new", "fresh")) // lands in the active segment
	require.NoError(t, s.RunRetention())
	segs := p.Segments()
	require.NotEmpty(t, segs)
	assert.Len(t, segs, 1, "every sealed segment expired; the active one stays")
	recs := readAll(t, p)
	require.NotEmpty(t, recs)
	assert.Equal(t, "new", string(recs[len(recs)-1].Key))
	assert.Equal(t, p.LogStartOffset(), recs[0].Offset)
	st := s.State("timed", 0)
	assert.Contains(t, st.LastDeletionReason, "retention.ms=3600000")
	assert.Contains(t, st.RetentionExplanation, "active segment")
}

// TestRetentionQuietTopicRollsAndExpires: a topic that receives nothing
// more rolls its active segment on segment.ms, and then the rolled segment
// expires on retention.ms.
func TestRetentionQuietTopicRollsAndExpires(t *testing.T) {
	clk := newClock()
	d := openLogDir(t, vfs.NewMem(), "/data", clk, map[string]string{
		"segment.ms": "3600000", "retention.ms": "7200000",
	})
	p := createPartition(t, d, "quiet", nil)
	appendRecs(t, p, kv("a", "1"), kv("b", "2"))
	leo := p.LogEndOffset()

	s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), DedupeBufferSize: testBuffer})
	defer s.Stop()
	require.NoError(t, s.RunRetention())
	require.Len(t, p.Segments(), 1)
	st := s.State("quiet", 0)
	assert.Contains(t, st.RetentionExplanation, "is the active segment")
	assert.Contains(t, st.RetentionExplanation, "segment.ms=3600000")

	clk.Advance(61 * time.Minute)
	require.NoError(t, s.RunRetention())
	segs := p.Segments()
	require.Len(t, segs, 2, "rolled on segment.ms")
	assert.True(t, segs[1].Active)
	assert.Len(t, readAll(t, p), 2, "rolled but not yet expired")

	clk.Advance(60 * time.Minute)
	require.NoError(t, s.RunRetention())
	segs = p.Segments()
	require.Len(t, segs, 1, "the rolled segment expired")
	assert.Equal(t, leo, p.LogStartOffset())
	assert.Equal(t, leo, p.LogEndOffset())
	assert.Empty(t, readAll(t, p))
}

// TestRetentionActiveSegmentSurvives: no retention setting deletes the
// active segment.
func TestRetentionActiveSegmentSurvives(t *testing.T) {
	for _, kvs := range []map[string]string{
		{"retention.ms": "0"},
		{"retention.bytes": "0"},
		{"retention.ms": "0", "retention.bytes": "0", "cleanup.policy": "compact,delete"},
	} {
		t.Run(fmt.Sprint(kvs), func(t *testing.T) {
			clk := newClock()
			d := openLogDir(t, vfs.NewMem(), "/data", clk, kvs)
			p := createPartition(t, d, "keep", nil)
			appendRecs(t, p, kv("a", "1"), kv("b", "2"))
			s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), DedupeBufferSize: testBuffer})
			defer s.Stop()
			// Long past retention.ms, short of segment.ms (7 days), which
			// would roll the segment and then let it expire.
			clk.Advance(6 * 24 * time.Hour)
			require.NoError(t, s.RunRetention())
			assert.Len(t, readAll(t, p), 2)
			assert.Contains(t, s.State("keep", 0).RetentionExplanation, "is the active segment")
			assert.Equal(t, int64(0), p.LogStartOffset())
			assert.Len(t, p.Segments(), 1)
		})
	}
}

// TestSchedulerBackground runs the scheduler for real (ticks of a few ms)
// and waits for retention to happen on its own, then stops it.
func TestSchedulerBackground(t *testing.T) {
	clk := newClock()
	d := openLogDir(t, vfs.NewMem(), "/data", clk, map[string]string{
		"segment.bytes": "1024", "retention.bytes": "2048", "retention.check.interval.ms": "1",
	})
	p := createPartition(t, d, "bg", nil)
	for i := 0; i < 100; i++ {
		appendRecs(t, p, kv(fmt.Sprint(i), "some value of forty bytes or so ......"))
	}
	s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), TickInterval: 2 * time.Millisecond})
	s.Start()
	for p.LogStartOffset() == 0 { // the test binary's -timeout bounds this
		clk.Advance(time.Millisecond) // retention.check.interval.ms on the injected clock
		time.Sleep(2 * time.Millisecond)
	}
	s.Stop()
	s.Stop() // idempotent
	var total int64
	for _, si := range p.Segments() {
		total += si.Size
	}
	assert.LessOrEqual(t, total, int64(2048+1024))
}
