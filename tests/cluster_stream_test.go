package tests

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

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
