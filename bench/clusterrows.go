package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The cluster rows: a mount of an in-process kfake cluster (kafka.go)
// beside the same work done by plain franz-go clients against the same
// brokers in the same run.

// clusterAppend times `cat FILE > TOPIC/0/append` into a mounted cluster
// beside a franz-go producer sending the file's lines.
func clusterAppend(ctx context.Context, r *runner) (rows []Row, err error) {
	lines := r.path("cluster-lines.txt")
	n, err := newPool(3).writeLines(lines, r.sizes.ClusterAppend, viewValueSize+1)
	if err != nil {
		return nil, err
	}
	defer os.Remove(lines)
	size := n * int64(viewValueSize+1)
	k, err := startKafka()
	if err != nil {
		return nil, err
	}
	defer k.close()
	prod, err := k.newProducer()
	if err != nil {
		return nil, err
	}
	defer prod.Close()
	var best, bestBase time.Duration
	var cpu, cpuBase cpuUse
	err = r.withClusterMount(ctx, k, func(m *mountProc) error {
		for rep := range r.targetReps() {
			// Each run appends to new topics, deleted afterwards: kfake
			// keeps every record in memory.
			d, c, err := kgoAppendOnce(ctx, k, prod, fmt.Sprintf("kgo%d", rep), lines, n)
			if err != nil {
				return err
			}
			bestBase, cpuBase = least(bestBase, d), cpuBase.least(c)
			if d, c, err = catAppendOnce(ctx, k, m, fmt.Sprintf("cat%d", rep), lines, n); err != nil {
				return err
			}
			best, cpu = least(best, d), cpu.least(c)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	row := Row{
		Workload: "cluster-append",
		Name:     fmt.Sprintf("cluster append cat %s > TOPIC/0/append", fmtBytes(size)),
		Value:    Figure{V: mbps(size, best), Unit: "MB/s", Extra: perSec(n, best, "rec")},
		BaseName: "kgo produce",
		Baseline: Figure{V: mbps(size, bestBase), Unit: "MB/s"},
		Note: "100-byte lines, one record each, acks=all and idempotent on both sides, no compression, no linger; " +
			"both end when every record is acknowledged (cat's close; the producer's Flush), checked by ListOffsets; " +
			"the baseline reads the file 1 MiB at a time and produces every line, with one Flush at the end; " +
			cpuNote(cpu, cpuBase, size, "appended"),
	}
	row.ratio()
	row.ratioAtLeast(0.8)
	return []Row{row}, nil
}

// kgoAppendOnce creates topic, times prod sending the n lines of the file
// at path to it, checks that they arrived and deletes the topic.
func kgoAppendOnce(ctx context.Context, k *kafka, prod *kgo.Client, topic, path string, n int64) (time.Duration, cpuUse, error) {
	if err := k.createTopic(ctx, topic); err != nil {
		return 0, cpuUse{}, err
	}
	var d time.Duration
	c, err := cpuSpent(nil, func() error {
		start := time.Now()
		got, err := produceFile(ctx, prod, topic, path)
		d = time.Since(start)
		if err == nil && got != n {
			err = fmt.Errorf("%d records sent of %d lines", got, n)
		}
		return err
	})
	if err != nil {
		return 0, c, errorf("kgo produce", err)
	}
	if err := k.checkEnd(ctx, topic, n); err != nil {
		return 0, c, err
	}
	return d, c, k.deleteTopic(ctx, topic)
}

// catAppendOnce makes topic in the mount (mkdir), times cat of the file at
// path (n lines) into its partition's append file, checks that every line
// arrived and deletes the topic (rmdir).
func catAppendOnce(ctx context.Context, k *kafka, m *mountProc, topic, path string, n int64) (time.Duration, cpuUse, error) {
	if err := os.Mkdir(m.path(topic), 0o755); err != nil {
		return 0, cpuUse{}, errorf("mkdir topic", err)
	}
	var d time.Duration
	c, err := cpuSpent(m, func() (err error) {
		d, err = shCat(ctx, path, m.path(topic, "0", "append"))
		return err
	})
	if err != nil {
		return 0, c, errorf("cat into append", err)
	}
	if err := k.checkEnd(ctx, topic, n); err != nil {
		return 0, c, err
	}
	return d, c, errorf("rmdir topic", os.Remove(m.path(topic)))
}

// cpuUse is the CPU time used during a timed run by the mount process and
// by this one (kfake, and a baseline's client).
type cpuUse struct{ mount, bench time.Duration }

// cpuSpent runs fn and returns the CPU time the mount process (none when m
// is nil) and this process used meanwhile; zero where /proc could not
// tell (the figures are informative only).
func cpuSpent(m *mountProc, fn func() error) (cpuUse, error) {
	var c cpuUse
	b0, berr := procCPU(os.Getpid())
	var err error
	if m != nil {
		c.mount, err = m.cpuDuring(fn)
	} else {
		err = fn()
	}
	if err != nil {
		return c, err
	}
	if b1, err := procCPU(os.Getpid()); err == nil && berr == nil {
		c.bench = b1 - b0
	}
	return c, nil
}

// least keeps the least non-zero figures of c and o, each on its own (the
// run a busy machine inflated least).
func (c cpuUse) least(o cpuUse) cpuUse {
	return cpuUse{mount: leastCPU(c.mount, o.mount), bench: leastCPU(c.bench, o.bench)}
}

// cpuNote compares the CPU the two sides used per MiB moved: the mount's
// and kfake's (two processes) against the baseline's (one process: the
// client and kfake).
func cpuNote(c, base cpuUse, size int64, verb string) string {
	per := func(d time.Duration) float64 {
		return float64(d) / float64(time.Millisecond) / (float64(size) / (1 << 20))
	}
	return fmt.Sprintf("CPU per MiB %s (least of the runs; robust to a busy machine): the mount process %.1f ms + this process (kfake) %.1f ms = %.1f ms; the baseline (franz-go client and kfake) %.1f ms",
		verb, per(c.mount), per(c.bench), per(c.mount+c.bench), per(base.bench))
}

// least keeps the shortest non-zero duration.
func least(best, d time.Duration) time.Duration {
	if best == 0 || d < best {
		return d
	}
	return best
}

// clusterData starts kfake with topic holding the lines of a file of size
// bytes (100-byte lines), produced by franz-go, and returns the number of
// records.
func (r *runner) clusterData(ctx context.Context, topic string, size int64) (*kafka, int64, error) {
	lines := r.path("cluster-data.txt")
	n, err := newPool(4).writeLines(lines, size, viewValueSize+1)
	if err != nil {
		return nil, 0, err
	}
	defer os.Remove(lines)
	k, err := startKafka()
	if err != nil {
		return nil, 0, err
	}
	err = k.createTopic(ctx, topic)
	if err == nil {
		err = k.fill(ctx, topic, lines, n)
	}
	if err != nil {
		k.close()
		return nil, 0, err
	}
	return k, n, nil
}

// fill produces the lines of the file at path to topic and checks that it
// then holds n records.
func (k *kafka) fill(ctx context.Context, topic, path string, n int64) error {
	prod, err := k.newProducer()
	if err != nil {
		return err
	}
	defer prod.Close()
	if _, err := produceFile(ctx, prod, topic, path); err != nil {
		return err
	}
	return k.checkEnd(ctx, topic, n)
}

// clusterReadRun is one run of the read rows: a new mount (an empty local
// copy) reads the view twice, cold then warm.
type clusterReadRun struct {
	cold, warm time.Duration
	cpu        cpuUse // of the cold cat
}

// clusterReadOnce mounts k anew and reads topic's view cold, then warm;
// the view must then hold want (the lines the baseline rendered).
func (r *runner) clusterReadOnce(ctx context.Context, k *kafka, topic string, want []byte) (run clusterReadRun, err error) {
	err = r.withClusterMount(ctx, k, func(m *mountProc) error {
		run, err = readViewTwice(ctx, m, topic, want)
		return err
	})
	return run, err
}

// readViewTwice is clusterReadOnce on the mount m.
func readViewTwice(ctx context.Context, m *mountProc, topic string, want []byte) (run clusterReadRun, err error) {
	// Nothing looks at the view before the timed cat: its size alone
	// needs the whole partition in the local copy.
	view := m.path(topic, "0", "records")
	run.cpu, err = cpuSpent(m, func() (err error) {
		run.cold, err = timeCmd(ctx, nil, "cat", view)
		return err
	})
	if err != nil {
		return run, errorf("cat records (cold)", err)
	}
	if run.warm, err = catView(ctx, view); err != nil {
		return run, errorf("cat records (warm)", err)
	}
	got, err := os.ReadFile(view)
	if err != nil {
		return run, err
	}
	if !bytes.Equal(got, want) {
		return run, fmt.Errorf("%s: %d bytes that differ from the %d bytes the franz-go consumer rendered", view, len(got), len(want))
	}
	return run, nil
}

// kgoReadOnce times a new franz-go consumer reading topic from its start
// and rendering n records as lines.
func kgoReadOnce(ctx context.Context, k *kafka, topic string, n int64, out *bytes.Buffer) (time.Duration, cpuUse, error) {
	cons, err := k.newConsumer(topic)
	if err != nil {
		return 0, cpuUse{}, err
	}
	defer cons.Close()
	out.Reset()
	var d time.Duration
	c, err := cpuSpent(nil, func() error {
		start := time.Now()
		err := consumeLines(ctx, cons, n, out)
		d = time.Since(start)
		return err
	})
	if err != nil {
		return 0, c, errorf("kgo consume", err)
	}
	if want := n * int64(viewValueSize+1); int64(out.Len()) != want {
		return 0, c, fmt.Errorf("kgo consume: %d bytes rendered, want %d", out.Len(), want)
	}
	return d, c, nil
}

func clusterRead(ctx context.Context, r *runner) (rows []Row, err error) {
	const topic = "read"
	k, n, err := r.clusterData(ctx, topic, r.sizes.ClusterRead)
	if err != nil {
		return nil, err
	}
	defer k.close()
	size := n * int64(viewValueSize+1)
	out := bytes.NewBuffer(make([]byte, 0, size))
	var bestBase, cold, warm time.Duration
	var cpu, cpuBase cpuUse
	for range r.targetReps() {
		d, c, err := kgoReadOnce(ctx, k, topic, n, out)
		if err != nil {
			return nil, err
		}
		bestBase, cpuBase = least(bestBase, d), cpuBase.least(c)
		run, err := r.clusterReadOnce(ctx, k, topic, out.Bytes())
		if err != nil {
			return nil, err
		}
		cold, warm, cpu = least(cold, run.cold), least(warm, run.warm), cpu.least(run.cpu)
	}
	base := Figure{V: mbps(size, bestBase), Unit: "MB/s"}
	coldRow := Row{
		Workload: "cluster-read",
		Name:     fmt.Sprintf("cluster read cat records (%s), cold copy", fmtBytes(size)),
		Value:    Figure{V: mbps(size, cold), Unit: "MB/s", Extra: perSec(n, cold, "rec")},
		BaseName: "kgo consume", Baseline: base,
		Note: "MB/s of rendered lines (value and '\\n') for both; each run mounts anew with an empty cache directory, " +
			"so cat's open fetches the whole partition into the local copy, which the view then renders; " +
			"the baseline is a new franz-go consumer (kgo's defaults) from the first offset writing each value and '\\n' to memory; " +
			cpuNote(cpu, cpuBase, size, "read"),
	}
	coldRow.ratio()
	coldRow.ratioAtLeast(0.8)
	warmRow := Row{
		Workload: "cluster-read",
		Name:     fmt.Sprintf("cluster read cat records (%s), warm copy", fmtBytes(size)),
		Value:    Figure{V: mbps(size, warm), Unit: "MB/s", Extra: perSec(n, warm, "rec")},
		BaseName: "kgo consume", Baseline: base,
		Note: "the same mount's second cat: the copy is local, only the high watermark is asked for",
	}
	warmRow.ratio()
	return []Row{coldRow, warmRow}, nil
}

// tailN is the N of the by-offset/-N row.
const tailN = 10

// readTail reads the whole view at path (open, read to EOF, close: what cat
// does) and checks that it holds tailN lines of the view partition.
func readTail(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if want := tailN * (viewValueSize + 1); len(b) != want || bytes.Count(b, []byte{'\n'}) != tailN {
		return fmt.Errorf("%s: %d bytes, %d lines; want %d bytes, %d lines", path, len(b), bytes.Count(b, []byte{'\n'}), want, tailN)
	}
	return nil
}

// latencies runs fn warmup+runs times and returns the sorted durations of
// the last runs.
func latencies(ctx context.Context, runs, warmup int, fn func() error) ([]time.Duration, error) {
	lat := make([]time.Duration, 0, runs)
	for i := range runs + warmup {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		start := time.Now()
		if err := fn(); err != nil {
			return nil, err
		}
		if d := time.Since(start); i >= warmup {
			lat = append(lat, d)
		}
	}
	slices.Sort(lat)
	return lat, nil
}

func clusterOffset(ctx context.Context, r *runner) (rows []Row, err error) {
	const topic = "tail"
	k, _, err := r.clusterData(ctx, topic, r.sizes.ClusterRead)
	if err != nil {
		return nil, err
	}
	defer k.close()
	const warmup = 5
	var mount []time.Duration
	err = r.withClusterMount(ctx, k, func(m *mountProc) (err error) {
		path := m.path(topic, "0", "by-offset", fmt.Sprint(-tailN))
		mount, err = latencies(ctx, r.sizes.ClusterOpens, warmup, func() error { return readTail(path) })
		return errorf("by-offset", err)
	})
	if err != nil {
		return nil, err
	}
	tl, err := k.newTail(ctx, topic)
	if err != nil {
		return nil, err
	}
	defer tl.close()
	var out bytes.Buffer
	base, err := latencies(ctx, r.sizes.ClusterOpens, warmup, func() error {
		out.Reset()
		if err := tl.run(ctx, tailN, &out); err != nil {
			return err
		}
		if want := tailN * (viewValueSize + 1); out.Len() != want {
			return fmt.Errorf("kgo tail: %d bytes, want %d", out.Len(), want)
		}
		return nil
	})
	if err != nil {
		return nil, errorf("kgo tail", err)
	}
	for _, q := range []struct {
		name string
		q    float64
	}{{"median", 0.5}, {"p99", 0.99}} {
		row := Row{
			Workload: "cluster-offset",
			Name:     fmt.Sprintf("cluster cat by-offset/-%d %s", tailN, q.name),
			Value:    Figure{V: ms(quantile(mount, q.q)), Unit: "ms"},
			BaseName: "kgo tail",
			Baseline: Figure{V: ms(quantile(base, q.q)), Unit: "ms"},
		}
		row.ratio()
		if q.name == "p99" {
			row.Note = fmt.Sprintf("%d runs each after %d warm-up runs; the mount: open, read to EOF, close in the bench process (cat's calls, without its exec); "+
				"the baseline: a connected franz-go client sends ListOffsets, then one Fetch from end-%d, to the leader, "+
				"and writes the %d records kgo decodes as lines; ratio = mount/kgo",
				len(mount), warmup, tailN, tailN)
		}
		rows = append(rows, row)
	}
	return rows, nil
}
