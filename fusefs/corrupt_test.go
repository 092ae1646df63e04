package fusefs

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/vfs"
)

// syncBuffer is a bytes.Buffer safe for a concurrent slog handler.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestCorruptionIsEIOAndLogged(t *testing.T) {
	requireFUSE(t)
	data := t.TempDir()
	cfg := engine.DefaultConfig()
	cfg.SegmentBytes = 4096
	d, err := engine.OpenLogDir(vfs.OS, data, engine.LogDirOptions{Defaults: cfg})
	require.NoError(t, err)
	tp, err := d.CreateTopic("c", 1)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	for i := 0; i < 100; i++ {
		_, _, err = p.Append(testRecords("some value that fills segments quickly", "and another one"))
		require.NoError(t, err)
	}
	dir := p.Dir()
	require.NoError(t, d.Close())

	// Flip a byte inside the records of the first batch of the first
	// (sealed) segment: its CRC no longer matches.
	seg := filepath.Join(dir, "00000000000000000000.log")
	b, err := os.ReadFile(seg)
	require.NoError(t, err)
	b[70] ^= 0xff
	require.NoError(t, os.WriteFile(seg, b, 0o644))

	logs := &syncBuffer{}
	d, err = engine.OpenLogDir(vfs.OS, data, engine.LogDirOptions{Defaults: cfg})
	require.NoError(t, err)
	mnt := t.TempDir()
	srv, err := Mount(mnt, d, Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			_ = syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
		srv.Wait()
		d.Close()
	})
	m := &testMount{mnt: mnt, data: data, d: d}
	_, errOut, err := m.shErr(`cat $MNT/c/0/records`)
	require.Error(t, err)
	assert.Contains(t, errOut, "Input/output error")
	assert.Contains(t, logs.String(), "00000000000000000000.log", "the log names the segment")
	assert.Contains(t, logs.String(), "position=0", "and the position of the bad batch")
	// A view starting after the damage still reads.
	assert.Equal(t, "and another one\n", m.sh(t, `tail -n 1 $MNT/c/0/by-offset/150`))
}
