package tools

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/record"
)

func TestJavaString(t *testing.T) {
	tests := []struct {
		in   []byte
		want string
	}{
		{[]byte("plain"), "plain"},
		{[]byte("h\u00e9llo \u20ac"), "h\u00e9llo \u20ac"},
		{[]byte{0xff}, "\ufffd"},
		{[]byte{'a', 0x80, 'b'}, "a\ufffdb"},
		{[]byte{0xe2, 0x82, 'A'}, "\ufffdA"},             // truncated 3-byte sequence: one replacement
		{[]byte{0xe2, 0x82}, "\ufffd"},                   // truncated at the end
		{[]byte{0xf0, 0x9f, 0x98}, "\ufffd"},             // truncated 4-byte sequence
		{[]byte{0xe0, 0x80, 0x80}, "\ufffd\ufffd\ufffd"}, // overlong: E0 needs A0..BF next
		{[]byte{0xed, 0xa0, 0x80}, "\ufffd\ufffd\ufffd"}, // surrogate
		{[]byte{0xc0, 0xaf}, "\ufffd\ufffd"},             // C0 is never a lead byte
		{[]byte{0xf4, 0x90, 0x80, 0x80}, "\ufffd\ufffd\ufffd\ufffd"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, javaString(tt.in), "% x", tt.in)
	}
}

func writeLog(t *testing.T, dir string, batches ...[]record.Record) (string, []int64) {
	t.Helper()
	var data []byte
	var pos []int64
	for _, recs := range batches {
		spec := record.NewBatchSpec(recs[0].Offset)
		spec.PartitionLeaderEpoch = 0
		pos = append(pos, int64(len(data)))
		var err error
		data, err = record.Encode(data, spec, recs)
		require.NoError(t, err)
	}
	path := filepath.Join(dir, "00000000000000000000.log")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	return path, pos
}

func rec(off, ts int64, key, value string) record.Record {
	r := record.Record{Offset: off, Timestamp: ts, Value: []byte(value)}
	if key != "" {
		r.Key = []byte(key)
	}
	return r
}

func TestDumpSummariesInKafkasWords(t *testing.T) {
	dir := t.TempDir()
	logPath, pos := writeLog(t, dir,
		[]record.Record{rec(0, 100, "a", "1"), rec(1, 105, "", "2")},
		[]record.Record{rec(2, 103, "b", "3")},
		[]record.Record{rec(5, 110, "c", "4"), rec(9, 120, "d", "5")}, // compaction gaps
	)
	idx := filepath.Join(dir, "00000000000000000000.index")
	tix := filepath.Join(dir, "00000000000000000000.timeindex")
	be := binary.BigEndian
	var ib []byte
	ib = be.AppendUint32(be.AppendUint32(ib, 2), uint32(pos[1])) // matches
	ib = be.AppendUint32(be.AppendUint32(ib, 4), uint32(pos[2])) // batch there ends at 9
	require.NoError(t, os.WriteFile(idx, ib, 0o644))
	var tb []byte
	tb = be.AppendUint32(be.AppendUint64(tb, 105), 1) // ok
	tb = be.AppendUint32(be.AppendUint64(tb, 104), 2) // out of order, and batch 2's max is 103
	tb = be.AppendUint32(be.AppendUint64(tb, 130), 7) // no batch ends at 7
	require.NoError(t, os.WriteFile(tix, tb, 0o644))
	// Two bytes of a torn append.
	f, err := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte{0, 0})
	require.NoError(t, err)
	require.NoError(t, f.Close())

	var out, errOut bytes.Buffer
	require.NoError(t, Dump(&out, &errOut, []string{logPath, idx, tix}, DumpOptions{DeepIteration: true}))
	abs := func(p string) string { a, _ := filepath.Abs(p); return a }
	assert.Equal(t, "Mismatches in :"+abs(idx)+"\n"+
		"  Index offset: 4, log offset: 9\n"+
		"Found timestamp mismatch in :"+abs(tix)+"\n"+
		"  Index timestamp: 104, log timestamp: 103\n"+
		"Found out of order timestamp in :"+abs(tix)+"\n"+
		"  Index timestamp: 104, Previously indexed timestamp: 105\n"+
		"The following indexed offsets are not found in the log.\n"+
		"Indexed offset: 7, found log offset: 9\n"+
		"Non-consecutive offsets in "+abs(logPath)+"\n"+
		"  5 is followed by 9\n"+
		"  2 is followed by 5\n", errOut.String())
	text := out.String()
	assert.Contains(t, text, "Found 2 invalid bytes at the end of 00000000000000000000.log\n")
	assert.Contains(t, text, "offset: 2 position: "+fmt.Sprint(pos[1])+"\noffset: 4 position: "+fmt.Sprint(pos[2])+"\n")
	assert.Contains(t, text, "timestamp: 105 offset: 1\ntimestamp: 104 offset: 2\ntimestamp: 130 offset: 7\n")

	// --verify-index-only prints no entries but still checks them.
	out.Reset()
	errOut.Reset()
	require.NoError(t, Dump(&out, &errOut, []string{idx}, DumpOptions{VerifyIndexOnly: true}))
	assert.Equal(t, "Dumping "+idx+"\n", out.String())
	assert.Contains(t, errOut.String(), "Index offset: 4, log offset: 9")

	// --index-sanity-check.
	out.Reset()
	require.NoError(t, Dump(&out, io.Discard, []string{idx}, DumpOptions{IndexSanityCheck: true}))
	assert.Equal(t, "Dumping "+idx+"\n"+idx+" passed sanity check.\n", out.String())
}

func TestDumpSkipRecordMetadata(t *testing.T) {
	logPath, _ := writeLog(t, t.TempDir(), []record.Record{rec(0, 1, "k", "v"), rec(1, 2, "", "w")})
	var out bytes.Buffer
	require.NoError(t, Dump(&out, io.Discard, []string{logPath}, DumpOptions{PrintData: true, SkipRecordMetadata: true}))
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 5)
	assert.Equal(t, "| key: k payload: v", lines[3])
	assert.Equal(t, " payload: w", lines[4], "Kafka's quirk: no '|' when the key is null")
}

func TestDumpCorruptEntryFails(t *testing.T) {
	logPath, _ := writeLog(t, t.TempDir(), []record.Record{rec(0, 1, "k", "v")})
	st, err := os.Stat(logPath)
	require.NoError(t, err)
	f, err := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.Write(make([]byte, 40)) // a zero-filled (preallocated) tail: size 0 < 14
	require.NoError(t, err)
	require.NoError(t, f.Close())
	var out, errOut bytes.Buffer
	err = Dump(&out, &errOut, []string{logPath, filepath.Join(filepath.Dir(logPath), "00000000000000000099.log")}, DumpOptions{})
	require.Error(t, err)
	assert.ErrorIs(t, err, record.ErrCorrupt)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.Contains(t, out.String(), "Found 40 invalid bytes at the end of 00000000000000000000.log")
	assert.Contains(t, errOut.String(), fmt.Sprintf("position %d", st.Size()))
}

// TestDumpGarbageFailsWhateverItsSize: a .log of random bytes fails the
// dump (exit 1) whether the first length field runs past the end of the
// file or not; it used to pass when it did (a 17-byte file). A real batch
// cut short is still only reported, as Kafka does.
func TestDumpGarbageFailsWhateverItsSize(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{17, 40, 100 << 10} {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		binary.BigEndian.PutUint32(data[8:], 1<<30) // runs past the end
		data[16] = 0x55                             // no magic
		p := filepath.Join(dir, fmt.Sprintf("%020d.log", n))
		require.NoError(t, os.WriteFile(p, data, 0o644))
		var out, errOut bytes.Buffer
		err := Dump(&out, &errOut, []string{p}, DumpOptions{})
		require.ErrorIs(t, err, record.ErrCorrupt, "%d bytes of garbage", n)
		assert.Contains(t, errOut.String(), "topicfs dump: "+p+": position 0: ")
	}

	logPath, _ := writeLog(t, t.TempDir(), []record.Record{rec(0, 1, "k", "v"), rec(1, 2, "", "w")})
	data, err := os.ReadFile(logPath)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(logPath, data[:len(data)-5], 0o644))
	var out bytes.Buffer
	require.NoError(t, Dump(&out, io.Discard, []string{logPath}, DumpOptions{}), "a batch cut short is no error")
	assert.Contains(t, out.String(), "invalid bytes at the end")
}

// TestDumpBadSnapshotSaysDump: a bad producer snapshot is reported as
// "topicfs dump: PATH: ...", like every other dump error.
func TestDumpBadSnapshotSaysDump(t *testing.T) {
	p := filepath.Join(t.TempDir(), "00000000000000000000.snapshot")
	require.NoError(t, os.WriteFile(p, []byte("not a snapshot at all"), 0o644))
	var out, errOut bytes.Buffer
	require.ErrorIs(t, Dump(&out, &errOut, []string{p}, DumpOptions{}), ErrCorruptSnapshot)
	assert.True(t, strings.HasPrefix(errOut.String(), "topicfs dump: "+p+": corrupt producer snapshot"), errOut.String())
}
