package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// partitionStats is the part of a partition's stats file the rows read.
type partitionStats struct {
	LogStartOffset int64 `json:"log_start_offset"`
	LogEndOffset   int64 `json:"log_end_offset"`
	SizeBytes      int64 `json:"size_bytes"`
	SegmentCount   int   `json:"segment_count"`
	Policies       *struct {
		DirtyRatio             float64 `json:"dirty_ratio"`
		MinCleanableDirtyRatio float64 `json:"min_cleanable_dirty_ratio"`
		FirstDirtyOffset       int64   `json:"first_dirty_offset"`
		FirstUncleanableOffset int64   `json:"first_uncleanable_offset"`
		Cleaning               bool    `json:"cleaning_in_progress"`
		Cleanings              int64   `json:"cleanings"`
		LastCleaning           *struct {
			DurationMs int64  `json:"duration_ms"`
			BytesIn    int64  `json:"bytes_in"`
			BytesOut   int64  `json:"bytes_out"`
			MappedKeys int64  `json:"mapped_keys"`
			MapFull    bool   `json:"offset_map_full"`
			Outcome    string `json:"outcome"`
		} `json:"last_cleaning"`
	} `json:"policies"`
}

func (m *mountProc) stats(topic string) (partitionStats, error) {
	var st partitionStats
	b, err := os.ReadFile(m.path(topic, "0", "stats"))
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("%s/0/stats: %w", topic, err)
	}
	return st, nil
}

// shCat times `cat src > dst` run by sh (so the shell opens dst as a user's
// redirection does: O_WRONLY|O_CREAT|O_TRUNC).
func shCat(ctx context.Context, src, dst string) (time.Duration, error) {
	return timeCmd(ctx, nil, "sh", "-c", `cat "$1" > "$2"`, "sh", src, dst)
}

func mountAppend(ctx context.Context, r *runner) (rows []Row, err error) {
	lines := r.path("lines.txt")
	p := newPool(3)
	n, err := p.writeLines(lines, r.sizes.MountAppend, viewValueSize+1)
	if err != nil {
		return nil, err
	}
	defer os.Remove(lines)
	size := n * int64(viewValueSize+1)

	// Each run's topic is deleted after it, as the baseline's copy is:
	// with no delete delay its files go at once (the default keeps a
	// deleted topic file.delete.delay.ms, as a broker does).
	m, err := r.startMount(ctx, r.path("append-data"), map[string]string{"file.delete.delay.ms": "0"})
	if err != nil {
		return nil, err
	}
	defer func() {
		if serr := m.stop(); err == nil {
			err = serr
		}
	}()
	var best, bestBase, cpu time.Duration
	for rep := range r.targetReps() {
		copyPath := r.path("lines-copy.txt")
		d, err := shCat(ctx, lines, copyPath)
		os.Remove(copyPath)
		if err != nil {
			return nil, errorf("cat to a file", err)
		}
		if bestBase == 0 || d < bestBase {
			bestBase = d
		}
		// Each run appends to a new topic, deleted afterwards as the
		// baseline's copy is: a topic that kept every run's data would
		// have the kernel writing back the earlier runs' gigabytes during
		// the later ones, which the baseline never has.
		topic := fmt.Sprintf("bench%d", rep)
		if err := os.Mkdir(m.path(topic), 0o755); err != nil {
			return nil, errorf("mkdir topic", err)
		}
		c, err := m.cpuDuring(func() (err error) {
			d, err = shCat(ctx, lines, m.path(topic, "0", "append"))
			return err
		})
		if err != nil {
			return nil, errorf("cat into append", err)
		}
		if best == 0 || d < best {
			best = d
		}
		cpu = leastCPU(cpu, c)
		st, err := m.stats(topic)
		if err != nil {
			return nil, err
		}
		if st.LogEndOffset != n {
			return nil, fmt.Errorf("log end offset %d after appending %d lines", st.LogEndOffset, n)
		}
		if err := m.deleteTopic(ctx, topic); err != nil {
			return nil, err
		}
	}
	row := Row{
		Workload: "mount-append",
		Name:     fmt.Sprintf("mount append cat %s > TOPIC/0/append", fmtBytes(size)),
		Value:    Figure{V: mbps(size, best), Unit: "MB/s", Extra: perSec(n, best, "rec")},
		BaseName: "cat > file",
		Baseline: Figure{V: mbps(size, bestBase), Unit: "MB/s"},
		Note: fmt.Sprintf("100-byte lines, one record each; neither side fsyncs; records are readable when cat's close returns (checked via stats); each run appends to a new topic, deleted after it as the baseline's copy is; the mount process used %.2f ms of CPU per MiB appended (least of the runs; robust to a busy machine)",
			float64(cpu)/float64(time.Millisecond)/(float64(size)/(1<<20))),
	}
	row.ratio()
	row.ratioAtLeast(0.4)
	return []Row{row}, nil
}

// deleteTopic removes topic through the mount (rmdir) and waits until the
// data directory holds nothing of it (a deleted topic's directories are
// renamed, then removed in the background).
func (m *mountProc) deleteTopic(ctx context.Context, topic string) error {
	if err := os.Remove(m.path(topic)); err != nil {
		return errorf("rmdir topic", err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		ents, err := os.ReadDir(m.data)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(ents, func(e os.DirEntry) bool { return strings.HasPrefix(e.Name(), topic+"-") }) {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("topic %s still in %s a minute after rmdir", topic, m.data)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// dropCache drops the kernel's page cache of one file (a FUSE view), so the
// next read goes to the file system and not to pages an earlier read left.
func dropCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}

// catView times `cat view > /dev/null`, starting from a cold FUSE page cache.
func catView(ctx context.Context, path string) (time.Duration, error) {
	if err := dropCache(path); err != nil {
		return 0, err
	}
	return timeCmd(ctx, nil, "cat", path)
}

func mountRead(ctx context.Context, r *runner) (rows []Row, err error) {
	v, err := r.viewData(ctx)
	if err != nil {
		return nil, err
	}
	m, err := r.startMount(ctx, v.dir, nil)
	if err != nil {
		return nil, err
	}
	defer func() {
		if serr := m.stop(); err == nil {
			err = serr
		}
	}()
	info := v.built[topicSmall]
	view := m.path(topicSmall, "0", "records")
	fi, err := os.Stat(view)
	if err != nil {
		return nil, err
	}
	if want := info.records * int64(v.valueSize+1); fi.Size() != want {
		return nil, fmt.Errorf("%s is %d bytes, want %d (%d records)", view, fi.Size(), want, info.records)
	}
	dir := v.partDir(topicSmall)
	if _, _, err := catLogs(ctx, dir); err != nil { // warm the .log files
		return nil, err
	}
	var best, bestBase, cpu time.Duration
	var logBytes int64
	for range r.targetReps() {
		d, lb, err := catLogs(ctx, dir)
		if err != nil {
			return nil, errorf("cat .log", err)
		}
		if bestBase == 0 || d < bestBase {
			bestBase, logBytes = d, lb
		}
		c, err := m.cpuDuring(func() (err error) {
			d, err = catView(ctx, view)
			return err
		})
		if err != nil {
			return nil, errorf("cat records", err)
		}
		if best == 0 || d < best {
			best = d
		}
		cpu = leastCPU(cpu, c)
	}
	row := Row{
		Workload: "mount-read",
		Name:     fmt.Sprintf("mount read cat records (%s .log)", fmtBytes(logBytes)),
		Value:    Figure{V: mbps(logBytes, best), Unit: "MB/s", Extra: perSec(info.records, best, "rec")},
		BaseName: "cat .log",
		Baseline: Figure{V: mbps(logBytes, bestBase), Unit: "MB/s"},
		Note: fmt.Sprintf("MB/s of .log bytes for both; .log files warm in the page cache; views are direct I/O with st_blksize 1 MiB, so cat reads 1 MiB per READ; the mount process used %.0f ms of CPU per GiB of .log read (least of the runs; robust to a busy machine)",
			float64(cpu)/float64(time.Millisecond)/(float64(logBytes)/(1<<30))),
	}
	row.ratio()
	row.ratioAtLeast(0.25)
	return []Row{row}, nil
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)-1))
	return sorted[i]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
