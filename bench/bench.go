package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Sizes are the amounts each workload moves. The zero value of a field means
// its default (DefaultSizes, or QuickSizes with Options.Quick).
type Sizes struct {
	Append      int64 // value bytes per engine append run (each value size × codec)
	MountAppend int64 // bytes of the file of 100-byte lines cat'd into append
	Read        int64 // partition for the sequential read rows and the small by-offset/RSS partition
	OffsetLarge int64 // the large by-offset partition
	Opens       int   // by-offset opens per partition
	RSSRead     int64 // partition read end to end before the RSS figure
	Segments    int   // segments of the mount-time partition
	SegmentRead int64 // the sealed segment cat through segments/
	CleanKeys   int64 // distinct keys for the cleaner and the RSS-after-cleaning rows
	// The cluster rows (a mount of an in-process kfake cluster).
	ClusterAppend int64 // bytes of the file of 100-byte lines cat'd into a cluster topic's append
	ClusterRead   int64 // bytes of 100-byte lines in the topic the cluster read and by-offset rows read
	ClusterOpens  int   // by-offset/-10 reads timed, and as many tails by the baseline consumer
}

// DefaultSizes finish in a few minutes on 2 cores.
var DefaultSizes = Sizes{
	Append:      512 << 20,
	MountAppend: 256 << 20,
	Read:        1 << 30,
	OffsetLarge: 8 << 30,
	Opens:       2000,
	RSSRead:     4 << 30,
	Segments:    10000,
	SegmentRead: 256 << 20,
	CleanKeys:   10_000_000,

	ClusterAppend: 32 << 20,
	ClusterRead:   32 << 20,
	ClusterOpens:  200,
}

// QuickSizes keep the whole table under about a minute (CI).
var QuickSizes = Sizes{
	Append:      8 << 20,
	MountAppend: 8 << 20,
	Read:        32 << 20,
	OffsetLarge: 256 << 20,
	Opens:       200,
	RSSRead:     64 << 20,
	Segments:    500,
	SegmentRead: 128 << 20,
	CleanKeys:   100_000,

	ClusterAppend: 4 << 20,
	ClusterRead:   4 << 20,
	ClusterOpens:  50,
}

// sizeKeys maps the --sizes keys to their fields; byte sizes take K/M/G/KiB/MiB/GiB suffixes.
type sizeKey struct {
	name  string
	bytes bool
	field func(*Sizes) any
	help  string
}

var sizeKeys = []sizeKey{
	{"append", true, func(s *Sizes) any { return &s.Append }, "value bytes per engine append run"},
	{"mount-append", true, func(s *Sizes) any { return &s.MountAppend }, "bytes cat'd into TOPIC/0/append"},
	{"read", true, func(s *Sizes) any { return &s.Read }, "partition read sequentially; also the small by-offset partition"},
	{"offset", true, func(s *Sizes) any { return &s.OffsetLarge }, "large by-offset partition"},
	{"opens", false, func(s *Sizes) any { return &s.Opens }, "by-offset opens per partition"},
	{"rss-read", true, func(s *Sizes) any { return &s.RSSRead }, "partition read end to end before measuring RSS"},
	{"segments", false, func(s *Sizes) any { return &s.Segments }, "segments of the mount-time partition"},
	{"segment-read", true, func(s *Sizes) any { return &s.SegmentRead }, "sealed segment cat through segments/"},
	{"keys", false, func(s *Sizes) any { return &s.CleanKeys }, "distinct keys cleaned"},
	{"cluster-append", true, func(s *Sizes) any { return &s.ClusterAppend }, "bytes cat'd into a cluster topic's append"},
	{"cluster-read", true, func(s *Sizes) any { return &s.ClusterRead }, "cluster topic read by cat records and by-offset/-10"},
	{"cluster-opens", false, func(s *Sizes) any { return &s.ClusterOpens }, "by-offset/-10 reads timed"},
}

// SizesHelp describes the keys ParseSizes accepts.
func SizesHelp() string {
	var b strings.Builder
	for _, k := range sizeKeys {
		fmt.Fprintf(&b, "%s (%s), ", k.name, k.help)
	}
	return strings.TrimSuffix(b.String(), ", ")
}

// ParseSizes parses "key=value,key=value" (keys: see SizesHelp) into s.
func ParseSizes(spec string, s *Sizes) error {
	for _, kv := range strings.FieldsFunc(spec, func(r rune) bool { return r == ',' || r == ' ' }) {
		name, val, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("--sizes: %q is not key=value", kv)
		}
		i := slices.IndexFunc(sizeKeys, func(k sizeKey) bool { return k.name == name })
		if i < 0 {
			names := make([]string, len(sizeKeys))
			for j, k := range sizeKeys {
				names[j] = k.name
			}
			return fmt.Errorf("--sizes: unknown key %q (keys: %s)", name, strings.Join(names, ", "))
		}
		n, err := parseAmount(val, sizeKeys[i].bytes)
		if err != nil || n <= 0 {
			return fmt.Errorf("--sizes: %s=%q: want a positive number%s", name, val, map[bool]string{true: " of bytes (e.g. 512MiB, 2G)", false: " (e.g. 10000, 10M)"}[sizeKeys[i].bytes])
		}
		switch f := sizeKeys[i].field(s).(type) {
		case *int64:
			*f = n
		case *int:
			*f = int(n)
		}
	}
	return nil
}

// parseAmount parses 123, 4k, 4KiB, 1.5G, 10M. With bytes, K/M/G are powers
// of 1024 (as in KiB); counts use powers of 1000.
func parseAmount(s string, bytes bool) (int64, error) {
	s = strings.TrimSpace(s)
	up := strings.ToUpper(s)
	up = strings.TrimSuffix(up, "B")
	up = strings.TrimSuffix(up, "I")
	mult := int64(1)
	base := int64(1000)
	if bytes {
		base = 1024
	}
	if up != "" {
		switch up[len(up)-1] {
		case 'K':
			mult = base
		case 'M':
			mult = base * base
		case 'G':
			mult = base * base * base
		case 'T':
			mult = base * base * base * base
		}
		if mult != 1 {
			up = up[:len(up)-1]
		}
	}
	f, err := strconv.ParseFloat(up, 64)
	if err != nil {
		return 0, err
	}
	return int64(f * float64(mult)), nil
}

// Options configure Run. The zero value runs the default sizes, without the
// mount rows (no Binary).
type Options struct {
	Quick bool
	Sizes Sizes // zero fields: defaults (quick or not)
	// Dir is where the data goes (a fresh temporary directory is made
	// inside it and removed at the end); "" = os.TempDir(). Baselines write
	// to the same directory, so they measure the same disk.
	Dir string
	// Binary is the topicfs executable the mount rows run; "" skips them.
	Binary string
	// Only, if non-empty, selects workloads by name (see the package doc).
	Only []string
	// Fsync ends every append run (engine and baseline alike) with one
	// fsync; false: no fsync in either.
	Fsync bool
	// CPUProfile, if set, writes a CPU profile of this process (the engine
	// workloads; the mount runs in its own process) to the file.
	CPUProfile string
	// Progress receives one line per step; nil = discard.
	Progress io.Writer
	// Keep leaves the data directory in place (its path is printed).
	Keep bool
}

func (o *Options) sizes() Sizes {
	d := DefaultSizes
	if o.Quick {
		d = QuickSizes
	}
	s := o.Sizes
	fill := func(v *int64, def int64) {
		if *v <= 0 {
			*v = def
		}
	}
	fill(&s.Append, d.Append)
	fill(&s.MountAppend, d.MountAppend)
	fill(&s.Read, d.Read)
	fill(&s.OffsetLarge, d.OffsetLarge)
	fill(&s.RSSRead, d.RSSRead)
	fill(&s.CleanKeys, d.CleanKeys)
	fill(&s.SegmentRead, d.SegmentRead)
	fill(&s.ClusterAppend, d.ClusterAppend)
	fill(&s.ClusterRead, d.ClusterRead)
	if s.Opens <= 0 {
		s.Opens = d.Opens
	}
	if s.ClusterOpens <= 0 {
		s.ClusterOpens = d.ClusterOpens
	}
	if s.Segments <= 0 {
		s.Segments = d.Segments
	}
	return s
}

// workload is one group of rows.
type workload struct {
	name  string
	mount bool // needs the topicfs binary
	run   func(ctx context.Context, r *runner) ([]Row, error)
}

// workloads in the order they run and print.
var workloads = []workload{
	{name: "engine-append", run: engineAppend},
	{name: "engine-read", run: engineRead},
	{name: "engine-point", run: enginePoint},
	{name: "cleaner", run: cleanerThroughput},
	{name: "key-index", run: keyIndexRows},
	{name: "mount-append", mount: true, run: mountAppend},
	{name: "mount-read", mount: true, run: mountRead},
	{name: "mount-segments", mount: true, run: mountSegments},
	{name: "mount-offset", mount: true, run: mountOffset},
	{name: "mount-rss", mount: true, run: mountRSS},
	{name: "mount-time", mount: true, run: mountTime},
	{name: "cluster-append", mount: true, run: clusterAppend},
	{name: "cluster-read", mount: true, run: clusterRead},
	{name: "cluster-offset", mount: true, run: clusterOffset},
}

// WorkloadNames lists the workloads in run order.
func WorkloadNames() []string {
	n := make([]string, len(workloads))
	for i, w := range workloads {
		n[i] = w.name
	}
	return n
}

// runner is the state shared by the workloads of one Run.
type runner struct {
	opts  Options
	sizes Sizes
	root  string // temporary directory for everything
	// views is the data directory with the read/offset/rss partitions,
	// built once by the first workload that needs it.
	views *viewsData
	// kv describes the pristine key/value data (kvData), once built.
	kv *topicInfo
	// readKiB: the engine read rows' partition of 1 KiB values is built.
	readKiB bool
}

func (r *runner) logf(format string, args ...any) {
	if r.opts.Progress != nil {
		fmt.Fprintf(r.opts.Progress, "bench: "+format+"\n", args...)
	}
}

// path returns a path inside the run's directory.
func (r *runner) path(elem ...string) string {
	return filepath.Join(append([]string{r.root}, elem...)...)
}

// Run runs the selected workloads and returns their table. A workload that
// fails adds a row with Err and the others still run; Run's error is about
// the run itself (bad options, no temporary directory). Cancel ctx to stop
// early (rows not run are left out).
func Run(ctx context.Context, opts Options) (*Table, error) {
	for _, n := range opts.Only {
		if !slices.Contains(WorkloadNames(), n) {
			return nil, fmt.Errorf("unknown workload %q (workloads: %s)", n, strings.Join(WorkloadNames(), ", "))
		}
	}
	dir := opts.Dir
	if dir == "" {
		dir = os.TempDir()
	}
	root, err := os.MkdirTemp(dir, "topicfs-bench-")
	if err != nil {
		return nil, err
	}
	r := &runner{opts: opts, sizes: opts.sizes(), root: root}
	if opts.Keep {
		r.logf("data in %s (kept)", root)
	} else {
		defer os.RemoveAll(root)
	}
	if opts.CPUProfile != "" {
		f, err := os.Create(opts.CPUProfile)
		if err != nil {
			return nil, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, err
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	t := &Table{Quick: opts.Quick, Sizes: r.sizes, Fsync: opts.Fsync, Procs: runtime.GOMAXPROCS(0), Started: time.Now()}
	for _, w := range workloads {
		if len(opts.Only) > 0 && !slices.Contains(opts.Only, w.name) {
			continue
		}
		if w.mount && opts.Binary == "" {
			t.Skipped = append(t.Skipped, w.name)
			continue
		}
		if ctx.Err() != nil {
			break
		}
		r.logf("%s ...", w.name)
		start := time.Now()
		rows, err := w.run(ctx, r)
		t.Rows = append(t.Rows, rows...)
		if err != nil {
			t.Rows = append(t.Rows, Row{Workload: w.name, Name: w.name, Err: err})
			r.logf("%s FAILED after %v: %v", w.name, time.Since(start).Round(time.Millisecond), err)
		} else {
			r.logf("%s done in %v (%d files open)", w.name, time.Since(start).Round(time.Millisecond), openFiles())
		}
	}
	t.Elapsed = time.Since(t.Started)
	return t, ctx.Err()
}

// errorf wraps a workload step's failure with the step.
func errorf(step string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", step, err)
}

var errNoData = errors.New("bench: no data measured")

// openFiles counts this process's open file descriptors (a leak check in
// the progress lines).
func openFiles() int {
	ents, _ := os.ReadDir("/proc/self/fd")
	return len(ents)
}
