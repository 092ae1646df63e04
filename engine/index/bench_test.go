package index

import (
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/topicfs/topicfs/engine/vfs"
)

// BenchmarkOffsetIndexLookup looks up random offsets in a full default-size
// index (10 MiB = 1 310 720 entries), mmapped and on the heap.
func BenchmarkOffsetIndexLookup(b *testing.B) {
	const maxBytes = 10 << 20
	for _, bc := range []struct {
		name string
		fs   vfs.FS
		dir  string
	}{{"mmap", vfs.OS, b.TempDir()}, {"heap", vfs.NewMem(), "/"}} {
		b.Run(bc.name, func(b *testing.B) {
			x, err := OpenOffsetIndex(bc.fs, filepath.Join(bc.dir, "0.index"), 0, maxBytes, true)
			if err != nil {
				b.Fatal(err)
			}
			defer x.Close()
			for i := int64(1); !x.IsFull(); i++ {
				if err := x.Append(i*3, i*1024); err != nil {
					b.Fatal(err)
				}
			}
			n := int64(x.Entries())
			for _, mode := range []string{"random", "tail"} {
				b.Run(mode, func(b *testing.B) {
					r := rand.New(rand.NewPCG(1, 2))
					lo := int64(0)
					if mode == "tail" {
						lo = (n - 500) * 3 // tailing readers: within the warm section
					}
					b.SetBytes(OffsetEntrySize)
					b.ReportMetric(float64(n), "entries")
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						t := lo + r.Int64N(n*3-lo)
						off, _ := x.Lookup(t)
						if off > t {
							b.Fatal("lookup above target")
						}
					}
				})
			}
		})
	}
}

// BenchmarkOpenNewIndex opens (and closes) a new default-size mmapped offset
// and time index, as every segment roll does.
func BenchmarkOpenNewIndex(b *testing.B) {
	dir := b.TempDir()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		p := filepath.Join(dir, "new")
		x, err := OpenOffsetIndex(vfs.OS, p+".index", 0, 10<<20, true)
		if err != nil {
			b.Fatal(err)
		}
		t, err := OpenTimeIndex(vfs.OS, p+".timeindex", 0, 10<<20, true)
		if err != nil {
			b.Fatal(err)
		}
		if err := x.Close(); err != nil {
			b.Fatal(err)
		}
		if err := t.Close(); err != nil {
			b.Fatal(err)
		}
		if err := vfs.OS.Remove(p + ".index"); err != nil {
			b.Fatal(err)
		}
		if err := vfs.OS.Remove(p + ".timeindex"); err != nil {
			b.Fatal(err)
		}
	}
}
