package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// appendBatch is the number of records per Partition.Append call.
const appendBatch = 1000

var quietLogger = slog.New(slog.DiscardHandler)

// newPartitionOptions are the options of a fresh partition with cfg.
func newPartitionOptions(cfg engine.Config) engine.PartitionOptions {
	return engine.PartitionOptions{Config: cfg, RecoveryPoint: -1, LogStartOffset: -1, FirstDirty: -1, Logger: quietLogger}
}

// appendBudget bounds the first run of each engine append row (zstd on a
// slow machine would otherwise take minutes).
func (r *runner) appendBudget() time.Duration {
	if r.opts.Quick {
		return 2 * time.Second
	}
	return 15 * time.Second
}

// reps is how many times each timed run repeats (the best run counts).
func (r *runner) reps() int {
	if r.opts.Quick {
		return 1
	}
	return 2
}

// targetReps is how many times a row with a throughput ratio target
// repeats, topicfs and baseline runs interleaved, the best of each
// counting: a shared machine's speed moves from one second to the next
// (steal time, neighbours), and the best of several runs measures both
// sides at their quietest instead of one side in a bad second
// (docs/PERFORMANCE.md, "The machine").
func (r *runner) targetReps() int {
	if r.opts.Quick {
		return 1
	}
	return 5
}

func engineAppend(ctx context.Context, r *runner) ([]Row, error) {
	p := newPool(1)
	var rows []Row
	for _, size := range []int{100, 1024} {
		for _, codec := range []string{"none", "lz4", "zstd"} {
			if ctx.Err() != nil {
				return rows, ctx.Err()
			}
			row, err := r.appendRow(p, size, codec)
			if err != nil {
				return rows, errorf(fmt.Sprintf("%d B %s", size, codec), err)
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// appendRow times Partition.Append of sizes.Append bytes of size-byte values
// with codec, and a raw write(2) of the same bytes in the same chunks.
func (r *runner) appendRow(p *pool, size int, codec string) (Row, error) {
	dir := r.path("append", fmt.Sprintf("%d-%s", size, codec))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Row{}, err
	}
	defer os.RemoveAll(dir)
	n := r.sizes.Append / int64(size)
	if n < appendBatch {
		n = appendBatch
	}
	var best, bestRaw time.Duration
	var logBytes int64
	var cpuShare string
	cut := false
	reps := r.reps()
	if size == 1024 && codec == "none" {
		reps = r.targetReps()
	}
	for rep := range reps {
		// The first run may stop at the time budget (slow codecs); later
		// runs and the baseline move exactly as many records.
		budget := time.Duration(0)
		if rep == 0 {
			budget = r.appendBudget()
		}
		u := startUsage()
		d, got, lb, err := engineAppendOnce(filepath.Join(dir, "t-0"), p, n, size, codec, r.opts.Fsync, budget)
		if err != nil {
			return Row{}, err
		}
		if got < n {
			n, cut = got, true
		}
		if best == 0 || d < best {
			best = d
			cpuShare = u.share(d)
		}
		logBytes = lb
		d, err = rawWrite(filepath.Join(dir, "raw"), p, n, size, r.opts.Fsync)
		if err != nil {
			return Row{}, errorf("raw write", err)
		}
		if bestRaw == 0 || d < bestRaw {
			bestRaw = d
		}
	}
	valueBytes := n * int64(size)
	extra := fmt.Sprintf("%s, .log %.0f%%, %s", perSec(n, best, "rec"), 100*float64(logBytes)/float64(valueBytes), cpuShare)
	if cut {
		extra += fmt.Sprintf(", %s in the %v budget", fmtBytes(valueBytes), r.appendBudget())
	}
	row := Row{
		Workload: "engine-append",
		Name:     fmt.Sprintf("engine append %s %s", sizeName(size), codec),
		Value:    Figure{V: mbps(valueBytes, best), Unit: "MB/s", Extra: extra},
		BaseName: "write(2)",
		Baseline: Figure{V: mbps(valueBytes, bestRaw), Unit: "MB/s"},
	}
	row.ratio()
	switch {
	case size == 1024 && codec == "none":
		row.ratioAtLeast(0.7)
	case size == 100 && codec == "none":
		rate := float64(n) / best.Seconds()
		row.Target = "≥ 3 M rec/s"
		met := rate >= 3e6
		row.Met = &met
	}
	if size == 100 && codec == "none" {
		row.Note = fmt.Sprintf("MB/s of values (%s of %s values, %d per Append); the baseline writes the same value bytes in %s chunks; .log = bytes written per value byte; CPU = CPU seconds per second of the run, runq = seconds spent waiting for a CPU (a busy machine) per second",
			fmtBytes(valueBytes), sizeName(size), appendBatch, fmtBytes(int64(appendBatch*size)))
	}
	return row, nil
}

func sizeName(size int) string {
	if size%1024 == 0 {
		return fmt.Sprintf("%d KiB", size/1024)
	}
	return fmt.Sprintf("%d B", size)
}

// rawWrite writes n values of size bytes from p, appendBatch values per
// write(2), then fsyncs if asked; it returns the time taken and removes the file.
func rawWrite(path string, p *pool, n int64, size int, fsync bool) (time.Duration, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, err
	}
	defer os.Remove(path)
	defer f.Close()
	runtime.GC()
	start := time.Now()
	for i := int64(0); i < n; i += appendBatch {
		k := min(appendBatch, n-i)
		if _, err := f.Write(p.chunk(i/appendBatch, int(k)*size)); err != nil {
			return 0, err
		}
	}
	if fsync {
		if err := f.Sync(); err != nil {
			return 0, err
		}
	}
	d := time.Since(start)
	return d, f.Close()
}

// engineAppendOnce appends n values into a fresh partition at dir (fewer if
// budget > 0 runs out first) and removes it; it returns the time, the
// records appended and the .log bytes written.
func engineAppendOnce(dir string, p *pool, n int64, size int, codec string, fsync bool, budget time.Duration) (time.Duration, int64, int64, error) {
	defer os.RemoveAll(dir)
	cfg := engine.DefaultConfig()
	if err := cfg.Set("compression.type", codec); err != nil {
		return 0, 0, 0, err
	}
	part, err := engine.OpenPartition(vfs.OS, dir, "t", 0, newPartitionOptions(cfg))
	if err != nil {
		return 0, 0, 0, err
	}
	defer part.Close()
	recs := make([]record.Record, appendBatch)
	runtime.GC()
	start := time.Now()
	i := int64(0)
	for i < n {
		k := int(min(appendBatch, n-i))
		chunk := p.chunk(i/appendBatch, k*size)
		for j := range k {
			recs[j] = record.Record{Timestamp: -1, Value: chunk[j*size : (j+1)*size : (j+1)*size]}
		}
		if _, _, err := part.Append(recs[:k]); err != nil {
			return 0, 0, 0, errorf("Append", err)
		}
		i += int64(k)
		if budget > 0 && time.Since(start) > budget {
			break
		}
	}
	if fsync {
		if err := part.Flush(); err != nil {
			return 0, 0, 0, errorf("Flush", err)
		}
	}
	d := time.Since(start)
	if got := part.LogEndOffset(); got != i {
		return 0, 0, 0, fmt.Errorf("log end offset %d after appending %d records", got, i)
	}
	lb := part.Stats().BytesAppended
	return d, i, lb, part.Close()
}

// fillPartition appends bytes of size-byte values to part (with its codec),
// appendBatch at a time, and returns the record count.
func fillPartition(part *engine.Partition, p *pool, bytes int64, size int, seed int64) (int64, error) {
	n := max(bytes/int64(size), 1)
	recs := make([]record.Record, appendBatch)
	for i := int64(0); i < n; i += appendBatch {
		k := int(min(appendBatch, n-i))
		chunk := p.chunk(i/appendBatch+seed, k*size)
		for j := range k {
			recs[j] = record.Record{Timestamp: -1, Value: chunk[j*size : (j+1)*size : (j+1)*size]}
		}
		if _, _, err := part.Append(recs[:k]); err != nil {
			return i, err
		}
	}
	return n, nil
}

// logFiles lists a partition directory's .log files in offset order and
// their total size.
func logFiles(dir string) ([]string, int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, 0, err
	}
	var files []string
	var total int64
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".log") {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			return nil, 0, err
		}
		files = append(files, filepath.Join(dir, e.Name()))
		total += fi.Size()
	}
	sort.Strings(files)
	if len(files) == 0 {
		return nil, 0, fmt.Errorf("no .log files in %s", dir)
	}
	return files, total, nil
}

// timeCmd runs a command with stdout to out (nil: /dev/null) and returns
// how long it took.
func timeCmd(ctx context.Context, out io.Writer, name string, args ...string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	if out == nil {
		null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			return 0, err
		}
		defer null.Close()
		cmd.Stdout = null
	} else {
		cmd.Stdout = out
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("%s: %w: %s", name, err, oneLine(stderr.String()))
	}
	return d, nil
}

// cpuTime is the CPU time (user + system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runqWait is how long this process's threads have waited for a CPU while
// runnable (/proc/self/task/*/schedstat, second field): on a busy machine
// it tells waiting for a CPU apart from waiting for the disk.
func runqWait() time.Duration {
	tasks, _ := os.ReadDir("/proc/self/task")
	var total time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/schedstat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			continue
		}
		ns, _ := strconv.ParseInt(f[1], 10, 64)
		total += time.Duration(ns)
	}
	return total
}

// usage measures the CPU and run-queue time of a stretch of this process.
type usage struct{ cpu, wait time.Duration }

func startUsage() usage { return usage{cpuTime(), runqWait()} }

// share returns "c CPU, w waiting for a CPU" per second of wall time d.
func (u usage) share(d time.Duration) string {
	cpu := (cpuTime() - u.cpu).Seconds() / d.Seconds()
	wait := (runqWait() - u.wait).Seconds() / d.Seconds()
	return fmt.Sprintf("%.1f CPU, %.1f runq", cpu, wait)
}
