package tests

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// requestCounter counts the requests kc serves, by API name, from when it
// is reset.
type requestCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func countRequests(kc *kfake.Cluster) *requestCounter {
	rc := &requestCounter{n: map[string]int{}}
	kc.ControlKey(-1, func(req kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		rc.mu.Lock()
		rc.n[kmsg.NameForKey(req.Key())]++
		rc.mu.Unlock()
		return nil, nil, false
	})
	return rc
}

func (rc *requestCounter) take() map[string]int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := rc.n
	rc.n = map[string]int{}
	return n
}

// TestClusterRequestsPerOperation bounds the requests a shell operation
// sends to the cluster: `ls -l` of a partition sends no Fetch, and `cat
// by-offset/-10` of a partition sends a handful of requests (its topic's
// metadata and configuration are reused between operations), not one per
// FUSE operation.
func TestClusterRequestsPerOperation(t *testing.T) {
	kc := startKfake(t)
	m := startMount(t, clusterMountOpts(t, kc, ""))
	m.Sh(t, `mkdir $MNT/r && seq 1 5000 > $MNT/r/0/append && cat $MNT/r/0/by-offset/-10 >/dev/null`)
	rc := countRequests(kc)

	const runs = 20
	rc.take()
	got := m.Sh(t, fmt.Sprintf(`for i in $(seq %d); do cat $MNT/r/0/by-offset/-10; done | sort -n | uniq -c | wc -l`, runs))
	assert.Equal(t, "10\n", got, "the last 10 records, every time")
	n := rc.take()
	t.Logf("%d x cat by-offset/-10: %v", runs, n)
	assert.Zero(t, n["Fetch"], "the copy holds the last records")
	assert.Less(t, n["DescribeConfigs"], runs, "topic lookups reuse what was read")
	assert.LessOrEqual(t, n["Metadata"], 3*runs,
		"a topic-id check beside each of a cat's two end listings (at open, and at EOF), and the clients' own")
	assert.LessOrEqual(t, n["ListOffsets"], 4*runs, "three ListOffsets per cat (bounds at open, the end at fstat), and the watcher's polls")

	got = m.Sh(t, `ls -l $MNT/r/0/ | wc -l`)
	require.NotEqual(t, "0\n", got)
	n = rc.take()
	t.Logf("ls -l of a partition: %v", n)
	assert.Zero(t, n["Fetch"], "ls -l never fetches records")
	total := 0
	for _, c := range n {
		total += c
	}
	assert.LessOrEqual(t, total, 20, "O(1) requests (the cursors entry lists groups): %v", n)
}

// TestClusterCursorRequests: reading a topic's cursor and its stats list
// the offsets of all partitions together, not per partition: over 12
// partitions they send at most as many ListOffsets as over one times the
// brokers the partitions' leaders are spread over (one request per leader
// per round).
func TestClusterCursorRequests(t *testing.T) {
	const parts, brokers = 12, 3
	kc := startKfake(t)
	m := startMount(t, clusterMountOpts(t, kc, ""))
	rc := countRequests(kc)
	listOffsets := func(topic string, n int) (read, stats int) {
		m.Sh(t, fmt.Sprintf(`mkdir $MNT/%[1]s && echo num.partitions=%[2]d > $MNT/%[1]s/config
			seq 1 1200 > $MNT/%[1]s/append && echo earliest > $MNT/%[1]s/cursors/billing
			test $(ls -d $MNT/%[1]s/[0-9]* | wc -l) = %[2]d`, topic, n))
		rc.take()
		assert.Equal(t, "1200\n", m.Sh(t, fmt.Sprintf(`wc -l < $MNT/%s/cursors/billing`, topic)))
		read = rc.take()["ListOffsets"]
		assert.Contains(t, m.Sh(t, fmt.Sprintf(`cat $MNT/%s/stats`, topic)), `"billing"`)
		stats = rc.take()["ListOffsets"]
		t.Logf("%d partitions: ListOffsets for cat cursors/billing %d, for cat stats %d", n, read, stats)
		return read, stats
	}
	read1, stats1 := listOffsets("one", 1)
	read, stats := listOffsets("many", parts)
	assert.LessOrEqual(t, read, brokers*read1)
	assert.LessOrEqual(t, stats, brokers*stats1)
}
