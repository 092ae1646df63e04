package policies

import (
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

// experimentPrefix makes each record's value 27 bytes plus its counter in
// decimal, so that an uncompressed single-record batch is 95 bytes plus the
// counter's digits (61 bytes of batch header, 7 of record framing): about
// 100 bytes, as in the experiment of issue #21.
const experimentPrefix = "retention.bytes experiment "

// appendCounted appends one single-record batch per counter value in
// [from, to), the value being experimentPrefix and the counter.
func appendCounted(t *testing.T, p *engine.Partition, from, to int) {
	t.Helper()
	const chunk = 4096
	groups := make([][]record.Record, 0, chunk)
	flush := func() {
		if len(groups) == 0 {
			return
		}
		_, _, err := p.AppendEach(groups)
		require.NoError(t, err)
		groups = groups[:0]
	}
	for i := from; i < to; i++ {
		v := experimentPrefix + strconv.Itoa(i)
		groups = append(groups, []record.Record{{Value: []byte(v), Timestamp: -1}})
		if len(groups) == chunk {
			flush()
		}
	}
	flush()
}

func segmentBases(p *engine.Partition) []int64 {
	var out []int64
	for _, s := range p.Segments() {
		out = append(out, s.BaseOffset)
	}
	return out
}

// TestRetentionCanonicalExperiment is the experiment of issue #21, which a
// Kafka broker answers the same way: segment.bytes=5242880,
// retention.bytes=10485760, ~100-byte uncompressed single-record batches.
// The segments start at 0, 52539, 104918 and 157316. With two sealed
// segments and the active one nothing is deleted (deleting segment 0 would
// leave less than retention.bytes); with three sealed segments only
// segment 0 goes: it is renamed .deleted and its files are unlinked
// file.delete.delay.ms (60 s) later, by the injected clock.
func TestRetentionCanonicalExperiment(t *testing.T) {
	clk := newClock()
	fs := vfs.OS
	d := openLogDir(t, fs, t.TempDir(), clk, map[string]string{
		"segment.bytes":        "5242880",
		"retention.bytes":      "10485760",
		"file.delete.delay.ms": "60000",
	})
	p := createPartition(t, d, "experiment", nil)
	s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(t), DedupeBufferSize: testBuffer})
	defer s.Stop()

	// First run: 119050 records, counters 0 to 119049.
	appendCounted(t, p, 0, 119050)
	require.Equal(t, []int64{0, 52539, 104918}, segmentBases(p))
	segs := p.Segments()
	assert.Equal(t, int64(52539*95+251585), segs[0].Size, "batches of 95 bytes plus the counter's digits")
	require.NoError(t, s.RunRetention())
	assert.Equal(t, []int64{0, 52539, 104918}, segmentBases(p), "two sealed segments and the active one: nothing deleted")
	assert.Equal(t, int64(0), p.LogStartOffset())
	assert.Zero(t, countSuffix(listDir(t, fs, p.Dir()), ".deleted"))

	// Second run: 40000 more records, counters from 0 again.
	appendCounted(t, p, 0, 40000)
	require.Equal(t, []int64{0, 52539, 104918, 157316}, segmentBases(p))
	clk.Advance(time.Second)
	require.NoError(t, s.RunRetention())
	assert.Equal(t, []int64{52539, 104918, 157316}, segmentBases(p), "three sealed segments: only segment 0 deleted")
	assert.Equal(t, int64(52539), p.LogStartOffset())
	names := listDir(t, fs, p.Dir())
	for _, ext := range []string{".log", ".index", ".timeindex"} {
		assert.Contains(t, names, fmt.Sprintf("%020d%s.deleted", 0, ext))
	}
	assert.Equal(t, 3, countSuffix(names, ".deleted"), "only segment 0: %v", names)
	st := s.State("experiment", 0)
	assert.Equal(t, int64(1), st.SegmentsDeleted)
	assert.Contains(t, st.LastDeletionReason, "retention.bytes=10485760")

	// file.delete.delay.ms later the files are gone, not before.
	clk.Advance(59 * time.Second)
	require.NoError(t, s.RunRetention())
	assert.Equal(t, 3, countSuffix(listDir(t, fs, p.Dir()), ".deleted"), "still within file.delete.delay.ms")
	clk.Advance(time.Second)
	require.NoError(t, s.RunRetention())
	names = listDir(t, fs, p.Dir())
	assert.Zero(t, countSuffix(names, ".deleted"), "unlinked after file.delete.delay.ms: %v", names)
	_, err := fs.Stat(filepath.Join(p.Dir(), fmt.Sprintf("%020d.log", 0)))
	assert.Error(t, err)
	assert.Equal(t, []int64{52539, 104918, 157316}, segmentBases(p))
}
