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

// segSide is one mount's side of the segments/ rows.
type segSide struct {
	m    *mountProc
	view string // segments/X.log in the mount
	best time.Duration
	cpu  time.Duration
	mode string // the mount's log line on how segments/ is read
}

// The two mounts are read-only, so that they can serve the same data
// directory at once (a writable mount locks it) and every round times the
// file and both mounts back to back: on a shared machine, rows measured
// minutes apart compare a quiet minute with a busy one. A read-only mount
// reads segments/ exactly as a writable one does.
var segFlags = [][]string{{"--read-only"}, {"--read-only", "--no-passthrough"}}

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
	sides := make([]*segSide, len(segFlags))
	for i, flags := range segFlags {
		m, err := r.launch(ctx, dir, nil, append([]string{"--data", dir}, flags...), nil)
		if err != nil {
			return nil, errorf(strings.Join(flags, " "), err)
		}
		defer func() {
			if serr := m.stop(); err == nil {
				err = serr
			}
		}()
		sides[i] = &segSide{m: m, view: m.path(topicSeg, "0", "segments", log), mode: segmentsMode(m.stderrTail())}
		if err := sameFile(sides[i].view, disk); err != nil {
			return nil, err
		}
	}
	base, err := segRounds(ctx, max(r.targetReps(), segMinRounds), disk, sides)
	if err != nil {
		return nil, err
	}
	for i, side := range sides {
		row := Row{
			Workload: "mount-segments",
			Name:     fmt.Sprintf("mount cat segments/X.log (%s, sealed)", fmtBytes(size)),
			Value:    Figure{V: mbps(size, side.best), Unit: "MB/s"},
			BaseName: "cat X.log",
			Baseline: Figure{V: mbps(size, base), Unit: "MB/s"},
			Note: fmt.Sprintf("the .log warm in the page cache; each round cats the file and then it through both mounts (read-only, on the same data); the mount process used %.0f ms of CPU per GiB (least of the runs); mount said: %s",
				float64(side.cpu)/float64(time.Millisecond)/(float64(size)/(1<<30)), side.mode),
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

// segMinRounds is the least number of rounds, --quick included: a round
// takes a fraction of a second, and the best of a few is still at the
// mercy of a busy neighbour.
const segMinRounds = 9

// segRounds times reps rounds of cat of the file at disk and of each
// side's view, keeping each side's best, and returns the file's best.
func segRounds(ctx context.Context, reps int, disk string, sides []*segSide) (base time.Duration, err error) {
	if _, err := timeCmd(ctx, nil, "cat", disk); err != nil { // warm the page cache
		return 0, err
	}
	for range reps {
		d, err := timeCmd(ctx, nil, "cat", disk)
		if err != nil {
			return 0, errorf("cat the file", err)
		}
		base = least(base, d)
		for _, side := range sides {
			c, err := side.m.cpuDuring(func() (err error) {
				d, err = timeCmd(ctx, nil, "cat", side.view)
				return err
			})
			if err != nil {
				return 0, errorf("cat segments/", err)
			}
			side.best = least(side.best, d)
			side.cpu = leastCPU(side.cpu, c)
		}
	}
	return base, nil
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
