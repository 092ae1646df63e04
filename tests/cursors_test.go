package tests

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestCursorCommitSurvivesKill checks that a commit whose close(2)
// returned survives kill -9 of the mount, and a read cut short does not
// count.
func TestCursorCommitSurvivesKill(t *testing.T) {
	m := startMount(t, mountOpts{})
	m.Sh(t, `mkdir $MNT/o && seq 1 5 > $MNT/o/0/append && cat $MNT/o/0/cursors/c > /dev/null && seq 6 5000 > $MNT/o/0/append && head -n 1 $MNT/o/0/cursors/c`)
	m.Kill()
	m.Remount()
	assert.Equal(t, "6\n4995\n0\n", m.Sh(t, `head -n 1 $MNT/o/0/cursors/c; wc -l < $MNT/o/0/cursors/c; wc -l < $MNT/o/0/cursors/c`))
}

// TestCursorRestartsAtLogStart checks that a cursor retention went past
// restarts at the log start and says how many records it skipped.
func TestCursorRestartsAtLogStart(t *testing.T) {
	m := startMount(t, mountOpts{Config: `"segment.bytes" = 1024
"retention.bytes" = 1
"retention.check.interval.ms" = 50
"file.delete.delay.ms" = 0
`})
	m.Sh(t, `mkdir $MNT/o && echo 0 > $MNT/o/0/append && echo earliest > $MNT/o/0/cursors/c && seq 1 2000 > $MNT/o/0/append
until [ "$(jq .log_start_offset $MNT/o/0/stats)" -gt 0 ]; do sleep 0.05; done`)
	out := m.Sh(t, `start=$(jq .log_start_offset $MNT/o/0/stats); first=$(head -n 1 $MNT/o/0/cursors/c); echo $((first + 1 - start))`)
	assert.Equal(t, "1\n", out, "the cursor's first record is at the log start (value N is at offset N)")
	assert.Contains(t, m.Stderr(), "cursor below the log start")
	assert.Regexp(t, `records_skipped=[1-9]`, m.Stderr())
}

// TestCursorReadOnlyMount checks that a read-only mount reads cursors and
// refuses to change them (EROFS).
func TestCursorReadOnlyMount(t *testing.T) {
	m := startMount(t, mountOpts{})
	m.Sh(t, `mkdir $MNT/o && seq 1 3 > $MNT/o/0/append && echo 1 > $MNT/o/0/cursors/c`)
	m.Stop()
	ro := startMount(t, mountOpts{Data: m.Data, ReadOnly: true})
	out := ro.Sh(t, `ls $MNT/o/0/cursors | tr '\n' ' '; { cat $MNT/o/0/cursors/c; } 2>&1 || echo "cat failed"
{ echo 0 > $MNT/o/0/cursors/c; } 2>&1 || true; rm $MNT/o/0/cursors/c 2>&1 || true`)
	assert.Contains(t, out, "c c.jsonl 2\n3\ncat: ")
	assert.Contains(t, out, "Read-only file system\ncat failed\n")
	assert.Contains(t, out, "rm: cannot remove")
	assert.Equal(t, 3, countOf(out, "Read-only file system"), out)
}

func countOf(s, sub string) int {
	n := 0
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			n++
		}
	}
	return n
}

// TestCursorStartLatest checks cursor.start=latest: a new cursor skips
// what the log held when it was first read.
func TestCursorStartLatest(t *testing.T) {
	m := startMount(t, mountOpts{})
	out := m.Sh(t, `mkdir $MNT/o && echo cursor.start=latest > $MNT/o/config && seq 1 3 > $MNT/o/0/append
wc -l < $MNT/o/0/cursors/c; echo 4 > $MNT/o/0/append; cat $MNT/o/0/cursors/c`)
	assert.Equal(t, "0\n4\n", out)
}

// TestCursorIsTheClusterGroup checks, with a client that shares no code
// with topicfs, that a cluster cursor is the consumer group of its name,
// and that a group with an active member refuses a move (EBUSY).
func TestCursorIsTheClusterGroup(t *testing.T) {
	kc := startKfake(t)
	m := startMount(t, clusterMountOpts(t, kc, ""))
	m.Sh(t, `mkdir $MNT/o && seq 1 7 > $MNT/o/0/append && cat $MNT/o/0/cursors/billing > /dev/null`)

	cl := kafkaClient(t, kc)
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = "billing"
	resp, err := req.RequestWith(context.Background(), cl)
	require.NoError(t, err)
	var got []int64
	for _, tp := range resp.Topics {
		for _, p := range tp.Partitions {
			if tp.Topic == "o" {
				got = append(got, p.Offset)
			}
		}
	}
	assert.Equal(t, []int64{7}, got, "the group's committed offset is where the cursor stands")

	// A consumer that joins group "live" holds it: topicfs may not move it.
	member := kafkaClient(t, kc, kgo.ConsumerGroup("live"), kgo.ConsumeTopics("o"), kgo.DisableAutoCommit())
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		fs := member.PollFetches(ctx)
		cancel()
		if fs.NumRecords() > 0 {
			break
		}
	}
	out := m.Sh(t, `{ echo 0 > $MNT/o/0/cursors/live; } 2>&1 || echo refused`)
	assert.Contains(t, out, "Device or resource busy\nrefused\n")
}
