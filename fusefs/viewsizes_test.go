package fusefs

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
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

	raw, err := os.ReadFile(filepath.Join(data, ViewSizesFile))
	require.NoError(t, err, "the mount saved its view sizes")
	var file viewSizesFile
	require.NoError(t, json.Unmarshal(raw, &file))
	assert.Len(t, file.Segments, segs, "every segment, the active one included")

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
