package engine

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// pointBenchBytes sizes the logs of BenchmarkPointRead:
// -engine.bench.pointbytes=N or TOPICFS_BENCH_POINT_BYTES=N.
var pointBenchBytes = flag.Int("engine.bench.pointbytes", envInt("TOPICFS_BENCH_POINT_BYTES", 64<<20),
	".log bytes of each BenchmarkPointRead partition")

// recordSpan is where a record's bytes lie in a .log file.
type recordSpan struct {
	pos int64
	n   int
}

// pointPartition fills a partition on the real file system with about
// total bytes of 100-byte values in batches of about batchBytes, and
// returns it with the file position and length of every record (index =
// offset; one segment).
func pointPartition(b *testing.B, batchBytes, total int) (*Partition, []recordSpan) {
	b.Helper()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1 << 30
	cfg.MaxMessageBytes = 2 << 20
	p, err := OpenPartition(vfs.OS, filepath.Join(b.TempDir(), "point-0"), "point", 0,
		PartitionOptions{Config: cfg, RecoveryPoint: -1, LogStartOffset: -1, FirstDirty: -1, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	recs := benchValues(max(batchBytes/109, 1), 100)
	for i := range recs {
		recs[i].Key = nil
	}
	for n := 0; n < total; n += batchBytes {
		if _, _, err := p.Append(recs); err != nil {
			b.Fatal(err)
		}
	}
	snap := p.Snapshot()
	defer snap.Release()
	if len(snap.Segments) != 1 {
		b.Fatalf("%d segments, want 1", len(snap.Segments))
	}
	seg := snap.Segments[0]
	var spans []recordSpan
	for pos := int64(0); ; {
		bt, err := seg.ReadBatch(pos, nil)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		for q := record.HeaderSize; q < len(bt.Raw); {
			_, end, err := record.RecordFrame(bt.Raw, q)
			if err != nil {
				b.Fatal(err)
			}
			spans = append(spans, recordSpan{pos + int64(q), end - q})
			q = end
		}
		pos += int64(bt.Size())
	}
	if int64(len(spans)) != p.LogEndOffset() {
		b.Fatalf("%d records framed, log end %d", len(spans), p.LogEndOffset())
	}
	return p, spans
}

// reportLatencies reports the median and 99th percentile of lat.
func reportLatencies(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))].Nanoseconds()) }
	b.ReportMetric(q(0.5), "p50-ns")
	b.ReportMetric(q(0.99), "p99-ns")
}

// BenchmarkPointRead reads records at random offsets with a PointReader,
// warm (every batch read once before: checked, remembered, anchored; the
// .log in the page cache), at about 16 KiB and 1 MiB batches of 100-byte
// values. Each case has a raw-pread sibling that preads exactly the same
// records' bytes from the .log file at the same offsets, so engine against
// raw-pread is what the engine costs on top of the one pread a record
// needs. p50-ns and p99-ns are per read (ns/op averages them).
func BenchmarkPointRead(b *testing.B) {
	for _, batch := range []int{16 << 10, 1 << 20} {
		p, spans := pointPartition(b, batch, *pointBenchBytes)
		name := fmt.Sprintf("batch=%dKiB", batch>>10)
		b.Run(name+"/engine", func(b *testing.B) {
			var r PointReader
			for o := int64(0); o < int64(len(spans)); o += 64 { // warm
				if _, err := r.ReadRecord(p, o); err != nil {
					b.Fatal(err)
				}
			}
			rng := rand.New(rand.NewPCG(5, 6))
			lat := make([]time.Duration, 0, 1<<20)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				o := rng.Int64N(int64(len(spans)))
				t0 := time.Now()
				rec, err := r.ReadRecord(p, o)
				lat = append(lat, time.Since(t0))
				if err != nil || rec.Offset != o || len(rec.Value) != 100 {
					b.Fatalf("offset %d: %v (got %d, %d bytes)", o, err, rec.Offset, len(rec.Value))
				}
			}
			reportLatencies(b, lat)
		})
		b.Run(name+"/findoffset-readbatch", func(b *testing.B) {
			// What a point read cost before PointReader: the offset index
			// and a header scan (FindOffset), the whole batch read and
			// CRC-checked (ReadBatch), its records walked to the offset.
			snap := p.Snapshot()
			defer snap.Release()
			seg := snap.Segments[0]
			rng := rand.New(rand.NewPCG(5, 6))
			lat := make([]time.Duration, 0, 1<<20)
			var buf []byte
			b.ResetTimer()
			for b.Loop() {
				o := rng.Int64N(int64(len(spans)))
				t0 := time.Now()
				rec, err := oldPointRead(seg, o, &buf)
				lat = append(lat, time.Since(t0))
				if err != nil || rec.Offset != o || len(rec.Value) != 100 {
					b.Fatalf("offset %d: %v", o, err)
				}
			}
			reportLatencies(b, lat)
		})
		b.Run(name+"/raw-pread", func(b *testing.B) {
			f, err := os.Open(filepath.Join(p.Dir(), segmentName(0)+logSuffix))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			buf := make([]byte, 4096)
			rng := rand.New(rand.NewPCG(5, 6))
			lat := make([]time.Duration, 0, 1<<20)
			b.ResetTimer()
			for b.Loop() {
				s := spans[rng.Int64N(int64(len(spans)))]
				t0 := time.Now()
				n, err := f.ReadAt(buf[:s.n], s.pos)
				lat = append(lat, time.Since(t0))
				if err != nil || n != s.n {
					b.Fatal(err)
				}
			}
			reportLatencies(b, lat)
		})
		if err := p.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// oldPointRead reads the record at offset o of seg as callers of the
// engine did before PointReader.
func oldPointRead(seg *Segment, o int64, buf *[]byte) (record.Record, error) {
	pos, err := seg.FindOffset(o)
	if err != nil {
		return record.Record{}, err
	}
	bt, err := seg.ReadBatch(pos, *buf)
	if err != nil {
		return record.Record{}, err
	}
	*buf = bt.Raw[:cap(bt.Raw)]
	err = errors.New("not found")
	var out record.Record
	_, _ = bt.EachRecord(nil, func(r *record.Record) error {
		if r.Offset == o {
			out, err = *r, nil
			return io.EOF
		}
		return nil
	})
	return out, err
}
