package local

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/vfs"
)

func openDir(t *testing.T, dir string, readOnly bool) *Backend {
	t.Helper()
	d, err := engine.OpenLogDir(vfs.OS, dir, engine.LogDirOptions{ReadOnly: readOnly})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	return New(d)
}

// TestCursorsPersist checks commits, partial deletes and the file a new
// open reads them back from.
func TestCursorsPersist(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := openDir(t, dir, false)
	_, err := b.CreateTopic(ctx, "orders", 2)
	require.NoError(t, err)

	_, ok, err := b.Cursor(ctx, "orders", "billing")
	require.NoError(t, err)
	assert.False(t, ok)
	require.NoError(t, b.CommitCursor(ctx, "orders", "billing", map[int]int64{0: 3, 1: 5}))
	require.NoError(t, b.CommitCursor(ctx, "orders", "billing", map[int]int64{1: 7}))
	require.NoError(t, b.CommitCursor(ctx, "orders", "audit", map[int]int64{0: 1}))
	require.NoError(t, b.DeleteCursor(ctx, "orders", "audit", []int{0}))
	assert.ErrorIs(t, b.DeleteCursor(ctx, "orders", "audit", nil), backend.ErrUnknownCursor)
	assert.ErrorIs(t, b.CommitCursor(ctx, "nope", "c", map[int]int64{0: 1}), backend.ErrUnknownTopic)

	got, err := ReadCursorsFile(vfs.OS, dir)
	require.NoError(t, err)
	assert.Equal(t, map[string]map[string]map[int]int64{"orders": {"billing": {0: 3, 1: 7}}}, got)
	_, err = os.Stat(filepath.Join(dir, CursorsFile+".tmp"))
	assert.ErrorIs(t, err, os.ErrNotExist, "no temporary file left behind")

	// A fresh backend (the next mount) reads them back.
	b2 := New(b.LogDir())
	all, err := b2.ListCursors(ctx, "orders")
	require.NoError(t, err)
	assert.Equal(t, map[string]map[int]int64{"billing": {0: 3, 1: 7}}, all)

	// Deleting the topic drops its cursors, also in the file.
	require.NoError(t, b2.DeleteTopic(ctx, "orders"))
	got, err = ReadCursorsFile(vfs.OS, dir)
	require.NoError(t, err)
	assert.Empty(t, got)
}

// TestCursorsGarbageFileRefused checks that a file that does not parse
// fails every cursor call with ErrCorrupt and is never overwritten.
func TestCursorsGarbageFileRefused(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := openDir(t, dir, false)
	_, err := b.CreateTopic(ctx, "orders", 1)
	require.NoError(t, err)
	garbage := []byte(`{"version":1,"topics":{"orders":{"billing":{"0":`)
	require.NoError(t, os.WriteFile(filepath.Join(dir, CursorsFile), garbage, 0o644))

	b = New(b.LogDir()) // the next mount of the directory
	_, _, err = b.Cursor(ctx, "orders", "billing")
	assert.ErrorIs(t, err, backend.ErrCorrupt)
	assert.Contains(t, err.Error(), CursorsFile)
	assert.ErrorIs(t, b.CommitCursor(ctx, "orders", "billing", map[int]int64{0: 1}), backend.ErrCorrupt)
	after, err := os.ReadFile(filepath.Join(dir, CursorsFile))
	require.NoError(t, err)
	assert.Equal(t, garbage, after, "the file keeps its bytes")

	for _, bad := range []string{`{"version":2,"topics":{}}`, `{"version":1,"topics":{"o":{"c":{"x":1}}}}`, `{"version":1,"topics":{"o":{"c":{"0":-5}}}}`} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, CursorsFile), []byte(bad), 0o644))
		_, err := ReadCursorsFile(vfs.OS, dir)
		assert.ErrorIs(t, err, backend.ErrCorrupt, bad)
	}
}

// TestCursorsReadOnly checks that a read-only data directory reads cursors
// and refuses to change them.
func TestCursorsReadOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b := openDir(t, dir, false)
	_, err := b.CreateTopic(ctx, "orders", 1)
	require.NoError(t, err)
	require.NoError(t, b.CommitCursor(ctx, "orders", "billing", map[int]int64{0: 0}))
	require.NoError(t, b.LogDir().Close())

	ro := openDir(t, dir, true)
	got, ok, err := ro.Cursor(ctx, "orders", "billing")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, map[int]int64{0: 0}, got)
	assert.ErrorIs(t, ro.CommitCursor(ctx, "orders", "billing", map[int]int64{0: 0}), backend.ErrReadOnly)
	assert.ErrorIs(t, ro.DeleteCursor(ctx, "orders", "billing", nil), backend.ErrReadOnly)
}

// TestCursorsOfVanishedTopicIgnored checks that an entry left for a topic
// that no longer exists (a crash between deleting the topic and dropping
// its cursors) is ignored.
func TestCursorsOfVanishedTopicIgnored(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, CursorsFile), []byte(`{"version":1,"topics":{"gone":{"c":{"0":4}}}}`), 0o644))
	b := openDir(t, dir, false)
	_, err := b.CreateTopic(ctx, "gone", 1)
	require.NoError(t, err)
	_, ok, err := b.Cursor(ctx, "gone", "c")
	require.NoError(t, err)
	assert.False(t, ok, "the recreated topic starts without the old cursor")
}
