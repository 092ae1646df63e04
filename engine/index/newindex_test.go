package index

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/topicfs/topicfs/engine/vfs"
)

// residentPages counts the pages of mm in the page cache.
func residentPages(t *testing.T, mm []byte) int {
	t.Helper()
	vec := make([]byte, (len(mm)+os.Getpagesize()-1)/os.Getpagesize())
	_, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(mm))), uintptr(len(mm)), uintptr(unsafe.Pointer(unsafe.SliceData(vec))))
	require.Zero(t, e, "mincore")
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// Opening a new preallocated index must not read its holes: that faulted in
// all 10 MiB of each new index (per roll, under the partition lock).
func TestOpenNewIndexTouchesNoHoles(t *testing.T) {
	dir := t.TempDir()
	x, err := OpenOffsetIndex(vfs.OS, filepath.Join(dir, "0.index"), 0, 10<<20, true)
	require.NoError(t, err)
	defer x.Close()
	ti, err := OpenTimeIndex(vfs.OS, filepath.Join(dir, "0.timeindex"), 0, 10<<20, true)
	require.NoError(t, err)
	defer ti.Close()
	require.NotNil(t, x.ef.mm, "OS indexes are mapped")
	require.LessOrEqual(t, residentPages(t, x.ef.mm), 2)
	require.LessOrEqual(t, residentPages(t, ti.ef.mm), 2)

	// Reopening a short index with a few entries scans only those.
	for i := int64(1); i <= 100; i++ {
		require.NoError(t, x.Append(i, i*100))
	}
	require.NoError(t, x.Close())
	x, err = OpenOffsetIndex(vfs.OS, filepath.Join(dir, "0.index"), 0, 10<<20, true)
	require.NoError(t, err)
	require.Equal(t, 100, x.Entries())
	require.LessOrEqual(t, residentPages(t, x.ef.mm), 2)
	off, pos := x.Lookup(50)
	require.Equal(t, int64(50), off)
	require.Equal(t, int64(5000), pos)
	require.NoError(t, x.Close())
}
