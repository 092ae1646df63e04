package record

import (
	"bytes"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/internal/testutil"
)

// fixtureBatch is one batch of a fixture file with its decoded records.
type fixtureBatch struct {
	Batch
	Pos  int64
	Recs []Record
}

// readFixture reads every batch of a record batch file with ReadAt, requiring
// each to Verify and decode, and the file to end exactly at a batch boundary.
func readFixture(t *testing.T, path string) []fixtureBatch {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	r := bytes.NewReader(data)
	var out []fixtureBatch
	var buf []byte
	pos := int64(0)
	for {
		b, err := ReadAt(r, pos, int64(len(data)), buf)
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "%s at %d", path, pos)
		require.NoError(t, b.Verify(), "%s at %d", path, pos)
		recs, err := b.Records(nil)
		require.NoError(t, err, "%s at %d", path, pos)
		if b.Magic >= 2 {
			require.Len(t, recs, int(b.RecordCount))
		}
		b.Raw = append([]byte(nil), b.Raw...)
		buf = b.Raw[:0:0]
		out = append(out, fixtureBatch{Batch: b, Pos: pos, Recs: recs})
		pos += int64(b.Size())
	}
	require.Equal(t, int64(len(data)), pos)
	return out
}

// fixturePath returns a real broker file (testdata/kafka-real, or the extra
// corpus: the test is skipped when that is absent).
func fixturePath(t *testing.T, rel string) string {
	t.Helper()
	p := testutil.KafkaFixture(t, rel)
	_, err := os.Stat(p)
	require.NoError(t, err, "fixture %s missing", p)
	return p
}

// TestFixturesAllLogs walks every .log and bootstrap.checkpoint file of the
// real broker fixtures: every batch verifies and decodes, offsets increase,
// and re-encoding the records with the batch's header reproduces them.
func TestFixturesAllLogs(t *testing.T) {
	files := fixtureFiles(t, func(name string) bool {
		return strings.HasSuffix(name, ".log") || name == "bootstrap.checkpoint"
	})
	batches := 0
	for _, f := range files {
		t.Run(f.name, func(t *testing.T) {
			batches += checkFixtureLog(t, f.path)
		})
	}
	// testdata/kafka-real alone holds 71 such files; the extra corpus 61 more.
	assert.GreaterOrEqual(t, len(files), 71)
	t.Logf("%d files, %d batches", len(files), batches)
}

// fixtureFile is one file of the real broker fixtures.
type fixtureFile struct{ name, path string }

// fixtureFiles lists the files whose base name passes keep, in every
// fixture set present (testutil.KafkaFixtureRoots), sorted by name.
func fixtureFiles(t *testing.T, keep func(name string) bool) []fixtureFile {
	t.Helper()
	var out []fixtureFile
	roots := testutil.KafkaFixtureRoots(t)
	for _, set := range slices.Sorted(maps.Keys(roots)) {
		root := roots[set]
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !keep(d.Name()) {
				return err
			}
			out = append(out, fixtureFile{name: set + strings.TrimPrefix(path, root), path: path})
			return nil
		})
		require.NoError(t, err)
	}
	return out
}

// checkFixtureLog reads every batch of one file and checks offsets rise,
// records sit inside their batch, LogAppendTime records read the batch's
// maxTimestamp, and v2 batches re-encode to the same records. It returns
// the number of batches.
func checkFixtureLog(t *testing.T, path string) int {
	t.Helper()
	n := 0
	last := int64(-1)
	for _, fb := range readFixture(t, path) {
		n++
		assert.Greater(t, fb.LastOffset(), last, "offsets increase at %d", fb.Pos)
		last = fb.LastOffset()
		for i, r := range fb.Recs {
			assert.GreaterOrEqual(t, r.Offset, fb.BaseOffset)
			assert.LessOrEqual(t, r.Offset, fb.LastOffset())
			if i > 0 {
				assert.Greater(t, r.Offset, fb.Recs[i-1].Offset)
			}
			if fb.LogAppendTime() {
				assert.Equal(t, fb.MaxTimestamp, r.Timestamp)
			}
		}
		if fb.Magic == 2 {
			reencodeMatches(t, &fb.Batch, fb.Recs)
		}
	}
	return n
}

// reencodeMatches re-encodes recs with b's header fields and checks the
// result decodes to the same records and header; for uncompressed batches
// the bytes must be identical.
func reencodeMatches(t *testing.T, b *Batch, recs []Record) {
	t.Helper()
	spec := BatchSpec{
		BaseOffset:           b.BaseOffset,
		Codec:                b.Codec(),
		LogAppendTime:        b.LogAppendTime(),
		Transactional:        b.IsTransactional(),
		Control:              b.IsControl(),
		ProducerID:           b.ProducerID,
		ProducerEpoch:        b.ProducerEpoch,
		BaseSequence:         b.BaseSequence,
		PartitionLeaderEpoch: b.PartitionLeaderEpoch,
		DeleteHorizonMs:      b.DeleteHorizonMs(),
		LastOffsetDelta:      b.LastOffsetDelta,
	}
	in := recs
	if b.LogAppendTime() && len(recs) > 0 {
		// LogAppendTime hides the stored deltas; only the batch can be compared.
		in = nil
	}
	if in == nil {
		return
	}
	raw, err := Encode(nil, spec, in)
	require.NoError(t, err)
	nb, err := Parse(raw)
	require.NoError(t, err)
	require.NoError(t, nb.Verify())
	got, err := nb.Records(nil)
	require.NoError(t, err)
	assert.Equal(t, recs, got)
	if b.Codec() == None {
		assert.Equal(t, b.Raw, raw, "uncompressed re-encode is byte-identical at offset %d", b.BaseOffset)
	}
}

func TestFixtureConfluentMonitoringLZ4LogAppendTime(t *testing.T) {
	bs := readFixture(t, fixturePath(t, "cp76-kafka36-lz4-rjmfernandes/data/_confluent-monitoring-0/00000000000000000000.log"))
	require.Len(t, bs, 1951)
	assert.Equal(t, int64(0), bs[0].BaseOffset)
	assert.Equal(t, int64(2826), bs[len(bs)-1].LastOffset())
	n := 0
	for _, b := range bs {
		assert.Equal(t, LZ4, b.Codec())
		assert.True(t, b.LogAppendTime())
		assert.Equal(t, int16(0x0b), b.Attributes)
		assert.Equal(t, []byte{0x04, 0x22, 0x4D, 0x18, 0x60, 0x40, lz4HC}, b.Raw[HeaderSize:HeaderSize+7])
		for _, r := range b.Recs {
			assert.Equal(t, b.MaxTimestamp, r.Timestamp)
			n++
		}
	}
	assert.Positive(t, n)
}

func TestFixtureConfluentCommandIdempotent(t *testing.T) {
	bs := readFixture(t, fixturePath(t, "cp76-kafka36-lz4-rjmfernandes/data/_confluent-command-0/00000000000000000000.log"))
	require.Len(t, bs, 2)
	pids := []int64{bs[0].ProducerID, bs[1].ProducerID}
	assert.ElementsMatch(t, []int64{2, 20}, pids)
	for _, b := range bs {
		assert.Equal(t, LZ4, b.Codec())
		assert.Equal(t, int16(0), b.ProducerEpoch)
		assert.Equal(t, int32(0), b.BaseSequence)
	}
}

func TestFixtureClusterMetadataLeaderChange(t *testing.T) {
	bs := readFixture(t, fixturePath(t, "kafka41-kraft-nomanazeem/kafka-logs/__cluster_metadata-0/00000000000000000000.log"))
	require.Len(t, bs, 1842)
	assert.Equal(t, int64(2066), bs[len(bs)-1].LastOffset())
	b0 := bs[0]
	assert.Equal(t, int64(0), b0.BaseOffset)
	assert.True(t, b0.IsControl())
	assert.False(t, b0.IsTransactional())
	assert.Equal(t, int64(-1), b0.ProducerID)
	assert.Equal(t, int32(1), b0.PartitionLeaderEpoch)
	typ, err := b0.ControlType()
	require.NoError(t, err)
	assert.Equal(t, ControlLeaderChange, typ)
	for _, b := range bs {
		assert.Equal(t, None, b.Codec())
	}
}

func TestFixtureBootstrapCheckpointSnapshotMarkers(t *testing.T) {
	bs := readFixture(t, fixturePath(t, "kafka41-kraft-nomanazeem/kafka-logs/bootstrap.checkpoint"))
	require.GreaterOrEqual(t, len(bs), 3)
	first, err := bs[0].ControlType()
	require.NoError(t, err)
	assert.Equal(t, ControlSnapshotHeader, first)
	last, err := bs[len(bs)-1].ControlType()
	require.NoError(t, err)
	assert.Equal(t, ControlSnapshotFooter, last)
	data := 0
	for _, b := range bs[1 : len(bs)-1] {
		assert.False(t, b.IsControl())
		data += len(b.Recs)
	}
	assert.Equal(t, 6, data, "6 FeatureLevelRecords")
}

func TestFixtureConsumerOffsetsBaseSequenceQuirk(t *testing.T) {
	bs := readFixture(t, fixturePath(t, "kafka41-kraft-nomanazeem/kafka-logs/__consumer_offsets-15/00000000000000000000.log"))
	require.Len(t, bs, 88)
	assert.Equal(t, int64(255), bs[len(bs)-1].LastOffset())
	for _, b := range bs {
		assert.Equal(t, int64(-1), b.ProducerID)
		assert.Equal(t, int32(0), b.BaseSequence)
	}
}

func TestFixtureCompactedGapsAndTombstones(t *testing.T) {
	bs := readFixture(t, fixturePath(t, "kafka271-zk-compacted-donaldy/kafka-logs/__consumer_offsets-28/00000000000000000000.log"))
	require.NotEmpty(t, bs)
	assert.Equal(t, int64(1), bs[0].Recs[0].Offset, "file name is a lower bound: first offset 1")

	var offs []int64
	for _, b := range readFixture(t, fixturePath(t, "kafka271-zk-compacted-donaldy/kafka-logs/__consumer_offsets-39/00000000000000000000.log")) {
		for _, r := range b.Recs {
			offs = append(offs, r.Offset)
		}
	}
	assert.Equal(t, []int64{4, 16, 17}, offs)

	tomb := 0
	for _, rel := range []string{"__consumer_offsets-17/00000000000000000001.log", "__consumer_offsets-28/00000000000000000002.log", "__consumer_offsets-39/00000000000000000018.log"} {
		for _, b := range readFixture(t, fixturePath(t, "kafka271-zk-compacted-donaldy/kafka-logs/"+rel)) {
			for _, r := range b.Recs {
				if r.Value == nil {
					tomb++
				}
			}
		}
	}
	assert.Positive(t, tomb, "later segments keep tombstones")
}

func TestFixtureKafka0110ConsoleProducer(t *testing.T) {
	bs := readFixture(t, fixturePath(t, "kafka0110-zk-sharaweil/data/test0-0/00000000000000000000.log"))
	require.NotEmpty(t, bs)
	for i, b := range bs {
		require.Len(t, b.Recs, 1)
		assert.Nil(t, b.Recs[0].Key)
		assert.Equal(t, int64(i), b.Recs[0].Offset)
		assert.NotNil(t, b.Recs[0].Value, "console producer sends empty lines as empty, not null, values")
	}
}

const kafkaGo = "kafka-go-fetch-v1v2-gzip-segmentio/extracted/"

func TestFixtureKafkaGoV1GzipWrapperRelativeOffsets(t *testing.T) {
	bs := readFixture(t, fixturePath(t, kafkaGo+"v1c-v1c/00000000000000000000.log"))
	require.NotEmpty(t, bs)
	w := bs[0]
	assert.Equal(t, int8(1), w.Magic)
	assert.Equal(t, Gzip, w.Codec())
	assert.Equal(t, int64(1), w.LastOffset(), "wrapper offset is the last inner offset")
	require.Len(t, w.Recs, 2)
	assert.Equal(t, int64(0), w.Recs[0].Offset)
	assert.Equal(t, int64(1), w.Recs[1].Offset)
	assert.Equal(t, int64(0), w.BaseOffset, "Records sets BaseOffset to the first inner offset")
	assert.Equal(t, int32(2), w.RecordCount)
	assert.Equal(t, max(w.Recs[0].Timestamp, w.Recs[1].Timestamp), w.MaxTimestamp, "wrapper timestamp = max inner")
	assert.Equal(t, []byte{0x1f, 0x8b, 0x08, 0x00}, gzipStart(t, &w.Batch))

	// Before Records(): a freshly parsed wrapper has BaseOffset == LastOffset.
	fresh, err := Parse(w.Raw)
	require.NoError(t, err)
	assert.Equal(t, int64(1), fresh.BaseOffset)
	assert.Equal(t, int64(1), fresh.LastOffset())
	assert.Equal(t, int32(-1), fresh.RecordCount)
}

// gzipStart returns the first 4 bytes of a legacy wrapper's value.
func gzipStart(t *testing.T, b *Batch) []byte {
	t.Helper()
	m, err := parseLegacyMessage(b.Raw[LogOverhead:])
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(m.value), 4)
	return m.value[:4]
}

func TestFixtureKafkaGoMixedMagics(t *testing.T) {
	bs := readFixture(t, fixturePath(t, kafkaGo+"v1-v1c-v2-v2c-v2b-v2b-v2b-v2bc-v1b-v1bc/00000000000000000000.log"))
	var offs []int64
	magics := map[int8]bool{}
	codecs := map[Codec]bool{}
	for _, b := range bs {
		magics[b.Magic] = true
		codecs[b.Codec()] = true
		for _, r := range b.Recs {
			offs = append(offs, r.Offset)
			assert.NotNil(t, r.Value)
		}
	}
	require.Len(t, offs, 20)
	for i, o := range offs {
		assert.Equal(t, int64(i), o)
	}
	assert.Equal(t, map[int8]bool{1: true, 2: true}, magics)
	assert.Equal(t, map[Codec]bool{None: true, Gzip: true}, codecs)
}

func TestFixtureKafkaGoV1Plain(t *testing.T) {
	bs := readFixture(t, fixturePath(t, kafkaGo+"v1-v1/00000000000000000000.log"))
	require.Len(t, bs, 4)
	for i, b := range bs {
		assert.Equal(t, int8(1), b.Magic)
		assert.Equal(t, int32(1), b.RecordCount)
		require.Len(t, b.Recs, 1)
		assert.Equal(t, int64(i), b.Recs[0].Offset)
		assert.Equal(t, b.MaxTimestamp, b.Recs[0].Timestamp)
		assert.Equal(t, int64(-1), b.ProducerID)
	}
}
