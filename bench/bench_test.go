package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// TestQuickEngineTable runs the in-process rows of the table on tiny sizes,
// so `go test ./bench/` notices when a workload stops working. The mount
// rows need the topicfs binary and are covered by running `topicfs bench
// --quick` in CI.
func TestQuickEngineTable(t *testing.T) {
	var progress bytes.Buffer
	tab, err := Run(context.Background(), Options{
		Quick:    true,
		Dir:      t.TempDir(),
		Only:     []string{"engine-append", "engine-read", "engine-point"},
		Sizes:    Sizes{Append: 256 << 10, Read: 2 << 20},
		Progress: &progress,
	})
	require.NoError(t, err, progress.String())
	require.False(t, tab.Failed(), "%+v", tab.Rows)
	require.Len(t, tab.Rows, 13) // 2 value sizes × 3 codecs, 3 read rows, 2 batch sizes × 2 point rows
	for _, r := range tab.Rows {
		assert.Greater(t, r.Value.V, 0.0, r.Name)
		assert.Greater(t, r.Baseline.V, 0.0, r.Name)
		assert.InDelta(t, r.Value.V/r.Baseline.V, r.Ratio, 1e-9, r.Name)
	}
	// Compressed runs write fewer .log bytes than they were given.
	assert.Contains(t, tab.Rows[2].Name, "zstd")
	assert.NotContains(t, tab.Rows[2].Value.Extra, ".log 1") // not ≥100%

	var out bytes.Buffer
	tab.Print(&out)
	for _, want := range []string{"engine append 100 B none", "engine append 1 KiB zstd", "engine read", "write(2)", "pread .log", "ratio ≥ 0.7",
		"engine read 2.0MiB (1 KiB values)", "engine point read median, 16 KiB batches", "pread of the record", "≤ 6 µs"} {
		assert.Contains(t, out.String(), want)
	}
	assert.NotContains(t, out.String(), "FAILED")
}

func TestRunLeavesNothingBehind(t *testing.T) {
	dir := t.TempDir()
	_, err := Run(context.Background(), Options{Quick: true, Dir: dir, Only: []string{"engine-read"}, Sizes: Sizes{Read: 1 << 20}})
	require.NoError(t, err)
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, ents)
}

func TestRunRejectsUnknownWorkload(t *testing.T) {
	_, err := Run(context.Background(), Options{Only: []string{"nope"}, Dir: t.TempDir()})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "engine-append")
}

func TestMountRowsSkippedWithoutBinary(t *testing.T) {
	tab, err := Run(context.Background(), Options{Quick: true, Dir: t.TempDir(), Only: []string{"mount-read", "mount-time"}})
	require.NoError(t, err)
	assert.Empty(t, tab.Rows)
	assert.Equal(t, []string{"mount-read", "mount-time"}, tab.Skipped)
	var out bytes.Buffer
	tab.Print(&out)
	assert.Contains(t, out.String(), "skipped (no topicfs binary): mount-read, mount-time")
}

func TestRunStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tab, err := Run(ctx, Options{Quick: true, Dir: t.TempDir()})
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, tab.Rows)
}

func TestParseSizes(t *testing.T) {
	tests := []struct {
		name string
		spec string
		want Sizes
		err  string
	}{
		{name: "empty", spec: "", want: Sizes{}},
		{name: "bytes with suffixes", spec: "append=512MiB,read=2G,offset=1.5GiB,mount-append=64k",
			want: Sizes{Append: 512 << 20, Read: 2 << 30, OffsetLarge: 3 << 29, MountAppend: 64 << 10}},
		{name: "counts are decimal", spec: "keys=10M, segments=500,opens=2k",
			want: Sizes{CleanKeys: 10_000_000, Segments: 500, Opens: 2000}},
		{name: "plain bytes", spec: "rss-read=4096", want: Sizes{RSSRead: 4096}},
		{name: "cluster", spec: "cluster-append=64MiB,cluster-read=1G,cluster-opens=1k",
			want: Sizes{ClusterAppend: 64 << 20, ClusterRead: 1 << 30, ClusterOpens: 1000}},
		{name: "unknown key", spec: "nope=1", err: `unknown key "nope"`},
		{name: "not key=value", spec: "append", err: "not key=value"},
		{name: "bad number", spec: "append=lots", err: "want a positive number of bytes"},
		{name: "zero", spec: "segments=0", err: "want a positive number"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s Sizes
			err := ParseSizes(tc.spec, &s)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, s)
		})
	}
}

func TestSizesDefaults(t *testing.T) {
	o := Options{Sizes: Sizes{Read: 5}}
	s := o.sizes()
	assert.Equal(t, int64(5), s.Read)
	assert.Equal(t, DefaultSizes.OffsetLarge, s.OffsetLarge)
	o.Quick = true
	assert.Equal(t, QuickSizes.Segments, o.sizes().Segments)
	for _, k := range sizeKeys {
		assert.Contains(t, SizesHelp(), k.name)
	}
}

func TestTablePrint(t *testing.T) {
	ok := Row{Name: "fast thing", Value: Figure{V: 812.4, Unit: "MB/s", Extra: "3.1 M rec/s"}, BaseName: "write(2)", Baseline: Figure{V: 1000, Unit: "MB/s"}}
	ok.ratio()
	ok.ratioAtLeast(0.7)
	slow := Row{Name: "slow thing", Value: Figure{V: 12, Unit: "ms"}, BaseName: "ls -l", Baseline: Figure{V: 2, Unit: "ms"}, Note: "a note"}
	slow.ratio()
	slow.ratioAtMost(5)
	tab := &Table{Rows: []Row{ok, slow, {Name: "broken", Err: errors.New("it broke\nbadly")}}}
	var out bytes.Buffer
	tab.Print(&out)
	s := out.String()
	assert.Contains(t, s, "812 MB/s (3.1 M rec/s)")
	assert.Contains(t, s, "write(2) 1000 MB/s")
	assert.Contains(t, s, "0.81")
	assert.Contains(t, s, "ratio ≥ 0.7 ok")
	assert.Contains(t, s, "6.00")
	assert.Contains(t, s, "ratio ≤ 5 MISSED")
	assert.Regexp(t, `broken +FAILED \(below\)`, s)
	assert.Contains(t, s, "FAILED:\n  broken: it broke; badly")
	assert.Contains(t, s, "slow thing: a note")
	assert.True(t, tab.Failed())
	require.Len(t, tab.Missed(), 1)
	assert.Equal(t, "slow thing", tab.Missed()[0].Name)
}

func TestPoolChunks(t *testing.T) {
	require.Equal(t, genPool(7, 64<<10).b, genPool(7, 64<<10).b, "deterministic")
	p := newPool(7)
	assert.Same(t, p, newPool(7), "generated once")
	assert.Len(t, p.b, poolSize)
	assert.NotContains(t, string(p.b), "\n")
	// Consecutive chunks are consecutive bytes of the pool, so a batch of
	// values cut from one chunk holds exactly the chunk.
	c0, c1 := p.chunk(0, 1000), p.chunk(1, 1000)
	assert.Equal(t, p.b[:2000], append(append([]byte{}, c0...), c1...))
	// It wraps around without running off the end.
	per := int64(len(p.b) / 4096)
	assert.Equal(t, p.chunk(0, 4096), p.chunk(per, 4096))

	path := filepath.Join(t.TempDir(), "lines")
	n, err := p.writeLines(path, 1000, 100)
	require.NoError(t, err)
	assert.Equal(t, int64(10), n)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	require.Len(t, lines, 10)
	for _, l := range lines {
		assert.Len(t, l, 99)
	}
}

func TestProcStatus(t *testing.T) {
	kib, err := procStatus(os.Getpid(), "VmRSS")
	require.NoError(t, err)
	assert.Greater(t, kib, int64(1000))
	_, err = procStatus(os.Getpid(), "NoSuchField")
	assert.Error(t, err)
}

func TestQuantile(t *testing.T) {
	assert.Zero(t, quantile(nil, 0.5))
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	assert.Equal(t, 50*time.Millisecond, quantile(d, 0.5))
	assert.Equal(t, 99*time.Millisecond, quantile(d, 0.99))
	assert.Equal(t, 100*time.Millisecond, quantile(d, 1))
}

// BenchmarkEngineAppend is the engine-append row as a Go benchmark, for
// profiling: go test -run '^$' -bench EngineAppend -cpuprofile cpu.out ./bench/
// One op is one Partition.Append of appendBatch records.
func BenchmarkEngineAppend(b *testing.B) {
	p := newPool(1)
	for _, size := range []int{100, 1024} {
		for _, codec := range []string{"none", "lz4", "zstd"} {
			b.Run(fmt.Sprintf("%s/%s", sizeName(size), codec), func(b *testing.B) {
				cfg := engine.DefaultConfig()
				require.NoError(b, cfg.Set("compression.type", codec))
				part, err := engine.OpenPartition(vfs.OS, filepath.Join(b.TempDir(), "t-0"), "t", 0, newPartitionOptions(cfg))
				require.NoError(b, err)
				defer part.Close()
				recs := make([]record.Record, appendBatch)
				b.SetBytes(int64(appendBatch * size))
				i := int64(0)
				for b.Loop() {
					chunk := p.chunk(i, appendBatch*size)
					for j := range recs {
						recs[j] = record.Record{Timestamp: -1, Value: chunk[j*size : (j+1)*size : (j+1)*size]}
					}
					_, _, err := part.Append(recs)
					require.NoError(b, err)
					i++
				}
				b.ReportMetric(float64(appendBatch)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
				b.ReportMetric(float64(part.Stats().BytesAppended)/float64(int64(b.N)*appendBatch*int64(size)), "log/value")
			})
		}
	}
}

// BenchmarkEngineRead is the engine-read row as a Go benchmark.
func BenchmarkEngineRead(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "t-0")
	part, err := engine.OpenPartition(vfs.OS, dir, "t", 0, newPartitionOptions(engine.DefaultConfig()))
	require.NoError(b, err)
	n, err := fillPartition(part, newPool(2), 64<<20, viewValueSize, 0)
	require.NoError(b, err)
	require.NoError(b, part.Close())
	_, size, err := logFiles(dir)
	require.NoError(b, err)
	b.SetBytes(size)
	for b.Loop() {
		recs, _, err := readPartition(dir, "t", true)
		require.NoError(b, err)
		require.Equal(b, n, recs)
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
