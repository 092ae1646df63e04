package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/vfs"
)

// topicSeg is the topic of the segments/ rows: one sealed segment of
// sizes.SegmentRead bytes of .log, and an empty active one.
const topicSeg = "seg"

// segData builds the data directory of the segments/ rows and returns it
// with the sealed segment's name.
func (r *runner) segData() (dir, log string, err error) {
	dir = r.path("segments-data")
	d, err := engine.OpenLogDir(vfs.OS, dir, engine.LogDirOptions{Logger: quietLogger})
	if err != nil {
		return "", "", err
	}
	defer func() {
		if cerr := d.Close(); err == nil {
			err = cerr
		}
	}()
	t, err := d.CreateTopic(topicSeg, 1)
	if err != nil {
		return "", "", err
	}
	part, err := t.Partition(0)
	if err != nil {
		return "", "", err
	}
	want := r.sizes.SegmentRead * int64(viewValueSize) / int64(viewValueSize+recordOverhead)
	if _, err := fillPartition(part, newPool(5), want, viewValueSize, 0); err != nil {
		return "", "", err
	}
	if err := part.Roll(); err != nil {
		return "", "", err
	}
	return dir, fmt.Sprintf("%020d.log", 0), nil
}

// segRun is one mount's side of the segments/ rows.
type segRun struct {
	best, bestBase time.Duration
	cpu            time.Duration
	mode           string // the mount's log line on how segments/ is read
}

func mountSegments(ctx context.Context, r *runner) (rows []Row, err error) {
	dir, log, err := r.segData()
	if err != nil {
		return nil, errorf("build data", err)
	}
	disk := filepath.Join(dir, topicSeg+"-0", log)
	fi, err := os.Stat(disk)
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	if _, err := timeCmd(ctx, nil, "cat", disk); err != nil { // warm the page cache
		return nil, err
	}
	pass, err := r.segRun(ctx, dir, log, nil)
	if err != nil {
		return nil, errorf("passthrough", err)
	}
	served, err := r.segRun(ctx, dir, log, []string{"--no-passthrough"})
	if err != nil {
		return nil, errorf("--no-passthrough", err)
	}
	base := min(pass.bestBase, served.bestBase)
	name := fmt.Sprintf("mount cat segments/X.log (%s, sealed)", fmtBytes(size))
	for i, run := range []segRun{pass, served} {
		row := Row{
			Workload: "mount-segments",
			Name:     name,
			Value:    Figure{V: mbps(size, run.best), Unit: "MB/s"},
			BaseName: "cat X.log",
			Baseline: Figure{V: mbps(size, base), Unit: "MB/s"},
			Note: fmt.Sprintf("the .log warm in the page cache; baseline the best cat of the file itself over both mounts' runs; the mount process used %.0f ms of CPU per GiB (least of the runs); mount said: %s",
				float64(run.cpu)/float64(time.Millisecond)/(float64(size)/(1<<30)), run.mode),
		}
		row.ratio()
		if i == 0 {
			row.Name += ", passthrough"
			row.ratioAtLeast(0.9)
		} else {
			row.Name += ", --no-passthrough"
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// segRun mounts dir with flags and times cat of segments/log against cat
// of the file on disk, interleaved, best of targetReps each; it checks the
// bytes once.
func (r *runner) segRun(ctx context.Context, dir, log string, flags []string) (run segRun, err error) {
	m, err := r.launch(ctx, dir, nil, append([]string{"--data", dir}, flags...), nil)
	if err != nil {
		return run, err
	}
	defer func() {
		if serr := m.stop(); err == nil {
			err = serr
		}
	}()
	run.mode = segmentsMode(m.stderrTail())
	disk := filepath.Join(dir, topicSeg+"-0", log)
	view := m.path(topicSeg, "0", "segments", log)
	if err := sameFile(view, disk); err != nil {
		return run, err
	}
	for range r.targetReps() {
		d, err := timeCmd(ctx, nil, "cat", disk)
		if err != nil {
			return run, errorf("cat the file", err)
		}
		run.bestBase = least(run.bestBase, d)
		c, err := m.cpuDuring(func() (err error) {
			d, err = timeCmd(ctx, nil, "cat", view)
			return err
		})
		if err != nil {
			return run, errorf("cat segments/", err)
		}
		run.best = least(run.best, d)
		run.cpu = leastCPU(run.cpu, c)
	}
	return run, nil
}

// segmentsMode picks the mount's log line on how segments/ is read out of
// its stderr lines.
func segmentsMode(tail string) string {
	for _, line := range strings.Split(tail, "; ") {
		if i := strings.Index(line, "segments/: "); i >= 0 {
			return strings.TrimSpace(strings.ReplaceAll(line[i:], `"`, ""))
		}
	}
	return "(no line on segments/)"
}

// sameFile compares two files byte for byte.
func sameFile(a, b string) error {
	fa, err := os.Open(a)
	if err != nil {
		return err
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return err
	}
	defer fb.Close()
	ba, bb := make([]byte, 1<<20), make([]byte, 1<<20)
	var off int64
	for {
		na, ea := io.ReadFull(fa, ba)
		nb, eb := io.ReadFull(fb, bb)
		if na != nb || !bytes.Equal(ba[:na], bb[:nb]) {
			return fmt.Errorf("%s differs from %s in the MiB at %d", a, b, off)
		}
		if ea != nil || eb != nil {
			if ea == io.ErrUnexpectedEOF || ea == io.EOF {
				return nil
			}
			return fmt.Errorf("%s: %v, %s: %v", a, ea, b, eb)
		}
		off += int64(na)
	}
}
