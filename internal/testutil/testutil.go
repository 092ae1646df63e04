package testutil

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// CopyTree copies a directory tree (for example a read-only fixture) into
// dst, with writable permissions.
func CopyTree(t testing.TB, src, dst string) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		if e.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, data, 0o644)
	}))
}

// TreeState lists every path under dir with its size, mtime and mode,
// sorted, so a test can compare a tree before and after an operation.
func TreeState(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		out = append(out, fmt.Sprintf("%s %d %d %v", p, info.Size(), info.ModTime().UnixNano(), info.Mode()))
		return nil
	}))
	sort.Strings(out)
	return out
}

// Guarded returns a copy of data that ends exactly where an unreadable page
// begins, so that a read past its end faults instead of passing unnoticed:
// for decoders that read through unsafe, without Go's bounds checks. The
// copy is unmapped when the test ends.
func Guarded(t testing.TB, data []byte) []byte {
	t.Helper()
	page := unix.Getpagesize()
	size := (len(data)+page-1)/page*page + page
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	require.NoError(t, err)
	t.Cleanup(func() { _ = unix.Munmap(mem) })
	require.NoError(t, unix.Mprotect(mem[size-page:], unix.PROT_NONE))
	g := mem[size-page-len(data) : size-page : size-page]
	copy(g, data)
	return g
}
