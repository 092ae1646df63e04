package fusefs

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
)

// segMount is a test mount that counts the READ requests the server gets
// (a file read by FUSE passthrough causes none) and keeps its log.
type segMount struct {
	*testMount
	reads   atomic.Int64
	flushes atomic.Int64
	logs    *syncBuffer
}

// newSegMount mounts with passthrough on (pass) or turned off. With it on,
// the machine must have it: the tests of this file are about it.
func newSegMount(t *testing.T, pass bool) *segMount {
	t.Helper()
	m := &segMount{logs: &syncBuffer{}}
	m.testMount = newTestMount(t, mountOpts{
		noPass: !pass,
		logger: slog.New(slog.NewTextHandler(m.logs, nil)),
		opLatency: func(op string, d time.Duration) {
			switch op {
			case "read":
				m.reads.Add(1)
			case "flush":
				m.flushes.Add(1)
			}
		},
	})
	require.Equal(t, pass, m.srv.f.passthrough.Load(), "passthrough in use; log:\n%s", m.logs.String())
	return m
}

// sealedAndActive makes topic with a sealed segment of about 600 KB and an
// active one holding a few records, and returns the partition.
func (m *segMount) sealedAndActive(t *testing.T, topic string) *engine.Partition {
	t.Helper()
	m.sh(t, fmt.Sprintf(`mkdir $MNT/%s && seq 1 100000 > $MNT/%s/0/append`, topic, topic))
	p := m.partition(t, topic, 0)
	require.NoError(t, p.Roll())
	_, _, err := p.Append(testRecords("active one", "active two"))
	require.NoError(t, err)
	return p
}

// readBoth reads name through segments/ and from disk and requires the same
// bytes; it returns how many READ requests the mount served meanwhile.
func (m *segMount) readBoth(t *testing.T, p *engine.Partition, topic, name string) int64 {
	t.Helper()
	before := m.reads.Load()
	got, err := os.ReadFile(m.path(topic, "0", "segments", name))
	require.NoError(t, err)
	reads := m.reads.Load() - before
	want, err := os.ReadFile(filepath.Join(p.Dir(), name))
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "%s: %d bytes through segments/, %d on disk", name, len(got), len(want))
	fi, err := os.Stat(m.path(topic, "0", "segments", name))
	require.NoError(t, err)
	assert.Equal(t, int64(len(want)), fi.Size(), "%s: st_size", name)
	return reads
}

func TestSegmentsSealedFilesPassThrough(t *testing.T) {
	for _, pass := range []bool{true, false} {
		t.Run(fmt.Sprintf("passthrough=%v", pass), func(t *testing.T) {
			m := newSegMount(t, pass)
			if pass {
				assert.Contains(t, m.logs.String(), "(FUSE passthrough)")
			} else {
				assert.Contains(t, m.logs.String(), "turned off (--no-passthrough)")
			}
			p := m.sealedAndActive(t, "s")
			flushes := m.flushes.Load()
			sealed := engineName(0)
			for _, ext := range []string{".log", ".index", ".timeindex"} {
				reads := m.readBoth(t, p, "s", sealed+ext)
				if pass {
					assert.Zero(t, reads, "%s read by the kernel, no READ request", ext)
				} else {
					assert.Positive(t, reads, "%s read through topicfs", ext)
				}
			}
			// The active segment, its preallocated indexes included, is
			// read through topicfs in both modes, as it is on disk.
			active, _ := p.ActiveBaseOffset()
			for _, ext := range []string{".log", ".index", ".timeindex"} {
				assert.Positive(t, m.readBoth(t, p, "s", engineName(active)+ext), "active %s read through topicfs", ext)
			}
			assert.Equal(t, flushes, m.flushes.Load(), "read-only files are opened without FLUSH on close")
			// mmap works in both modes (Kafka's tools map index files). It
			// is mapped by another process: a page fault of this one on its
			// own mount can deadlock with the Go runtime stopping the
			// threads that would answer it.
			mapped, err := exec.Command("python3", "-c", `import mmap, sys
f = open(sys.argv[1], 'rb')
sys.stdout.buffer.write(mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)[:])`,
				m.path("s", "0", "segments", sealed+".index")).Output()
			require.NoError(t, err)
			want, err := os.ReadFile(filepath.Join(p.Dir(), sealed+".index"))
			require.NoError(t, err)
			assert.True(t, bytes.Equal(want, mapped), "mapped index")
		})
	}
}

func engineName(base int64) string { return fmt.Sprintf("%020d", base) }

// TestSegmentsSealedWhileOpen: a file opened as the active segment's and
// sealed while open stays on the normal path for every handle while that
// one is open (the kernel refuses to mix the modes on one inode with EIO),
// then later opens pass through.
func TestSegmentsSealedWhileOpen(t *testing.T) {
	m := newSegMount(t, true)
	m.sh(t, `mkdir $MNT/w && seq 1 1000 > $MNT/w/0/append`)
	p := m.partition(t, "w", 0)
	name := engineName(0) + ".log"
	path := m.path("w", "0", "segments", name)
	f1, err := os.Open(path)
	require.NoError(t, err)
	defer f1.Close()
	m.sh(t, `seq 1001 2000 >> $MNT/w/0/append`)
	require.NoError(t, p.Roll())

	f2, err := os.Open(path)
	require.NoError(t, err, "a second open after sealing")
	before := m.reads.Load()
	got2, err := io.ReadAll(f2)
	require.NoError(t, err)
	require.NoError(t, f2.Close())
	assert.Positive(t, m.reads.Load()-before, "read through topicfs while the first handle is open")
	got1, err := io.ReadAll(f1)
	require.NoError(t, err)
	want, err := os.ReadFile(filepath.Join(p.Dir(), name))
	require.NoError(t, err)
	assert.True(t, bytes.Equal(want, got1), "the handle opened before sealing reads the whole sealed file")
	assert.True(t, bytes.Equal(want, got2))
	require.NoError(t, f1.Close())

	// RELEASE reaches the server after close returns: the opens after
	// it pass through once it has.
	passed := false
	for range 200 {
		if m.readBoth(t, p, "w", name) == 0 {
			passed = true
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	assert.True(t, passed, "passthrough once the page-cache handles are released")
}

// TestSegmentsRetentionWhileOpen: retention renames an open sealed file and
// then unlinks it; the open handle reads every byte of it still, in both
// modes, and the name is gone.
func TestSegmentsRetentionWhileOpen(t *testing.T) {
	for _, pass := range []bool{true, false} {
		t.Run(fmt.Sprintf("passthrough=%v", pass), func(t *testing.T) {
			m := newSegMount(t, pass)
			p := m.sealedAndActive(t, "r")
			name := engineName(0) + ".log"
			want, err := os.ReadFile(filepath.Join(p.Dir(), name))
			require.NoError(t, err)
			f, err := os.Open(m.path("r", "0", "segments", name))
			require.NoError(t, err)
			defer f.Close()
			half := make([]byte, len(want)/2)
			_, err = io.ReadFull(f, half)
			require.NoError(t, err)

			_, err = p.DeleteOldestSegments(1, "test")
			require.NoError(t, err)
			ents, err := os.ReadDir(m.path("r", "0", "segments"))
			require.NoError(t, err)
			for _, e := range ents {
				assert.NotEqual(t, name, e.Name(), "the name is gone")
			}
			require.NoError(t, p.PurgeDeleted(time.Now().Add(time.Hour)))
			_, err = os.Stat(filepath.Join(p.Dir(), name+".deleted"))
			require.ErrorIs(t, err, os.ErrNotExist, "unlinked on disk")

			rest, err := io.ReadAll(f)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(want, append(half, rest...)), "read on after the unlink")
			all := make([]byte, len(want)+10)
			n, err := f.ReadAt(all, 0)
			assert.ErrorIs(t, err, io.EOF)
			assert.True(t, bytes.Equal(want, all[:n]), "read again from the start")
			fi, err := f.Stat()
			require.NoError(t, err)
			assert.Equal(t, int64(len(want)), fi.Size())
		})
	}
}

// TestSegmentsReplacedUnderName: a new file under an open sealed file's
// name (as the cleaner swaps a segment) is a new inode: opening the name
// reads the new file, the open handle the old one, although the kernel
// holds the old file as the first inode's backing file.
func TestSegmentsReplacedUnderName(t *testing.T) {
	m := newSegMount(t, true)
	p := m.sealedAndActive(t, "c")
	name := engineName(0) + ".log"
	disk := filepath.Join(p.Dir(), name)
	old, err := os.ReadFile(disk)
	require.NoError(t, err)
	path := m.path("c", "0", "segments", name)
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	fi1, err := f.Stat()
	require.NoError(t, err)

	newer := bytes.Repeat([]byte("cleaned "), 1000)
	require.NoError(t, os.WriteFile(disk+".swap", newer, 0o644))
	require.NoError(t, os.Rename(disk+".swap", disk))

	before := m.reads.Load()
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(newer), string(got), "the name reads the new file")
	assert.Zero(t, m.reads.Load()-before, "the new file passes through too")
	fi2, err := os.Stat(path)
	require.NoError(t, err)
	assert.NotEqual(t, fi1.Sys().(*syscall.Stat_t).Ino, fi2.Sys().(*syscall.Stat_t).Ino, "a new inode")
	gotOld, err := io.ReadAll(f)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(old, gotOld), "the open handle reads the file it opened")
}
