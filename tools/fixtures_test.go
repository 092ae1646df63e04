package tools

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/internal/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// fixtureLogDirs are the Kafka log.dirs among the fixtures; cleanShutdown
// says whether the broker left a clean-shutdown marker.
var fixtureLogDirs = []struct {
	dir           string
	cleanShutdown bool
}{
	{"kafka41-kraft-nomanazeem/kafka-logs", true},
	{"cp76-kafka36-lz4-rjmfernandes/data", true},
	{"kafka271-zk-compacted-donaldy/kafka-logs", false},
	{"kafka0110-zk-sharaweil/data", true},
}

// fixture returns a path below the fixture sets (testdata/kafka-real, or
// the extra corpus: the test is skipped when that is absent).
func fixture(t testing.TB, parts ...string) string {
	t.Helper()
	return testutil.KafkaFixture(t, filepath.Join(parts...))
}

func TestCheckPassesOnEveryFixtureLogDir(t *testing.T) {
	for _, fx := range fixtureLogDirs {
		t.Run(fx.dir, func(t *testing.T) {
			dir := fixture(t, fx.dir)
			before := testutil.TreeState(t, dir)
			var out bytes.Buffer
			rep, err := Check(&out, dir, CheckOptions{})
			require.NoError(t, err)
			assert.Empty(t, rep.Problems(), out.String())
			assert.Contains(t, out.String(), "\nOK\n")
			assert.Equal(t, before, testutil.TreeState(t, dir), "check wrote nothing")

			var sum int64
			for _, p := range rep.Partitions {
				sum += p.Batches
				assert.NotEqual(t, engine.MetadataTopic, "", p.Topic)
			}
			assert.Equal(t, rep.Batches, sum)

			// After a clean shutdown the recovery point of every partition
			// is its log end: our reading of the data must agree with
			// what the broker checkpointed.
			if !fx.cleanShutdown {
				return
			}
			rp, err := engine.ReadCheckpoint(vfs.OS, filepath.Join(dir, engine.RecoveryPointCheckpointFile))
			require.NoError(t, err)
			for _, p := range rep.Partitions {
				if want, ok := rp[engine.TopicPartition{Topic: p.Topic, Partition: p.Partition}]; ok {
					assert.Equal(t, want, p.NextOffset, "%s-%d log end vs recovery point", p.Topic, p.Partition)
				}
			}
		})
	}
}

func partitionReport(t *testing.T, rep CheckReport, topic string, p int) PartitionReport {
	t.Helper()
	for _, pr := range rep.Partitions {
		if pr.Topic == topic && pr.Partition == p {
			return pr
		}
	}
	t.Fatalf("no partition %s-%d in the report", topic, p)
	return PartitionReport{}
}

func TestCheckFixtureFacts(t *testing.T) {
	check := func(t *testing.T, dir string) CheckReport {
		var out bytes.Buffer
		rep, err := Check(&out, fixture(t, dir), CheckOptions{})
		require.NoError(t, err)
		return rep
	}
	t.Run("kafka41", func(t *testing.T) {
		k41 := check(t, "kafka41-kraft-nomanazeem/kafka-logs")
		md := partitionReport(t, k41, engine.MetadataTopic, 0)
		assert.EqualValues(t, 1842, md.Batches)
		assert.EqualValues(t, 0, md.FirstOffset)
		assert.EqualValues(t, 2066, md.LastOffset)
		co := partitionReport(t, k41, "__consumer_offsets", 15)
		assert.EqualValues(t, 88, co.Batches)
		assert.EqualValues(t, 255, co.LastOffset)
		assert.EqualValues(t, 54, len(k41.Partitions), "50 __consumer_offsets + 3 demo-topic + the metadata log")
	})
	t.Run("cp76", func(t *testing.T) {
		cp := check(t, "cp76-kafka36-lz4-rjmfernandes/data")
		mon := partitionReport(t, cp, "_confluent-monitoring", 0)
		assert.EqualValues(t, 1951, mon.Batches)
		assert.EqualValues(t, 0, mon.FirstOffset)
		assert.EqualValues(t, 2826, mon.LastOffset)
		assert.EqualValues(t, 460756, mon.Bytes)
		cl := partitionReport(t, cp, "_confluent-controlcenter-7-6-0-1-KSTREAM-OUTEROTHER-0000000106-store-changelog", 0)
		assert.EqualValues(t, 487, cl.Batches)
		cmd := partitionReport(t, cp, "_confluent-command", 0)
		assert.EqualValues(t, 2, cmd.Batches)
		// The root checkpoints list ~150 partitions of which 5 were copied.
		require.NotEmpty(t, cp.Warnings)
		assert.Contains(t, cp.Warnings[len(cp.Warnings)-1].Message, "partitions not in this directory")
	})
	t.Run("kafka271", func(t *testing.T) {
		dy := check(t, "kafka271-zk-compacted-donaldy/kafka-logs")
		c28 := partitionReport(t, dy, "__consumer_offsets", 28)
		assert.EqualValues(t, 1, c28.FirstOffset, "offset 0 was compacted away")
		assert.EqualValues(t, 2, c28.Segments)
		my := partitionReport(t, dy, "myTopic", 0)
		assert.EqualValues(t, 0, my.Records)
		assert.EqualValues(t, 38, my.NextOffset, "an empty segment named 38 is the log end")
	})
	t.Run("kafka0110", func(t *testing.T) {
		k11 := check(t, "kafka0110-zk-sharaweil/data")
		for p := range 3 {
			pr := partitionReport(t, k11, "test0", p)
			assert.EqualValues(t, 11, pr.Records, "test0-%d", p)
		}
		assert.EqualValues(t, 78, partitionReport(t, k11, "mac_test", 0).NextOffset)
	})
}

// kafkaBatchLine formats a v2 batch line from kmsg's independent parse of
// raw, following docs/FORMATS.md §9 (Kafka 3.3+ text).
func kafkaBatchLine(t *testing.T, raw []byte, pos int64) string {
	t.Helper()
	var b kmsg.RecordBatch
	require.NoError(t, b.ReadFrom(raw))
	lastSeq := int32(-1)
	if b.FirstSequence >= 0 {
		lastSeq = b.FirstSequence + b.LastOffsetDelta
	}
	tt := "CreateTime"
	if b.Attributes&0x08 != 0 {
		tt = "LogAppendTime"
	}
	codec := []string{"none", "gzip", "snappy", "lz4", "zstd"}[b.Attributes&7]
	horizon := "OptionalLong.empty"
	if b.Attributes&0x40 != 0 {
		horizon = fmt.Sprintf("OptionalLong[%d]", b.FirstTimestamp)
	}
	return fmt.Sprintf("baseOffset: %d lastOffset: %d count: %d baseSequence: %d lastSequence: %d producerId: %d producerEpoch: %d partitionLeaderEpoch: %d isTransactional: %t isControl: %t deleteHorizonMs: %s position: %d %s: %d size: %d magic: 2 compresscodec: %s crc: %d isvalid: true",
		b.FirstOffset, b.FirstOffset+int64(b.LastOffsetDelta), b.NumRecords, b.FirstSequence, lastSeq,
		b.ProducerID, b.ProducerEpoch, b.PartitionLeaderEpoch, b.Attributes&0x10 != 0, b.Attributes&0x20 != 0, horizon,
		pos, tt, b.MaxTimestamp, len(raw), codec, uint32(b.CRC))
}

// kafkaRecordLines formats the --print-data-log record lines of an
// uncompressed, non-control v2 batch from kmsg's parse.
func kafkaRecordLines(t *testing.T, raw []byte) []string {
	t.Helper()
	var b kmsg.RecordBatch
	require.NoError(t, b.ReadFrom(raw))
	var out []string
	data := b.Records
	for range b.NumRecords {
		n, used := binary.Varint(data)
		require.Positive(t, used)
		var r kmsg.Record
		require.NoError(t, r.ReadFrom(data[:used+int(n)]))
		data = data[used+int(n):]
		size := func(p []byte) int {
			if p == nil {
				return -1
			}
			return len(p)
		}
		seq := int32(-1)
		if b.FirstSequence >= 0 {
			seq = b.FirstSequence + r.OffsetDelta
		}
		var hk []string
		for _, h := range r.Headers {
			hk = append(hk, h.Key)
		}
		line := fmt.Sprintf("| offset: %d CreateTime: %d keySize: %d valueSize: %d sequence: %d headerKeys: [%s]",
			b.FirstOffset+int64(r.OffsetDelta), b.FirstTimestamp+r.TimestampDelta64, size(r.Key), size(r.Value), seq, strings.Join(hk, ","))
		if r.Key != nil {
			line += " key: " + javaString(r.Key)
		}
		if r.Value != nil {
			line += " payload: " + javaString(r.Value)
		}
		out = append(out, line)
	}
	return out
}

func readLines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// TestDumpMatchesKafkaFormatOnFixtures compares the whole dump of real
// segments with text built from kmsg's independent parse in Kafka's format:
// every batch line, and with --print-data-log the record lines of logs whose
// batches are all uncompressed data batches.
func TestDumpMatchesKafkaFormatOnFixtures(t *testing.T) {
	logs := []struct {
		path    string
		records bool // every batch uncompressed and not control
	}{
		{"kafka41-kraft-nomanazeem/kafka-logs/__cluster_metadata-0/00000000000000000000.log", false},
		{"kafka41-kraft-nomanazeem/kafka-logs/__consumer_offsets-15/00000000000000000000.log", true},
		{"cp76-kafka36-lz4-rjmfernandes/data/_confluent-monitoring-0/00000000000000000000.log", false},
		{"cp76-kafka36-lz4-rjmfernandes/data/_confluent-command-0/00000000000000000000.log", false},
		{"cp76-kafka36-lz4-rjmfernandes/data/__consumer_offsets-28/00000000000000000000.log", true},
		{"kafka271-zk-compacted-donaldy/kafka-logs/__consumer_offsets-39/00000000000000000000.log", true},
		{"kafka271-zk-compacted-donaldy/kafka-logs/__consumer_offsets-39/00000000000000000018.log", true},
		{"kafka0110-zk-sharaweil/data/test0-0/00000000000000000000.log", true},
		{"kafka0110-zk-sharaweil/data/test0-2/00000000000000000000.log", true},
	}
	for _, l := range logs {
		t.Run(l.path, func(t *testing.T) {
			path := fixture(t, l.path)
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			base, err := fileBase(path)
			require.NoError(t, err)
			for _, printData := range []bool{false, true} {
				if printData && !l.records {
					continue
				}
				var want strings.Builder
				fmt.Fprintf(&want, "Dumping %s\nLog starting offset: %d\n", path, base)
				for pos := 0; pos < len(data); {
					size := 12 + int(binary.BigEndian.Uint32(data[pos+8:]))
					raw := data[pos : pos+size]
					want.WriteString(kafkaBatchLine(t, raw, int64(pos)) + "\n")
					if printData {
						for _, rl := range kafkaRecordLines(t, raw) {
							want.WriteString(rl + "\n")
						}
					}
					pos += size
				}
				var out bytes.Buffer
				require.NoError(t, Dump(&out, io.Discard, []string{path}, DumpOptions{PrintData: printData}))
				require.Equal(t, want.String(), out.String(), "print data %v", printData)
			}
		})
	}
}

func TestDumpKafkaSampleLine(t *testing.T) {
	// Real (pre-3.2) kafka-dump-log output, as Kafka's documentation quotes it:
	const sampleBatch = "baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false position: 0 CreateTime: 1632815304456 size: 88 magic: 2 compresscodec: none crc: 873053997 isvalid: true"
	const sampleRecord = "| offset: 0 CreateTime: 1632815303637 keySize: -1 valueSize: 7 sequence: -1 headerKeys: [] payload: drfverv"
	// Rebuild a batch with the same fields (the second record's 5-byte value
	// is unknown, so the CRC differs) and compare everything else, with the
	// deleteHorizonMs field Kafka added in 3.2.
	raw := buildBatch(t, kBatch{pid: -1, epoch: -1, seq: -1, recs: []kRecord{
		{value: []byte("drfverv"), ts: 1632815303637},
		{value: []byte("12345"), ts: 1632815304456},
	}})
	path := filepath.Join(t.TempDir(), "00000000000000000000.log")
	require.NoError(t, os.WriteFile(path, raw, 0o644))
	var out bytes.Buffer
	require.NoError(t, Dump(&out, io.Discard, []string{path}, DumpOptions{PrintData: true}))
	lines := readLines(out.String())
	require.Len(t, lines, 5)
	crc := binary.BigEndian.Uint32(raw[17:])
	want := strings.Replace(sampleBatch, " position:", " deleteHorizonMs: OptionalLong.empty position:", 1)
	want = strings.Replace(want, "crc: 873053997", fmt.Sprintf("crc: %d", crc), 1)
	assert.Equal(t, want, lines[2])
	assert.Equal(t, sampleRecord, lines[3])
	assert.Equal(t, "| offset: 1 CreateTime: 1632815304456 keySize: -1 valueSize: 5 sequence: -1 headerKeys: [] payload: 12345", lines[4])
}

func TestDumpIndexesOfFixtures(t *testing.T) {
	t.Run("cp76", func(t *testing.T) {
		mon := fixture(t, "cp76-kafka36-lz4-rjmfernandes/data/_confluent-monitoring-0/00000000000000000000")
		var out, errOut bytes.Buffer
		require.NoError(t, Dump(&out, &errOut, []string{mon + ".index", mon + ".timeindex"}, DumpOptions{}))
		assert.Empty(t, errOut.String(), "every entry matches its batch (PROVENANCE)")
		lines := readLines(out.String())
		require.Len(t, lines, 1+109+1+109)
		assert.Equal(t, "Dumping "+mon+".index", lines[0])
		assert.Equal(t, "offset: 33 position: 4220", lines[1])
		assert.Equal(t, "Dumping "+mon+".timeindex", lines[110])
		assert.Regexp(t, `^timestamp: \d+ offset: 31$`, lines[111])
		assert.Regexp(t, `^timestamp: \d+ offset: 2826$`, lines[len(lines)-1])
	})
	t.Run("kafka41", func(t *testing.T) {
		md := fixture(t, "kafka41-kraft-nomanazeem/kafka-logs/__cluster_metadata-0/00000000000000000000")
		var out, errOut bytes.Buffer
		require.NoError(t, Dump(&out, &errOut, []string{md + ".index", md + ".timeindex"}, DumpOptions{}))
		assert.Empty(t, errOut.String())
		lines := readLines(out.String())
		require.Len(t, lines, 1+34+1+35)
		assert.Equal(t, "offset: 55 position: 4136", lines[1])
		assert.Equal(t, "timestamp: 1779276569220 offset: 2066", lines[len(lines)-1])
	})
	t.Run("kafka0110", func(t *testing.T) {
		// A one-entry time index, an empty index, and a file Kafka does
		// not know.
		var out, errOut bytes.Buffer
		ti := fixture(t, "kafka0110-zk-sharaweil/data/test0-0/00000000000000000000.timeindex")
		empty := fixture(t, "kafka0110-zk-sharaweil/data/test0-0/00000000000000000000.index")
		unknown := fixture(t, "kafka0110-zk-sharaweil/data/test0-0/leader-epoch-checkpoint")
		require.NoError(t, Dump(&out, &errOut, []string{ti, empty, unknown}, DumpOptions{}))
		assert.Equal(t, []string{"Dumping " + ti, "timestamp: 1600054618983 offset: 10", "Dumping " + empty, empty + " is empty.", "Dumping " + unknown}, readLines(out.String()))
		assert.Equal(t, "Ignoring unknown file "+unknown+"\n", errOut.String())
	})
}

func TestDumpProducerSnapshots(t *testing.T) {
	t.Run("kafka271", func(t *testing.T) {
		var out, errOut bytes.Buffer
		file := fixture(t, "kafka271-zk-compacted-donaldy/kafka-logs/myTopic-0/00000000000000000038.snapshot")
		require.NoError(t, Dump(&out, &errOut, []string{file}, DumpOptions{}))
		assert.Empty(t, errOut.String())
		lines := readLines(out.String())
		require.Len(t, lines, 1+3)
		assert.Equal(t, "producerId: 4001 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty lastTimestamp: 1670068129797 firstSequence: 9 lastSequence: 11 lastOffset: 11 offsetDelta: 2 timestamp: 1670068129797", lines[1])

		// A flipped byte fails the CRC, reported in Kafka's words.
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		data[20] ^= 0xff
		bad := filepath.Join(t.TempDir(), "00000000000000000038.snapshot")
		require.NoError(t, os.WriteFile(bad, data, 0o644))
		out.Reset()
		err = Dump(&out, &errOut, []string{bad}, DumpOptions{})
		require.ErrorIs(t, err, ErrCorruptSnapshot)
		assert.Contains(t, errOut.String(), "Snapshot is corrupt (CRC is no longer valid). Stored crc: ")
	})
	t.Run("extra", func(t *testing.T) {
		var out, errOut bytes.Buffer
		files := []string{
			fixture(t, "cp76-kafka36-lz4-rjmfernandes/data/_confluent-command-0/00000000000000000002.snapshot"),
			fixture(t, "kafka41-kraft-nomanazeem/kafka-logs/__cluster_metadata-0/00000000000000002067.snapshot"),
		}
		require.NoError(t, Dump(&out, &errOut, files, DumpOptions{}))
		assert.Empty(t, errOut.String())
		lines := readLines(out.String())
		require.Len(t, lines, 1+2+1)
		assert.Contains(t, lines[1], "producerId: 2 producerEpoch: 0 ")
		assert.Contains(t, lines[2], "producerId: 20 producerEpoch: 0 ")
	})
}

func TestDumpKafkaGoExtractedLogs(t *testing.T) {
	root := fixture(t, "kafka-go-fetch-v1v2-gzip-segmentio/extracted")
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	require.Len(t, entries, 11)
	for _, e := range entries {
		t.Run(e.Name(), func(t *testing.T) {
			path := filepath.Join(root, e.Name(), "00000000000000000000.log")
			var out, errOut bytes.Buffer
			require.NoError(t, Dump(&out, &errOut, []string{path}, DumpOptions{PrintData: true, JSON: true}))
			var offsets []int64
			for _, o := range jsonLines(t, out.String()) {
				switch o["type"] {
				case "trailing":
					t.Fatalf("invalid bytes at the end: %v", o)
				case "batch":
					assert.Equal(t, true, o["isvalid"])
					assert.Contains(t, []any{"none", "gzip"}, o["compresscodec"])
				case "record":
					offsets = append(offsets, int64(o["offset"].(float64)))
					assert.Contains(t, []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"}, o["key"])
					assert.True(t, strings.HasPrefix(o["payload"].(string), `{"count":`), o["payload"])
				}
			}
			require.NotEmpty(t, offsets)
			for i, off := range offsets {
				assert.EqualValues(t, i, off, "offsets are consecutive from 0")
			}
			assert.Empty(t, errOut.String())
		})
	}

	// The wrapper of v1c-v1c at offset 1 holds inner offsets 0 and 1
	// (relative inner offsets, docs/FORMATS.md §2.8): Kafka's legacy lines.
	path := filepath.Join(root, "v1c-v1c", "00000000000000000000.log")
	var out bytes.Buffer
	require.NoError(t, Dump(&out, io.Discard, []string{path}, DumpOptions{DeepIteration: true}))
	lines := readLines(out.String())
	require.GreaterOrEqual(t, len(lines), 5)
	assert.Regexp(t, `^offset: 1 position: 0 CreateTime: \d+ size: \d+ magic: 1 compresscodec: gzip crc: \d+ isvalid: true$`, lines[2])
	assert.Regexp(t, `^\| offset: 0 CreateTime: \d+ keySize: 5 valueSize: \d+ isValid: true crc: \d+}$`, lines[3])
	assert.Regexp(t, `^\| offset: 1 CreateTime: \d+ keySize: 4 valueSize: \d+ isValid: true crc: \d+}$`, lines[4])
}

// TestFixturesMountedReadWriteStillPass opens a copy of every fixture log dir
// read-write with the engine (recovering the unclean one, rebuilding missing
// indexes), appends to every partition, closes, and checks the result: what
// topicfs writes into a Kafka directory must satisfy the same rules.
func TestFixturesMountedReadWriteStillPass(t *testing.T) {
	for _, fx := range fixtureLogDirs {
		t.Run(fx.dir, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			testutil.CopyTree(t, fixture(t, fx.dir), dir)
			d, err := engine.OpenLogDir(vfs.OS, dir, engine.LogDirOptions{Logger: quiet(), CheckpointInterval: -1})
			require.NoError(t, err)
			want := map[string]int64{}
			for _, p := range d.Partitions() {
				if p.ID()%10 != 8 && p.ID() > 2 { // a sample of the 50 __consumer_offsets partitions
					want[fmt.Sprintf("%s-%d", p.Topic(), p.ID())] = p.LogEndOffset()
					continue
				}
				first, last, err := p.Append([]record.Record{{Timestamp: -1, Key: []byte("k"), Value: []byte("from topicfs")}, {Timestamp: -1, Value: []byte("2")}})
				require.NoError(t, err)
				require.Equal(t, first+1, last)
				want[fmt.Sprintf("%s-%d", p.Topic(), p.ID())] = last + 1
			}
			require.NoError(t, d.Close())

			var out bytes.Buffer
			rep, err := Check(&out, dir, CheckOptions{})
			require.NoError(t, err)
			require.Empty(t, rep.Problems(), out.String())
			for _, p := range rep.Partitions {
				if p.Topic == engine.MetadataTopic {
					continue
				}
				assert.Equal(t, want[fmt.Sprintf("%s-%d", p.Topic, p.Partition)], p.NextOffset, "%s-%d", p.Topic, p.Partition)
			}
			rp, err := engine.ReadCheckpoint(vfs.OS, filepath.Join(dir, engine.RecoveryPointCheckpointFile))
			require.NoError(t, err)
			for name, leo := range want {
				if leo == 0 {
					continue // Kafka lists empty partitions; ours may too
				}
				i := strings.LastIndexByte(name, '-')
				var id int
				_, _ = fmt.Sscan(name[i+1:], &id)
				assert.Equal(t, leo, rp[engine.TopicPartition{Topic: name[:i], Partition: id}], name)
			}
		})
	}
}
