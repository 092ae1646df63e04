package tests

// Retention and compaction end to end, observed only through the mount:
// `ls segments/`, `cat records`, records.jsonl, `head -n1` and `stats`.
// Every wait polls with a generous deadline; nothing asserts a speed.

import (
	"bytes"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// policyDeadline bounds every wait for a background policy to act.
const policyDeadline = 90 * time.Second

// segListing lists a partition's segments/ directory through the mount.
func segListing(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err, "ls %s", dir)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	sort.Strings(out)
	return out
}

func TestRetentionEndToEnd(t *testing.T) {
	const segBytes, retBytes = 512 << 10, 1 << 20
	m := startMount(t, mountOpts{Config: fmt.Sprintf(`
"segment.bytes" = %d
"retention.bytes" = %d
"retention.ms" = -1
"retention.check.interval.ms" = 200
"file.delete.delay.ms" = 1500
"num.partitions" = 1
`, segBytes, retBytes)})
	m.Sh(t, `mkdir $MNT/ret`)
	segDir := m.Path("ret", "0", "segments")

	// Watch segments/ from the start: .deleted files must show up (renamed
	// by retention) and later vanish (unlinked after file.delete.delay.ms).
	var sawDeleted atomic.Value // first listing that held a .deleted file
	stopWatch := make(chan struct{})
	var watch sync.WaitGroup
	watch.Add(1)
	go func() {
		defer watch.Done()
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(20 * time.Millisecond):
			}
			ents, err := os.ReadDir(segDir)
			if err != nil {
				continue
			}
			for _, e := range ents {
				if strings.HasSuffix(e.Name(), ".deleted") && sawDeleted.Load() == nil {
					var names []string
					for _, e := range ents {
						names = append(names, e.Name())
					}
					sawDeleted.Store(strings.Join(names, " "))
				}
			}
		}
	}()
	defer func() { close(stopWatch); watch.Wait() }()

	// 2 MiB of ~100-byte records; record i is relPayload(0, i) at offset i.
	const n = 2 << 20 / 100
	f, err := os.OpenFile(m.Path("ret", "0", "append"), os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	var buf bytes.Buffer
	written := 0
	for i := 0; i < n; i++ {
		p := relPayload(0, i)
		buf.WriteString(p + strings.Repeat(".", max(0, 99-len(p))) + "\n")
		written += max(100, len(p)+1)
		if buf.Len() > 64<<10 || i == n-1 {
			_, err := f.Write(buf.Bytes())
			require.NoError(t, err)
			buf.Reset()
		}
	}
	require.NoError(t, f.Close())
	t.Logf("wrote %d records, %d bytes", n, written)

	eventually(t, policyDeadline, "retention renames the oldest segments to .deleted", func() error {
		if sawDeleted.Load() == nil {
			return fmt.Errorf("no .deleted file seen in segments/; now %v", segListing(t, segDir))
		}
		return nil
	})
	t.Logf("segments/ while retention ran: %s", sawDeleted.Load())
	eventually(t, policyDeadline, ".deleted files vanish after file.delete.delay.ms", func() error {
		for _, name := range segListing(t, segDir) {
			if strings.HasSuffix(name, ".deleted") {
				return fmt.Errorf("still listed: %s", name)
			}
		}
		return nil
	})

	// What is left: at most retention.bytes + one segment, starting at the
	// new log start, which stats, the first segment's name, head -n1 and
	// records.jsonl all agree on.
	var logBytes int64
	var firstBase int64 = -1
	for _, name := range segListing(t, segDir) {
		if !strings.HasSuffix(name, ".log") {
			continue
		}
		st, err := os.Stat(m.Path("ret", "0", "segments", name))
		require.NoError(t, err)
		logBytes += st.Size()
		if firstBase < 0 {
			firstBase, err = strconv.ParseInt(strings.TrimSuffix(name, ".log"), 10, 64)
			require.NoError(t, err)
		}
	}
	assert.LessOrEqual(t, logBytes, int64(retBytes+segBytes), "partition holds at most retention.bytes + segment.bytes")
	assert.Greater(t, firstBase, int64(0), "the oldest segments were deleted")
	start := logStartFromStats(t, m.Path("ret", "0", "stats"))
	assert.Equal(t, firstBase, start, "stats log start = base offset of the first remaining segment")
	head := strings.TrimSpace(m.Sh(t, `head -n1 $MNT/ret/0/records`))
	assert.Equal(t, relPayload(0, int(start)), strings.TrimRight(head, "."), "head -n1 records starts at the new log start")
	recs, err := readJSONL(m.Path("ret", "0", "records.jsonl"))
	require.NoError(t, err)
	require.NotEmpty(t, recs)
	assert.Equal(t, start, recs[0].Offset)
	assert.Equal(t, int64(n-1), recs[len(recs)-1].Offset, "the newest records stay")
	assert.Equal(t, n-int(start), len(recs), "every record from the log start on is there")
	_, errOut, err := m.ShErr(fmt.Sprintf(`cat $MNT/ret/0/by-offset/%d`, start-1))
	require.Error(t, err, "by-offset below the new log start")
	assert.Contains(t, errOut, msgENOENT)

	// The new log start survives a restart.
	m.Remount()
	assert.Equal(t, start, logStartFromStats(t, m.Path("ret", "0", "stats")), "log start persists across a restart")
	head = strings.TrimSpace(m.Sh(t, `head -n1 $MNT/ret/0/records`))
	assert.Equal(t, relPayload(0, int(start)), strings.TrimRight(head, "."))
	m.Stop()
	requireCheckPasses(t, m.Data)
}

func TestCompactionWithTombstonesEndToEnd(t *testing.T) {
	m := startMount(t, mountOpts{Config: `
"segment.bytes" = 8192
"num.partitions" = 1
"retention.ms" = -1
"retention.check.interval.ms" = 200
"file.delete.delay.ms" = 300

[topics.cmp]
"cleanup.policy" = "compact"
"parse.key" = true
"min.cleanable.dirty.ratio" = 0.01
"delete.retention.ms" = 4000
"min.compaction.lag.ms" = 0
`})
	m.Sh(t, `mkdir $MNT/cmp`)
	cfg := m.Sh(t, `cat $MNT/cmp/config`)
	require.Contains(t, cfg, "cleanup.policy=compact")
	segDir := m.Path("cmp", "0", "segments")

	const keys, rounds = 20, 40
	var lines []string
	for r := 0; r < rounds; r++ {
		for k := 0; k < keys; k++ {
			lines = append(lines, fmt.Sprintf("key%02d\tvalue-%02d-round%03d-%s", k, k, r, strings.Repeat("v", 40)))
		}
	}
	// Tombstones for key00..key04 (null.marker is empty), then one more round
	// of the other keys, then fillers with unique keys so that everything
	// above sits in sealed, cleanable segments.
	for k := 0; k < 5; k++ {
		lines = append(lines, fmt.Sprintf("key%02d\t", k))
	}
	latest := map[string]string{}
	for k := 5; k < keys; k++ {
		v := fmt.Sprintf("value-%02d-final-%s", k, strings.Repeat("f", 40))
		lines = append(lines, fmt.Sprintf("key%02d\t%s", k, v))
		latest[fmt.Sprintf("key%02d", k)] = v
	}
	filler := 0
	addFillers := func(n int) {
		var fl []string
		for i := 0; i < n; i++ {
			fl = append(fl, fmt.Sprintf("filler%05d\t%s", filler, strings.Repeat("x", 60)))
			filler++
		}
		writeLines(t, m.Path("cmp", "0", "append"), fl, 50)
	}
	writeLines(t, m.Path("cmp", "0", "append"), lines, 25)
	addFillers(300)
	before := segListing(t, segDir)
	total := len(lines) + 300
	t.Logf("wrote %d records; segments/ before cleaning: %d entries", total, len(before))

	// state reads records.jsonl: per key, the records it holds.
	type keyState struct {
		values     []string
		tombstones int
	}
	state := func() (map[string]*keyState, []jsonRec) {
		recs, err := readJSONL(m.Path("cmp", "0", "records.jsonl"))
		require.NoError(t, err)
		st := map[string]*keyState{}
		for i, r := range recs {
			if i > 0 {
				require.Greater(t, r.Offset, recs[i-1].Offset, "offsets increase after cleaning")
			}
			k, ok := r.KeyString()
			require.True(t, ok, "every record has a key")
			if st[k] == nil {
				st[k] = &keyState{}
			}
			if r.IsTombstone() {
				st[k].tombstones++
			} else {
				v, _ := r.ValueString()
				st[k].values = append(st[k].values, v)
			}
		}
		return st, recs
	}

	// Phase 1: cleaned. Every live key holds exactly its latest value; the
	// deleted keys hold only their tombstone (still inside delete.retention.ms).
	sawTombstones := false
	eventually(t, policyDeadline, "the cleaner leaves each key's latest value", func() error {
		st, _ := state()
		for k, v := range latest {
			if s := st[k]; s == nil || len(s.values) != 1 || s.values[0] != v || s.tombstones != 0 {
				return fmt.Errorf("key %s: %+v", k, st[k])
			}
		}
		for k := 0; k < 5; k++ {
			key := fmt.Sprintf("key%02d", k)
			if s := st[key]; s != nil && len(s.values) > 0 {
				return fmt.Errorf("deleted key %s still has %d values", key, len(s.values))
			}
			if s := st[key]; s != nil && s.tombstones == 1 {
				sawTombstones = true
			}
		}
		return nil
	})
	assert.True(t, sawTombstones, "tombstones are visible after the first cleaning, until their delete horizon (delete.retention.ms=4000)")
	st, recs := state()
	for i := 0; i < 300; i++ {
		k := fmt.Sprintf("filler%05d", i)
		require.NotNil(t, st[k], "unique key %s is never compacted away", k)
		assert.Len(t, st[k].values, 1, "key %s", k)
	}
	plain := linesOf(m.Sh(t, `cat $MNT/cmp/0/records`))
	assert.Len(t, plain, len(recs), "records and records.jsonl show the same records")
	for _, l := range plain {
		assert.NotContains(t, l, "round0", "no superseded value is shown: %q", l)
	}
	during := segListing(t, segDir)
	t.Logf("after the first cleaning: %d records (from %d), segments/ %d entries", len(recs), total, len(during))
	// 15 live keys + at most 5 tombstones + 300 unique fillers.
	assert.LessOrEqual(t, len(recs), 15+5+300, "compaction removed every superseded value")
	assert.GreaterOrEqual(t, len(recs), 15+300)

	// Phase 2: after delete.retention.ms the tombstones go too. Keep the log
	// a little dirty so the cleaner has a reason to run again.
	lastFill := time.Now()
	eventually(t, policyDeadline, "tombstones vanish after their delete horizon", func() error {
		st, _ := state()
		for k := 0; k < 5; k++ {
			key := fmt.Sprintf("key%02d", k)
			if s := st[key]; s != nil {
				if time.Since(lastFill) > 500*time.Millisecond {
					addFillers(40)
					lastFill = time.Now()
				}
				return fmt.Errorf("key %s still has %d tombstones", key, s.tombstones)
			}
		}
		return nil
	})
	st, _ = state()
	for k, v := range latest {
		require.NotNil(t, st[k], "live key %s survives tombstone removal", k)
		assert.Equal(t, []string{v}, st[k].values, "key %s", k)
	}

	// Segments: no half-finished cleaner files stay behind, and stats talks
	// about the cleaner.
	eventually(t, policyDeadline, "no .cleaned/.swap/.deleted files stay in segments/", func() error {
		for _, name := range segListing(t, segDir) {
			if strings.HasSuffix(name, ".cleaned") || strings.HasSuffix(name, ".swap") || strings.HasSuffix(name, ".deleted") {
				return fmt.Errorf("still listed: %s", name)
			}
		}
		return nil
	})
	stats, err := os.ReadFile(m.Path("cmp", "0", "stats"))
	require.NoError(t, err)
	assert.Contains(t, strings.ToLower(string(stats)), "clean", "stats reports the cleaner's state: %s", stats)

	// The cleaned log survives a restart unchanged.
	_, beforeRestart := state()
	m.Remount()
	_, afterRestart := state()
	assert.Equal(t, beforeRestart, afterRestart, "the compacted log is the same after a restart")
	m.Stop()
	requireCheckPasses(t, m.Data)
}
