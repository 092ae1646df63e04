package bench

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/vfs"
	"github.com/topicfs/topicfs/policies"
)

// kvData returns a fresh copy of the compacted key/value data directory
// (sizes.CleanKeys keys, a third of the records obsolete), building the
// original once.
func (r *runner) kvData(ctx context.Context, name string) (dir string, records, logBytes int64, err error) {
	pristine := r.path("kv-pristine")
	if r.kv == nil {
		start := time.Now()
		records, logBytes, err := r.buildKV(pristine, r.sizes.CleanKeys)
		if err != nil {
			return "", 0, 0, errorf("build key/value data", err)
		}
		r.kv = &topicInfo{records: records, logBytes: logBytes}
		r.logf("built %d keys (%d records, %s) in %v", r.sizes.CleanKeys, records, fmtBytes(logBytes), time.Since(start).Round(time.Millisecond))
	}
	dir = r.path(name)
	os.RemoveAll(dir)
	if _, err := timeCmd(ctx, nil, "cp", "-a", pristine, dir); err != nil {
		return "", 0, 0, err
	}
	return dir, r.kv.records, r.kv.logBytes, nil
}

func cleanerThroughput(ctx context.Context, r *runner) ([]Row, error) {
	data, records, logBytes, err := r.kvData(ctx, "clean-data")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(data)
	dir := data + "/" + kvTopic + "-0"
	if _, _, err := catLogs(ctx, dir); err != nil { // warm the page cache
		return nil, err
	}
	var catTime time.Duration
	for range r.reps() {
		d, _, err := catLogs(ctx, dir)
		if err != nil {
			return nil, err
		}
		if catTime == 0 || d < catTime {
			catTime = d
		}
	}

	d, err := engine.OpenLogDir(vfs.OS, data, engine.LogDirOptions{Logger: quietLogger})
	if err != nil {
		return nil, err
	}
	defer d.Close()
	t, err := d.Topic(kvTopic)
	if err != nil {
		return nil, err
	}
	p, err := t.Partition(0)
	if err != nil {
		return nil, err
	}
	dedupe := engine.DefaultConfig().CleanerDedupeBufferSize
	s := policies.NewScheduler(d, policies.Options{Logger: quietLogger, DedupeBufferSize: dedupe, ProgressBytes: -1})
	segs := p.Segments()
	activeBase := segs[len(segs)-1].BaseOffset

	var in, out, dropped int64
	rounds := 0
	u := startUsage()
	start := time.Now()
	for p.FirstDirtyOffset() < activeBase {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		run, err := s.CleanPartition(p, true)
		if err != nil {
			return nil, errorf("CleanPartition", err)
		}
		if run == nil {
			return nil, fmt.Errorf("nothing cleanable with the first dirty offset at %d below %d", p.FirstDirtyOffset(), activeBase)
		}
		rounds++
		in += run.BytesIn
		out += run.BytesOut
		dropped += run.RecordsDropped
	}
	took := time.Since(start)
	cpuShare := u.share(took)
	if want := records - r.sizes.CleanKeys; dropped != want {
		return nil, fmt.Errorf("the cleaner dropped %d records, want %d (every key's older copy)", dropped, want)
	}
	row := Row{
		Workload: "cleaner",
		Name:     fmt.Sprintf("cleaner, %d keys, %s", r.sizes.CleanKeys, fmtBytes(logBytes)),
		Value:    Figure{V: mbps(in, took), Unit: "MB/s", Extra: fmt.Sprintf("%d rounds, %s", rounds, cpuShare)},
		BaseName: "cat .log",
		Baseline: Figure{V: mbps(logBytes, catTime), Unit: "MB/s"},
		Note: fmt.Sprintf("MB/s of cleaner input (bytes_in %s, out %s, %d records dropped); dedupe buffer %s; .log files warm",
			fmtBytes(in), fmtBytes(out), dropped, fmtBytes(dedupe)),
	}
	row.ratio()
	return []Row{row}, nil
}
