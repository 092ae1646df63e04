package engine

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// Sizes of BenchmarkSealedIndexes: sealedBenchParts partitions of
// sealedBenchSegs sealed segments each (1,024 in all), every segment with
// one index entry per single-record batch.
const (
	sealedBenchParts   = 64
	sealedBenchSegs    = 16
	sealedBenchSegSize = 160 << 10
)

// sealedBenchPartitions writes the partitions of BenchmarkSealedIndexes on
// the real file system, closes them and reopens them as after a clean
// shutdown, so that no sealed index is loaded yet.
func sealedBenchPartitions(b *testing.B) []*Partition {
	b.Helper()
	cfg := DefaultConfig()
	cfg.SegmentBytes = sealedBenchSegSize
	cfg.IndexIntervalBytes = 0
	root := b.TempDir()
	rec := []record.Record{{Timestamp: 1, Value: make([]byte, 40)}}
	parts := make([]*Partition, sealedBenchParts)
	for i := range parts {
		dir := filepath.Join(root, fmt.Sprintf("t-%d", i))
		p, err := OpenPartition(vfs.OS, dir, "t", i, PartitionOptions{Config: cfg, RecoveryPoint: -1, LogStartOffset: -1, FirstDirty: -1, Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		for len(p.Segments()) <= sealedBenchSegs {
			rec[0].Timestamp++
			if _, _, err := p.Append(rec); err != nil {
				b.Fatal(err)
			}
		}
		leo := p.LogEndOffset()
		if err := p.Close(); err != nil {
			b.Fatal(err)
		}
		parts[i], err = OpenPartition(vfs.OS, dir, "t", i, PartitionOptions{Config: cfg, RecoveryPoint: leo, LogStartOffset: -1,
			FirstDirty: -1, CleanShutdown: true, Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
	}
	return parts
}

// heapInUse is the heap in use after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// BenchmarkSealedIndexes looks up offsets in the sealed segments of 64
// partitions x 16 sealed segments: "load" reports the heap the loaded
// indexes take (heap-MiB: heap in use after one lookup in every sealed
// segment minus before); "lookup" times FindOffset at random offsets of
// random sealed segments, every index loaded.
func BenchmarkSealedIndexes(b *testing.B) {
	parts := sealedBenchPartitions(b)
	defer func() {
		for _, p := range parts {
			_ = p.Close()
		}
	}()
	var sealed []*Segment
	for _, p := range parts {
		l := p.list()
		sealed = append(sealed, l[:len(l)-1]...)
	}
	b.Run("load", func(b *testing.B) {
		// The first pass loads every index; the timed loop repeats it
		// with the indexes loaded (or reloaded, past a bound).
		load := func() {
			for _, s := range sealed {
				if _, err := s.FindOffset(s.BaseOffset() + 1); err != nil {
					b.Fatal(err)
				}
			}
		}
		before := heapInUse()
		load()
		heap := (float64(heapInUse()) - float64(before)) / (1 << 20)
		for b.Loop() {
			load()
		}
		b.ReportMetric(heap, "heap-MiB")
	})
	b.Run("lookup", func(b *testing.B) {
		rng := rand.New(rand.NewPCG(7, 8))
		for _, s := range sealed {
			if _, err := s.FindOffset(s.BaseOffset() + 1); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			s := sealed[rng.IntN(len(sealed))]
			n := s.NextOffset() - s.BaseOffset()
			if _, err := s.FindOffset(s.BaseOffset() + rng.Int64N(n)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
