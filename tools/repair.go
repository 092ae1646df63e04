package tools

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/vfs"
)

// A repair never throws intact data away. For each partition with a
// problem it:
//
//  1. settles an interrupted compaction swap the way recovery does (the
//     engine completes or rolls it back), then checks the partition again;
//  2. scans each .log with a problem (engine.PlanLogFile: the scanner crash
//     recovery uses too) and moves every damaged byte range to
//     <segment>.log.damaged-<pos>-<end> beside it, byte for byte, except
//     a range of zeros only (space never written), which is dropped, as
//     recovery drops it;
//  3. rewrites the .log with the intact batches only, or truncates it when
//     the damage is a tail (engine.ApplySegmentPlan, as recovery does);
//  4. rebuilds the indexes of the segments it rewrote and of those whose
//     indexes had problems, and only those.

// ErrNotDataDir is returned by Check for a directory that is neither a data
// directory nor a partition directory.
var ErrNotDataDir = errors.New("not a data directory")

// dataDirMarkers are root files only a data directory (topicfs's or a Kafka
// broker's) holds.
var dataDirMarkers = []string{
	"meta.properties", engine.LockFile, engine.RecoveryPointCheckpointFile,
	engine.LogStartOffsetCheckpointFile, engine.CleanerOffsetCheckpointFile,
	"replication-offset-checkpoint", engine.TopicsConfigFile, engine.CleanShutdownFile,
	engine.KafkaCleanShutdownFile,
}

// identifyDataDir reports whether dir is a single partition directory (a
// TOPIC-N directory holding .log files), or else a data directory: one
// holding a root marker file or a partition directory with .log files. An
// empty directory is not one: there is nothing to check (a mount writes its
// checkpoint files on the first stop).
func identifyDataDir(fsys vfs.FS, dir string) (single bool, err error) {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("check: %w", err)
	}
	if _, ok := partitionOf(filepath.Base(filepath.Clean(dir))); ok && hasLogs(entries) {
		return true, nil
	}
	const what = "a data directory holds TOPIC-N partition directories with .log files, meta.properties or checkpoint files"
	if len(entries) == 0 {
		return false, fmt.Errorf("%s is %w: it is empty (%s)", dir, ErrNotDataDir, what)
	}
	for _, e := range entries {
		if !e.IsDir() && slices.Contains(dataDirMarkers, e.Name()) {
			return false, nil
		}
	}
	for _, e := range entries {
		if _, ok := partitionOf(e.Name()); !ok || !e.IsDir() {
			continue
		}
		if sub, err := fsys.ReadDir(filepath.Join(dir, e.Name())); err == nil && hasLogs(sub) {
			return false, nil
		}
	}
	return false, fmt.Errorf("%s is %w (%s)", dir, ErrNotDataDir, what)
}

// PartitionPlan is what a repair does to one partition.
type PartitionPlan struct {
	Name, Dir string
	// SettleSwaps: an interrupted compaction swap is completed or rolled
	// back first (the segments below may change with it).
	SettleSwaps bool
	// Segments are the .log files with damaged ranges.
	Segments []engine.SegmentPlan
	// Rebuild lists the .log files whose indexes are rebuilt.
	Rebuild []string
}

func (p *PartitionPlan) empty() bool {
	return !p.SettleSwaps && len(p.Segments) == 0 && len(p.Rebuild) == 0
}

// planRepair plans the repair of every partition with a problem.
func planRepair(fsys vfs.FS, rep *CheckReport) ([]PartitionPlan, error) {
	var out []PartitionPlan
	for i := range rep.Partitions {
		p := &rep.Partitions[i]
		if len(p.Problems) == 0 {
			continue
		}
		pl, err := planPartition(fsys, p)
		if err != nil {
			return out, err
		}
		out = append(out, pl)
	}
	return out, nil
}

// planPartition scans the segments of p that a problem names (and the one
// before a segment whose base offset overlaps it).
func planPartition(fsys vfs.FS, p *PartitionReport) (PartitionPlan, error) {
	pl := PartitionPlan{Name: fmt.Sprintf("%s-%d", p.Topic, p.Partition), Dir: p.Dir}
	named := map[string]bool{}
	for _, pr := range p.Problems {
		named[pr.Path] = true
		if strings.HasSuffix(pr.Path, ".swap") {
			pl.SettleSwaps = true
		}
	}
	logs, err := segmentLogs(fsys, p.Dir)
	if err != nil {
		return pl, err
	}
	rebuild := map[string]bool{}
	for i, l := range logs {
		stem := strings.TrimSuffix(l.path, ".log")
		for _, s := range []string{".index", ".timeindex", ".txnindex"} {
			if named[stem+s] {
				rebuild[l.path] = true
			}
		}
		if !named[l.path] && (i+1 == len(logs) || !named[logs[i+1].path]) {
			continue
		}
		lim := engine.ScanLimits{Base: l.base, Limit: math.MaxInt64}
		if i+1 < len(logs) {
			lim.Limit, lim.HasNext = logs[i+1].base, true
		}
		sp, err := engine.PlanLogFile(fsys, l.path, lim)
		if err != nil {
			return pl, err
		}
		if len(sp.Damaged) > 0 {
			pl.Segments = append(pl.Segments, sp)
			rebuild[l.path] = true
		}
	}
	for _, l := range logs {
		if rebuild[l.path] {
			pl.Rebuild = append(pl.Rebuild, l.path)
		}
	}
	return pl, nil
}

type logFile struct {
	path string
	base int64
}

// segmentLogs lists the .log files of a partition directory by base offset.
func segmentLogs(fsys vfs.FS, dir string) ([]logFile, error) {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []logFile
	for _, e := range entries {
		if base, suffix, ok := engine.ParseSegmentName(e.Name()); ok && suffix == "log" && !e.IsDir() {
			out = append(out, logFile{path: filepath.Join(dir, e.Name()), base: base})
		}
	}
	slices.SortFunc(out, func(a, b logFile) int { return int(min(max(a.base-b.base, -1), 1)) })
	return out, nil
}

// printPlan says what check --repair would do.
func printPlan(w io.Writer, plans []PartitionPlan) {
	fmt.Fprintln(w, "check --repair would:")
	for i := range plans {
		describePlan(w, &plans[i], "  ", "would ")
	}
}

// describePlan prints one partition's plan, each line after prefix; verb is
// "would " for the plan and "" once done.
func describePlan(w io.Writer, pl *PartitionPlan, prefix, verb string) {
	past := func(would, did string) string {
		if verb != "" {
			return verb + would
		}
		return did
	}
	if pl.empty() {
		fmt.Fprintf(w, "%s%s: %s\n", prefix, pl.Name, past("change nothing (the problems above are not in segment or index files; they stay)", "changed nothing"))
		return
	}
	if pl.SettleSwaps {
		fmt.Fprintf(w, "%s%s: %s the interrupted compaction swap, as recovery does (then the segments are scanned again)\n",
			prefix, pl.Name, past("complete or roll back", "completed or rolled back"))
	}
	for _, sp := range pl.Segments {
		for _, r := range sp.Damaged {
			if r.Discard {
				fmt.Fprintf(w, "%s%s: %s bytes %d..%d (%d bytes, all zero: never written) of %s; %s\n", prefix, pl.Name, past("drop", "dropped"),
					r.Pos, r.End, r.End-r.Pos, filepath.Base(sp.Path), r.LostOffsets())
				continue
			}
			fmt.Fprintf(w, "%s%s: %s bytes %d..%d (%d bytes) of %s to %s; %s\n", prefix, pl.Name, past("move", "moved"),
				r.Pos, r.End, r.End-r.Pos, filepath.Base(sp.Path), filepath.Base(engine.AsidePath(sp.Path, r)), r.LostOffsets())
			for _, d := range r.Dropped {
				fmt.Fprintf(w, "%s  with it the batch at position %d (offsets %d..%d): its CRC verifies but its offsets conflict with the batch at position %d, and the base offset field is outside the CRC\n",
					prefix, d.Pos, d.Base, d.Last, d.ConflictPos)
			}
		}
		how := "rewrite"
		if sp.Truncates() {
			how = "truncate"
		}
		fmt.Fprintf(w, "%s%s: %s %s to its %d intact batches (%d records), each at its offsets\n", prefix, pl.Name,
			past(how, map[string]string{"rewrite": "rewrote", "truncate": "truncated"}[how]), filepath.Base(sp.Path), sp.KeptBatches, sp.KeptRecords)
	}
	for _, l := range pl.Rebuild {
		fmt.Fprintf(w, "%s%s: %s the indexes of %s\n", prefix, pl.Name, past("rebuild", "rebuilt"), filepath.Base(l))
	}
	fmt.Fprintf(w, "%s%s: %s no other segment\n", prefix, pl.Name, past("touch", "touched"))
}

// topicConfig is the config a repair opens a partition with: defaults plus
// the persisted settings that are valid (what mount.toml says is not known
// offline; it only matters for index spacing and sizes).
func topicConfig(topics map[string]map[string]string, topic string) engine.Config {
	return engine.ApplyPersisted(engine.DefaultConfig(), topics[topic], func(string, string, error) {})
}

// repairEnv is what repairing one partition needs.
type repairEnv struct {
	w      io.Writer
	fsys   vfs.FS
	logger *slog.Logger
	topics map[string]map[string]string
}

// repair carries out rep.Plan (one entry per partition with problems, in
// order), under the lock Check holds on the data directory root.
func repair(w io.Writer, fsys vfs.FS, root string, rep *CheckReport, logger *slog.Logger) ([]string, error) {
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := repairRoot(w, fsys, root, rep.Root); err != nil {
		return nil, fmt.Errorf("check --repair: %w", err)
	}
	env := &repairEnv{w: w, fsys: fsys, logger: logger}
	env.topics, _ = engine.ReadTopicsFile(fsys, root) // unreadable: defaults (check reported it)

	var repaired []string
	plans := rep.Plan
	for i := range rep.Partitions {
		p := &rep.Partitions[i]
		if len(p.Problems) == 0 {
			continue
		}
		if len(plans) == 0 {
			return repaired, fmt.Errorf("check --repair: %s-%d: no plan", p.Topic, p.Partition)
		}
		changed, err := env.partition(p, plans[0])
		plans = plans[1:]
		if err != nil {
			return repaired, fmt.Errorf("check --repair: %s-%d: %w", p.Topic, p.Partition, err)
		}
		if changed {
			repaired = append(repaired, fmt.Sprintf("%s-%d", p.Topic, p.Partition))
		}
	}
	return repaired, nil
}

// repairRoot handles unreadable root files: a checkpoint file is removed
// (missing means no entries: the next open recovers every partition from
// its start, as Kafka does when it cannot read one); topicfs-topics.json is
// set aside as topicfs-topics.json.corrupt, keeping its bytes.
func repairRoot(w io.Writer, fsys vfs.FS, root string, problems []Problem) error {
	for _, pr := range problems {
		name := filepath.Base(pr.Path)
		switch {
		case name == engine.TopicsConfigFile:
			if err := fsys.Rename(pr.Path, pr.Path+".corrupt"); err != nil {
				return err
			}
			fmt.Fprintf(w, "repair: moved unreadable %s to %s.corrupt (topics use their default settings)\n", pr.Path, name)
		case slices.Contains(checkpointFiles, name):
			if err := fsys.Remove(pr.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			fmt.Fprintf(w, "repair: removed unreadable %s (the next open recovers every partition from its start)\n", pr.Path)
		default:
			continue
		}
		if err := fsys.SyncDir(root); err != nil {
			return err
		}
	}
	return nil
}

// partition carries out pl, the plan Check made for p, and reports
// whether it changed anything.
func (env *repairEnv) partition(p *PartitionReport, pl PartitionPlan) (bool, error) {
	var err error
	if pl.SettleSwaps {
		// The engine settles swaps when it opens a partition.
		if err := env.open(p, nil); err != nil {
			return false, err
		}
		again := checkPartition(env.fsys, p.Dir, engine.TopicPartition{Topic: p.Topic, Partition: p.Partition})
		if pl, err = planPartition(env.fsys, &again); err != nil {
			return true, err
		}
		pl.SettleSwaps = true // done: describePlan says so
	}
	// Indexes go first (durably), so that an interrupted repair never
	// leaves a rewritten .log beside indexes of the old one; missing ones
	// are rebuilt by the next open.
	for _, l := range pl.Rebuild {
		stem := strings.TrimSuffix(l, ".log")
		for _, s := range []string{".index", ".timeindex", ".txnindex"} {
			if err := env.fsys.Remove(stem + s); err != nil && !errors.Is(err, os.ErrNotExist) {
				return true, err
			}
		}
	}
	if len(pl.Rebuild) > 0 {
		if err := env.fsys.SyncDir(p.Dir); err != nil {
			return true, err
		}
	}
	for _, sp := range pl.Segments {
		if err := engine.ApplySegmentPlan(env.fsys, sp); err != nil {
			return true, err
		}
	}
	if len(pl.Rebuild) > 0 {
		if err := env.open(p, pl.Rebuild); err != nil {
			return true, err
		}
	}
	describePlan(env.w, &pl, "repair: ", "")
	return !pl.empty(), nil
}

// open opens the partition read-write without recovery scanning (which
// settles interrupted swaps and rebuilds the active segment's missing
// indexes), loads the indexes of the segments in rebuild (rebuilding the
// missing ones on disk), and closes it. No .log is changed.
func (env *repairEnv) open(p *PartitionReport, rebuild []string) error {
	part, err := engine.OpenPartition(env.fsys, p.Dir, p.Topic, p.Partition, engine.PartitionOptions{
		Config:        topicConfig(env.topics, p.Topic),
		RecoveryPoint: -1,
		// The log start checkpoint is left out: a log start above the log
		// end makes the engine delete every segment, and a repair must not
		// (the next mount applies the checkpoint as usual).
		LogStartOffset: -1,
		FirstDirty:     -1,
		CleanShutdown:  true,
		Logger:         env.logger,
	})
	if err != nil {
		return err
	}
	snap := part.Snapshot()
	var errs []error
	for _, s := range snap.Segments {
		if slices.Contains(rebuild, s.LogPath()) {
			// A lookup above the base offset loads the indexes.
			if _, err := s.FindOffset(s.BaseOffset() + 1); err != nil {
				errs = append(errs, fmt.Errorf("rebuild indexes of %s: %w", s.LogPath(), err))
			}
		}
	}
	snap.Release()
	return errors.Join(append(errs, part.Close())...)
}
