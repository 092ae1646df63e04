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

	"github.com/topicfs/topicfs/engine"
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

// TestRetentionQuietTopicExpires: a topic that receives nothing more
// loses its records once retention.ms has passed since the newest, even
// though they sit in the active segment and segment.ms (7 days) is far
// off: as a broker does, retention rolls the active segment (a roll with
// reason "retention") and deletes it. Nothing rolls before that.
func TestRetentionQuietTopicExpires(t *testing.T) {
	clk := newClock()
	d := openLogDir(t, vfs.NewMem(), "/data", clk, map[string]string{"retention.ms": "7200000"})
	p := createPartition(t, d, "quiet", nil)
	appendRecs(t, p, kv("a", "1"), kv("b", "2"))
	leo := p.LogEndOffset()

	s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), DedupeBufferSize: testBuffer})
	defer s.Stop()
	clk.Advance(2 * time.Hour)
	require.NoError(t, s.RunRetention())
	require.Len(t, p.Segments(), 1, "exactly retention.ms old: kept, and not rolled")
	assert.Zero(t, p.Stats().Rolls)
	st := s.State("quiet", 0)
	assert.Contains(t, st.RetentionExplanation, "active segment")
	assert.Contains(t, st.RetentionExplanation, "retention.ms=7200000")

	clk.Advance(time.Millisecond)
	require.NoError(t, s.RunRetention())
	segs := p.Segments()
	require.Len(t, segs, 1, "the expired active segment was replaced by an empty one")
	assert.True(t, segs[0].Active)
	assert.Equal(t, leo, segs[0].BaseOffset, "the new active segment starts at the old log end offset")
	assert.Zero(t, segs[0].Size)
	assert.Equal(t, leo, p.LogStartOffset())
	assert.Equal(t, leo, p.LogEndOffset())
	assert.Empty(t, readAll(t, p))
	es := p.Stats()
	assert.Equal(t, int64(1), es.Rolls, "the roll counts as a roll")
	assert.Equal(t, engine.RollRetention, es.LastRollReason)
	assert.Equal(t, int64(1), es.SegmentsDeleted)
	st = s.State("quiet", 0)
	assert.Contains(t, st.LastDeletionReason, "retention.ms=7200000")
	assert.Contains(t, st.RetentionExplanation, "empty")

	// An empty active segment is never deleted, and appends go on at the end.
	clk.Advance(24 * time.Hour)
	require.NoError(t, s.RunRetention())
	assert.Equal(t, int64(1), p.Stats().Rolls)
	assert.Equal(t, leo, appendRecs(t, p, kv("c", "3")))
	assert.Len(t, readAll(t, p), 1)
}

// TestRetentionDeletesExpiredActiveSegment: every retention setting that
// covers the active segment deletes it, as Kafka's retention does:
// retention.ms=0 once its newest record is older than now, and
// retention.bytes=0 at once.
func TestRetentionDeletesExpiredActiveSegment(t *testing.T) {
	for _, kvs := range []map[string]string{
		{"retention.ms": "0"},
		{"retention.bytes": "0"},
		{"retention.ms": "0", "retention.bytes": "0", "cleanup.policy": "compact,delete"},
	} {
		t.Run(fmt.Sprint(kvs), func(t *testing.T) {
			clk := newClock()
			d := openLogDir(t, vfs.NewMem(), "/data", clk, kvs)
			p := createPartition(t, d, "gone", nil)
			appendRecs(t, p, kv("a", "1"), kv("b", "2"))
			s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), DedupeBufferSize: testBuffer})
			defer s.Stop()
			clk.Advance(time.Second)
			require.NoError(t, s.RunRetention())
			assert.Empty(t, readAll(t, p))
			assert.Equal(t, int64(2), p.LogStartOffset())
			require.Len(t, p.Segments(), 1)
			assert.Equal(t, engine.RollRetention, p.Stats().LastRollReason)
		})
	}
}

// TestRetentionKeepsRecordsAppendedAfterThePlan: retention plans on a list
// of segments and deletes later under the partition's lock; records
// appended to the active segment in between are not deleted with it.
func TestRetentionKeepsRecordsAppendedAfterThePlan(t *testing.T) {
	clk := newClock()
	d := openLogDir(t, vfs.NewMem(), "/data", clk, map[string]string{"retention.ms": "1000"})
	p := createPartition(t, d, "race", nil)
	appendRecs(t, p, kv("a", "1"))
	clk.Advance(2 * time.Second)
	segs := p.Segments()
	n, reason := RetentionPlan(segs, p.Config(), p.LogStartOffset(), clk.Now())
	require.Equal(t, 1, n, "the active segment expired")
	appendRecs(t, p, kv("b", "2")) // lands in the active segment after the plan
	k, _, err := p.DeleteSegmentsBelow(DeleteEnd(segs, n), reason)
	require.NoError(t, err)
	assert.Zero(t, k)
	assert.Len(t, readAll(t, p), 2)
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
