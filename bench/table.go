package bench

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Figure is one measured number with its unit ("MB/s", "ms", "MiB", ...)
// and an optional second figure in words ("3.1 M rec/s").
type Figure struct {
	V     float64
	Unit  string
	Extra string
}

func (f Figure) String() string {
	if f.Unit == "" && f.V == 0 {
		return "-"
	}
	s := fmtNum(f.V) + " " + f.Unit
	if f.Extra != "" {
		s += " (" + f.Extra + ")"
	}
	return s
}

// fmtNum prints three significant digits or so.
func fmtNum(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

// Row is one line of the table: topicfs's figure, the baseline measured in
// the same run, and their ratio (Value / Baseline).
type Row struct {
	Workload string // the workload that produced it (Options.Only name)
	Name     string // what was measured
	Value    Figure // topicfs
	BaseName string // what the baseline is ("raw write(2)", "cat .log", ...)
	Baseline Figure
	Ratio    float64 // Value.V / Baseline.V; 0 when there is no baseline
	Target   string  // the goal, in words ("≥ 0.7"); "" none
	// Met says whether Target is met (nil: no target, or not checkable).
	Met  *bool
	Note string
	Err  error // the workload failed; the other fields may be empty
}

// ratio sets r.Ratio from the two figures.
func (r *Row) ratio() {
	if r.Baseline.V > 0 {
		r.Ratio = r.Value.V / r.Baseline.V
	}
}

// atLeast / atMost set Target and Met for a bound on the ratio.
func (r *Row) ratioAtLeast(x float64) {
	r.Target = "ratio ≥ " + strconv.FormatFloat(x, 'g', -1, 64)
	met := r.Ratio >= x
	r.Met = &met
}

func (r *Row) ratioAtMost(x float64) {
	r.Target = "ratio ≤ " + strconv.FormatFloat(x, 'g', -1, 64)
	met := r.Ratio > 0 && r.Ratio <= x
	r.Met = &met
}

// Table is the result of Run.
type Table struct {
	Quick   bool
	Sizes   Sizes
	Fsync   bool
	Rows    []Row
	Skipped []string // workloads not run (mount rows without a binary)
	Procs   int      // GOMAXPROCS of the run (the engine rows run in this process)
	Started time.Time
	Elapsed time.Duration
}

// Failed reports whether any workload failed.
func (t *Table) Failed() bool {
	for _, r := range t.Rows {
		if r.Err != nil {
			return true
		}
	}
	return false
}

// Missed lists the rows whose target was not met.
func (t *Table) Missed() []Row {
	var out []Row
	for _, r := range t.Rows {
		if r.Met != nil && !*r.Met {
			out = append(out, r)
		}
	}
	return out
}

// Print writes the table as aligned text.
func (t *Table) Print(w io.Writer) {
	mode := "default sizes"
	if t.Quick {
		mode = "quick"
	}
	fsync := "no fsync"
	if t.Fsync {
		fsync = "one fsync at the end of each append run"
	}
	fmt.Fprintf(w, "topicfs bench (%s; %s; %d CPUs, GOMAXPROCS %d; %s; %v)\n", mode, fsync, runtime.NumCPU(), t.Procs, t.Started.UTC().Format(time.RFC3339), t.Elapsed.Round(100*time.Millisecond))
	s := t.Sizes
	fmt.Fprintf(w, "sizes: append=%s mount-append=%s read=%s offset=%s opens=%d rss-read=%s segments=%d segment-read=%s keys=%d cluster-append=%s cluster-read=%s cluster-opens=%d\n\n",
		fmtBytes(s.Append), fmtBytes(s.MountAppend), fmtBytes(s.Read), fmtBytes(s.OffsetLarge), s.Opens, fmtBytes(s.RSSRead), s.Segments, fmtBytes(s.SegmentRead), s.CleanKeys,
		fmtBytes(s.ClusterAppend), fmtBytes(s.ClusterRead), s.ClusterOpens)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKLOAD\tTOPICFS\tBASELINE\tRATIO\tTARGET\t")
	for _, r := range t.Rows {
		if r.Err != nil {
			fmt.Fprintf(tw, "%s\tFAILED (below)\t\t\t\t\n", r.Name)
			continue
		}
		base := r.Baseline.String()
		if r.BaseName != "" {
			base = r.BaseName + " " + base
		}
		ratio := "-"
		if r.Ratio != 0 {
			ratio = fmt.Sprintf("%.2f", r.Ratio)
		}
		target := r.Target
		if r.Met != nil {
			if *r.Met {
				target += " ok"
			} else {
				target += " MISSED"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", r.Name, r.Value, base, ratio, target)
	}
	tw.Flush()
	var notes []string
	for _, r := range t.Rows {
		if r.Note != "" {
			notes = append(notes, fmt.Sprintf("  %s: %s", r.Name, r.Note))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintf(w, "\nnotes:\n%s\n", strings.Join(notes, "\n"))
	}
	var failed []string
	for _, r := range t.Rows {
		if r.Err != nil {
			failed = append(failed, fmt.Sprintf("  %s: %s", r.Name, oneLine(r.Err.Error())))
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(w, "\nFAILED:\n%s\n", strings.Join(failed, "\n"))
	}
	if len(t.Skipped) > 0 {
		fmt.Fprintf(w, "\nskipped (no topicfs binary): %s\n", strings.Join(t.Skipped, ", "))
	}
}

func oneLine(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ") }

// fmtBytes prints n as B/KiB/MiB/GiB.
func fmtBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<30:
		return fmt.Sprintf("%.1fGiB", float64(n)/(1<<30))
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// mbps is decimal megabytes per second.
func mbps(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) / 1e6 / d.Seconds()
}

// perSec formats a rate like "3.12 M rec/s".
func perSec(n int64, d time.Duration, unit string) string {
	if d <= 0 {
		return ""
	}
	v := float64(n) / d.Seconds()
	switch {
	case v >= 1e6:
		return fmtNum(v/1e6) + " M " + unit + "/s"
	case v >= 1e3:
		return fmtNum(v/1e3) + " k " + unit + "/s"
	}
	return fmtNum(v) + " " + unit + "/s"
}
