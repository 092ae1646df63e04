package cli

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"github.com/topicfs/topicfs/bench"
)

func init() {
	register(&command{
		name:     "bench",
		synopsis: "measure topicfs next to the machine's own limits (append, read, seek, cleaner, mount, cluster)",
		usage:    "topicfs bench [--quick] [--only WORKLOADS] [--sizes KEY=N,...] [--dir DIR] [--fsync] [--cpuprofile FILE] [--keep]",
		help: `
Runs the benchmark workloads and prints a table: each figure beside a
baseline measured in the same run on the same disk (a raw write, cat of the
.log files, ...) and their ratio. The mount workloads mount this topicfs
binary on temporary mountpoints (root and /dev/fuse needed) and always
unmount; the cluster workloads start an in-process Kafka cluster (franz-go's
kfake), mount it, and time plain franz-go clients doing the same work
against it beside the mount. Exits 1 if a workload failed (returned an error); a missed
target is shown in the table but does not change the exit status.

Workloads: ` + strings.Join(bench.WorkloadNames(), ", ") + `.`,
		flags: benchFlags,
	})
}

func benchFlags(fs *flag.FlagSet, e *env) func([]string) int {
	var (
		quick, fsync, keep bool
		only, sizes, dir   string
		cpuprofile         string
	)
	fs.BoolVar(&quick, "quick", false, "small sizes: the whole table in about a minute (CI)")
	fs.StringVar(&only, "only", "", "comma-separated `WORKLOADS` to run (default all)")
	fs.StringVar(&sizes, "sizes", "", "override amounts as `KEY=N,...`; keys: "+bench.SizesHelp())
	fs.StringVar(&dir, "dir", "", "put the temporary data in `DIR` (default $TMPDIR); baselines use the same disk")
	fs.BoolVar(&fsync, "fsync", false, "end every append run, topicfs and baseline alike, with one fsync")
	fs.StringVar(&cpuprofile, "cpuprofile", "", "write a CPU profile of the engine workloads to `FILE`")
	fs.BoolVar(&keep, "keep", false, "keep the data directory afterwards (its path is printed)")
	return func(args []string) int {
		const cmd = "bench"
		if len(args) > 0 {
			return e.usageErr(cmd, "unexpected arguments: %q", args)
		}
		opts := bench.Options{Quick: quick, Dir: dir, Fsync: fsync, CPUProfile: cpuprofile, Keep: keep, Progress: e.stderr}
		if only != "" {
			opts.Only = strings.Split(only, ",")
		}
		if sizes != "" {
			if err := bench.ParseSizes(sizes, &opts.Sizes); err != nil {
				return e.usageErr(cmd, "%v", err)
			}
		}
		exe, err := os.Executable()
		if err != nil {
			return e.fail(cmd, "cannot find the topicfs binary for the mount workloads: %v", err)
		}
		opts.Binary = exe
		// The engine rows run in this process: give it the Ps `topicfs
		// mount` runs the engine with, so the rows measure the engine as the
		// mount runs it. At the CPU count, a Reader's pread that blocks while
		// every P is busy loses its P to sysmon and waits in the run queue
		// for another (docs/PERFORMANCE.md, "Engine read").
		prev := runtime.GOMAXPROCS(0)
		if _, raised := raiseProcs(); raised {
			defer runtime.GOMAXPROCS(prev)
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		t, err := bench.Run(ctx, opts)
		if t != nil {
			t.Print(e.stdout)
		}
		if err != nil {
			return e.fail(cmd, "%v", err)
		}
		if t.Failed() {
			return exitFail
		}
		return exitOK
	}
}
