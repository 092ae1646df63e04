package tests

// Load: 16 writers and 16 readers on a 4-partition topic for a fixed record
// count, with retention and compaction running on neighbouring topics the
// whole time. No operation may fail, no reader may see a line that was not
// written, and afterwards (and after a restart) the counts are exact: every
// record once, each writer's records in its own order.
//
// Knob: TOPICFS_LOAD_RECORDS (records per writer, default 1500).

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

const loadConfig = `
"segment.bytes" = 65536
"index.interval.bytes" = 1024
"retention.ms" = -1
"retention.check.interval.ms" = 100
"file.delete.delay.ms" = 200
"linger.ms" = 2
"num.partitions" = 4

[topics.churn-ret]
"num.partitions" = 1
"segment.bytes" = 8192
"retention.bytes" = 32768

[topics.churn-cmp]
"num.partitions" = 1
"segment.bytes" = 8192
"cleanup.policy" = "compact"
"parse.key" = true
"min.cleanable.dirty.ratio" = 0.01
"delete.retention.ms" = 200
`

func TestLoadWritersReaders(t *testing.T) {
	perWriter := envInt("TOPICFS_LOAD_RECORDS", 1500)
	const writers, readers, parts = 16, 16, 4
	m := startMount(t, mountOpts{Config: loadConfig})
	m.Sh(t, `mkdir $MNT/load $MNT/churn-ret $MNT/churn-cmp`)

	r := &crashRun{t: t, m: m, byID: map[int]*crashWriter{}}
	for w := 0; w < writers; w++ {
		cw := &crashWriter{id: w, topic: "load", file: fmt.Sprintf("load/%d/append", w%parts), reopen: w%2 == 1}
		r.writers = append(r.writers, cw)
		r.byID[w] = cw
	}
	// Background churn: retention and compaction keep running.
	churn := []*crashWriter{
		{id: 40, topic: "churn-ret", file: "churn-ret/0/append"},
		{id: 41, topic: "churn-cmp", file: "churn-cmp/0/append", keyed: true},
	}
	for _, cw := range churn {
		r.byID[cw.id] = cw
	}

	stopChurn := make(chan struct{})
	var churnWG sync.WaitGroup
	for _, cw := range churn {
		churnWG.Add(1)
		go func(cw *crashWriter) {
			defer churnWG.Done()
			cw.run(m.Dir, rand.New(rand.NewPCG(uint64(cw.id), 9)), stopChurn, r.fail)
		}(cw)
	}

	stopReaders := make(chan struct{})
	var readWG sync.WaitGroup
	for i := 0; i < readers; i++ {
		path := m.Path("load", fmt.Sprint(i%parts), "records")
		readWG.Add(1)
		if i < parts {
			go func() { defer readWG.Done(); r.follow("load", path, stopReaders) }()
		} else {
			go func() { defer readWG.Done(); r.readWhole("load", path, stopReaders) }()
		}
	}

	var writeWG sync.WaitGroup
	for _, cw := range r.writers {
		writeWG.Add(1)
		go func(cw *crashWriter) {
			defer writeWG.Done()
			loadWrite(cw, m.Dir, perWriter, rand.New(rand.NewPCG(uint64(cw.id), 3)), r.fail)
		}(cw)
	}
	writeWG.Wait()
	close(stopReaders)
	readWG.Wait()
	close(stopChurn)
	churnWG.Wait()
	r.mu.Lock()
	failures := append([]string(nil), r.failures...)
	r.mu.Unlock()
	require.Empty(t, failures, "no operation fails under load")

	verifyLoad := func(stage string) {
		t.Helper()
		next := map[int]int{}
		total := 0
		for p := 0; p < parts; p++ {
			recs, err := readJSONL(m.Path("load", fmt.Sprint(p), "records.jsonl"))
			require.NoError(t, err)
			for i, rec := range recs {
				require.Equal(t, int64(i), rec.Offset, "%s: load/%d offsets are 0,1,2,...", stage, p)
				v, _ := rec.ValueString()
				w, seq, ok := relParsePayload(v)
				require.True(t, ok, "%s: load/%d offset %d: %q was never written", stage, p, i, v)
				require.Equal(t, p, w%parts, "%s: writer %d's record landed in partition %d", stage, w, p)
				require.Equal(t, next[w], seq, "%s: writer %d's records appear once each, in order", stage, w)
				next[w]++
				total++
			}
		}
		for w := 0; w < writers; w++ {
			require.Equal(t, perWriter, next[w], "%s: writer %d: every record present", stage, w)
		}
		require.Equal(t, writers*perWriter, total)
	}
	verifyLoad("under load")
	m.Remount()
	verifyLoad("after restart")
	m.Stop()
	requireCheckPasses(t, m.Data)
	msg := fmt.Sprintf("load: %d writers x %d records on %d partitions, %d reader lines validated (%d whole reads), churn writers wrote %d+%d records",
		writers, perWriter, parts, r.linesRead.Load(), r.readsDone.Load(), churn[0].attempted.Load(), churn[1].attempted.Load())
	t.Log(msg)
	reportSummary(msg)
}

// loadWrite writes exactly n records of writer cw in random-sized batches.
func loadWrite(cw *crashWriter, mnt string, n int, rng *rand.Rand, fail func(string, error)) {
	path := mnt + "/" + cw.file
	var f *os.File
	for seq := 0; seq < n; {
		var err error
		if f == nil {
			if f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0); err != nil {
				fail("open "+cw.file, err)
				return
			}
		}
		k := min(n-seq, 1+rng.IntN(40))
		var buf bytes.Buffer
		for i := seq; i < seq+k; i++ {
			buf.WriteString(cw.line(i))
		}
		cw.attempted.Store(int64(seq + k))
		if _, err := f.Write(buf.Bytes()); err != nil {
			fail("write "+cw.file, err)
			return
		}
		seq += k
		if cw.reopen {
			if err := f.Close(); err != nil {
				fail("close "+cw.file, err)
				return
			}
			f = nil
		}
	}
	if f != nil {
		if err := f.Close(); err != nil {
			fail("close "+strings.TrimPrefix(cw.file, mnt), err)
		}
	}
}
