package fusefs

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/engine"
)

// BenchmarkByOffsetOpen is the mount's own work for one open of
// by-offset/N at a random N, read and closed, without FUSE: the state a
// LOOKUP builds for the size and drops, the state the OPEN builds, the
// first 64 KiB READ, the release. The segment index is built and the .log
// in the page cache (warm). Its plain-file sibling opens a file of the same
// lines, preads 64 KiB at a random line and closes it. p50-ns and p99-ns
// are per open.
func BenchmarkByOffsetOpen(b *testing.B) {
	for _, per := range []int{150, 1000} { // about 16 KiB and 108 KiB batches of 100-byte values
		cfg := engine.DefaultConfig()
		p := openTestPartition(b, cfg)
		want := appendBigBatches(b, p, 24<<20/(per*109), per, 100)
		records := p.LogEndOffset()
		ps := newPartState(newFsys(nil, Options{}), asPart(p))
		name := fmt.Sprintf("batch=%drecords", per)
		b.Run(name+"/view", func(b *testing.B) {
			ctx := context.Background()
			buf := make([]byte, 64<<10)
			open := func(n int64) *viewState {
				st, err := newViewState(ctx, ps, viewFormat{}, snapshotFrom(ps.p, n), func(*backend.Snapshot) (int64, error) { return n, nil })
				if err != nil {
					b.Fatal(err)
				}
				return st
			}
			open(0).release() // builds the segment index
			rng := rand.New(rand.NewPCG(1, 2))
			lat := make([]time.Duration, 0, 1<<16)
			for b.Loop() {
				n := rng.Int64N(records)
				t0 := time.Now()
				st := open(n) // LOOKUP: the size
				_ = st.size()
				st.release()
				st = open(n) // OPEN
				var c cursor
				k, err := st.read(ctx, &c, buf, 0)
				c.rd.free()
				st.release()
				lat = append(lat, time.Since(t0))
				if err != nil || k == 0 || buf[100] != '\n' {
					b.Fatalf("offset %d: read %d bytes: %v", n, k, err)
				}
			}
			reportOpenLatencies(b, lat)
		})
		b.Run(name+"/plain-file", func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "lines")
			if err := os.WriteFile(path, want, 0o600); err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, 64<<10)
			rng := rand.New(rand.NewPCG(1, 2))
			lat := make([]time.Duration, 0, 1<<16)
			for b.Loop() {
				pos := rng.Int64N(records) * 101
				t0 := time.Now()
				f, err := os.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				k, _ := f.ReadAt(buf, pos)
				f.Close()
				lat = append(lat, time.Since(t0))
				if k == 0 {
					b.Fatal("nothing read")
				}
			}
			reportOpenLatencies(b, lat)
		})
	}
}

func reportOpenLatencies(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))].Nanoseconds()) }
	b.ReportMetric(q(0.5), "p50-ns")
	b.ReportMetric(q(0.99), "p99-ns")
}
