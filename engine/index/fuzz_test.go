package index

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/topicfs/topicfs/engine/vfs"
	"github.com/topicfs/topicfs/internal/testutil"
)

func seedFromFixtures(f *testing.F, ext string) {
	var paths []string
	for _, root := range testutil.KafkaFixtureRoots(f) {
		more, _ := filepath.Glob(filepath.Join(root, "*", "*", "*"+ext))
		paths = append(paths, more...)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil && len(b) > 0 {
			f.Add(b, int64(0))
		}
	}
	f.Add([]byte{}, int64(0))
	f.Add(make([]byte, 64), int64(5))
}

// FuzzOffsetIndex opens arbitrary bytes: it must never panic, entries must
// come back strictly increasing, lookups must be monotone, and a writable
// reopen must read the same entries.
func FuzzOffsetIndex(f *testing.F) {
	seedFromFixtures(f, ".index")
	f.Fuzz(func(t *testing.T, raw []byte, base int64) {
		fs := vfs.NewMem()
		wf, _ := fs.OpenFile("/0.index", os.O_CREATE|os.O_RDWR, 0o644)
		_, _ = wf.WriteAt(raw, 0)
		_ = wf.Close()
		x, err := OpenOffsetIndex(fs, "/0.index", base, 1<<16, false)
		if err != nil {
			t.Fatal(err)
		}
		_ = x.SanityCheck()
		n := x.Entries()
		prev := int64(-1 << 62)
		for i := 0; i < n; i++ {
			off, pos := x.Entry(i)
			if off <= prev && i > 0 {
				t.Fatalf("entry %d offset %d not above %d", i, off, prev)
			}
			prev = off
			lo, lp := x.Lookup(off)
			if lo != off || lp != pos {
				t.Fatalf("lookup(%d) = (%d,%d), want (%d,%d)", off, lo, lp, off, pos)
			}
		}
		last := int64(-1 << 62)
		for tgt := base - 3; tgt < base+int64(n)*3+3; tgt++ {
			o, _ := x.Lookup(tgt)
			if o < last || (o > tgt && o != base) {
				t.Fatalf("lookup(%d) = %d after %d", tgt, o, last)
			}
			last = o
		}
		y, err := OpenOffsetIndex(fs, "/0.index", base, 1<<16, true)
		if err != nil {
			t.Fatal(err)
		}
		if y.Entries() != n {
			t.Fatalf("writable open: %d entries, read-only %d", y.Entries(), n)
		}
		_ = y.Close()
		m, _ := openBothOffset(t, raw, base)
		if m.Entries() != n || (m.SanityCheck() == nil) != (x.SanityCheck() == nil) {
			t.Fatalf("mapped open: %d entries (%v), heap %d (%v)", m.Entries(), m.SanityCheck(), n, x.SanityCheck())
		}
		for i := 0; i < n; i++ {
			mo, mp := m.Entry(i)
			ho, hp := x.Entry(i)
			if mo != ho || mp != hp {
				t.Fatalf("mapped entry %d = (%d, %d), heap (%d, %d)", i, mo, mp, ho, hp)
			}
		}
	})
}

// FuzzTimeIndex is FuzzOffsetIndex for the time index.
func FuzzTimeIndex(f *testing.F) {
	seedFromFixtures(f, ".timeindex")
	f.Fuzz(func(t *testing.T, raw []byte, base int64) {
		fs := vfs.NewMem()
		wf, _ := fs.OpenFile("/0.timeindex", os.O_CREATE|os.O_RDWR, 0o644)
		_, _ = wf.WriteAt(raw, 0)
		_ = wf.Close()
		x, err := OpenTimeIndex(fs, "/0.timeindex", base, 1<<16, false)
		if err != nil {
			t.Fatal(err)
		}
		_ = x.SanityCheck()
		n := x.Entries()
		for i := 1; i < n; i++ {
			t0, o0 := x.Entry(i - 1)
			t1, o1 := x.Entry(i)
			if t1 <= t0 || o1 < o0 {
				t.Fatalf("entries %d,%d out of order", i-1, i)
			}
		}
		for i := 0; i < n; i++ {
			ts, off := x.Entry(i)
			lt, lo := x.Lookup(ts)
			if lt != ts || lo != off {
				t.Fatalf("lookup(%d) = (%d,%d), want (%d,%d)", ts, lt, lo, ts, off)
			}
			if i == 0 && ts > -1<<63+1 {
				if lt, lo := x.Lookup(ts - 1); lt != -1 || lo != base {
					t.Fatalf("lookup below first = (%d,%d)", lt, lo)
				}
			}
		}
		y, err := OpenTimeIndex(fs, "/0.timeindex", base, 1<<16, true)
		if err != nil {
			t.Fatal(err)
		}
		if y.Entries() != n {
			t.Fatalf("writable open: %d entries, read-only %d", y.Entries(), n)
		}
		_ = y.Close()
		m, _ := openBothTime(t, raw, base)
		if m.Entries() != n || (m.SanityCheck() == nil) != (x.SanityCheck() == nil) {
			t.Fatalf("mapped open: %d entries (%v), heap %d (%v)", m.Entries(), m.SanityCheck(), n, x.SanityCheck())
		}
		for i := 0; i < n; i++ {
			mt, mo := m.Entry(i)
			ht, ho := x.Entry(i)
			if mt != ht || mo != ho {
				t.Fatalf("mapped entry %d = (%d, %d), heap (%d, %d)", i, mt, mo, ht, ho)
			}
		}
	})
}
