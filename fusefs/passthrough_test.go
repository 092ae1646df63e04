package fusefs

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/backend/local"
	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/vfs"
)

// TestPassthroughRefusedByKernel: a data directory on another FUSE file
// system (here go-fuse's loopback, itself passing its files through) is
// one the kernel will not take backing files from (stacking depth). The
// mount says so once and reads every file of segments/ through topicfs,
// byte for byte.
func TestPassthroughRefusedByKernel(t *testing.T) {
	requireFUSE(t)
	src, lower := t.TempDir(), t.TempDir()
	root, err := gofs.NewLoopbackRoot(src)
	require.NoError(t, err)
	lsrv, err := gofs.Mount(lower, root, &gofs.Options{MountOptions: fuse.MountOptions{DirectMount: true}})
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := lsrv.Unmount(); err != nil {
			_ = syscall.Unmount(lower, syscall.MNT_DETACH)
		}
		lsrv.Wait()
	})

	d, err := engine.OpenLogDir(vfs.OS, filepath.Join(lower, "data"), engine.LogDirOptions{})
	require.NoError(t, err)
	var logs syncBuffer
	var reads atomic.Int64
	mnt := t.TempDir()
	srv, err := Mount(mnt, d, Options{
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		OpLatency: func(op string, _ time.Duration) {
			if op == "read" {
				reads.Add(1)
			}
		},
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
		srv.Wait()
		assert.NoError(t, d.Close())
	})
	assert.False(t, srv.f.passthrough.Load())
	assert.Contains(t, logs.String(), "stacked file system")
	assert.Equal(t, 1, strings.Count(logs.String(), "segments/:"), "one line on how segments/ is read:\n%s", logs.String())

	tp, err := d.CreateTopic("l", 1)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	_, _, err = p.Append(testRecords("sealed one", "sealed two"))
	require.NoError(t, err)
	require.NoError(t, p.Roll())
	name := engineName(0) + ".log"
	got, err := os.ReadFile(filepath.Join(mnt, "l", "0", "segments", name))
	require.NoError(t, err)
	want, err := os.ReadFile(filepath.Join(p.Dir(), name))
	require.NoError(t, err)
	assert.True(t, bytes.Equal(want, got), "%d bytes through segments/, %d on disk", len(got), len(want))
	assert.Positive(t, reads.Load(), "read through topicfs")
}

// TestPassthroughNotTaken: a handle offered for passthrough that the
// kernel reads through the server after all (go-fuse stops offering
// backing files after one refusal) serves the file's bytes, and the mount
// warns once.
func TestPassthroughNotTaken(t *testing.T) {
	dir := t.TempDir()
	d, err := engine.OpenLogDir(vfs.OS, dir, engine.LogDirOptions{})
	require.NoError(t, err)
	defer d.Close()
	var logs syncBuffer
	f := newFsys(local.New(d), Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	path := filepath.Join(dir, "x.log")
	want := bytes.Repeat([]byte("0123456789"), 1000)
	require.NoError(t, os.WriteFile(path, want, 0o600))
	n := &segFileNode{fsys: f, vfs: vfs.OS, path: path}
	for range 3 {
		file, err := vfs.OS.OpenFile(path, os.O_RDONLY, 0)
		require.NoError(t, err)
		fi, err := fileInfo(vfs.OS, file, path)
		require.NoError(t, err)
		h := &segPassHandle{segFileHandle: segFileHandle{f: file, info: fi}, fd: int(file.(*vfs.OSFile).Fd())}
		res, errno := n.Read(context.Background(), h, make([]byte, 1<<20), 0)
		require.Zero(t, errno)
		got, st := res.Bytes(nil)
		require.True(t, st.Ok())
		assert.True(t, bytes.Equal(want, got))
		n.passed++ // as admit counted it
		require.Zero(t, n.Release(context.Background(), h))
	}
	assert.Zero(t, n.passed)
	assert.Equal(t, 1, strings.Count(logs.String(), "did not take a file for FUSE passthrough"), logs.String())
}

// TestProbeFile: the file passthrough is tried on is the data directory's
// own (its .lock), else one of a partition directory; an empty directory
// has none.
func TestProbeFile(t *testing.T) {
	empty := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(empty, "t-0"), 0o755))
	_, err := probeFile(vfs.OS, empty)
	assert.ErrorContains(t, err, "no regular file")

	copyDir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(copyDir, "t-0"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(copyDir, "t-0", "00000000000000000000.log"), []byte("x"), 0o600))
	f, err := probeFile(vfs.OS, copyDir)
	require.NoError(t, err)
	assert.Equal(t, "00000000000000000000.log", filepath.Base(f.Name()))
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 10))
	require.NoError(t, err)
	assert.Equal(t, "x", string(b))
	require.NoError(t, f.Close())

	require.NoError(t, os.WriteFile(filepath.Join(copyDir, ".lock"), nil, 0o600))
	f, err = probeFile(vfs.OS, copyDir)
	require.NoError(t, err)
	assert.Equal(t, ".lock", filepath.Base(f.Name()))
	require.NoError(t, f.Close())
}
