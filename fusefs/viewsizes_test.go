package fusefs

import (
	"github.com/topicfs/topicfs/engine/vfs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestViewSizesSurviveRemount: the rendered lengths measured by one mount
// serve the next one's stats without reading the log, but only for the
// very files measured: a .log changed behind the mount is measured again,
// and an unreadable sizes file is ignored.
func TestViewSizesSurviveRemount(t *testing.T) {
	data := t.TempDir()
	m := newTestMountAt(t, data, false)
	m.sh(t, `mkdir $MNT/s && echo segment.bytes=16384 >> $MNT/s/config && seq -f '%g-0123456789' 1 30000 > $MNT/s/0/append`)
	wantPlain := m.sh(t, `cat $MNT/s/0/records | wc -c`)
	wantJSON := m.sh(t, `cat $MNT/s/0/records.jsonl | wc -c`)
	stat := `stat -c %s $MNT/s/0/records $MNT/s/0/records.jsonl`
	want := strings.TrimSpace(wantPlain) + "\n" + strings.TrimSpace(wantJSON) + "\n"
	require.Equal(t, want, m.sh(t, stat))
	segs := len(m.partition(t, "s", 0).Segments())
	require.Greater(t, segs, 20)
	m.unmount()

	saved, err := readViewSizesAt(filepath.Join(data, ViewSizesFile))
	require.NoError(t, err, "the mount saved its view sizes")
	assert.Len(t, saved, segs, "every segment, the active one included")
	for path, es := range saved {
		assert.Len(t, es, 2, "%s: plain and JSON", path)
		for _, e := range es {
			assert.NotZero(t, e.cps, "%s %s: with its index", path, e.format)
		}
	}

	// statRead stats both views on a fresh mount and returns what that read.
	statRead := func() int64 {
		t.Helper()
		m := newTestMountAt(t, data, false)
		defer m.unmount()
		p := m.partition(t, "s", 0)
		before := p.Stats().BytesRead
		assert.Equal(t, want, m.sh(t, stat))
		read := p.Stats().BytesRead - before
		assert.Equal(t, want, m.sh(t, `cat $MNT/s/0/records | wc -c; cat $MNT/s/0/records.jsonl | wc -c`), "the content agrees")
		return read
	}
	assert.Zero(t, statRead(), "sizes come from the saved file")

	// A .log modified behind the mount (here only its mtime) is measured
	// again, alone.
	first := filepath.Join(data, "s-0", "00000000000000000000.log")
	fi, err := os.Stat(first)
	require.NoError(t, err)
	later := fi.ModTime().Add(time.Second)
	require.NoError(t, os.Chtimes(first, later, later))
	assert.Equal(t, 2*fi.Size(), statRead(), "only the changed segment is read, once per view")
	assert.Zero(t, statRead(), "and saved again")

	// An unreadable sizes file is ignored: everything is measured again.
	require.NoError(t, os.WriteFile(filepath.Join(data, ViewSizesFile), []byte("{"), 0o644))
	logs, err := filepath.Glob(filepath.Join(data, "s-0", "*.log"))
	require.NoError(t, err)
	var total int64
	for _, l := range logs {
		fi, err := os.Stat(l)
		require.NoError(t, err)
		total += fi.Size()
	}
	assert.GreaterOrEqual(t, statRead(), 2*total, "every segment read, once per view")
	assert.Zero(t, statRead())
}

// TestViewSizesNotOnReadOnlyMount: a read-only mount writes nothing, and
// a mount that measured nothing writes no file.
func TestViewSizesNotOnReadOnlyMount(t *testing.T) {
	data := t.TempDir()
	m := newTestMountAt(t, data, false)
	m.sh(t, `mkdir $MNT/s && seq 1 1000 > $MNT/s/0/append`)
	m.unmount()
	_, err := os.Stat(filepath.Join(data, ViewSizesFile))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing measured, nothing saved")
	ro := newTestMountAt(t, data, true)
	assert.Equal(t, "3893\n", ro.sh(t, `stat -c %s $MNT/s/0/records`))
	ro.unmount()
	_, err = os.Stat(filepath.Join(data, ViewSizesFile))
	assert.ErrorIs(t, err, os.ErrNotExist, "a read-only mount writes nothing")
}

// TestSavedIndexServesSeeksAfterRemount: after a remount, tail -n and
// by-offset/N read about one index interval of a large segment, not the
// segment, and read the right lines; a damaged saved index is ignored
// (the segment is scanned) and never serves wrong bytes.
func TestSavedIndexServesSeeksAfterRemount(t *testing.T) {
	data := t.TempDir()
	m := newTestMountAt(t, data, false)
	m.sh(t, `mkdir $MNT/b && seq -f '%g-0123456789012345678901234567890123456789' 1 60000 > $MNT/b/0/append`)
	require.Len(t, m.partition(t, "b", 0).Segments(), 1)
	m.sh(t, `tail -n 1 $MNT/b/0/records && tail -n 1 $MNT/b/0/records.jsonl`) // measured and indexed
	m.unmount()
	logSize := func() int64 {
		fi, err := os.Stat(filepath.Join(data, "b-0", "00000000000000000000.log"))
		require.NoError(t, err)
		return fi.Size()
	}()
	require.Greater(t, logSize, int64(2<<20))

	seeks := func() (tailRead, offsetRead int64) {
		t.Helper()
		m := newTestMountAt(t, data, false)
		defer m.unmount()
		p := m.partition(t, "b", 0)
		before := p.Stats().BytesRead
		assert.Equal(t, "59999-0123456789012345678901234567890123456789\n60000-0123456789012345678901234567890123456789\n",
			m.sh(t, `tail -n 2 $MNT/b/0/records`))
		assert.Contains(t, m.sh(t, `tail -n 1 $MNT/b/0/records.jsonl`), `{"offset":59999,`)
		tailRead = p.Stats().BytesRead - before
		before = p.Stats().BytesRead
		assert.Equal(t, "30001-0123456789012345678901234567890123456789\n", m.sh(t, `head -n 1 $MNT/b/0/by-offset/30000`))
		offsetRead = p.Stats().BytesRead - before
		return tailRead, offsetRead
	}
	tr, or := seeks()
	t.Logf("after a remount: tail -n (plain and JSON) read %d bytes, by-offset %d, of a %d-byte segment", tr, or, logSize)
	assert.Less(t, tr, logSize/4, "tail -n reads about an index interval per view, not the segment")
	assert.Less(t, or, logSize/4, "by-offset/N reads an index interval and what head reads, not the segment")

	// A mount that only stats (lengths from the file, no index loaded)
	// saves the indexes it did not load, not just the lengths.
	st := newTestMountAt(t, data, false)
	st.sh(t, `stat $MNT/b/0/records $MNT/b/0/records.jsonl`)
	st.unmount()
	tr, _ = seeks()
	assert.Less(t, tr, int64(512<<10), "the indexes survived a mount that did not use them")

	// Damage the first blob: the index is ignored, the segment scanned.
	path := filepath.Join(data, ViewSizesFile)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	raw[10] ^= 0xff
	require.NoError(t, os.WriteFile(path, raw, 0o644))
	tr, _ = seeks()
	assert.GreaterOrEqual(t, tr, logSize, "a damaged index is not used")
	tr, _ = seeks()
	assert.Less(t, tr, int64(512<<10), "and saved afresh")
}

// TestViewSizesSavedWhileServing: a writable mount saves ViewSizesFile
// while it serves (when views measured something new), so a mount that is
// killed leaves what it measured; and a save that replaces the file while
// the mount reads saved indexes from it keeps those usable.
func TestViewSizesSavedWhileServing(t *testing.T) {
	data := t.TempDir()
	path := filepath.Join(data, ViewSizesFile)
	opts := Options{sizesEvery: 10 * time.Millisecond}
	m := newTestMountWith(t, data, opts)
	m.sh(t, `for t in b c; do mkdir $MNT/$t && seq -f '%g-0123456789012345678901234567890123456789' 1 60000 > $MNT/$t/0/append; done`)
	m.sh(t, `tail -n 1 $MNT/b/0/records && tail -n 1 $MNT/c/0/records`) // measured and indexed
	logs := []string{filepath.Join("b-0", "00000000000000000000.log"), filepath.Join("c-0", "00000000000000000000.log")}
	var raw []byte
	require.Eventually(t, func() bool {
		saved, err := readViewSizesAt(path)
		for _, l := range logs {
			if err != nil || len(saved[l]) != 1 || saved[l][0].cps == 0 {
				return false
			}
		}
		raw, err = os.ReadFile(path)
		return err == nil
	}, time.Minute, 20*time.Millisecond, "the mount saves while it serves")
	// A crash after that save: the next mount finds what it wrote, not
	// what a clean unmount writes.
	m.unmount()
	require.NoError(t, os.WriteFile(path, raw, 0o644))
	fi, err := os.Stat(filepath.Join(data, logs[0]))
	require.NoError(t, err)
	logSize := fi.Size()
	require.Greater(t, logSize, int64(2<<20))

	m = newTestMountWith(t, data, opts)
	tailRead := func(topic string) int64 {
		t.Helper()
		p := m.partition(t, topic, 0)
		before := p.Stats().BytesRead
		assert.Equal(t, "59999-0123456789012345678901234567890123456789\n60000-0123456789012345678901234567890123456789\n",
			m.sh(t, `tail -n 2 $MNT/`+topic+`/0/records`))
		return p.Stats().BytesRead - before
	}
	assert.Less(t, tailRead("b"), logSize/4, "the saved index serves tail -n after the crash")
	ino := func() uint64 {
		var st syscall.Stat_t
		require.NoError(t, syscall.Stat(path, &st))
		return st.Ino
	}
	first := ino()
	m.sh(t, `stat $MNT/b/0/records.jsonl`) // something new: a save replaces the file
	require.Eventually(t, func() bool { return ino() != first }, time.Minute, 20*time.Millisecond)
	assert.Less(t, tailRead("c"), logSize/4, "c's saved index, carried into the new file, is read from it")
	m.unmount()
	saved, err := readViewSizesAt(path)
	require.NoError(t, err)
	assert.Len(t, saved[logs[0]], 2, "b: plain and JSON")
	assert.Len(t, saved[logs[1]], 1, "c: plain")
	assert.NotZero(t, saved[logs[1]][0].cps, "c keeps its index")
}

// readViewSizesAt reads the table of the ViewSizesFile at path.
func readViewSizesAt(path string) (map[string][]savedEntry, error) {
	f, err := vfs.OS.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readViewSizes(f)
}
