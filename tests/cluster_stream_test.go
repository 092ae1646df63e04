package tests

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/topicfs/topicfs/internal/testutil/kfakehold"
)

// holdFetches makes kc hold back every Fetch after the first `free` until
// the returned function is called (also at the end of the test); it
// returns how many fetches kc was sent so far.
func holdFetches(t *testing.T, kc *kfake.Cluster, free int) (release func(), count func() int) {
	return kfakehold.Hold(t, kc, kmsg.Fetch, free)
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

// TestClusterStreamingViewLetsOthersIn: while a view's fetches are held
// back, nobody waits for that fill who need not: stat reports 0 (the size
// is not known yet), cat's own fstat does not wait, so cat prints what has
// arrived; other views of the partition read what the fill has copied;
// ls -l lists the partition. tail -n, which trusts a size, reads the view
// to its end instead and is exact once the fetches flow. Once the fill
// ends, the view shows its exact size while closed, until another
// client's record makes it unknown (0, which tail reads whole).
func TestClusterStreamingViewLetsOthersIn(t *testing.T) {
	const n = 300000
	kc := startKfake(t)
	m := startMount(t, clusterMountOpts(t, kc, ""))
	m.Sh(t, fmt.Sprintf(`mkdir $MNT/s && seq %d > $MNT/s/0/append`, n))
	release, _ := holdFetches(t, kc, 1)
	out := m.Sh(t, `
		exec 3< $MNT/s/0/records # streaming from here on
		timeout 60 stat -c %s $MNT/s/0/records
		cat $MNT/s/0/records > cat.out & reader=$!
		for i in $(seq 600); do [ "$(stat -c %s cat.out)" -ge 6 ] && break; sleep 0.05; done
		kill $reader; wait $reader || true
		head -c 6 cat.out
		timeout 60 head -n 1 $MNT/s/0/records.jsonl | cut -c1-11
		timeout 60 head -n 1 $MNT/s/0/by-offset/10
		timeout 60 ls -l $MNT/s/0 | grep -c records
		tail -n 2 $MNT/s/0/records > tail.out 2> tail.err & echo $! > tail.pid`)
	assert.Equal(t, "0\n1\n2\n3\n{\"offset\":0\n11\n2\n", out, "nobody waited for the held-back fill")
	release()
	assert.Equal(t, fmt.Sprintf("%d\n%d\n", n-1, n), m.Sh(t, `while kill -0 $(cat tail.pid) 2>/dev/null; do sleep 0.05; done; cat tail.out`),
		"tail -n read the view whole: the last lines, not those of what had arrived")

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

// TestClusterSharedViewOwesItsEnd: a view another process holds open
// ends, for a second reader, at the partition's end when that reader
// opened it. When the records past the holder's end cannot be fetched
// (the cluster holds every fetch back past the request timeout), the
// second reader's cat fails instead of ending early with exit status 0.
func TestClusterSharedViewOwesItsEnd(t *testing.T) {
	kc := startKfake(t)
	m := startMount(t, clusterMountOpts(t, kc, "\"request.timeout.ms\" = 2000\n"))
	m.Sh(t, `mkdir $MNT/s && seq 1000 > $MNT/s/0/append && cat $MNT/s/0/records > /dev/null
		sleep 600 < $MNT/s/0/records > /dev/null 2>&1 & echo $! > holder.pid`)
	t.Cleanup(func() { _, _, _ = m.ShErr(`kill $(cat holder.pid)`) })
	holdFetches(t, kc, 0)
	produceValues(t, kc, "s", 0, "1001", "1002")
	stdout, stderr, err := m.ShErr(`
		sleep 1.5 # the mount's idea of the partition's end is at most 1 s old
		cat $MNT/s/0/records | wc -l`)
	require.Error(t, err, "cat of records it could not fetch failed: stdout %q stderr %q", stdout, stderr)
	assert.Contains(t, stderr, "cat:")
	assert.Equal(t, "1000\n", stdout, "it printed what it had, then failed")
}
