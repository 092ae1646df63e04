package tests

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// holdFetches makes kc hold back every Fetch after the first `free` until
// the returned function is called (also at the end of the test); it
// returns how many fetches kc was sent so far.
func holdFetches(t *testing.T, kc *kfake.Cluster, free int) (release func(), count func() int) {
	var (
		mu      sync.Mutex
		fetches int
		once    sync.Once
	)
	gate := make(chan struct{})
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	kc.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		mu.Lock()
		fetches++
		held := fetches > free
		mu.Unlock()
		if held {
			kc.SleepControl(func() { <-gate })
		}
		return nil, nil, false
	})
	return release, func() int {
		mu.Lock()
		defer mu.Unlock()
		return fetches
	}
}

// TestClusterViewStreams: a view of a partition the local copy lacks
// serves its first records while the rest is still being fetched. With
// the cluster holding back every fetch after the first, `head -n 1`
// returns the first record (a view that waited for the whole partition
// would hang), and its close stops the fetching. Once fetches flow again,
// cat, wc -l and stat see exactly the records up to the end at open.
func TestClusterViewStreams(t *testing.T) {
	const n = 300000
	kc := startKfake(t)
	m := startMount(t, clusterMountOpts(t, kc, ""))
	m.Sh(t, fmt.Sprintf(`mkdir $MNT/s && seq %d > $MNT/s/0/append`, n))
	release, fetches := holdFetches(t, kc, 1)

	assert.Equal(t, "1\n", m.Sh(t, `head -n 1 $MNT/s/0/records`))
	assert.Equal(t, "1\n2\n3\n", m.Sh(t, `head -n 3 $MNT/s/0/by-offset/0`))
	held := fetches()
	assert.Less(t, held, 5, "the fill stopped at the first fetch held back")

	release()
	want := m.Sh(t, fmt.Sprintf(`seq %d | md5sum; seq %d | wc -c`, n, n))
	got := m.Sh(t, `cat $MNT/s/0/records | md5sum; stat -c %s $MNT/s/0/records`)
	assert.Equal(t, want, got)
	assert.Equal(t, strconv.Itoa(n)+"\n", m.Sh(t, `wc -l < $MNT/s/0/records`))
	assert.Equal(t, fmt.Sprintf("%d\n%d\n", n-1, n), m.Sh(t, `tail -n 2 $MNT/s/0/records`))
	out := m.Sh(t, `grep -c 7 $MNT/s/0/records`)
	require.NotEqual(t, "0\n", out)
	assert.Equal(t, strings.TrimSpace(m.Sh(t, fmt.Sprintf(`seq %d | grep -c 7`, n))), strings.TrimSpace(out))
}

// TestClusterStreamingViewLetsOthersIn: while one process streams a view
// whose fetches are held back, other processes are not made to wait for
// that fill: stat tells them what has arrived, other views of the
// partition read what the fill has copied, and ls -l lists the partition.
// Once the fill ends, the view shows its exact size while closed, until
// another client's record makes it unknown (0, which tail reads whole).
func TestClusterStreamingViewLetsOthersIn(t *testing.T) {
	const n = 300000
	kc := startKfake(t)
	m := startMount(t, clusterMountOpts(t, kc, ""))
	m.Sh(t, fmt.Sprintf(`mkdir $MNT/s && seq %d > $MNT/s/0/append`, n))
	release, _ := holdFetches(t, kc, 1)

	out := m.Sh(t, `
		cat $MNT/s/0/records > /dev/null & reader=$!
		# stat answers at once with what has arrived (0: not open yet).
		until [ "$(timeout 60 stat -c %s $MNT/s/0/records)" -gt 0 ]; do sleep 0.05; done
		timeout 60 head -n 1 $MNT/s/0/records.jsonl | cut -c1-11
		timeout 60 head -n 1 $MNT/s/0/by-offset/10
		timeout 60 ls -l $MNT/s/0 | grep -c records
		kill $reader; wait $reader || true`)
	assert.Equal(t, "{\"offset\":0\n11\n2\n", out, "nobody waited for the held-back fill")

	release()
	want := m.Sh(t, fmt.Sprintf(`seq %d | wc -c`, n))
	assert.Equal(t, want, m.Sh(t, `cat $MNT/s/0/records > /dev/null; stat -c %s $MNT/s/0/records`),
		"the size measured while open is shown while closed")
	assert.Equal(t, fmt.Sprintf("%d\n", n), m.Sh(t, `tail -n 1 $MNT/s/0/records`))

	produceValues(t, kc, "s", 0, "other")
	assert.Eventually(t, func() bool {
		return m.Sh(t, `stat -c %s $MNT/s/0/records`) == "0\n"
	}, 30*time.Second, 100*time.Millisecond, "a size measured before another client's record is not shown")
	assert.Equal(t, "other\n", m.Sh(t, `tail -n 1 $MNT/s/0/records`))
}
