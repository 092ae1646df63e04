package engine

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// benchRecords sizes the log of the read and lookup benchmarks:
// -engine.bench.records=N or TOPICFS_BENCH_RECORDS=N (default small).
var benchRecords = flag.Int("engine.bench.records", envInt("TOPICFS_BENCH_RECORDS", 200_000),
	"records in the logs of the engine read/lookup benchmarks")

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func benchValues(n, size int) []record.Record {
	recs := make([]record.Record, n)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range recs {
		v := make([]byte, size)
		for j := range v {
			v[j] = byte('a' + rng.IntN(16)) // compressible, not trivially
		}
		recs[i] = record.Record{Timestamp: 1_700_000_000_000 + int64(i), Key: []byte(fmt.Sprintf("key-%d", i%100)), Value: v}
	}
	return recs
}

// BenchmarkAppend appends 1000-record batches to a partition on the real
// file system. Each case has a "raw-write" sibling that writes the same
// number of bytes per op sequentially to a plain file in the same
// directory, so engine/raw-write is the cost of the engine over the disk.
func BenchmarkAppend(b *testing.B) {
	for _, size := range []int{100, 1024} {
		for _, codec := range []string{"none", "lz4", "zstd"} {
			recs := benchValues(1000, size)
			name := fmt.Sprintf("value=%dB/codec=%s", size, codec)
			// The bytes one Append writes, for SetBytes and the baseline.
			spec := record.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, DeleteHorizonMs: -1, LastOffsetDelta: -1}
			spec.Codec, _ = record.ParseCodec(codec)
			for i := range recs {
				recs[i].Offset = int64(i)
			}
			enc, err := record.Encode(nil, spec, recs)
			if err != nil {
				b.Fatal(err)
			}
			batchBytes := int64(len(enc))
			b.Run(name+"/engine", func(b *testing.B) {
				cfg := DefaultConfig()
				cfg.CompressionType = codec
				cfg.SegmentBytes = 256 << 20
				p, err := OpenPartition(vfs.OS, filepath.Join(b.TempDir(), "bench-0"), "bench", 0,
					PartitionOptions{Config: cfg, RecoveryPoint: -1, LogStartOffset: -1, FirstDirty: -1, Logger: quietLogger()})
				if err != nil {
					b.Fatal(err)
				}
				defer p.Close()
				b.SetBytes(batchBytes)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, _, err := p.Append(recs); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(b.N)*1000/b.Elapsed().Seconds(), "records/s")
			})
			b.Run(name+"/raw-write", func(b *testing.B) {
				dir := b.TempDir()
				files := 0
				create := func() *os.File {
					f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("raw-%d", files)), os.O_RDWR|os.O_CREATE, 0o644)
					if err != nil {
						b.Fatal(err)
					}
					files++
					return f
				}
				f := create()
				defer func() { f.Close() }()
				buf := make([]byte, batchBytes)
				copy(buf, enc)
				b.SetBytes(batchBytes)
				b.ResetTimer()
				var pos int64
				for i := 0; i < b.N; i++ {
					if pos+batchBytes > 256<<20 { // roll like the engine does
						f.Close()
						f = create()
						pos = 0
					}
					if _, err := f.WriteAt(buf, pos); err != nil {
						b.Fatal(err)
					}
					pos += batchBytes
				}
				b.StopTimer()
				b.ReportMetric(float64(b.N)*1000/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}

// benchPartition fills a partition with *benchRecords 100-byte records in
// batches of 100 on the real file system.
func benchPartition(b *testing.B) *Partition {
	b.Helper()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 16 << 20
	p, err := OpenPartition(vfs.OS, filepath.Join(b.TempDir(), "bench-0"), "bench", 0,
		PartitionOptions{Config: cfg, RecoveryPoint: -1, LogStartOffset: -1, FirstDirty: -1, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	recs := benchValues(100, 100)
	for n := 0; n < *benchRecords; n += len(recs) {
		if _, _, err := p.Append(recs); err != nil {
			b.Fatal(err)
		}
	}
	return p
}

// BenchmarkReadSequential reads (CRC-checks and decodes) every batch of a
// partition, as a `cat` of its records view does.
func BenchmarkReadSequential(b *testing.B) {
	p := benchPartition(b)
	defer p.Close()
	var total int64
	for _, s := range p.Segments() {
		total += s.Size
	}
	b.SetBytes(total)
	b.ReportAllocs()
	b.ResetTimer()
	var buf []byte
	var recs []record.Record
	n := 0
	for i := 0; i < b.N; i++ {
		snap := p.Snapshot()
		for _, s := range snap.Segments {
			for pos := int64(0); ; {
				batch, err := s.ReadBatch(pos, buf)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				buf = batch.Raw[:cap(batch.Raw)]
				if recs, err = batch.Records(recs[:0]); err != nil {
					b.Fatal(err)
				}
				n += len(recs)
				pos += int64(batch.Size())
			}
		}
		snap.Release()
	}
	b.StopTimer()
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkFindOffset looks up random offsets (segment choice, offset index,
// bounded scan) in a large log.
func BenchmarkFindOffset(b *testing.B) {
	p := benchPartition(b)
	defer p.Close()
	snap := p.Snapshot()
	defer snap.Release()
	rng := rand.New(rand.NewPCG(3, 4))
	leo := snap.LogEndOffset
	before := p.Stats().BytesRead
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		o := rng.Int64N(leo)
		s := snap.Segments[snap.SegmentFor(o)]
		if _, err := s.FindOffset(o); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(p.Stats().BytesRead-before)/float64(b.N), "bytes-read/op")
}
