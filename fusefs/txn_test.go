package fusefs

import (
	"encoding/json"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
)

// txnAppend appends, as a transactional producer pid sends it, a batch of
// values (sequences from seq) to p.
func txnAppend(t *testing.T, p *engine.Partition, pid int64, seq int32, values ...string) {
	t.Helper()
	spec := record.NewBatchSpec(0)
	spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence, spec.Transactional = pid, 0, seq, true
	recs := make([]record.Record, len(values))
	now := time.Now().UnixMilli()
	for i, v := range values {
		recs[i] = record.Record{Offset: int64(i), Timestamp: now, Value: []byte(v)}
	}
	raw, err := record.Encode(nil, spec, recs)
	require.NoError(t, err)
	_, _, err = p.AppendBatch(raw)
	require.NoError(t, err)
}

// txnEnd appends producer pid's COMMIT (commit) or ABORT marker to p.
func txnEnd(t *testing.T, p *engine.Partition, pid int64, commit bool) {
	t.Helper()
	spec := record.NewBatchSpec(0)
	spec.ProducerID, spec.ProducerEpoch = pid, 0
	typ := record.ControlAbort
	if commit {
		typ = record.ControlCommit
	}
	raw, err := record.EncodeControlBatch(nil, spec, 0, time.Now().UnixMilli(), typ, 0)
	require.NoError(t, err)
	_, _, err = p.AppendBatch(raw)
	require.NoError(t, err)
}

// lsoOf reads last_stable_offset and log_end_offset from a stats file.
func lsoOf(t *testing.T, raw string) [2]int64 {
	t.Helper()
	var st struct {
		LSO int64 `json:"last_stable_offset"`
		LEO int64 `json:"log_end_offset"`
	}
	require.NoError(t, json.Unmarshal([]byte(raw), &st), raw)
	return [2]int64{st.LSO, st.LEO}
}

// TestViewsStopAtLastStableOffset: records of a transaction whose COMMIT
// or ABORT marker is not written yet, and every record after them, are
// not in the views (as a broker serves read_committed readers: up to the
// last stable offset, which stats shows); when the COMMIT comes, the
// views grow past it and tail -f shows the records; aborted ones never
// show. An open transaction still holds the views after a remount.
func TestViewsStopAtLastStableOffset(t *testing.T) {
	data := t.TempDir()
	m := newTestMountAt(t, data, false)
	m.sh(t, `mkdir $MNT/tx && echo before > $MNT/tx/0/append`)
	p := m.partition(t, "tx", 0)
	txnAppend(t, p, 7, 0, "open-1", "open-2") // 1..2
	m.sh(t, `echo after >> $MNT/tx/0/append`) // 3
	assert.Equal(t, "before\n", m.sh(t, `cat $MNT/tx/0/records`))
	assert.Equal(t, "1\n", m.sh(t, `wc -l < $MNT/tx/0/records.jsonl`))
	assert.Equal(t, "before\nbefore\nbefore\n", m.sh(t, `cat $MNT/tx/0/by-offset/0 $MNT/tx/0/by-time/0 $MNT/tx/0/by-offset/-5`))
	assert.Equal(t, [2]int64{1, 4}, lsoOf(t, m.sh(t, `cat $MNT/tx/0/stats`)))
	_, errOut, err := m.shErr(`cat $MNT/tx/0/by-offset/3`)
	require.Error(t, err, "an offset past the last stable offset does not open")
	assert.Contains(t, errOut, "No such file or directory")

	out := t.TempDir() + "/out"
	o, err := os.Create(out)
	require.NoError(t, err)
	defer o.Close()
	tail := exec.Command("tail", "-n", "+1", "-f", m.path("tx", "0", "records"))
	tail.Stdout = o
	require.NoError(t, tail.Start())
	stopTail := func() { _ = tail.Process.Kill(); _ = tail.Wait() }
	defer stopTail()
	waitFileContains(t, out, "before\n")
	txnEnd(t, p, 7, true) // 4
	waitFileContains(t, out, "after\n")
	assert.Equal(t, "before\nopen-1\nopen-2\nafter\n", m.sh(t, `cat $MNT/tx/0/records`))
	assert.Equal(t, [2]int64{5, 5}, lsoOf(t, m.sh(t, `cat $MNT/tx/0/stats`)))

	txnAppend(t, p, 8, 0, "aborted")          // 5
	m.sh(t, `echo later >> $MNT/tx/0/append`) // 6
	txnEnd(t, p, 8, false)                    // 7
	m.sh(t, `echo last >> $MNT/tx/0/append`)  // 8
	waitFileContains(t, out, "last\n")
	want := "before\nopen-1\nopen-2\nafter\nlater\nlast\n"
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, want, string(got), "tail -f never showed the aborted record")
	assert.Equal(t, want, m.sh(t, `cat $MNT/tx/0/records`))

	txnAppend(t, p, 9, 0, "pending") // 9
	m.sh(t, `echo behind >> $MNT/tx/0/append`)
	stopTail() // it holds the mount
	m.unmount()
	m = newTestMountAt(t, data, true)
	assert.Equal(t, want, m.sh(t, `cat $MNT/tx/0/records`), "the producer snapshot keeps the transaction open")
	assert.Equal(t, [2]int64{9, 11}, lsoOf(t, m.sh(t, `cat $MNT/tx/0/stats`)))
}
