package policies

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// benchLog writes size bytes of records (100-byte values, keys over a
// space a quarter of the record count, so 3 in 4 records are superseded)
// into a compacted topic under dir, rolls, and closes the directory.
func benchLog(b *testing.B, dir string, size int64) int64 {
	clk := newClock()
	d, err := engine.OpenLogDir(vfs.OS, dir, engine.LogDirOptions{
		Defaults: testConfig(b, map[string]string{"segment.bytes": fmt.Sprint(8 << 20)}),
		Logger:   testLogger(b), Now: clk.Now,
	})
	require.NoError(b, err)
	p := createPartition(b, d, "bench", map[string]string{"cleanup.policy": "compact"})
	value := make([]byte, 100)
	recs := make([]record.Record, 1000)
	nrec := size / 130
	for i := int64(0); i < nrec; i += int64(len(recs)) {
		for j := range recs {
			recs[j] = record.Record{Key: fmt.Appendf(nil, "key-%09d", (i+int64(j))%(nrec/4+1)), Value: value, Timestamp: -1}
		}
		_, _, err := p.Append(recs)
		require.NoError(b, err)
	}
	require.NoError(b, p.Roll())
	var total int64
	for _, si := range p.Segments() {
		total += si.Size
	}
	require.NoError(b, d.Close())
	return total
}

func copyDir(b *testing.B, src, dst string) {
	require.NoError(b, filepath.Walk(src, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(target)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	}))
}

// BenchmarkCleaner measures cleaner throughput (MB/s of input log) beside a
// sequential read-and-decode of the same segments in the same run. The
// cleaner reads the dirty range twice (map, rewrite), so about half the read
// speed is the ceiling.
func BenchmarkCleaner(b *testing.B) {
	for _, size := range []int64{16 << 20, 64 << 20} {
		src := b.TempDir()
		total := benchLog(b, src, size)
		b.Run(fmt.Sprintf("clean/%dMiB", size>>20), func(b *testing.B) {
			b.SetBytes(total)
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				dst := b.TempDir()
				copyDir(b, src, dst)
				clk := newClock()
				d, err := engine.OpenLogDir(vfs.OS, dst, engine.LogDirOptions{Defaults: engine.DefaultConfig(), Logger: testLogger(b), Now: clk.Now})
				require.NoError(b, err)
				tp, err := d.Topic("bench")
				require.NoError(b, err)
				p, err := tp.Partition(0)
				require.NoError(b, err)
				s := NewScheduler(d, Options{Now: clk.Now, Logger: testLogger(b), DedupeBufferSize: 16 << 20})
				b.StartTimer()
				run, err := s.CleanPartition(p, true)
				b.StopTimer()
				require.NoError(b, err)
				require.NotNil(b, run)
				b.ReportMetric(float64(run.RecordsDropped), "dropped/op")
				s.Stop()
				require.NoError(b, d.Close())
				b.StartTimer()
			}
		})
		b.Run(fmt.Sprintf("read/%dMiB", size>>20), func(b *testing.B) {
			clk := newClock()
			d, err := engine.OpenLogDir(vfs.OS, src, engine.LogDirOptions{Defaults: engine.DefaultConfig(), Logger: testLogger(b), Now: clk.Now})
			require.NoError(b, err)
			defer d.Close()
			tp, err := d.Topic("bench")
			require.NoError(b, err)
			p, err := tp.Partition(0)
			require.NoError(b, err)
			b.SetBytes(total)
			b.ResetTimer()
			var buf []byte
			var recs []record.Record
			for i := 0; i < b.N; i++ {
				snap := p.Snapshot()
				for _, s := range snap.Segments {
					for pos := int64(0); pos < s.Size(); {
						bt, err := s.ReadBatch(pos, buf)
						if err != nil {
							b.Fatal(err)
						}
						if cap(bt.Raw) > cap(buf) {
							buf = bt.Raw[:cap(bt.Raw)]
						}
						if recs, err = bt.Records(recs[:0]); err != nil {
							b.Fatal(err)
						}
						pos += int64(bt.Size())
					}
				}
				snap.Release()
			}
		})
	}
}
