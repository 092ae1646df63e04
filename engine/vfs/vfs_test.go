package vfs

import (
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fsCase runs the same behaviour checks against OS and MemFS.
func forEachFS(t *testing.T, fn func(t *testing.T, fs FS, dir string)) {
	t.Run("OS", func(t *testing.T) { fn(t, OS, t.TempDir()) })
	t.Run("Mem", func(t *testing.T) {
		m := NewMem()
		require.NoError(t, m.MkdirAll("/data", 0o755))
		fn(t, m, "/data")
	})
}

func readAll(t *testing.T, fs FS, name string) []byte {
	t.Helper()
	f, err := fs.OpenFile(name, os.O_RDONLY, 0)
	require.NoError(t, err)
	defer f.Close()
	sz, err := f.Size()
	require.NoError(t, err)
	b := make([]byte, sz)
	n, err := f.ReadAt(b, 0)
	if err != nil {
		require.ErrorIs(t, err, io.EOF)
	}
	return b[:n]
}

func TestFSBasics(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs FS, dir string) {
		p := filepath.Join(dir, "a.log")
		f, err := fs.OpenFile(p, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
		require.NoError(t, err)
		_, err = f.Write([]byte("hello "))
		require.NoError(t, err)
		_, err = f.Write([]byte("world"))
		require.NoError(t, err)
		sz, err := f.Size()
		require.NoError(t, err)
		assert.Equal(t, int64(11), sz)
		buf := make([]byte, 5)
		n, err := f.ReadAt(buf, 6)
		require.NoError(t, err)
		assert.Equal(t, "world", string(buf[:n]))
		n, err = f.ReadAt(buf, 9)
		assert.Equal(t, 2, n)
		assert.ErrorIs(t, err, io.EOF)
		require.NoError(t, f.Truncate(5))
		require.NoError(t, f.Sync())
		require.NoError(t, f.Close())
		assert.Equal(t, "hello", string(readAll(t, fs, p)))

		// WriteAt on a non-append file, with a hole.
		g, err := fs.OpenFile(filepath.Join(dir, "b.index"), os.O_CREATE|os.O_RDWR, 0o644)
		require.NoError(t, err)
		_, err = g.WriteAt([]byte{1, 2}, 4)
		require.NoError(t, err)
		require.NoError(t, g.Close())
		assert.Equal(t, []byte{0, 0, 0, 0, 1, 2}, readAll(t, fs, filepath.Join(dir, "b.index")))

		_, err = fs.OpenFile(filepath.Join(dir, "b.index"), os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
		assert.ErrorIs(t, err, os.ErrExist)
		_, err = fs.OpenFile(filepath.Join(dir, "missing"), os.O_RDONLY, 0)
		assert.ErrorIs(t, err, os.ErrNotExist)
		assert.ErrorIs(t, err, syscall.ENOENT)

		require.NoError(t, fs.MkdirAll(filepath.Join(dir, "t-0", "x"), 0o755))
		require.NoError(t, fs.Rename(filepath.Join(dir, "a.log"), filepath.Join(dir, "t-0", "c.log")))
		_, err = fs.Stat(filepath.Join(dir, "a.log"))
		assert.ErrorIs(t, err, os.ErrNotExist)
		st, err := fs.Stat(filepath.Join(dir, "t-0", "c.log"))
		require.NoError(t, err)
		assert.Equal(t, int64(5), st.Size())
		assert.False(t, st.IsDir())

		ents, err := fs.ReadDir(dir)
		require.NoError(t, err)
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		assert.Equal(t, []string{"b.index", "t-0"}, names)
		assert.True(t, ents[1].IsDir())

		assert.Error(t, fs.Remove(filepath.Join(dir, "t-0")), "non-empty dir")
		require.NoError(t, fs.SyncDir(dir))
		require.NoError(t, fs.RemoveAll(filepath.Join(dir, "t-0")))
		require.NoError(t, fs.RemoveAll(filepath.Join(dir, "t-0")), "missing path is fine")
		require.NoError(t, fs.Remove(filepath.Join(dir, "b.index")))
		ents, err = fs.ReadDir(dir)
		require.NoError(t, err)
		assert.Empty(t, ents)

		// A read-only handle refuses writes.
		h, err := fs.OpenFile(filepath.Join(dir, "ro"), os.O_CREATE|os.O_WRONLY, 0o644)
		require.NoError(t, err)
		require.NoError(t, h.Close())
		r, err := fs.OpenFile(filepath.Join(dir, "ro"), os.O_RDONLY, 0)
		require.NoError(t, err)
		_, err = r.Write([]byte("x"))
		assert.Error(t, err)
		require.NoError(t, r.Close())
	})
}

func TestOSMmap(t *testing.T) {
	p := filepath.Join(t.TempDir(), "m")
	f, err := OS.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(4096))
	mm, ok := f.(Mmapper)
	require.True(t, ok)
	b, err := mm.Mmap(4096)
	require.NoError(t, err)
	copy(b[10:], "mapped")
	require.NoError(t, f.Sync())
	require.NoError(t, mm.Munmap(b))
	require.NoError(t, f.Close())
	got, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "mapped", string(got[10:16]))
	assert.NotZero(t, f.(*OSFile).Fd())
	_, memOK := File(&memFile{}).(Mmapper)
	assert.False(t, memOK, "MemFS files must not be mmappable")
}

func TestMemCrashLosesUnsyncedBytes(t *testing.T) {
	m := NewMem()
	require.NoError(t, m.MkdirAll("/d", 0o755))
	require.NoError(t, m.SyncDir("/"))
	f, err := m.OpenFile("/d/seg.log", os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	require.NoError(t, err)
	require.NoError(t, m.SyncDir("/d"))
	_, _ = f.Write([]byte("durable"))
	require.NoError(t, f.Sync())
	_, _ = f.Write([]byte("-lost"))

	c := m.Crash()
	assert.Equal(t, "durable", string(readAll(t, c, "/d/seg.log")))
	assert.Equal(t, "durable-lost", string(readAll(t, m, "/d/seg.log")), "crash does not touch the original")

	// A truncate is durable only after Sync.
	require.NoError(t, f.Truncate(3))
	assert.Equal(t, "durable", string(readAll(t, m.Crash(), "/d/seg.log")))
	require.NoError(t, f.Sync())
	assert.Equal(t, "dur", string(readAll(t, m.Crash(), "/d/seg.log")))

	// Overwrites in the middle (index files) are lost too.
	_, _ = f.WriteAt([]byte("X"), 0)
	assert.Equal(t, "dur", string(readAll(t, m.Crash(), "/d/seg.log")))
}

func TestMemCrashDirectoryEntries(t *testing.T) {
	m := NewMem()
	require.NoError(t, m.MkdirAll("/d", 0o755))
	c := m.Crash()
	_, err := c.Stat("/d")
	assert.ErrorIs(t, err, os.ErrNotExist, "mkdir not durable without SyncDir of the parent")
	require.NoError(t, m.SyncDir("/"))

	f, err := m.OpenFile("/d/a", os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	_, _ = f.Write([]byte("A"))
	require.NoError(t, f.Sync())
	_, err = m.Crash().Stat("/d/a")
	assert.ErrorIs(t, err, os.ErrNotExist, "synced file whose dir entry was not synced is lost")
	require.NoError(t, m.SyncDir("/d"))

	// Unsynced rename rolls back; the bytes stay with the durable name.
	require.NoError(t, m.Rename("/d/a", "/d/b"))
	c = m.Crash()
	assert.Equal(t, "A", string(readAll(t, c, "/d/a")))
	_, err = c.Stat("/d/b")
	assert.ErrorIs(t, err, os.ErrNotExist)
	require.NoError(t, m.SyncDir("/d"))
	c = m.Crash()
	assert.Equal(t, "A", string(readAll(t, c, "/d/b")))
	_, err = c.Stat("/d/a")
	assert.ErrorIs(t, err, os.ErrNotExist)

	// Unsynced remove is rolled back.
	require.NoError(t, m.Remove("/d/b"))
	assert.Equal(t, "A", string(readAll(t, m.Crash(), "/d/b")))
	require.NoError(t, m.SyncDir("/d"))
	_, err = m.Crash().Stat("/d/b")
	assert.ErrorIs(t, err, os.ErrNotExist)

	// A crashed copy is itself crashable and independent.
	c = m.Crash()
	g, err := c.OpenFile("/d/new", os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	require.NoError(t, g.Close())
	_, err = m.Stat("/d/new")
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestMemConcurrent(t *testing.T) {
	m := NewMem()
	f, err := m.OpenFile("/x", os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				_, _ = f.Write([]byte("abcd"))
				_, _ = f.ReadAt(make([]byte, 4), 0)
				_ = f.Sync()
				_, _ = m.Crash().Stat("/x")
			}
		}()
	}
	wg.Wait()
	sz, err := f.Size()
	require.NoError(t, err)
	assert.Equal(t, int64(4*200*4), sz)
}

func TestErrorFSInjection(t *testing.T) {
	tests := []struct {
		name  string
		inj   Injector
		check func(t *testing.T, fs FS, m *MemFS)
	}{
		{"ENOSPC on nth", FailNth(1, syscall.ENOSPC), func(t *testing.T, fs FS, m *MemFS) {
			f, err := fs.OpenFile("/f", os.O_CREATE|os.O_RDWR, 0o644) // op 0
			require.NoError(t, err)
			_, err = f.Write([]byte("abc")) // op 1
			assert.ErrorIs(t, err, syscall.ENOSPC)
			var pe *os.PathError
			assert.ErrorAs(t, err, &pe)
			_, err = f.Write([]byte("abc")) // op 2 runs
			assert.NoError(t, err)
		}},
		{"EIO on path", FailOnPath(".index", OpSync, syscall.EIO), func(t *testing.T, fs FS, m *MemFS) {
			f, err := fs.OpenFile("/0.index", os.O_CREATE|os.O_RDWR, 0o644)
			require.NoError(t, err)
			assert.ErrorIs(t, f.Sync(), syscall.EIO)
			g, err := fs.OpenFile("/0.log", os.O_CREATE|os.O_RDWR, 0o644)
			require.NoError(t, err)
			assert.NoError(t, g.Sync())
		}},
		{"short write", ShortWriteNth(0, 2, syscall.EIO), func(t *testing.T, fs FS, m *MemFS) {
			f, err := fs.OpenFile("/f", os.O_CREATE|os.O_RDWR, 0o644)
			require.NoError(t, err)
			n, err := f.Write([]byte("abcdef"))
			assert.Equal(t, 2, n)
			assert.ErrorIs(t, err, syscall.EIO)
			assert.Equal(t, "ab", string(readAll(t, m, "/f")))
		}},
		{"rename on path", FailOnPath(".swap", OpRename, syscall.EIO), func(t *testing.T, fs FS, m *MemFS) {
			f, err := fs.OpenFile("/a.cleaned", os.O_CREATE|os.O_RDWR, 0o644)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			err = fs.Rename("/a.cleaned", "/a.swap")
			assert.ErrorIs(t, err, syscall.EIO)
			_, err = m.Stat("/a.cleaned")
			assert.NoError(t, err)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMem()
			tc.check(t, NewErrorFS(m, tc.inj), m)
		})
	}
}

// scenario writes two "records", syncing and renaming like a checkpoint.
func scenario(fs FS) error {
	if err := fs.MkdirAll("/d", 0o755); err != nil {
		return err
	}
	if err := fs.SyncDir("/"); err != nil {
		return err
	}
	for _, v := range []string{"one", "two"} {
		f, err := fs.OpenFile("/d/cp.tmp", os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		if _, err := f.Write([]byte(v)); err != nil {
			f.Close()
			return err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
		f.Close()
		if err := fs.Rename("/d/cp.tmp", "/d/cp"); err != nil {
			return err
		}
		if err := fs.SyncDir("/d"); err != nil {
			return err
		}
	}
	return nil
}

func TestCrashAtEveryOp(t *testing.T) {
	counter := NewCounter()
	require.NoError(t, scenario(NewErrorFS(NewMem(), counter)))
	n := counter.Count()
	require.Equal(t, int64(2+2*5), n)
	seen := map[string]bool{}
	for i := int64(0); i <= n; i++ {
		m := NewMem()
		crash := CrashAt(i)
		err := scenario(NewErrorFS(m, crash))
		if i < n {
			require.ErrorIs(t, err, ErrInjectedCrash, "op %d", i)
			require.True(t, crash.Crashed())
			// Every later op fails too, reads included.
			_, err = NewErrorFS(m, crash).Stat("/")
			require.ErrorIs(t, err, ErrInjectedCrash)
		} else {
			require.NoError(t, err)
		}
		c := m.Crash()
		got := ""
		if _, err := c.Stat("/d/cp"); err == nil {
			got = string(readAll(t, c, "/d/cp"))
		}
		assert.Contains(t, []string{"", "one", "two"}, got, "crash at op %d left a torn file", i)
		seen[got] = true
	}
	assert.Equal(t, map[string]bool{"": true, "one": true, "two": true}, seen)
}

func TestSwitchable(t *testing.T) {
	var s Switchable
	fs := NewErrorFS(NewMem(), &s)
	require.NoError(t, fs.MkdirAll("/a", 0o755))
	s.Set(FailOnPath("/", OpAny, syscall.EROFS))
	err := fs.MkdirAll("/b", 0o755)
	assert.True(t, errors.Is(err, syscall.EROFS))
	s.Set(nil)
	require.NoError(t, fs.MkdirAll("/b", 0o755))
}

// TestMemSyncDeltaModel checks the incremental Sync against a model that
// snapshots the whole file at each Sync.
func TestMemSyncDeltaModel(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 9))
	m := NewMem()
	f, err := m.OpenFile("/f", os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	require.NoError(t, m.SyncDir("/"))
	var live, durable []byte
	for step := 0; step < 3000; step++ {
		switch r.IntN(4) {
		case 0, 1:
			off := r.Int64N(int64(len(live)) + 20)
			p := make([]byte, r.IntN(10)+1)
			for i := range p {
				p[i] = byte(r.IntN(255) + 1)
			}
			_, err := f.WriteAt(p, off)
			require.NoError(t, err)
			if end := int(off) + len(p); end > len(live) {
				live = append(live, make([]byte, end-len(live))...)
			}
			copy(live[off:], p)
		case 2:
			size := r.Int64N(int64(len(live)) + 10)
			require.NoError(t, f.Truncate(size))
			if int(size) <= len(live) {
				live = live[:size]
			} else {
				live = append(live, make([]byte, int(size)-len(live))...)
			}
		case 3:
			require.NoError(t, f.Sync())
			durable = append([]byte(nil), live...)
		}
		if step%50 == 0 {
			got := readAll(t, m.Crash(), "/f")
			require.Equal(t, len(durable), len(got), "step %d", step)
			if len(durable) > 0 {
				require.Equal(t, durable, got, "step %d", step)
			}
		}
	}
}
