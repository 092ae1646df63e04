package tools

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/vfs"
	"github.com/topicfs/topicfs/internal/testutil"
)

// The snapshot layout (docs/FORMATS.md §7), written out again here so that
// the test encoder below does not share code with the parser it checks.
const (
	snapshotVersion    = 1
	snapshotHeaderSize = 10
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendProducerSnapshot encodes entries in the snapshot format (test-only
// encoder, for round trips).
func appendProducerSnapshot(dst []byte, entries []ProducerEntry) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint16(dst, snapshotVersion)
	dst = binary.BigEndian.AppendUint32(dst, 0) // crc, below
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(entries)))
	for _, e := range entries {
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.ProducerID))
		dst = binary.BigEndian.AppendUint16(dst, uint16(e.Epoch))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.LastSequence))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.LastOffset))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.OffsetDelta))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.Timestamp))
		dst = binary.BigEndian.AppendUint32(dst, uint32(e.CoordinatorEpoch))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.CurrentTxnFirstOffset))
	}
	binary.BigEndian.PutUint32(dst[start+2:], crc32.Checksum(dst[start+6:], castagnoli))
	return dst
}

func TestSnapshotSizes(t *testing.T) {
	assert.Len(t, appendProducerSnapshot(nil, nil), snapshotHeaderSize, "an empty snapshot is 10 bytes")
	assert.Len(t, appendProducerSnapshot(nil, make([]ProducerEntry, 3)), 148, "148 B = 3 entries (donaldy myTopic-0)")
	assert.Len(t, appendProducerSnapshot(nil, make([]ProducerEntry, 5)), 240)
}

func TestParseProducerSnapshotFixturesRoundTrip(t *testing.T) {
	for _, f := range snapshotFixtures(t) {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		entries, err := ParseProducerSnapshot(data)
		require.NoError(t, err, f)
		assert.Equal(t, data, appendProducerSnapshot(nil, entries), f)
	}
}

func TestParseProducerSnapshotErrors(t *testing.T) {
	good := appendProducerSnapshot(nil, []ProducerEntry{{ProducerID: 1, LastOffset: 5, CurrentTxnFirstOffset: -1}})
	tests := []struct {
		name string
		mut  func([]byte) []byte
	}{
		{"short", func(b []byte) []byte { return b[:9] }},
		{"version 2", func(b []byte) []byte { b[1] = 2; return b }},
		{"crc", func(b []byte) []byte { b[20] ^= 1; return b }},
		{"truncated entry", func(b []byte) []byte {
			b = b[:len(b)-1]
			binary.BigEndian.PutUint32(b[2:], crc32.Checksum(b[6:], castagnoli))
			return b
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseProducerSnapshot(tt.mut(bytes.Clone(good)))
			assert.ErrorIs(t, err, ErrCorruptSnapshot)
		})
	}
	e := ProducerEntry{LastSequence: 1, OffsetDelta: 3}
	assert.EqualValues(t, int32(1<<31-1)-1, e.FirstSequence(), "wraps below 0 like decrementSequence")
}

func snapshotFixtures(t testing.TB) []string {
	t.Helper()
	var files []string
	for _, root := range testutil.KafkaFixtureRoots(t) {
		more, err := filepath.Glob(filepath.Join(root, "*", "*", "*.snapshot"))
		require.NoError(t, err)
		files = append(files, more...)
	}
	require.NotEmpty(t, files)
	sort.Strings(files)
	return files
}

func FuzzParseProducerSnapshot(f *testing.F) {
	for _, p := range snapshotFixtures(f) {
		data, err := os.ReadFile(p)
		require.NoError(f, err)
		f.Add(data)
	}
	f.Add(appendProducerSnapshot(nil, nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := ParseProducerSnapshot(data)
		if err != nil {
			return
		}
		// What is accepted round-trips.
		require.Equal(t, data, appendProducerSnapshot(nil, entries))
	})
}

// FuzzDumpLog dumps arbitrary .log bytes: Dump must never panic, and what it
// reports as batches must cover the file up to the invalid tail it names.
func FuzzDumpLog(f *testing.F) {
	for _, p := range []string{
		"kafka0110-zk-sharaweil/data/test0-0/00000000000000000000.log",
		"cp76-kafka36-lz4-rjmfernandes/data/_confluent-command-0/00000000000000000000.log",
		"kafka-go-fetch-v1v2-gzip-segmentio/extracted/v1c-v1-v1c/00000000000000000000.log",
	} {
		if data, ok := testutil.KafkaFixtureFile(f, p); ok {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := vfs.NewMem()
		require.NoError(t, mem.MkdirAll("/d/t-0", 0o755))
		file, err := mem.OpenFile("/d/t-0/00000000000000000000.log", os.O_CREATE|os.O_RDWR, 0o644)
		require.NoError(t, err)
		_, err = file.WriteAt(data, 0)
		require.NoError(t, err)
		require.NoError(t, file.Close())
		_ = Dump(io.Discard, io.Discard, []string{"/d/t-0/00000000000000000000.log"}, DumpOptions{PrintData: true, FS: mem})
		_ = Dump(io.Discard, io.Discard, []string{"/d/t-0/00000000000000000000.log"}, DumpOptions{JSON: true, DeepIteration: true, FS: mem})
		var out bytes.Buffer
		_, err = Check(&out, "/d", CheckOptions{FS: mem})
		require.NoError(t, err)
	})
}

func BenchmarkCheck(b *testing.B) {
	dir := fixture(b, "cp76-kafka36-lz4-rjmfernandes/data")
	var size int64
	_ = filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			size += info.Size()
		}
		return err
	})
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		rep, err := Check(io.Discard, dir, CheckOptions{})
		if err != nil || len(rep.Problems()) > 0 {
			b.Fatal(err, rep.Problems())
		}
		b.ReportMetric(float64(rep.Records), "records/op")
	}
}

func BenchmarkDump(b *testing.B) {
	path := fixture(b, "cp76-kafka36-lz4-rjmfernandes/data/_confluent-monitoring-0/00000000000000000000.log")
	st, err := os.Stat(path)
	require.NoError(b, err)
	b.SetBytes(st.Size())
	for b.Loop() {
		if err := Dump(io.Discard, io.Discard, []string{path}, DumpOptions{PrintData: true}); err != nil {
			b.Fatal(err)
		}
	}
}
