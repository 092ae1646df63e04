package vfs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// NoSync drops durability only: on MemFS an unsynced write is lost in a
// crash (Sync did nothing), and on the OS file system the files keep the
// methods the engine looks for (Mmap, Fd).
func TestNoSync(t *testing.T) {
	mem := NewMem()
	ns := NoSync(mem)
	require.NoError(t, ns.MkdirAll("/d", 0o755))
	require.NoError(t, mem.SyncDir("/"))
	f, err := ns.OpenFile("/d/f", os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	_, err = f.Write([]byte("abc"))
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, ns.SyncDir("/d"))
	require.NoError(t, f.Close())
	_, err = mem.Crash().Stat("/d/f")
	require.ErrorIs(t, err, os.ErrNotExist, "NoSync's SyncDir made nothing durable")

	of, err := NoSync(OS).OpenFile(filepath.Join(t.TempDir(), "f"), os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	defer of.Close()
	_, isMmapper := of.(Mmapper)
	_, hasFd := of.(interface{ Fd() uintptr })
	require.True(t, isMmapper && hasFd)
	require.NoError(t, of.Sync())
}
