package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/backend/local"
	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
	"github.com/topicfs/topicfs/keyindex"
)

// indexKeys is how many distinct keys the key-index rows index and look up.
func (r *runner) indexKeys() int {
	if r.opts.Quick {
		return 100_000
	}
	return 1_000_000
}

// keyIndexRows builds the by-key index of a partition of indexKeys distinct
// keys (100-byte values, batches of about 16 KiB), then looks every key up
// once in random order; beside them, in the same run, `grep -c` of the
// same .log files for one key: what answering a key costs without an
// index, and a full read of the log.
func keyIndexRows(ctx context.Context, r *runner) ([]Row, error) {
	dir := r.path("keyindex")
	defer os.RemoveAll(dir)
	d, err := engine.OpenLogDir(vfs.OS, dir, engine.LogDirOptions{Logger: quietLogger})
	if err != nil {
		return nil, err
	}
	defer d.Close()
	b := local.New(d)
	t, err := b.CreateTopic(ctx, "k", 1)
	if err != nil {
		return nil, err
	}
	p, err := t.Partition(0)
	if err != nil {
		return nil, err
	}
	n := r.indexKeys()
	if err := fillKeys(ctx, p, n); err != nil {
		return nil, err
	}
	logs, logBytes, err := logFiles(filepath.Join(dir, "k-0"))
	if err != nil {
		return nil, err
	}
	grep, err := grepLog(ctx, logs, keyOf(n/2))
	if err != nil {
		return nil, err
	}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	t0 := time.Now()
	x := keyindex.Open(p, keyindex.NewBudget(4<<30, ""), quietLogger)
	defer x.Close()
	if err := x.Ready(ctx); err != nil {
		return nil, err
	}
	build := time.Since(t0)
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	lat, err := lookupAll(ctx, x, n)
	if err != nil {
		return nil, err
	}
	return keyIndexTable(n, logBytes, build, grep, lat, x.Stats().TableBytes, int64(after.HeapInuse)-int64(before.HeapInuse)), nil
}

func keyOf(i int) string { return fmt.Sprintf("user-%08d", i) }

// fillKeys appends n records with distinct keys.
func fillKeys(ctx context.Context, p backend.Partition, n int) error {
	const per = 16 << 10 / 120
	value := make([]byte, 100)
	for i := 0; i < n; i += per {
		recs := make([]record.Record, 0, per)
		for j := i; j < min(i+per, n); j++ {
			recs = append(recs, record.Record{Key: []byte(keyOf(j)), Value: value, Timestamp: -1})
		}
		if _, _, err := p.AppendEach(ctx, [][]record.Record{recs}); err != nil {
			return err
		}
	}
	return p.Sync(ctx)
}

// grepLog times `grep -c -a -F KEY` over the partition's .log files (page
// cache warm: run twice, the second timed).
func grepLog(ctx context.Context, logs []string, key string) (time.Duration, error) {
	var took time.Duration
	for range 2 {
		var err error
		if took, err = timeCmd(ctx, nil, "grep", append([]string{"-c", "-a", "-F", key}, logs...)...); err != nil {
			return 0, err
		}
	}
	return took, nil
}

// lookupAll looks every key up once, in random order, and returns the
// sorted latencies.
func lookupAll(ctx context.Context, x *keyindex.Index, n int) ([]time.Duration, error) {
	order := rand.New(rand.NewPCG(9, 9)).Perm(n)
	lat := make([]time.Duration, 0, n)
	for _, i := range order {
		k := keyOf(i)
		t0 := time.Now()
		e, err := x.Lookup(ctx, keyindex.Ref{Key: []byte(k)})
		lat = append(lat, time.Since(t0))
		if err != nil {
			return nil, fmt.Errorf("lookup %s: %w", k, err)
		}
		if string(e.Key) != k {
			return nil, fmt.Errorf("lookup %s: got key %q", k, e.Key)
		}
	}
	slices.Sort(lat)
	return lat, nil
}

func keyIndexTable(n int, logBytes int64, build, grep time.Duration, lat []time.Duration, table, heap int64) []Row {
	perGiB := func(d time.Duration) float64 { return d.Seconds() * float64(1<<30) / float64(logBytes) }
	note := fmt.Sprintf("%d distinct keys, 100-byte values, %s of log; grep -c -a -F of one key over the same .log files, page cache warm", n, fmtBytes(logBytes))
	rows := []Row{{
		Workload: "key-index", Name: "key index build, per GiB of log",
		Value: Figure{V: perGiB(build), Unit: "s"}, BaseName: "grep of the log for one key",
		Baseline: Figure{V: perGiB(grep), Unit: "s"}, Note: note,
	}}
	for _, q := range []struct {
		name string
		q    float64
	}{{"median", 0.5}, {"p99", 0.99}} {
		rows = append(rows, Row{
			Workload: "key-index", Name: fmt.Sprintf("by-key lookup %s, %d keys", q.name, n),
			Value: Figure{V: float64(quantile(lat, q.q)) / 1e3, Unit: "µs"}, BaseName: "grep of the log for one key",
			Baseline: Figure{V: float64(grep) / 1e3, Unit: "µs"},
		})
	}
	perM := func(b int64) float64 { return float64(b) / float64(n) * 1e6 / (1 << 20) }
	rows = append(rows, Row{
		Workload: "key-index", Name: "key index memory per million keys",
		Value: Figure{V: perM(table), Unit: "MiB"}, BaseName: "heap growth during the build",
		Baseline: Figure{V: perM(max(heap, 1)), Unit: "MiB"},
	})
	for i := range rows {
		rows[i].ratio()
	}
	return rows
}
