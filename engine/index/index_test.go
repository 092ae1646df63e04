package index

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/vfs"
)

// backends runs fn against the mmapped OS implementation and the heap
// fallback on MemFS.
func backends(t *testing.T, fn func(t *testing.T, fs vfs.FS, dir string)) {
	t.Run("OS-mmap", func(t *testing.T) { fn(t, vfs.OS, t.TempDir()) })
	t.Run("MemFS-heap", func(t *testing.T) {
		m := vfs.NewMem()
		require.NoError(t, m.MkdirAll("/p", 0o755))
		fn(t, m, "/p")
	})
}

func fileSize(t *testing.T, fs vfs.FS, p string) int64 {
	t.Helper()
	st, err := fs.Stat(p)
	require.NoError(t, err)
	return st.Size()
}

func TestEntrySizes(t *testing.T) {
	assert.Equal(t, 8, OffsetEntrySize)
	assert.Equal(t, 12, TimeEntrySize)
	assert.Equal(t, 34, TxnEntrySize)

	var o [OffsetEntrySize]byte
	encodeOffsetEntry(o[:], 0x01020304, 0x0a0b0c0d)
	assert.Equal(t, []byte{1, 2, 3, 4, 0x0a, 0x0b, 0x0c, 0x0d}, o[:])
	rel, pos := decodeOffsetEntry(o[:])
	assert.Equal(t, int32(0x01020304), rel)
	assert.Equal(t, int32(0x0a0b0c0d), pos)

	var ti [TimeEntrySize]byte
	encodeTimeEntry(ti[:], 0x0102030405060708, 0x0a0b0c0d)
	assert.Equal(t, []byte{1, 2, 3, 4, 5, 6, 7, 8, 0x0a, 0x0b, 0x0c, 0x0d}, ti[:])

	var tx [TxnEntrySize]byte
	in := AbortedTxn{ProducerID: 7, FirstOffset: 10, LastOffset: 20, LastStableOffset: 9}
	encodeTxnEntry(tx[:], in)
	assert.Equal(t, []byte{0, 0}, tx[:2])
	assert.Equal(t, uint64(20), binary.BigEndian.Uint64(tx[18:26]))
	out, err := decodeTxnEntry(tx[:])
	require.NoError(t, err)
	assert.Equal(t, in, out)
}

func TestOffsetIndexAppendLookup(t *testing.T) {
	backends(t, func(t *testing.T, fs vfs.FS, dir string) {
		p := filepath.Join(dir, "00000000000000000100.index")
		x, err := OpenOffsetIndex(fs, p, 100, 1000, true)
		require.NoError(t, err)
		assert.Equal(t, 125, x.MaxEntries())
		if fs == vfs.OS {
			assert.Equal(t, int64(1000), fileSize(t, fs, p), "preallocated to floor(maxBytes/8)*8")
		}
		// Empty index.
		off, pos := x.Lookup(150)
		assert.Equal(t, [2]int64{100, 0}, [2]int64{off, pos})

		for i := int64(0); i < 10; i++ {
			require.NoError(t, x.Append(110+10*i, 1000*(i+1)))
		}
		assert.Equal(t, 10, x.Entries())
		tests := []struct {
			target, off, pos int64
		}{
			{50, 100, 0}, {100, 100, 0}, {109, 100, 0}, {110, 110, 1000},
			{111, 110, 1000}, {155, 150, 5000}, {200, 200, 10000}, {1 << 40, 200, 10000},
		}
		for _, tc := range tests {
			off, pos := x.Lookup(tc.target)
			assert.Equal(t, [2]int64{tc.off, tc.pos}, [2]int64{off, pos}, "lookup %d", tc.target)
		}
		o, ps := x.Entry(3)
		assert.Equal(t, [2]int64{140, 4000}, [2]int64{o, ps})
		assert.Equal(t, int64(200), x.LastOffset())

		require.ErrorIs(t, x.Append(200, 20000), ErrInvalidAppend, "offset must increase")
		require.ErrorIs(t, x.Append(99, 20000), ErrInvalidAppend, "below base")
		require.ErrorIs(t, x.Append(100+1<<31, 0), ErrInvalidAppend, "relative offset overflows int32")
		require.ErrorIs(t, x.Append(300, 1<<31), ErrInvalidAppend, "position overflows int32")
		require.NoError(t, x.SanityCheck())
		require.NoError(t, x.Sync())

		require.NoError(t, x.Trim())
		assert.Equal(t, int64(80), fileSize(t, fs, p))
		require.NoError(t, x.Append(210, 11000), "append after trim re-expands")
		require.NoError(t, x.Close())
		assert.Equal(t, int64(88), fileSize(t, fs, p), "close trims")

		for _, writable := range []bool{false, true} {
			y, err := OpenOffsetIndex(fs, p, 100, 1000, writable)
			require.NoError(t, err)
			assert.Equal(t, 11, y.Entries())
			off, pos = y.Lookup(215)
			assert.Equal(t, [2]int64{210, 11000}, [2]int64{off, pos})
			require.NoError(t, y.SanityCheck())
			if !writable {
				assert.ErrorIs(t, y.Append(300, 1), ErrReadOnly)
				assert.True(t, y.IsFull())
			} else {
				assert.False(t, y.IsFull())
			}
			require.NoError(t, y.Close())
		}
	})
}

func TestOffsetIndexFull(t *testing.T) {
	backends(t, func(t *testing.T, fs vfs.FS, dir string) {
		x, err := OpenOffsetIndex(fs, filepath.Join(dir, "0.index"), 0, 8*3+5, true)
		require.NoError(t, err)
		for i := int64(1); i <= 3; i++ {
			assert.False(t, x.IsFull())
			require.NoError(t, x.Append(i, i*10))
		}
		assert.True(t, x.IsFull())
		assert.ErrorIs(t, x.Append(4, 40), ErrFull)
		require.NoError(t, x.Close())
		assert.ErrorIs(t, x.Append(5, 50), ErrClosed)

		z, err := OpenOffsetIndex(fs, filepath.Join(dir, "1.index"), 0, 4, true)
		require.NoError(t, err, "maxBytes below one entry")
		assert.True(t, z.IsFull())
		require.NoError(t, z.Close())
	})
}

func TestOffsetIndexTruncateTo(t *testing.T) {
	tests := []struct {
		name   string
		target int64
		want   int
	}{
		{"below every entry", 5, 0},
		{"at base", 0, 0},
		{"exact match drops it", 30, 2},
		{"between entries keeps lower", 35, 3},
		{"above all", 100, 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			backends(t, func(t *testing.T, fs vfs.FS, dir string) {
				p := filepath.Join(dir, "0.index")
				x, err := OpenOffsetIndex(fs, p, 0, 800, true)
				require.NoError(t, err)
				for i := int64(1); i <= 5; i++ {
					require.NoError(t, x.Append(10*i, 100*i))
				}
				x.TruncateTo(tc.target)
				assert.Equal(t, tc.want, x.Entries())
				// Appending after a truncate continues from the cut.
				require.NoError(t, x.Append(1000, 5000))
				require.NoError(t, x.Close())
				y, err := OpenOffsetIndex(fs, p, 0, 800, false)
				require.NoError(t, err)
				assert.Equal(t, tc.want+1, y.Entries())
				off, _ := y.Lookup(1 << 20)
				assert.Equal(t, int64(1000), off)
			})
		})
	}
}

func TestOffsetIndexReset(t *testing.T) {
	backends(t, func(t *testing.T, fs vfs.FS, dir string) {
		p := filepath.Join(dir, "0.index")
		x, err := OpenOffsetIndex(fs, p, 0, 800, true)
		require.NoError(t, err)
		require.NoError(t, x.Append(5, 50))
		require.NoError(t, x.Reset())
		assert.Equal(t, 0, x.Entries())
		require.NoError(t, x.Close())
		assert.Equal(t, int64(0), fileSize(t, fs, p))
	})
}

// writeRaw writes b as the file p.
func writeRaw(t *testing.T, fs vfs.FS, p string, b []byte) {
	t.Helper()
	f, err := fs.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o644)
	require.NoError(t, err)
	_, err = f.WriteAt(b, 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func offsetEntries(pairs ...int32) []byte {
	var b []byte
	for i := 0; i < len(pairs); i += 2 {
		var e [8]byte
		encodeOffsetEntry(e[:], pairs[i], pairs[i+1])
		b = append(b, e[:]...)
	}
	return b
}

func TestOffsetIndexOpenStopsAtZeroTail(t *testing.T) {
	backends(t, func(t *testing.T, fs vfs.FS, dir string) {
		// A crashed broker's preallocated index: 3 entries then zeros, then
		// garbage that must not resurface.
		raw := append(offsetEntries(1, 0, 5, 100, 9, 200), make([]byte, 8*20)...)
		raw = append(raw, offsetEntries(77, 77)...)
		p := filepath.Join(dir, "0.index")
		writeRaw(t, fs, p, raw)
		for _, writable := range []bool{false, true} {
			x, err := OpenOffsetIndex(fs, p, 1000, 8*64, writable)
			require.NoError(t, err)
			assert.Equal(t, 3, x.Entries(), "writable=%v", writable)
			require.NoError(t, x.SanityCheck())
			if writable {
				for i := int64(0); i < 22; i++ {
					require.NoError(t, x.Append(1010+i, 300+i))
				}
				assert.Equal(t, 25, x.Entries())
				o, ps := x.Entry(24)
				assert.Equal(t, [2]int64{1031, 321}, [2]int64{o, ps}, "garbage overwritten, not resurfaced")
			}
			require.NoError(t, x.Close())
		}
	})
}

func TestOffsetIndexSanityCheck(t *testing.T) {
	tests := []struct {
		name    string
		raw     []byte
		entries int
		bad     bool
	}{
		{"empty", nil, 0, false},
		{"good", offsetEntries(1, 10, 2, 20), 2, false},
		{"partial tail", append(offsetEntries(1, 10), 1, 2, 3), 1, true},
		{"offset below base", offsetEntries(2, 5, -3, 10), 1, true},
		{"out of order", offsetEntries(5, 10, 3, 20, 9, 30), 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			writeRaw(t, fs, "/0.index", tc.raw)
			x, err := OpenOffsetIndex(fs, "/0.index", 50, 1024, false)
			require.NoError(t, err)
			assert.Equal(t, tc.entries, x.Entries())
			err = x.SanityCheck()
			if tc.bad {
				assert.ErrorIs(t, err, ErrCorruptIndex)
				assert.Contains(t, err.Error(), "index: ")
				assert.Contains(t, err.Error(), "/0.index")
			} else {
				assert.NoError(t, err)
			}
		})
	}
}

func TestOpenReadOnlyMissing(t *testing.T) {
	backends(t, func(t *testing.T, fs vfs.FS, dir string) {
		_, err := OpenOffsetIndex(fs, filepath.Join(dir, "none.index"), 0, 100, false)
		assert.ErrorIs(t, err, os.ErrNotExist)
		_, err = OpenTimeIndex(fs, filepath.Join(dir, "none.timeindex"), 0, 100, false)
		assert.ErrorIs(t, err, os.ErrNotExist)
		_, err = fs.Stat(filepath.Join(dir, "none.index"))
		assert.ErrorIs(t, err, os.ErrNotExist, "read-only open never creates")
	})
}

func TestTimeIndexMaybeAppend(t *testing.T) {
	backends(t, func(t *testing.T, fs vfs.FS, dir string) {
		p := filepath.Join(dir, "00000000000000000100.timeindex")
		x, err := OpenTimeIndex(fs, p, 100, 12*4+11, true)
		require.NoError(t, err)
		if fs == vfs.OS {
			assert.Equal(t, int64(48), fileSize(t, fs, p), "preallocated to floor(maxBytes/12)*12")
		}
		ts, off := x.LastEntry()
		assert.Equal(t, [2]int64{-1, 100}, [2]int64{ts, off})
		ts, off = x.Lookup(1 << 50)
		assert.Equal(t, [2]int64{-1, 100}, [2]int64{ts, off})

		require.NoError(t, x.MaybeAppend(-1, 100, false), "v0 timestamps -1 never enter")
		assert.Equal(t, 0, x.Entries())
		require.NoError(t, x.MaybeAppend(1000, 105, false))
		require.NoError(t, x.MaybeAppend(1000, 107, false), "equal timestamp: silent no-op")
		assert.Equal(t, 1, x.Entries())
		assert.ErrorIs(t, x.MaybeAppend(999, 110, false), ErrInvalidAppend, "timestamp went back")
		assert.ErrorIs(t, x.MaybeAppend(2000, 104, false), ErrInvalidAppend, "offset went back")
		require.NoError(t, x.MaybeAppend(2000, 110, false))
		require.NoError(t, x.MaybeAppend(3000, 120, false))
		assert.Equal(t, 3, x.Entries())
		assert.True(t, x.IsFull(), "one of 4 slots held back")
		assert.ErrorIs(t, x.MaybeAppend(4000, 130, false), ErrFull)
		require.NoError(t, x.MaybeAppend(4000, 130, true), "roll entry uses the held-back slot")
		assert.ErrorIs(t, x.MaybeAppend(5000, 140, true), ErrFull, "no slot left at all")

		tests := []struct{ target, ts, off int64 }{
			{999, -1, 100}, {1000, 1000, 105}, {2500, 2000, 110}, {4000, 4000, 130}, {1 << 40, 4000, 130},
		}
		for _, tc := range tests {
			ts, off := x.Lookup(tc.target)
			assert.Equal(t, [2]int64{tc.ts, tc.off}, [2]int64{ts, off}, "lookup %d", tc.target)
		}
		require.NoError(t, x.SanityCheck())

		x.TruncateTo(120)
		assert.Equal(t, 2, x.Entries())
		ts, off = x.LastEntry()
		assert.Equal(t, [2]int64{2000, 110}, [2]int64{ts, off})
		require.NoError(t, x.Close())
		assert.Equal(t, int64(24), fileSize(t, fs, p))

		y, err := OpenTimeIndex(fs, p, 100, 12*4, false)
		require.NoError(t, err)
		assert.Equal(t, 2, y.Entries())
		ts, off = y.Entry(0)
		assert.Equal(t, [2]int64{1000, 105}, [2]int64{ts, off})
		require.NoError(t, y.Close())
	})
}

func timeEntries(vals ...int64) []byte {
	var b []byte
	for i := 0; i < len(vals); i += 2 {
		var e [12]byte
		encodeTimeEntry(e[:], vals[i], int32(vals[i+1]))
		b = append(b, e[:]...)
	}
	return b
}

func TestTimeIndexOpenAndSanity(t *testing.T) {
	tests := []struct {
		name    string
		raw     []byte
		entries int
		bad     bool
	}{
		{"zero tail", append(timeEntries(10, 0, 20, 3), make([]byte, 120)...), 2, false},
		{"single entry at rel 0", timeEntries(10, 0), 1, false},
		{"ts not increasing", timeEntries(10, 1, 10, 2), 1, true},
		{"offset going back", timeEntries(10, 5, 20, 2), 1, true},
		{"offset below base", timeEntries(10, -1), 0, true},
		{"partial", append(timeEntries(10, 1), 0, 0), 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			writeRaw(t, fs, "/0.timeindex", tc.raw)
			x, err := OpenTimeIndex(fs, "/0.timeindex", 0, 1024, false)
			require.NoError(t, err)
			assert.Equal(t, tc.entries, x.Entries())
			if tc.bad {
				assert.ErrorIs(t, x.SanityCheck(), ErrCorruptIndex)
			} else {
				assert.NoError(t, x.SanityCheck())
			}
		})
	}
}

func TestIndexMemCrash(t *testing.T) {
	m := vfs.NewMem()
	require.NoError(t, m.MkdirAll("/p", 0o755))
	require.NoError(t, m.SyncDir("/"))
	x, err := OpenOffsetIndex(m, "/p/0.index", 0, 1024, true)
	require.NoError(t, err)
	require.NoError(t, m.SyncDir("/p"))
	require.NoError(t, x.Append(10, 100))
	require.NoError(t, x.Sync())
	require.NoError(t, x.Append(20, 200))

	c := m.Crash()
	y, err := OpenOffsetIndex(c, "/p/0.index", 0, 1024, true)
	require.NoError(t, err)
	assert.Equal(t, 1, y.Entries(), "the unsynced entry is lost")
	require.NoError(t, y.Close())
}

func TestIndexConcurrentReaders(t *testing.T) {
	backends(t, func(t *testing.T, fs vfs.FS, dir string) {
		x, err := OpenOffsetIndex(fs, filepath.Join(dir, "0.index"), 0, 8*5000, true)
		require.NoError(t, err)
		ti, err := OpenTimeIndex(fs, filepath.Join(dir, "0.timeindex"), 0, 12*5000, true)
		require.NoError(t, err)
		const n = 3000
		var wg sync.WaitGroup
		for r := 0; r < 3; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < n; i++ {
					k := x.Entries()
					if k > 0 {
						off, pos := x.Entry(k - 1)
						if off != int64(k) || pos != int64(k)*10 {
							t.Errorf("entry %d = (%d, %d)", k-1, off, pos)
							return
						}
						o2, _ := x.Lookup(int64(k))
						if o2 != int64(k) {
							t.Errorf("lookup %d = %d", k, o2)
							return
						}
					}
					ts, off := ti.LastEntry()
					if off > 0 && ts != off*2 {
						t.Errorf("time entry (%d, %d)", ts, off)
						return
					}
				}
			}()
		}
		for i := int64(1); i <= n; i++ {
			require.NoError(t, x.Append(i, i*10))
			require.NoError(t, ti.MaybeAppend(i*2, i, false))
		}
		wg.Wait()
		require.NoError(t, x.Close())
		require.NoError(t, ti.Close())
	})
}

func TestTxnIndex(t *testing.T) {
	backends(t, func(t *testing.T, fs vfs.FS, dir string) {
		p := filepath.Join(dir, "0.txnindex")
		x, err := OpenTxnIndex(fs, p)
		require.NoError(t, err)
		assert.Empty(t, x.All())
		require.NoError(t, x.Sync())
		_, err = fs.Stat(p)
		assert.ErrorIs(t, err, os.ErrNotExist, "created lazily")

		a := AbortedTxn{ProducerID: 1, FirstOffset: 5, LastOffset: 10, LastStableOffset: 4}
		b := AbortedTxn{ProducerID: 2, FirstOffset: 8, LastOffset: 20, LastStableOffset: 11}
		c := AbortedTxn{ProducerID: 3, FirstOffset: 21, LastOffset: 30, LastStableOffset: 25}
		require.NoError(t, x.Append(a))
		require.NoError(t, x.Append(b))
		assert.ErrorIs(t, x.Append(AbortedTxn{LastOffset: 20}), ErrInvalidAppend)
		require.NoError(t, x.Append(c))
		require.NoError(t, x.Sync())
		require.NoError(t, x.Close())
		assert.Equal(t, int64(3*34), fileSize(t, fs, p))

		// A torn trailing entry is ignored and cut by the next write.
		f, err := fs.OpenFile(p, os.O_RDWR, 0)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte{0, 0, 1}, 3*34)
		require.NoError(t, err)
		require.NoError(t, f.Close())

		y, err := OpenTxnIndex(fs, p)
		require.NoError(t, err)
		assert.Equal(t, []AbortedTxn{a, b, c}, y.All())
		require.NoError(t, y.SanityCheck(0))
		assert.ErrorIs(t, y.SanityCheck(15), ErrCorruptIndex)
		got, complete := y.Collect(11, 22)
		assert.Equal(t, []AbortedTxn{b, c}, got)
		assert.True(t, complete, "c's LSO 25 >= 22")
		got, complete = y.Collect(0, 100)
		assert.Len(t, got, 3)
		assert.False(t, complete)

		require.NoError(t, y.TruncateTo(20))
		assert.Equal(t, []AbortedTxn{a}, y.All())
		require.NoError(t, y.Append(c))
		require.NoError(t, y.Close())
		assert.Equal(t, int64(2*34), fileSize(t, fs, p))
		z, err := OpenTxnIndex(fs, p)
		require.NoError(t, err)
		assert.Equal(t, []AbortedTxn{a, c}, z.All())
		require.NoError(t, z.Reset())
		assert.Empty(t, z.All())
		require.NoError(t, z.Close())
		assert.Equal(t, int64(0), fileSize(t, fs, p))
	})
}

func TestTxnIndexBadVersion(t *testing.T) {
	fs := vfs.NewMem()
	var e [TxnEntrySize]byte
	encodeTxnEntry(e[:], AbortedTxn{LastOffset: 1})
	e[0] = 1
	writeRaw(t, fs, "/0.txnindex", e[:])
	_, err := OpenTxnIndex(fs, "/0.txnindex")
	assert.ErrorIs(t, err, ErrCorruptIndex)
}

func TestIndexWriteFaults(t *testing.T) {
	m := vfs.NewMem()
	var sw vfs.Switchable
	fs := vfs.NewErrorFS(m, &sw)
	x, err := OpenOffsetIndex(fs, "/0.index", 0, 1024, true)
	require.NoError(t, err)
	require.NoError(t, x.Append(1, 10))
	sw.Set(vfs.FailOnPath(".index", vfs.OpWriteAt, syscall.ENOSPC))
	err = x.Append(2, 20)
	require.ErrorIs(t, err, syscall.ENOSPC)
	assert.Equal(t, 1, x.Entries(), "a failed append adds nothing")
	off, _ := x.Lookup(5)
	assert.Equal(t, int64(1), off)

	sw.Set(vfs.FailOnPath(".index", vfs.OpSync, syscall.EIO))
	assert.ErrorIs(t, x.Sync(), syscall.EIO)

	// A lazy truncate reports its error on the next operation that writes.
	sw.Set(nil)
	require.NoError(t, x.Append(2, 20))
	x.TruncateTo(2)
	sw.Set(vfs.FailOnPath(".index", vfs.OpTruncate, syscall.EIO))
	assert.ErrorIs(t, x.Sync(), syscall.EIO)
	sw.Set(nil)
	require.NoError(t, x.Sync())
	require.NoError(t, x.Close())
	y, err := OpenOffsetIndex(m, "/0.index", 0, 1024, false)
	require.NoError(t, err)
	assert.Equal(t, 1, y.Entries())
}

// TestIndexCrashAtEveryOp appends with a Sync after every third entry and
// crashes at every file operation: the reopened index must hold a prefix of
// the appended entries, at least as long as the last synced count.
func TestIndexCrashAtEveryOp(t *testing.T) {
	run := func(fs vfs.FS, synced *int) error {
		x, err := OpenTimeIndex(fs, "/p/0.timeindex", 100, 12*64, true)
		if err != nil {
			return err
		}
		defer x.Close()
		if err := fs.SyncDir("/p"); err != nil {
			return err
		}
		for i := int64(1); i <= 20; i++ {
			if err := x.MaybeAppend(i*1000, 100+i, false); err != nil {
				return err
			}
			if i%3 == 0 {
				if err := x.Sync(); err != nil {
					return err
				}
				*synced = int(i)
			}
		}
		return nil
	}
	newMem := func() *vfs.MemFS {
		m := vfs.NewMem()
		require.NoError(t, m.MkdirAll("/p", 0o755))
		require.NoError(t, m.SyncDir("/"))
		return m
	}
	counter := vfs.NewCounter()
	var synced int
	require.NoError(t, run(vfs.NewErrorFS(newMem(), counter), &synced))
	for i := int64(0); i < counter.Count(); i++ {
		m := newMem()
		synced = 0
		require.ErrorIs(t, run(vfs.NewErrorFS(m, vfs.CrashAt(i)), &synced), vfs.ErrInjectedCrash)
		c := m.Crash()
		if _, err := c.Stat("/p/0.timeindex"); err != nil {
			require.Zero(t, synced, "crash at %d", i)
			continue
		}
		x, err := OpenTimeIndex(c, "/p/0.timeindex", 100, 12*64, false)
		require.NoError(t, err)
		require.NoError(t, x.SanityCheck())
		assert.GreaterOrEqual(t, x.Entries(), synced, "crash at %d", i)
		for j := 0; j < x.Entries(); j++ {
			ts, off := x.Entry(j)
			require.Equal(t, [2]int64{int64(j+1) * 1000, 101 + int64(j)}, [2]int64{ts, off})
		}
	}
}

// TestLookupMatchesLinearScan checks the binary search (warm tail included)
// against a linear scan on indexes larger than the warm section.
func TestLookupMatchesLinearScan(t *testing.T) {
	fs := vfs.NewMem()
	x, err := OpenOffsetIndex(fs, "/0.index", 1000, 8*5000, true)
	require.NoError(t, err)
	ti, err := OpenTimeIndex(fs, "/0.timeindex", 1000, 12*5000, true)
	require.NoError(t, err)
	var offs, tss []int64
	for i := int64(1); i < 4000; i++ {
		off := 1000 + i*3
		require.NoError(t, x.Append(off, i*100))
		require.NoError(t, ti.MaybeAppend(i*7, off, false))
		offs = append(offs, off)
		tss = append(tss, i*7)
	}
	want, k := int64(1000), 0
	for target := int64(900); target < 1000+4000*3+10; target++ {
		for k < len(offs) && offs[k] <= target { // targets increase: advance the scan
			want = offs[k]
			k++
		}
		got, _ := x.Lookup(target)
		require.Equal(t, want, got, "offset lookup %d", target)
		// Ceiling: the first entry at or after target.
		c := sort.Search(len(offs), func(i int) bool { return offs[i] >= target })
		cOff, cPos, ok := x.Ceiling(target)
		require.Equal(t, c < len(offs), ok, "ceiling %d", target)
		if ok {
			require.Equal(t, offs[c], cOff, "ceiling %d", target)
			require.Equal(t, int64(c+1)*100, cPos, "ceiling %d", target)
		}
	}
	want, k = -1, 0
	for target := int64(-5); target < 4000*7+10; target++ {
		for k < len(tss) && tss[k] <= target {
			want = tss[k]
			k++
		}
		got, _ := ti.Lookup(target)
		require.Equal(t, want, got, "time lookup %d", target)
	}
}

// TestMappedIndexReservesBlocks: before storing through the mapping the
// index reserves disk blocks, so a full disk yields ENOSPC, not SIGBUS.
func TestMappedIndexReservesBlocks(t *testing.T) {
	p := filepath.Join(t.TempDir(), "0.index")
	x, err := OpenOffsetIndex(vfs.OS, p, 0, 10<<20, true)
	require.NoError(t, err)
	defer x.Close()
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(p, &st))
	assert.Less(t, st.Blocks*512, int64(64<<10), "preallocation is sparse")
	require.NoError(t, x.Append(1, 10))
	require.NoError(t, syscall.Stat(p, &st))
	assert.GreaterOrEqual(t, st.Blocks*512, int64(64<<10))
	assert.Less(t, st.Blocks*512, int64(1<<20), "reserved in chunks, not all 10 MiB")
}
