package fusefs

import (
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/vfs"
)

// newFaultyMount mounts a fresh data directory whose writes of the topics
// config file (topicfs-topics.json) fail with *fail while it is not 0.
func newFaultyMount(t *testing.T, fail *atomic.Int64) *testMount {
	t.Helper()
	requireFUSE(t)
	inj := vfs.InjectorFunc(func(op vfs.Op) *vfs.Fault {
		errno := syscall.Errno(fail.Load())
		if errno == 0 || !op.Kind.Mutating() {
			return nil
		}
		if strings.Contains(op.Path, engine.TopicsConfigFile) || strings.Contains(op.NewPath, engine.TopicsConfigFile) {
			return &vfs.Fault{Err: errno}
		}
		return nil
	})
	data := t.TempDir()
	d, err := engine.OpenLogDir(vfs.NewErrorFS(vfs.OS, inj), data, engine.LogDirOptions{Defaults: engine.DefaultConfig()})
	require.NoError(t, err)
	mnt := t.TempDir()
	srv, err := Mount(mnt, d, Options{})
	if err != nil {
		d.Close()
		require.NoError(t, err)
	}
	var once sync.Once
	m := &testMount{mnt: mnt, data: data, d: d}
	m.unmount = func() {
		once.Do(func() {
			if err := srv.Unmount(); err != nil {
				_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
			}
			srv.Wait()
			d.Close()
		})
	}
	t.Cleanup(m.unmount)
	return m
}

// TestConfigWriteReportsPersistFailure: a config change that cannot be
// persisted fails the write(2) that carries it with the errno of the
// failure (the shell reports it and exits non-zero), and nothing of it is
// applied. Before, the change was applied at close, whose errno shells
// ignore: exit status 0, the change silently missing.
func TestConfigWriteReportsPersistFailure(t *testing.T) {
	var fail atomic.Int64
	m := newFaultyMount(t, &fail)
	m.sh(t, `mkdir $MNT/c`)
	for errno, msg := range map[syscall.Errno]string{
		syscall.ENOSPC: "No space left on device", syscall.EMFILE: "Too many open files", syscall.EIO: "Input/output error",
	} {
		fail.Store(int64(errno))
		_, errOut, err := m.shErr(`echo retention.ms=1234567 > $MNT/c/config`)
		require.Error(t, err, "%v: the shell sees the failure", errno)
		assert.Contains(t, errOut, "write error: "+msg)
		assert.NotContains(t, m.sh(t, `cat $MNT/c/config`), "retention.ms=1234567\n", "%v: nothing applied", errno)

		// A final line without '\n' is applied at close, which reports
		// the failure (shells ignore close's errno; Go and python do not).
		f, err := os.OpenFile(m.path("c", "config"), os.O_WRONLY|os.O_TRUNC, 0)
		require.NoError(t, err)
		_, err = f.WriteString("retention.ms=7654321")
		require.NoError(t, err)
		assert.ErrorIs(t, f.Close(), errno)
		assert.NotContains(t, m.sh(t, `cat $MNT/c/config`), "retention.ms=7654321\n")
	}
	fail.Store(0)
	m.sh(t, `echo retention.ms=1234567 > $MNT/c/config`)
	assert.Contains(t, m.sh(t, `cat $MNT/c/config`), "retention.ms=1234567\n")
	m.sh(t, `printf retention.ms=7654321 > $MNT/c/config`)
	assert.Contains(t, m.sh(t, `cat $MNT/c/config`), "retention.ms=7654321\n")

	// All or nothing per write: a bad line refuses its whole write; the
	// writes before it stay applied (bash's printf writes line by line).
	_, errOut, err := m.shErr(`printf 'segment.ms=1111111\nretention.bytes=2222222\nsegment.bytes=banana\n' | cat > $MNT/c/config`)
	require.Error(t, err)
	assert.Contains(t, errOut, "Invalid argument")
	cfg := m.sh(t, `cat $MNT/c/config`)
	assert.NotContains(t, cfg, "segment.ms=1111111\n")
	assert.NotContains(t, cfg, "retention.bytes=2222222\n")
	_, _, err = m.shErr(`printf 'segment.ms=1111111\nsegment.bytes=banana\n' > $MNT/c/config`)
	require.Error(t, err)
	cfg = m.sh(t, `cat $MNT/c/config`)
	assert.Contains(t, cfg, "segment.ms=1111111\n", "the write of the good line, before the bad one")
	assert.NotContains(t, cfg, "segment.bytes=banana")

	// Settings and new partitions of one write: if the partitions cannot
	// be added, the settings are put back.
	fail.Store(0)
	require.NoError(t, os.Mkdir(m.data+"/c-1", 0o755)) // in the way of partition 1
	_, errOut, err = m.shErr(`printf 'retention.ms=3333333\nnum.partitions=2\n' | cat > $MNT/c/config`)
	require.Error(t, err, "partition 1's directory is in the way")
	assert.Contains(t, errOut, "File exists")
	cfg = m.sh(t, `cat $MNT/c/config`)
	assert.NotContains(t, cfg, "retention.ms=3333333\n")
	assert.Contains(t, cfg, "num.partitions=1\n")
}
