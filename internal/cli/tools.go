package cli

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/tools"
)

func init() {
	register(&command{
		name:     "dump",
		synopsis: "print segment, index and snapshot files like kafka-dump-log",
		usage:    "topicfs dump [--print-data] [--deep-iteration] [--skip-record-metadata] [--verify-index-only] [--index-sanity-check] [--json] FILE...",
		help: `
Prints each FILE as Kafka's kafka-dump-log.sh (DumpLogSegments) does, by its
suffix: .log (record batches; with --print-data every record's key and
value), .index and .timeindex (entries, checked against the .log beside
them), .txnindex (aborted transactions) and .snapshot (producer state). It
reads the files directly — no mount needed — and never writes. The files may
be topicfs's or a Kafka broker's, or those shown under a mount's
TOPIC/P/segments/. Exits 1 if a file could not be read or holds data Kafka's
tool would fail on.`,
		flags: dumpFlags,
	})
	register(&command{
		name:     "check",
		synopsis: "verify every segment and index of a data directory offline (--repair to recover)",
		usage:    "topicfs check [--repair] DIR",
		help: `
Verifies a data directory (topicfs's, or a copy of a Kafka broker's log.dirs)
or a single partition directory without mounting it: every batch's CRC and
offsets, every index entry, the checkpoint files and leftovers of interrupted
deletes or compactions. It prints a line per partition and totals, and exits
1 when it found problems.

When it finds problems it prints what --repair would do, and changes
nothing. --repair then keeps every intact batch: a damaged byte range of a
.log moves, byte for byte, to SEGMENT.log.damaged-POS-END beside it (a name
Kafka and topicfs never load), the batches after it are found again by
their CRC and stay at their offsets, a torn tail is cut off the same way,
and only the changed segments' indexes are rebuilt; an interrupted
compaction swap is completed or rolled back. It says what it did, then
checks again. It locks the directory first, so it refuses a directory a
mount (or a Kafka broker) uses. DIR must be a data directory (partition
directories TOPIC-N with .log files, meta.properties or checkpoint files)
or one partition directory; anything else, including a topicfs mountpoint,
is an error.`,
		flags: checkFlags,
	})
}

func dumpFlags(fs *flag.FlagSet, e *env) func([]string) int {
	o := tools.DumpOptions{}
	fs.BoolVar(&o.PrintData, "print-data", false, "print every record with its key and value (implies --deep-iteration)")
	fs.BoolVar(&o.PrintData, "print-data-log", false, "the same as --print-data (Kafka's name)")
	fs.BoolVar(&o.DeepIteration, "deep-iteration", false, "print a line per record, without key and value")
	fs.BoolVar(&o.SkipRecordMetadata, "skip-record-metadata", false, "leave offset, timestamp, sizes and sequence out of record lines")
	fs.BoolVar(&o.VerifyIndexOnly, "verify-index-only", false, "check index entries against the log without printing them")
	fs.BoolVar(&o.IndexSanityCheck, "index-sanity-check", false, "only run Kafka's sanity check on .index and .timeindex files")
	fs.BoolVar(&o.JSON, "json", false, "print one JSON object per line (file, batch, record, index entry, ...) instead of Kafka's text")
	return func(files []string) int {
		const cmd = "dump"
		if len(files) == 0 {
			return e.usageErr(cmd, "name at least one FILE (a .log, .index, .timeindex, .txnindex or .snapshot)")
		}
		if err := tools.Dump(e.stdout, e.stderr, files, o); err != nil {
			return exitFail // Dump printed each error once, in order with its output
		}
		return exitOK
	}
}

func checkFlags(fs *flag.FlagSet, e *env) func([]string) int {
	var repair bool
	fs.BoolVar(&repair, "repair", false, "carry out the plan check prints: move damaged byte ranges aside keeping every intact batch, rebuild indexes, settle interrupted swaps; then check again")
	return func(args []string) int {
		const cmd = "check"
		if len(args) != 1 {
			return e.usageErr(cmd, "want one DIR (a data directory or a partition directory), got %d arguments", len(args))
		}
		dir := args[0]
		if fi, err := os.Stat(dir); err != nil {
			return e.fail(cmd, "%s: %v", dir, unwrapErrno(err))
		} else if !fi.IsDir() {
			return e.fail(cmd, "%s is not a directory", dir)
		}
		if mnt, ok := topicfsMountOf(dir); ok {
			return e.fail(cmd, "%s is inside the topicfs mount at %s, not a data directory: check the data directory it serves (--repair only once unmounted)", dir, mnt)
		}
		opts := tools.CheckOptions{Repair: repair}
		if repair {
			opts.Logger = slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
		}
		rep, err := tools.Check(e.stdout, dir, opts)
		if err != nil {
			if errors.Is(err, engine.ErrLocked) {
				return e.fail(cmd, "%s is in use by a topicfs mount or a Kafka broker (its .lock is held); unmount it before --repair", dir)
			}
			return e.fail(cmd, "%v", err)
		}
		problems := rep.Problems()
		if len(rep.Repaired) > 0 {
			fmt.Fprintf(e.stderr, "topicfs check: repaired %s\n", strings.Join(rep.Repaired, ", "))
		}
		if len(problems) > 0 {
			hint := " (the plan above is what topicfs check --repair would do)"
			if repair {
				hint = " left after the repair"
			}
			fmt.Fprintf(e.stderr, "topicfs check: %d problem(s) in %s%s\n", len(problems), dir, hint)
			return exitFail
		}
		return exitOK
	}
}

// topicfsMountOf reports whether path lies on a topicfs FUSE mount (the
// mountpoint or below it) and returns the mountpoint.
func topicfsMountOf(path string) (string, bool) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", false
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	best := ""
	for _, m := range mounts() {
		if !within(abs, m.dir) || len(m.dir) < len(best) {
			continue
		}
		if m.fstype == "fuse.topicfs" {
			best = m.dir
		} else if len(m.dir) > len(best) {
			best = "" // a mount of another type over (a part of) a topicfs mount
		}
	}
	return best, best != ""
}
