package index

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/vfs"
	"github.com/topicfs/topicfs/internal/testutil"
)

func baseFromName(t *testing.T, p string) int64 {
	t.Helper()
	name := filepath.Base(p)
	b, err := strconv.ParseInt(name[:strings.IndexByte(name, '.')], 10, 64)
	require.NoError(t, err, p)
	return b
}

// TestFixturesAllIndexes opens every index a real broker wrote: all are
// trimmed, so every entry must be read, in order, and pass SanityCheck.
func TestFixturesAllIndexes(t *testing.T) {
	var seen int
	roots := testutil.KafkaFixtureRoots(t)
	for _, root := range roots {
		seen += checkIndexesUnder(t, root)
	}
	// testdata/kafka-real alone holds 14 index files, the extra corpus 118.
	if len(roots) > 3 {
		assert.GreaterOrEqual(t, seen, 132)
	} else {
		assert.GreaterOrEqual(t, seen, 14)
	}
}

// checkIndexesUnder opens every index file under root and returns how many.
func checkIndexesUnder(t *testing.T, root string) int {
	t.Helper()
	seen := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		if d.IsDir() {
			return nil
		}
		st, err := os.Stat(p)
		require.NoError(t, err)
		switch filepath.Ext(p) {
		case ".index":
			x, err := OpenOffsetIndex(vfs.OS, p, baseFromName(t, p), 10<<20, false)
			require.NoError(t, err, p)
			assert.Equal(t, int(st.Size()/8), x.Entries(), p)
			assert.NoError(t, x.SanityCheck(), p)
			require.NoError(t, x.Close())
			seen++
		case ".timeindex":
			x, err := OpenTimeIndex(vfs.OS, p, baseFromName(t, p), 10<<20, false)
			require.NoError(t, err, p)
			assert.Equal(t, int(st.Size()/12), x.Entries(), p)
			assert.NoError(t, x.SanityCheck(), p)
			require.NoError(t, x.Close())
			seen++
		case ".txnindex":
			x, err := OpenTxnIndex(vfs.OS, p)
			require.NoError(t, err, p)
			assert.NoError(t, x.SanityCheck(baseFromName(t, p)), p)
			seen++
		}
		return nil
	})
	require.NoError(t, err)
	return seen
}

func TestFixturesKnownEntries(t *testing.T) {
	mon := testutil.KafkaFixture(t, "cp76-kafka36-lz4-rjmfernandes/data/_confluent-monitoring-0/00000000000000000000")
	meta := testutil.KafkaFixture(t, "kafka41-kraft-nomanazeem/kafka-logs/__cluster_metadata-0/00000000000000000000")

	x, err := OpenOffsetIndex(vfs.OS, mon+".index", 0, 10<<20, false)
	require.NoError(t, err)
	assert.Equal(t, 109, x.Entries())
	off, pos := x.Entry(0)
	assert.Equal(t, [2]int64{33, 4220}, [2]int64{off, pos})
	off, pos = x.Lookup(33)
	assert.Equal(t, [2]int64{33, 4220}, [2]int64{off, pos})
	off, pos = x.Lookup(32)
	assert.Equal(t, [2]int64{0, 0}, [2]int64{off, pos})
	lastOff, lastPos := x.Entry(108)
	off, pos = x.Lookup(1 << 40)
	assert.Equal(t, [2]int64{lastOff, lastPos}, [2]int64{off, pos})
	assert.LessOrEqual(t, lastOff, int64(2826))

	ti, err := OpenTimeIndex(vfs.OS, mon+".timeindex", 0, 10<<20, false)
	require.NoError(t, err)
	assert.Equal(t, 109, ti.Entries())
	ts0, o0 := ti.Entry(0)
	assert.Equal(t, int64(31), o0)
	ts, o := ti.Lookup(ts0)
	assert.Equal(t, [2]int64{ts0, 31}, [2]int64{ts, o})
	ts, o = ti.Lookup(ts0 - 1)
	assert.Equal(t, [2]int64{-1, 0}, [2]int64{ts, o})

	x, err = OpenOffsetIndex(vfs.OS, meta+".index", 0, 10<<20, false)
	require.NoError(t, err)
	assert.Equal(t, 34, x.Entries())
	off, pos = x.Entry(0)
	assert.Equal(t, [2]int64{55, 4136}, [2]int64{off, pos})

	ti, err = OpenTimeIndex(vfs.OS, meta+".timeindex", 0, 10<<20, false)
	require.NoError(t, err)
	assert.Equal(t, 35, ti.Entries())
	ts, o = ti.LastEntry()
	assert.Equal(t, [2]int64{1779276569220, 2066}, [2]int64{ts, o})
}

// TestFixturePreallocatedCopy reopens a fixture index copied into a
// preallocated (zero-tailed) file, as a crashed broker leaves it.
func TestFixturePreallocatedCopy(t *testing.T) {
	for _, tc := range []struct {
		rel     string
		entries int
	}{
		{"kafka0110-zk-sharaweil/data/test0-0/00000000000000000000.timeindex", 1},
		{"cp76-kafka36-lz4-rjmfernandes/data/_confluent-monitoring-0/00000000000000000000.timeindex", 109},
	} {
		t.Run(strings.SplitN(tc.rel, "/", 2)[0], func(t *testing.T) {
			preallocatedCopy(t, testutil.KafkaFixture(t, tc.rel), tc.entries)
		})
	}
}

// preallocatedCopy copies the time index src into a preallocated file and
// checks both opens read its entries and a writable close trims it back.
func preallocatedCopy(t *testing.T, src string, entries int) {
	raw, err := os.ReadFile(src)
	require.NoError(t, err)
	p := filepath.Join(t.TempDir(), "00000000000000000000.timeindex")
	require.NoError(t, os.WriteFile(p, append(raw, make([]byte, 10485756-len(raw))...), 0o644))
	for _, writable := range []bool{false, true} {
		x, err := OpenTimeIndex(vfs.OS, p, 0, 10485760, writable)
		require.NoError(t, err)
		assert.Equal(t, entries, x.Entries())
		if writable {
			assert.Equal(t, 873813, x.MaxEntries())
		}
		require.NoError(t, x.SanityCheck())
		require.NoError(t, x.Close())
	}
	got, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, raw, got, "a writable close trims back to the entries")
}

func TestPreallocatedEmptyIndex(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "00000000000000000000.index")
	require.NoError(t, os.WriteFile(empty, make([]byte, 10485760), 0o644))
	x, err := OpenOffsetIndex(vfs.OS, empty, 0, 10485760, false)
	require.NoError(t, err)
	assert.Equal(t, 0, x.Entries(), "an all-zero preallocated index is empty")
}
