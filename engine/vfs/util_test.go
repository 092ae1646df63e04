package vfs

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	_ Locker = osFS{}
	_ Locker = (*MemFS)(nil)
	_ Locker = (*ErrorFS)(nil)
)

func TestLock(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs FS, dir string) {
		p := filepath.Join(dir, ".lock")
		l, err := Lock(fs, p)
		require.NoError(t, err)
		_, err = Lock(fs, p)
		require.ErrorIs(t, err, ErrLocked)
		assert.ErrorIs(t, err, syscall.EWOULDBLOCK)
		_, err = Lock(NewErrorFS(fs, nil), p)
		require.ErrorIs(t, err, ErrLocked, "through ErrorFS too")
		require.NoError(t, l.Close())
		l2, err := Lock(fs, p)
		require.NoError(t, err)
		require.NoError(t, l2.Close())
		_, err = fs.Stat(p)
		assert.NoError(t, err, "the lock file exists")
	})
}

func TestWriteFileAtomic(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs FS, dir string) {
		p := filepath.Join(dir, "topicfs-topics.json")
		_, err := ReadFile(fs, p)
		require.ErrorIs(t, err, os.ErrNotExist)
		require.NoError(t, WriteFileAtomic(fs, p, []byte("{}"), 0o644))
		require.NoError(t, WriteFileAtomic(fs, p, []byte(`{"a":1}`), 0o644))
		got, err := ReadFile(fs, p)
		require.NoError(t, err)
		assert.Equal(t, `{"a":1}`, string(got))
		_, err = fs.Stat(p + ".tmp")
		assert.ErrorIs(t, err, os.ErrNotExist)
	})

	// Crash at every op: old or new content, never torn, never an error.
	setup := func() *MemFS {
		m := NewMem()
		require.NoError(t, WriteFileAtomic(m, "/f", []byte("old-content"), 0o644))
		return m
	}
	c := NewCounter()
	require.NoError(t, WriteFileAtomic(NewErrorFS(setup(), c), "/f", []byte("new"), 0o644))
	for i := int64(0); i <= c.Count(); i++ {
		m := setup()
		_ = WriteFileAtomic(NewErrorFS(m, CrashAt(i)), "/f", []byte("new"), 0o644)
		got, err := ReadFile(m.Crash(), "/f")
		require.NoError(t, err, "crash at %d", i)
		assert.Contains(t, []string{"old-content", "new"}, string(got), "crash at %d", i)
	}
}

// TestWriteAtomicWriterFails: a writer's error leaves the old file and no
// temporary file.
func TestWriteAtomicWriterFails(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs FS, dir string) {
		p := filepath.Join(dir, "f")
		require.NoError(t, WriteFileAtomic(fs, p, []byte("old"), 0o644))
		boom := errors.New("boom")
		err := WriteAtomic(fs, p, 0o644, func(w io.Writer) error {
			_, _ = w.Write([]byte("half"))
			return boom
		})
		require.ErrorIs(t, err, boom)
		got, err := ReadFile(fs, p)
		require.NoError(t, err)
		assert.Equal(t, "old", string(got))
		_, err = fs.Stat(p + ".tmp")
		assert.ErrorIs(t, err, os.ErrNotExist)
	})
}

func TestAllocate(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sparse")
	f, err := OS.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Truncate(1<<20))
	blocks := func() int64 {
		var st syscall.Stat_t
		require.NoError(t, syscall.Stat(p, &st))
		return st.Blocks * 512
	}
	before := blocks()
	require.NoError(t, Allocate(f, 0, 64<<10))
	assert.GreaterOrEqual(t, blocks()-before, int64(64<<10), "blocks reserved")
	sz, err := f.Size()
	require.NoError(t, err)
	assert.Equal(t, int64(1<<20), sz, "size unchanged")
	mf, err := NewMem().OpenFile("/x", os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	assert.NoError(t, Allocate(mf, 0, 100), "no-op on MemFS")
}

func TestReleaseBeyond(t *testing.T) {
	p := filepath.Join(t.TempDir(), "prealloc")
	f, err := OS.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	defer f.Close()
	blocks := func() int64 {
		var st syscall.Stat_t
		require.NoError(t, syscall.Stat(p, &st))
		return st.Blocks * 512
	}
	_, err = f.WriteAt(bytes.Repeat([]byte("x"), 10000), 0)
	require.NoError(t, err)
	require.NoError(t, Allocate(f, 10000, 1<<20))
	require.GreaterOrEqual(t, blocks(), int64(1<<20), "blocks reserved past the end")
	written := time.Unix(1_700_000_000, 123456789)
	require.NoError(t, os.Chtimes(p, written, written))
	require.NoError(t, ReleaseBeyond(f, 10000))
	assert.Less(t, blocks(), int64(64<<10), "blocks past the end freed")
	fi, err := os.Stat(p)
	require.NoError(t, err)
	assert.True(t, fi.ModTime().Equal(written), "mtime kept: %v", fi.ModTime())
	sz, err := f.Size()
	require.NoError(t, err)
	assert.Equal(t, int64(10000), sz, "size unchanged")
	got, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, bytes.Repeat([]byte("x"), 10000), got, "bytes unchanged")

	mf, err := NewMem().OpenFile("/x", os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	assert.NoError(t, ReleaseBeyond(mf, 0), "no-op on MemFS")
}

// TestMkdirAllDurable: the new directories survive a crash once it returns;
// a crash part way leaves the new chain unreachable or whole, never a
// durable directory missing the child it was made for; the leaf is synced
// before the entry naming it, and an existing directory costs no fsync.
func TestMkdirAllDurable(t *testing.T) {
	forEachFS(t, func(t *testing.T, fs FS, dir string) {
		p := filepath.Join(dir, "a", "b")
		require.NoError(t, MkdirAllDurable(fs, p, 0o755))
		require.NoError(t, MkdirAllDurable(fs, p, 0o755), "existing")
		st, err := fs.Stat(p)
		require.NoError(t, err)
		assert.True(t, st.IsDir())
	})

	setup := func() *MemFS {
		m := NewMem()
		require.NoError(t, m.MkdirAll("/data", 0o755))
		require.NoError(t, m.SyncDir("/"))
		return m
	}
	var synced []string
	record := InjectorFunc(func(op Op) *Fault {
		if op.Kind == OpSyncDir {
			synced = append(synced, op.Path)
		}
		return nil
	})
	m := setup()
	require.NoError(t, MkdirAllDurable(NewErrorFS(m, record), "/data/t/t-0", 0o755))
	assert.Equal(t, []string{"/data/t/t-0", "/data/t", "/data"}, synced, "leaf first, then each parent up")
	_, err := m.Crash().Stat("/data/t/t-0")
	require.NoError(t, err, "durable once it returned")
	synced = nil
	require.NoError(t, MkdirAllDurable(NewErrorFS(m, record), "/data/t/t-0", 0o755))
	assert.Empty(t, synced, "nothing created, nothing synced")

	c := NewCounter()
	require.NoError(t, MkdirAllDurable(NewErrorFS(setup(), c), "/data/t/t-0", 0o755))
	for i := int64(0); i <= c.Count(); i++ {
		m := setup()
		err := MkdirAllDurable(NewErrorFS(m, CrashAt(i)), "/data/t/t-0", 0o755)
		after := m.Crash()
		_, leafErr := after.Stat("/data/t/t-0")
		if err == nil {
			require.NoError(t, leafErr, "crash at %d after it returned nil", i)
			continue
		}
		if _, midErr := after.Stat("/data/t"); midErr == nil {
			assert.NoError(t, leafErr, "crash at %d: /data/t durable without its child", i)
		}
	}
}
