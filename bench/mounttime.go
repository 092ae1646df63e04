package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

const segsTopic = "segs"

// buildSegments writes n one-record segments (a tiny segment.bytes makes
// every append roll) through the engine and closes the directory cleanly.
func (r *runner) buildSegments(data string, n int) (err error) {
	d, err := engine.OpenLogDir(vfs.OS, data, engine.LogDirOptions{Logger: quietLogger})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := d.Close(); err == nil {
			err = cerr
		}
	}()
	t, err := d.CreateTopic(segsTopic, 1)
	if err != nil {
		return err
	}
	// One 100-byte record is a batch of about 170 bytes: a second one
	// never fits, so each append rolls. A small segment.index.bytes keeps
	// the roll cheap: creating an index maps and checks all of its
	// preallocated bytes (10 MiB by default).
	if err := t.AlterConfig(map[string]string{"segment.bytes": "200", "segment.index.bytes": "4096"}); err != nil {
		return err
	}
	part, err := t.Partition(0)
	if err != nil {
		return err
	}
	p := newPool(5)
	recs := make([]record.Record, 1)
	for i := range n {
		recs[0] = record.Record{Timestamp: -1, Value: p.chunk(int64(i), 100)}
		if _, _, err := part.Append(recs); err != nil {
			return err
		}
	}
	if got := len(part.Segments()); got != n {
		return fmt.Errorf("%d appends made %d segments, want %d", n, got, n)
	}
	return nil
}

// mountTime times mounting a partition of many segments after a clean
// shutdown and after kill -9, next to ls -l of the partition directory.
func mountTime(ctx context.Context, r *runner) (rows []Row, err error) {
	data := r.path("segs-data")
	start := time.Now()
	if err := r.buildSegments(data, r.sizes.Segments); err != nil {
		return nil, errorf("build", err)
	}
	r.logf("built %d segments in %v", r.sizes.Segments, time.Since(start).Round(time.Millisecond))
	ls, err := timeLs(ctx, data+"/"+segsTopic+"-0")
	if err != nil {
		return nil, err
	}
	clean, last, err := r.cleanMountTime(ctx, data)
	if err != nil {
		return nil, err
	}
	crash, err := r.crashMountTime(ctx, last)
	if err != nil {
		return nil, err
	}

	name := strconv.Itoa(r.sizes.Segments) + " segments"
	newRow := func(after string, v time.Duration) Row {
		row := Row{
			Workload: "mount-time",
			Name:     "mount time, " + name + ", " + after,
			Value:    Figure{V: ms(v), Unit: "ms"},
			BaseName: "ls -l",
			Baseline: Figure{V: ms(ls), Unit: "ms"},
		}
		row.ratio()
		return row
	}
	cleanRow := newRow("clean shutdown", clean)
	cleanRow.Note = "exec of topicfs mount until its ready line; ls -l of the partition directory, dentry cache warm"
	cleanRow.ratioAtMost(5)
	crashRow := newRow("after kill -9", crash)
	return []Row{cleanRow, crashRow}, nil
}

// timeLs returns the fastest of three ls -l of dir, after a first run that
// warms the dentry and inode caches.
func timeLs(ctx context.Context, dir string) (time.Duration, error) {
	var ls time.Duration
	for i := range 4 {
		d, err := timeCmd(ctx, nil, "ls", "-l", dir)
		if err != nil {
			return 0, err
		}
		if i > 0 && (ls == 0 || d < ls) {
			ls = d
		}
	}
	return ls, nil
}

// cleanMountTime mounts data (cleanly shut down each time) and stops it
// again, reps+1 times, checking the mount shows every segment; it returns
// the fastest time to ready and the last mount (stopped).
func (r *runner) cleanMountTime(ctx context.Context, data string) (time.Duration, *mountProc, error) {
	var clean time.Duration
	var last *mountProc
	for range r.reps() + 1 {
		m, err := r.startMount(ctx, data, nil)
		if err != nil {
			return 0, nil, errorf("clean mount", err)
		}
		st, err := m.stats(segsTopic)
		if serr := m.stop(); err == nil {
			err = serr
		}
		if err != nil {
			return 0, nil, errorf("clean mount", err)
		}
		if st.SegmentCount != r.sizes.Segments {
			return 0, nil, fmt.Errorf("the mount shows %d segments, want %d", st.SegmentCount, r.sizes.Segments)
		}
		if clean == 0 || m.ready < clean {
			clean = m.ready
		}
		last = m
	}
	return clean, last, nil
}

// crashMountTime times a mount after a crash: it mounts again as last did,
// kills it with kill -9 and mounts once more (recovery instead of the clean
// shutdown marker), checking the log's end survived; it returns the time
// of that last mount to ready.
func (r *runner) crashMountTime(ctx context.Context, last *mountProc) (time.Duration, error) {
	m, err := r.remount(ctx, last)
	if err != nil {
		return 0, errorf("mount before kill", err)
	}
	m.kill()
	m2, err := r.remount(ctx, m)
	if err != nil {
		return 0, errorf("mount after kill -9", err)
	}
	st, err := m2.stats(segsTopic)
	if serr := m2.stop(); err == nil {
		err = serr
	}
	if err != nil {
		return 0, errorf("mount after kill -9", err)
	}
	if st.LogEndOffset != int64(r.sizes.Segments) {
		return 0, fmt.Errorf("after kill -9 the log ends at %d, want %d", st.LogEndOffset, r.sizes.Segments)
	}
	return m2.ready, nil
}
