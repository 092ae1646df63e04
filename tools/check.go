package tools

import (
	"cmp"
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
	"github.com/topicfs/topicfs/engine/index"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// CheckOptions configures Check. The zero value checks vfs.OS and writes
// nothing.
type CheckOptions struct {
	// Repair carries out the plan Check prints (see repair.go): damaged
	// byte ranges of a .log move aside to files named
	// <segment>.log.damaged-<pos>-<end>, every intact batch stays with its
	// offsets, indexes of changed segments are rebuilt, interrupted swaps are
	// settled. Undamaged segments are not touched. The directory is locked
	// first (a mounted directory is refused even with nothing to repair).
	// Then the whole directory is checked again and that second report is
	// returned.
	Repair bool
	// FS is the file system to read; nil means vfs.OS.
	FS vfs.FS
	// Logger receives the engine's logs during a repair; nil discards them.
	Logger *slog.Logger
}

// Problem is one finding of Check: a file, a byte position in it (-1 when
// it is about the whole file) and what is wrong.
type Problem struct {
	Path     string
	Position int64
	Message  string
}

func (p Problem) String() string {
	if p.Position >= 0 {
		return fmt.Sprintf("%s: position %d: %s", p.Path, p.Position, p.Message)
	}
	return fmt.Sprintf("%s: %s", p.Path, p.Message)
}

// PartitionReport summarises one partition directory.
type PartitionReport struct {
	Topic     string
	Partition int
	Dir       string
	Segments  int64
	Batches   int64
	Records   int64
	Bytes     int64 // sum of .log sizes
	// FirstOffset and LastOffset are the first and last offsets held in the
	// segments (-1 when there are no records).
	FirstOffset, LastOffset int64
	// NextOffset is the log end offset the data implies: last offset + 1,
	// or the last segment's base when the log is empty.
	NextOffset int64
	Problems   []Problem
	Warnings   []Problem
}

// CheckReport is what Check found.
type CheckReport struct {
	Dir        string
	Partitions []PartitionReport
	// Totals over all partitions.
	Segments, Batches, Records, Bytes int64
	// Root holds findings about the data directory itself (checkpoint files).
	Root     []Problem
	Warnings []Problem // root warnings (partition warnings are in Partitions)
	// Plan is what check --repair does (or did) about the problems found.
	Plan []PartitionPlan
	// Repaired names the partitions Repair changed, and Before is the
	// report from before the repair (nil without a repair).
	Repaired []string
	Before   *CheckReport
}

// Problems returns every problem found, root first, then per partition.
// A data directory passes the check when there are none.
func (r CheckReport) Problems() []Problem {
	out := slices.Clone(r.Root)
	for _, p := range r.Partitions {
		out = append(out, p.Problems...)
	}
	return out
}

// Check verifies a data directory offline, topicfs's or a Kafka broker's:
//   - every batch of every segment: CRC, sizes, decodable records, offsets
//     strictly increasing across batches and segments, within the segment's
//     base offset and relative-offset range;
//   - every .index entry: strictly increasing, pointing at a batch boundary
//     with the entry's offset not covered by an earlier batch (so lookups
//     are correct); DumpLogSegments' "mismatch" (entry offset is not the
//     last offset of the batch at its position, normal after multi-batch
//     appends) is a warning;
//   - every .timeindex entry: timestamps strictly increasing, offset the last
//     offset of a batch whose max timestamp is the entry's;
//   - .txnindex entries point at ABORT markers; .snapshot files parse and
//     pass their CRC;
//   - the checkpoint files parse; entries naming partitions that are not in
//     the directory are warnings (a copied subset of a broker's log.dirs);
//   - leftovers: a .swap file (interrupted compaction swap) is a problem,
//     .cleaned files (abandoned cleaner output) and .deleted files (pending
//     deletion) are warnings, and so are the .damaged- files a salvage wrote.
//
// It prints a line per partition, totals and, when there are problems, what
// a repair would do (Repair: does it) to w. dir may also be a single
// partition directory. The error is non-nil when dir cannot be read, is not
// a data directory (ErrNotDataDir), is locked by a mount (with Repair;
// wraps engine.ErrLocked) or a repair fails; problems are in the report.
func Check(w io.Writer, dir string, opts CheckOptions) (CheckReport, error) {
	fsys := opts.FS
	if fsys == nil {
		fsys = vfs.OS
	}
	single, err := identifyDataDir(fsys, dir)
	if err != nil {
		return CheckReport{Dir: dir}, err
	}
	root := dir
	if single {
		root = filepath.Dir(filepath.Clean(dir))
	}
	if !opts.Repair && inUse(fsys, root) {
		fmt.Fprintf(w, "%s is in use by a running topicfs mount or Kafka broker (its .lock is held): files change while they are read, so the results below may show problems that are not there\n", root)
	}
	if opts.Repair {
		// The lock is taken before anything is read, so that a mounted
		// directory is refused even when it needs no repair, and no mount
		// can start while the repair writes.
		lock, err := engine.LockDir(fsys, root)
		if err != nil {
			return CheckReport{Dir: dir}, fmt.Errorf("check --repair: %w", err)
		}
		defer lock.Close()
	}
	rep, err := checkDir(fsys, dir, single)
	if err != nil {
		return rep, err
	}
	if len(rep.Problems()) > 0 {
		if rep.Plan, err = planRepair(fsys, &rep); err != nil {
			return rep, fmt.Errorf("check: %w", err)
		}
	}
	printReport(w, &rep, !opts.Repair)
	if !opts.Repair || len(rep.Problems()) == 0 {
		return rep, nil
	}

	before := rep
	repaired, err := repair(w, fsys, root, &before, opts.Logger)
	if err != nil {
		return before, err
	}
	fmt.Fprintf(w, "\nafter repair:\n")
	after, err := checkDir(fsys, dir, single)
	if err != nil {
		return after, err
	}
	after.Repaired = repaired
	after.Before = &before
	printReport(w, &after, false)
	return after, nil
}

// inUse reports whether a mount or broker holds the data directory's lock.
// It probes by taking the lock and releasing it at once, and only when the
// .lock file exists: a plain check creates nothing.
func inUse(fsys vfs.FS, root string) bool {
	if _, err := fsys.Stat(filepath.Join(root, engine.LockFile)); err != nil {
		return false
	}
	lock, err := engine.LockDir(fsys, root)
	if err != nil {
		return errors.Is(err, engine.ErrLocked)
	}
	_ = lock.Close()
	return false
}

// checkDir checks dir (a single partition directory when single) without
// printing.
func checkDir(fsys vfs.FS, dir string, single bool) (CheckReport, error) {
	rep := CheckReport{Dir: dir}
	if single {
		tp, _ := partitionOf(filepath.Base(filepath.Clean(dir)))
		rep.add(checkPartition(fsys, filepath.Clean(dir), tp))
		return rep, nil
	}
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return rep, fmt.Errorf("check: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		tp, ok := partitionOf(e.Name())
		if !ok {
			continue
		}
		rep.add(checkPartition(fsys, filepath.Join(dir, e.Name()), tp))
	}
	checkCheckpoints(fsys, dir, &rep)
	checkTopicsConfig(fsys, dir, &rep)
	return rep, nil
}

func (r *CheckReport) add(p PartitionReport) {
	r.Partitions = append(r.Partitions, p)
	r.Segments += p.Segments
	r.Batches += p.Batches
	r.Records += p.Records
	r.Bytes += p.Bytes
}

// partitionOf accepts every live partition directory, including KRaft's
// __cluster_metadata-0 (a log like any other for a checker).
func partitionOf(name string) (engine.TopicPartition, bool) {
	tp, ok := engine.ParsePartitionDir(name)
	if ok || tp.Topic == engine.MetadataTopic {
		return tp, true
	}
	return tp, false
}

func hasLogs(entries []os.DirEntry) bool {
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".log") {
			return true
		}
	}
	return false
}

// printReport prints r; withPlan adds what check --repair would do.
func printReport(w io.Writer, r *CheckReport, withPlan bool) {
	fmt.Fprintf(w, "checking %s\n", r.Dir)
	var warnings int
	for _, p := range r.Partitions {
		status := "ok"
		if n := len(p.Problems); n > 0 {
			status = fmt.Sprintf("%d problem(s)", n)
		}
		offsets := "no records"
		if p.FirstOffset >= 0 {
			offsets = fmt.Sprintf("offsets %d..%d", p.FirstOffset, p.LastOffset)
		}
		fmt.Fprintf(w, "%s-%d: %d segments, %d batches, %d records, %d bytes, %s, next offset %d: %s\n",
			p.Topic, p.Partition, p.Segments, p.Batches, p.Records, p.Bytes, offsets, p.NextOffset, status)
		for _, pr := range p.Problems {
			fmt.Fprintf(w, "  PROBLEM %s\n", pr)
		}
		for _, pr := range p.Warnings {
			fmt.Fprintf(w, "  warning %s\n", pr)
		}
		warnings += len(p.Warnings)
	}
	for _, pr := range r.Root {
		fmt.Fprintf(w, "PROBLEM %s\n", pr)
	}
	for _, pr := range r.Warnings {
		fmt.Fprintf(w, "warning %s\n", pr)
	}
	warnings += len(r.Warnings)
	n := len(r.Problems())
	fmt.Fprintf(w, "total: %d partitions, %d segments, %d batches, %d records, %d bytes; %d problems, %d warnings\n",
		len(r.Partitions), r.Segments, r.Batches, r.Records, r.Bytes, n, warnings)
	if withPlan && n > 0 {
		printPlan(w, r.Plan)
	}
	if n == 0 {
		fmt.Fprintln(w, "OK")
	} else {
		fmt.Fprintf(w, "FAILED: %d problems\n", n)
	}
}

// segmentFiles is what a partition directory holds for one base offset.
type segmentFiles struct {
	base                              int64
	log, index, timeindex, txnindex   string
	hasLog, hasIndex, hasTime, hasTxn bool
}

type partitionChecker struct {
	fs  vfs.FS
	rep *PartitionReport
}

func (c *partitionChecker) problem(path string, pos int64, format string, args ...any) {
	c.rep.Problems = append(c.rep.Problems, Problem{Path: path, Position: pos, Message: fmt.Sprintf(format, args...)})
}

func (c *partitionChecker) warn(path string, pos int64, format string, args ...any) {
	c.rep.Warnings = append(c.rep.Warnings, Problem{Path: path, Position: pos, Message: fmt.Sprintf(format, args...)})
}

func checkPartition(fsys vfs.FS, dir string, tp engine.TopicPartition) PartitionReport {
	rep := PartitionReport{Topic: tp.Topic, Partition: tp.Partition, Dir: dir, FirstOffset: -1, LastOffset: -1}
	c := &partitionChecker{fs: fsys, rep: &rep}
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		c.problem(dir, -1, "cannot list: %v", err)
		return rep
	}
	segs, snapshots := c.collectFiles(dir, entries)
	bases := c.logBases(segs)
	prevLast := int64(-1) // last offset seen in earlier segments
	for _, b := range bases {
		prevLast = c.checkSegment(segs[b], prevLast)
	}
	if len(bases) > 0 {
		rep.NextOffset = bases[len(bases)-1]
		if prevLast+1 > rep.NextOffset {
			rep.NextOffset = prevLast + 1
		}
	}
	if data, err := vfs.ReadFile(fsys, filepath.Join(dir, engine.LeaderEpochCheckpointFile)); err == nil {
		c.checkLeaderEpochs(filepath.Join(dir, engine.LeaderEpochCheckpointFile), data)
	}
	for _, p := range snapshots {
		data, err := vfs.ReadFile(fsys, p)
		if err != nil {
			c.problem(p, -1, "cannot read: %v", err)
			continue
		}
		if _, err := ParseProducerSnapshot(data); err != nil {
			c.problem(p, -1, "%v", err)
		}
	}
	return rep
}

// collectFiles sorts the files of a partition directory into segments (by
// base offset) and producer snapshots, and reports the leftovers of
// interrupted work it finds among them.
func (c *partitionChecker) collectFiles(dir string, entries []os.DirEntry) (map[int64]*segmentFiles, []string) {
	segs := map[int64]*segmentFiles{}
	get := func(base int64) *segmentFiles {
		s := segs[base]
		if s == nil {
			s = &segmentFiles{base: base}
			segs[base] = s
		}
		return s
	}
	var snapshots []string
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		name := e.Name()
		path := filepath.Join(dir, name)
		base, suffix, ok := engine.ParseSegmentName(name)
		if !ok {
			continue // leader-epoch-checkpoint, partition.metadata, quorum-state, ...
		}
		switch suffix {
		case "log":
			s := get(base)
			s.log, s.hasLog = path, true
		case "index":
			s := get(base)
			s.index, s.hasIndex = path, true
		case "timeindex":
			s := get(base)
			s.timeindex, s.hasTime = path, true
		case "txnindex":
			s := get(base)
			s.txnindex, s.hasTxn = path, true
		case "snapshot":
			snapshots = append(snapshots, path)
		default:
			c.leftover(path, suffix)
		}
	}
	return segs, snapshots
}

// leftover reports a segment file whose suffix says it is the leftover of
// interrupted work (a swap, a cleaning, a deletion, a repair).
func (c *partitionChecker) leftover(path, suffix string) {
	switch {
	case strings.HasSuffix(suffix, ".swap"):
		c.problem(path, -1, "leftover of an interrupted compaction swap (recovery completes or rolls it back; run check --repair)")
	case strings.HasSuffix(suffix, ".cleaned"):
		c.warn(path, -1, "leftover cleaner output (removed on the next open)")
	case strings.HasSuffix(suffix, ".deleted"):
		c.warn(path, -1, "segment file pending deletion")
	case strings.HasPrefix(suffix, "log"+engine.DamagedInfix):
		c.warn(path, -1, "damaged bytes crash recovery or check --repair moved aside (neither topicfs nor Kafka reads it; delete it when no longer needed)")
	case suffix == "log"+engine.RepairingSuffix:
		c.warn(path, -1, "leftover of an interrupted salvage (the .log beside it is unchanged; the next open deletes it)")
	}
}

// logBases returns the base offsets of the segments that have a .log, in
// order, and warns of the indexes without one.
func (c *partitionChecker) logBases(segs map[int64]*segmentFiles) []int64 {
	bases := make([]int64, 0, len(segs))
	for b, s := range segs {
		if s.hasLog {
			bases = append(bases, b)
			continue
		}
		for _, p := range []string{s.index, s.timeindex, s.txnindex} {
			if p != "" {
				c.warn(p, -1, "index without a .log (an orphan Kafka deletes on load)")
			}
		}
	}
	slices.Sort(bases)
	return bases
}

// checkLeaderEpochs checks a leader-epoch-checkpoint as the engine reads
// it (docs/FORMATS.md §6.2), and its latest epoch against the log end.
func (c *partitionChecker) checkLeaderEpochs(path string, data []byte) {
	entries, err := engine.ParseLeaderEpochCheckpoint(data)
	if err != nil {
		c.problem(path, -1, "does not parse: %v", err)
		return
	}
	if n := len(entries); n > 0 && entries[n-1].StartOffset > c.rep.NextOffset {
		c.warn(path, -1, "latest epoch %d starts at %d, beyond the log end %d", entries[n-1].Epoch, entries[n-1].StartOffset, c.rep.NextOffset)
	}
}

// batchInfo is what the index checks need of each batch of a segment.
type batchInfo struct {
	pos, base, last, maxTs, recMaxTs int64
	control, abort                   bool
}

// checkSegment verifies one segment and its indexes and returns the last
// offset seen so far (prevLast if the segment holds no records).
func (c *partitionChecker) checkSegment(s *segmentFiles, prevLast int64) int64 {
	rep := c.rep
	rep.Segments++
	f, err := c.fs.OpenFile(s.log, os.O_RDONLY, 0)
	if err != nil {
		c.problem(s.log, -1, "cannot open: %v", err)
		return prevLast
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		c.problem(s.log, -1, "cannot stat: %v", err)
		return prevLast
	}
	rep.Bytes += size
	if s.base <= prevLast {
		c.problem(s.log, -1, "segment base offset %d is not above the previous segment's last offset %d", s.base, prevLast)
	}

	batches, validEnd, prevLast := c.checkBatches(s, f, size, prevLast)
	if s.hasIndex {
		c.checkOffsetIndex(s, batches, validEnd)
	}
	if s.hasTime {
		c.checkTimeIndex(s, batches)
	}
	if s.hasTxn {
		c.checkTxnIndex(s, batches)
	}
	return prevLast
}

// checkBatches reads the batches of s's log f (size bytes) in order until
// its end or the first bad one, which it reports, and counts the good ones
// in the report. It returns them, the end of the last good one, and the
// last offset seen so far (prevLast if none).
func (c *partitionChecker) checkBatches(s *segmentFiles, f io.ReaderAt, size, prevLast int64) ([]batchInfo, int64, int64) {
	rep := c.rep
	var (
		batches []batchInfo
		pos     int64
		recs    []record.Record
	)
	// The batches come through the engine's batch reader (large checked
	// reads, the next one loaded ahead); where it has no verified batch,
	// badBatch reads the bytes there alone to say what is wrong with them.
	rd := engine.NewSegmentReader(engine.SegmentReaderOptions{Prefetch: true})
	defer rd.Free()
	src := engine.FileBatches(f, size)
	for pos < size {
		b, err := rd.Batch(src, pos, size)
		if err != nil {
			c.badBatch(f, s.log, pos, size, err)
			break
		}
		recs, err = b.Records(recs[:0])
		if err != nil {
			c.problem(s.log, pos, "records do not decode (the check of this segment stops here): %v", err)
			break
		}
		info, ok := c.checkBatch(s, pos, &b, recs, prevLast)
		if !ok {
			break
		}
		if rep.FirstOffset < 0 && len(recs) > 0 {
			rep.FirstOffset = recs[0].Offset
		}
		rep.Batches++
		rep.Records += int64(len(recs))
		rep.LastOffset = max(rep.LastOffset, info.last)
		batches = append(batches, info)
		prevLast = info.last
		pos += int64(b.Size())
	}
	return batches, pos, prevLast
}

// checkBatch checks the offsets of the batch b at pos of s, its records
// recs, against the segment's base and the last offset before it, and
// returns what the index checks need of it; ok is false (and the problems
// reported) when an offset is out of place.
func (c *partitionChecker) checkBatch(s *segmentFiles, pos int64, b *record.Batch, recs []record.Record, prevLast int64) (info batchInfo, ok bool) {
	info = batchInfo{pos: pos, base: b.BaseOffset, last: b.LastOffset(), maxTs: b.MaxTimestamp, recMaxTs: -1, control: b.IsControl()}
	if b.Magic < 2 && len(recs) > 0 {
		info.base = recs[0].Offset
	}
	if info.control {
		if t, err := b.ControlType(); err == nil && t == record.ControlAbort {
			info.abort = true
		}
	}
	ok = true
	if info.base <= prevLast {
		c.problem(s.log, pos, "batch offsets %d..%d do not follow the previous last offset %d", info.base, info.last, prevLast)
		ok = false
	}
	if info.base < s.base {
		c.problem(s.log, pos, "batch base offset %d is below the segment's base offset %d", info.base, s.base)
		ok = false
	}
	if info.last < info.base {
		c.problem(s.log, pos, "batch last offset %d is below its base offset %d", info.last, info.base)
		ok = false
	}
	if info.last-s.base > math.MaxInt32 {
		c.problem(s.log, pos, "offset %d does not fit a relative offset of segment %d", info.last, s.base)
		ok = false
	}
	prevRec := info.base - 1
	for i := range recs {
		r := &recs[i]
		if r.Offset <= prevRec || r.Offset > info.last {
			c.problem(s.log, pos, "record offset %d out of order or outside the batch's %d..%d", r.Offset, info.base, info.last)
			ok = false
			break
		}
		prevRec = r.Offset
		info.recMaxTs = max(info.recMaxTs, r.Timestamp)
	}
	return info, ok
}

// badBatch reports the problem at pos of the .log at path (valid bytes up
// to size), where the batch reader returned err: the entry there read
// alone says whether it is cut short, corrupt or fails its CRC.
func (c *partitionChecker) badBatch(f io.ReaderAt, path string, pos, size int64, err error) {
	b, rerr := record.ReadAt(f, pos, size, nil)
	if rerr == nil {
		if verr := b.Verify(); verr != nil {
			c.problem(path, pos, "batch fails verification (the check of this segment stops here): %v", verr)
			return
		}
	} else {
		err = rerr
	}
	what := "corrupt batch"
	if errors.Is(err, record.ErrTruncated) {
		what = "partial batch at the end of the log"
	}
	c.problem(path, pos, "%s (the check of this segment stops here, %d bytes before its end; the repair plan below says what is intact): %v", what, size-pos, err)
}

// batchAt returns the index of the batch starting at pos, or -1.
func batchAt(batches []batchInfo, pos int64) int {
	i, ok := slices.BinarySearchFunc(batches, pos, func(b batchInfo, p int64) int { return cmp.Compare(b.pos, p) })
	if !ok {
		return -1
	}
	return i
}

// batchEndingAt returns the index of the batch whose last offset is off, or -1.
func batchEndingAt(batches []batchInfo, off int64) int {
	i, ok := slices.BinarySearchFunc(batches, off, func(b batchInfo, o int64) int { return cmp.Compare(b.last, o) })
	if !ok {
		return -1
	}
	return i
}

func (c *partitionChecker) checkOffsetIndex(s *segmentFiles, batches []batchInfo, validEnd int64) {
	raw, size, err := readOffsetIndex(c.fs, s.index, s.base, true)
	if err != nil {
		c.problem(s.index, -1, "cannot read: %v", err)
		return
	}
	if size%offsetEntrySize != 0 {
		c.problem(s.index, -1, "size %d is not a multiple of %d", size, offsetEntrySize)
	}
	x, err := index.OpenOffsetIndex(c.fs, s.index, s.base, int(size), false)
	if err != nil {
		c.problem(s.index, -1, "engine cannot open it: %v", err)
		return
	}
	defer x.Close()
	if err := x.SanityCheck(); err != nil {
		c.problem(s.index, -1, "sanity check: %v", err)
	}
	if x.Entries() != len(raw) {
		c.problem(s.index, int64(x.Entries())*offsetEntrySize, "entry %d is out of order; the engine stops reading there", x.Entries())
	}
	prev := offsetEntry{offset: -1, pos: -1}
	past := 0 // entries past the valid end of the log, reported once
	for i, e := range raw {
		at := int64(i) * offsetEntrySize
		if i > 0 && (e.offset <= prev.offset || e.pos <= prev.pos) {
			c.problem(s.index, at, "entry (offset %d, position %d) does not increase over (offset %d, position %d)", e.offset, e.pos, prev.offset, prev.pos)
		}
		prev = e
		if e.pos >= validEnd {
			if past == 0 {
				c.problem(s.index, at, "entry (offset %d, position %d) and %d later entries point past the valid log end %d of %s",
					e.offset, e.pos, len(raw)-i-1, validEnd, filepath.Base(s.log))
			}
			past++
			continue
		}
		j := batchAt(batches, e.pos)
		if j < 0 {
			c.problem(s.index, at, "entry (offset %d, position %d) does not point at a batch boundary of %s", e.offset, e.pos, filepath.Base(s.log))
			continue
		}
		if j > 0 && batches[j-1].last >= e.offset {
			c.problem(s.index, at, "entry (offset %d, position %d): offset %d is held by the earlier batch at position %d, so lookups would skip it",
				e.offset, e.pos, e.offset, batches[j-1].pos)
			continue
		}
		if e.offset > batches[len(batches)-1].last {
			c.problem(s.index, at, "entry offset %d is beyond the segment's last offset %d", e.offset, batches[len(batches)-1].last)
			continue
		}
		if batches[j].last != e.offset {
			c.warn(s.index, at, "entry offset %d is not the last offset %d of the batch at position %d (normal when one append held several batches)",
				e.offset, batches[j].last, e.pos)
		}
	}
}

func (c *partitionChecker) checkTimeIndex(s *segmentFiles, batches []batchInfo) {
	raw, size, err := readTimeIndex(c.fs, s.timeindex, s.base, true)
	if err != nil {
		c.problem(s.timeindex, -1, "cannot read: %v", err)
		return
	}
	if size%timeEntrySize != 0 {
		c.problem(s.timeindex, -1, "size %d is not a multiple of %d", size, timeEntrySize)
	}
	x, err := index.OpenTimeIndex(c.fs, s.timeindex, s.base, int(size), false)
	if err != nil {
		c.problem(s.timeindex, -1, "engine cannot open it: %v", err)
		return
	}
	defer x.Close()
	if err := x.SanityCheck(); err != nil {
		c.problem(s.timeindex, -1, "sanity check: %v", err)
	}
	prevTs, prevOff := int64(math.MinInt64), int64(-1)
	lastValid := int64(-1)
	if len(batches) > 0 {
		lastValid = batches[len(batches)-1].last
	}
	past := 0
	for i, e := range raw {
		at := int64(i) * timeEntrySize
		if i > 0 && (e.ts <= prevTs || e.offset < prevOff) {
			c.problem(s.timeindex, at, "entry (timestamp %d, offset %d) does not increase over (timestamp %d, offset %d)", e.ts, e.offset, prevTs, prevOff)
		}
		prevTs, prevOff = e.ts, e.offset
		if e.offset > lastValid {
			if past == 0 {
				c.problem(s.timeindex, at, "entry offset %d and %d later entries are beyond the last valid offset %d of %s",
					e.offset, len(raw)-i-1, lastValid, filepath.Base(s.log))
			}
			past++
			continue
		}
		j := batchEndingAt(batches, e.offset)
		if j < 0 {
			c.problem(s.timeindex, at, "entry offset %d is not the last offset of any batch in %s", e.offset, filepath.Base(s.log))
			continue
		}
		if e.ts != batches[j].maxTs && e.ts != batches[j].recMaxTs {
			c.problem(s.timeindex, at, "entry timestamp %d is not the max timestamp %d of the batch ending at offset %d", e.ts, batches[j].maxTs, e.offset)
		}
	}
}

func (c *partitionChecker) checkTxnIndex(s *segmentFiles, batches []batchInfo) {
	x, err := index.OpenTxnIndex(c.fs, s.txnindex)
	if err != nil {
		c.problem(s.txnindex, -1, "cannot read: %v", err)
		return
	}
	defer x.Close()
	prev := int64(-1)
	for i, t := range x.All() {
		at := int64(i) * 34
		if t.LastOffset <= prev {
			c.problem(s.txnindex, at, "aborted transaction ending at %d does not follow the previous one at %d", t.LastOffset, prev)
		}
		prev = t.LastOffset
		if t.LastOffset < s.base || t.FirstOffset > t.LastOffset {
			c.problem(s.txnindex, at, "aborted transaction %d..%d is outside segment %d", t.FirstOffset, t.LastOffset, s.base)
			continue
		}
		j := batchEndingAt(batches, t.LastOffset)
		if j < 0 || !batches[j].abort {
			c.problem(s.txnindex, at, "aborted transaction of producer %d: offset %d is not an ABORT marker", t.ProducerID, t.LastOffset)
		}
	}
}
