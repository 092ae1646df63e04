package fusefs

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/record"
)

func testRecords(values ...string) []record.Record {
	recs := make([]record.Record, len(values))
	for i, v := range values {
		recs[i] = record.Record{Timestamp: -1, Value: []byte(v)}
	}
	return recs
}

// followDeadline bounds the wait for tail output; it is a safety net for a
// broken run, not the latency promise (that one is logged).
const followDeadline = 10 * time.Second

// waitFileContains polls path until it contains want.
func waitFileContains(t *testing.T, path, want string) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < followDeadline {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), want) {
			return time.Since(start)
		}
		time.Sleep(5 * time.Millisecond)
	}
	b, _ := os.ReadFile(path)
	t.Fatalf("%q did not show up in %s within %v; it holds %q", want, path, followDeadline, b)
	return 0
}

// startTail runs tail args... with its output in a file (tail -f into a
// pipe only flushes after an idle poll).
func startTail(t *testing.T, m *testMount, args ...string) (out, errOut string) {
	t.Helper()
	dir := t.TempDir()
	out, errOut = dir+"/out", dir+"/err"
	o, err := os.Create(out)
	require.NoError(t, err)
	e, err := os.Create(errOut)
	require.NoError(t, err)
	cmd := exec.Command("tail", args...)
	cmd.Stdout, cmd.Stderr = o, e
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		o.Close()
		e.Close()
	})
	return out, errOut
}

func TestTailFollowSeesAppendsFromAnotherProcess(t *testing.T) {
	m := newTestMount(t, mountOpts{})
	m.sh(t, `mkdir $MNT/f && seq 1 100 > $MNT/f/0/append`)
	out, _ := startTail(t, m, "-n", "1", "-f", m.path("f", "0", "records"))
	waitFileContains(t, out, "100\n")
	endOut, _ := startTail(t, m, "-f", m.path("f", "0", "by-offset", "100"))
	var worst time.Duration
	for i := 0; i < 3; i++ {
		line := fmt.Sprintf("followed-%d", i)
		m.sh(t, `echo `+line+` >> $MNT/f/0/append`)
		d := waitFileContains(t, out, line+"\n")
		waitFileContains(t, endOut, line+"\n")
		worst = max(worst, d)
	}
	t.Logf("tail -f showed each append within %v (DESIGN promises 1s)", worst)
	b, err := os.ReadFile(endOut)
	require.NoError(t, err)
	assert.Equal(t, "followed-0\nfollowed-1\nfollowed-2\n", string(b), "tail -f by-offset/<end> shows exactly the new records")
}

func TestTailFNotReplacedAfterDropCaches(t *testing.T) {
	m := newTestMount(t, mountOpts{})
	m.sh(t, `mkdir $MNT/F && echo first > $MNT/F/0/append`)
	out, errOut := startTail(t, m, "-s", "0.1", "-F", m.path("F", "0", "records"))
	waitFileContains(t, out, "first\n")
	for i := 0; i < 2; i++ {
		dropCaches(t)
		time.Sleep(800 * time.Millisecond) // more than 5 idle polls: tail -F reopens and compares inodes
		m.sh(t, fmt.Sprintf(`echo again-%d >> $MNT/F/0/append`, i))
		waitFileContains(t, out, fmt.Sprintf("again-%d\n", i))
	}
	e, err := os.ReadFile(errOut)
	require.NoError(t, err)
	assert.NotContains(t, string(e), "replaced")
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, "first\nagain-0\nagain-1\n", string(b), "nothing is re-read from the start")
}

func TestConcurrentWritersNeverTear(t *testing.T) {
	m := newTestMount(t, mountOpts{})
	m.sh(t, `mkdir $MNT/c`)
	const writers, lines = 8, 10000
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// seq writes 4 KiB buffers: lines are split across write(2)s.
			_, errOut, err := m.shErr(fmt.Sprintf(`seq -f 'writer-%d-%%g-padding-padding-padding' 1 %d >> $MNT/c/0/append`, w, lines))
			if err != nil {
				errs[w] = fmt.Errorf("%v: %s", err, errOut)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	f, err := os.Open(m.path("c", "0", "records"))
	require.NoError(t, err)
	defer f.Close()
	re := regexp.MustCompile(`^writer-(\d)-(\d+)-padding-padding-padding$`)
	next := make([]int, writers)
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		mm := re.FindStringSubmatch(sc.Text())
		require.NotNil(t, mm, "torn or foreign line %q", sc.Text())
		w, _ := strconv.Atoi(mm[1])
		i, _ := strconv.Atoi(mm[2])
		require.Equal(t, next[w]+1, i, "writer %d's lines in order", w)
		next[w] = i
		n++
	}
	require.NoError(t, sc.Err())
	assert.Equal(t, writers*lines, n)
}

func TestOpenReaderSurvivesSegmentDeletion(t *testing.T) {
	m := newTestMount(t, mountOpts{config: map[string]string{"segment.bytes": "4096", "file.delete.delay.ms": "0"}})
	m.sh(t, `mkdir $MNT/d && seq 1 5000 > $MNT/d/0/append`)
	want := m.sh(t, `seq 1 5000`)
	f, err := os.Open(m.path("d", "0", "records"))
	require.NoError(t, err)
	defer f.Close()
	head := make([]byte, 100)
	_, err = io.ReadFull(f, head)
	require.NoError(t, err)

	p := m.partition(t, "d", 0)
	n := len(p.Segments()) - 1
	require.Greater(t, n, 3)
	_, err = p.DeleteOldestSegments(n, "test")
	require.NoError(t, err)
	require.NoError(t, p.PurgeDeleted(time.Now().Add(time.Hour)))
	// Opens of the same view while it is open share its content (the page
	// cache is per inode): cat sees the bytes f started with.
	assertSameText(t, want, m.sh(t, `cat $MNT/d/0/records`))
	rest, err := io.ReadAll(f)
	require.NoError(t, err)
	assertSameText(t, want, string(head)+string(rest), "the open reader reads the bytes it started with")
	require.NoError(t, f.Close())
	// Once released, a new reader starts at the new log start. RELEASE
	// comes asynchronously after close() returns (FUSE sends it after the
	// last close, without waiting), so
	// a reader opening at once may still share the content f held.
	got := m.sh(t, `cat $MNT/d/0/records`)
	for deadline := time.Now().Add(10 * time.Second); len(got) == len(want) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		got = m.sh(t, `cat $MNT/d/0/records`)
	}
	require.Less(t, len(got), len(want), "a reader after the release sees the new log start")
	assert.True(t, strings.HasSuffix(want, got), "the new content is a suffix of the old")
	assert.Equal(t, fmt.Sprintf("%d\n", p.LogStartOffset()+1), m.sh(t, `head -n1 $MNT/d/0/records`))
}

func TestTailNReadsFewBytes(t *testing.T) {
	m := newTestMount(t, mountOpts{config: map[string]string{"segment.bytes": "524288"}})
	m.sh(t, `mkdir $MNT/big && seq -f '%g-0123456789012345678901234567890123456789' 1 150000 > $MNT/big/0/append`)
	p := m.partition(t, "big", 0)
	// The first stat builds the rendered-position index (one scan).
	size := m.sh(t, `stat -c %s $MNT/big/0/records`)
	t.Logf("records is %s bytes", strings.TrimSpace(size))
	before := p.Stats().BytesRead
	assert.Equal(t, "149999-0123456789012345678901234567890123456789\n150000-0123456789012345678901234567890123456789\n",
		m.sh(t, `tail -n 2 $MNT/big/0/records`))
	read := p.Stats().BytesRead - before
	t.Logf("tail -n 2 read %d bytes of the log", read)
	assert.Less(t, read, int64(512<<10), "tail -n reads about one index interval, not the log")
	before = p.Stats().BytesRead
	assert.Equal(t, "75001-0123456789012345678901234567890123456789\n", m.sh(t, `head -n1 $MNT/big/0/by-offset/75000`))
	read = p.Stats().BytesRead - before
	t.Logf("head -n1 by-offset/75000 read %d bytes of the log", read)
	assert.Less(t, read, int64(2<<20), "by-offset reads from its segment, not from the start")
}

// TestStatRemeasuresNothing: a view's size needs every segment's rendered
// length. Once measured, a segment is not scanned again for a stat, also
// when the mount keeps fewer segment indexes than the partition has
// segments (here 2 for ~40) and no handle holds the view's state.
func TestStatRemeasuresNothing(t *testing.T) {
	m := newTestMount(t, mountOpts{config: map[string]string{"segment.bytes": "16384"}, indexes: 2})
	m.sh(t, `mkdir $MNT/s && seq -f '%g-0123456789' 1 40000 > $MNT/s/0/append`)
	p := m.partition(t, "s", 0)
	require.Greater(t, len(p.Segments()), 30)
	want := m.sh(t, `seq -f '%g-0123456789' 1 40000 | wc -c`)
	wantJSON := m.sh(t, `wc -c < $MNT/s/0/records.jsonl`)
	for i := range 3 {
		before := p.Stats().BytesRead
		assert.Equal(t, want, m.sh(t, `stat -c %s $MNT/s/0/records`))
		assert.Equal(t, wantJSON, m.sh(t, `stat -c %s $MNT/s/0/records.jsonl`))
		read := p.Stats().BytesRead - before
		t.Logf("stat %d read %d bytes of the log", i, read)
		if i > 0 {
			assert.Zero(t, read, "a stat scans no segment it has measured")
		}
		time.Sleep(1100 * time.Millisecond) // past the attribute timeout
	}
	// Seeks rebuild the one index they need: the last lines are right.
	assert.Equal(t, "39999-0123456789\n40000-0123456789\n", m.sh(t, `tail -n 2 $MNT/s/0/records`))
	assert.Equal(t, "20001-0123456789\n", m.sh(t, `head -n 1 $MNT/s/0/by-offset/20000`))
	assert.Equal(t, want, m.sh(t, `cat $MNT/s/0/records | wc -c`))
}
