package tools

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/internal/testutil"
	"github.com/topicfs/topicfs/internal/testutil/kfakelog"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// batchPositions returns the start of every entry of a .log file.
func batchPositions(t *testing.T, data []byte) []int64 {
	t.Helper()
	var out []int64
	for pos := 0; pos+12 <= len(data); {
		out = append(out, int64(pos))
		pos += 12 + int(binary.BigEndian.Uint32(data[pos+8:]))
	}
	return out
}

func TestCheckCorruptBatchThenRepair(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	testutil.CopyTree(t, fixture(t, "kafka0110-zk-sharaweil/data"), dir)
	logPath := filepath.Join(dir, "test0-1", "00000000000000000000.log")
	data, err := os.ReadFile(logPath)
	require.NoError(t, err)
	pos := batchPositions(t, data)
	require.Greater(t, len(pos), 6)
	bad := pos[5]
	data[bad+40] ^= 0x5a // inside the CRC-covered header (maxTimestamp)
	require.NoError(t, os.WriteFile(logPath, data, 0o644))
	before := testutil.TreeState(t, dir)

	var out bytes.Buffer
	rep, err := Check(&out, dir, CheckOptions{})
	require.NoError(t, err)
	probs := rep.Problems()
	require.NotEmpty(t, probs, out.String())
	assert.Equal(t, logPath, probs[0].Path)
	assert.Equal(t, bad, probs[0].Position)
	assert.Contains(t, out.String(), fmt.Sprintf("%s: position %d: ", logPath, bad), "the report names the segment and position")
	assert.Contains(t, out.String(), "FAILED")
	assert.Equal(t, before, testutil.TreeState(t, dir), "check without --repair writes nothing")
	p1 := partitionReport(t, rep, "test0", 1)
	assert.EqualValues(t, 5, p1.NextOffset, "what is readable ends before the bad batch")

	end := pos[6]
	aside := fmt.Sprintf("%s.damaged-%d-%d", logPath, bad, end)
	assert.Contains(t, out.String(), fmt.Sprintf("test0-1: would move bytes %d..%d (%d bytes) of 00000000000000000000.log to %s; offset 5 lost, between intact offsets 4 and 6",
		bad, end, end-bad, filepath.Base(aside)), "check prints what --repair would do")

	out.Reset()
	rep, err = Check(&out, dir, CheckOptions{Repair: true})
	require.NoError(t, err, out.String())
	assert.Empty(t, rep.Problems(), out.String())
	assert.Equal(t, []string{"test0-1"}, rep.Repaired)
	require.NotNil(t, rep.Before)
	assert.NotEmpty(t, rep.Before.Problems())
	assert.Contains(t, out.String(), "repair: test0-1: moved bytes")

	got, err := os.ReadFile(logPath)
	require.NoError(t, err)
	assert.Equal(t, append(data[:bad:bad], data[end:]...), got, "the log keeps every batch but the damaged one, byte for byte")
	moved, err := os.ReadFile(aside)
	require.NoError(t, err)
	assert.Equal(t, data[bad:end], moved, "the damaged bytes are kept aside")
	p1 = partitionReport(t, rep, "test0", 1)
	assert.EqualValues(t, 11, p1.NextOffset, "the batches after the damaged one keep their offsets")
	assert.EqualValues(t, len(pos)-1, p1.Batches)

	// The untouched partitions were not rewritten.
	for _, p := range []string{"test0-0", "test0-2", "mac_test-0"} {
		for _, line := range before {
			if strings.Contains(line, "/"+p+"/") {
				assert.Contains(t, testutil.TreeState(t, dir), line)
			}
		}
	}
	out.Reset()
	rep, err = Check(&out, dir, CheckOptions{})
	require.NoError(t, err)
	assert.Empty(t, rep.Problems(), out.String())
}

func TestCheckPartialTailThenRepair(t *testing.T) {
	for _, tc := range []struct{ set, part string }{
		{"kafka0110-zk-sharaweil/data", "test0-0"},
		{"cp76-kafka36-lz4-rjmfernandes/data", "_confluent-command-0"},
	} {
		t.Run(tc.part, func(t *testing.T) { partialTailThenRepair(t, tc.set, tc.part) })
	}
}

// partialTailThenRepair appends a torn batch to the first log of part in a
// copy of the fixture log dir set: check reports it, repair cuts it off.
func partialTailThenRepair(t *testing.T, set, part string) {
	dir := filepath.Join(t.TempDir(), "data")
	testutil.CopyTree(t, fixture(t, set), dir)
	logPath := filepath.Join(dir, part, "00000000000000000000.log")
	data, err := os.ReadFile(logPath)
	require.NoError(t, err)
	end := int64(len(data))
	// A torn append: a batch header and part of its body.
	cut := min(100, 12+int(binary.BigEndian.Uint32(data[8:]))-1)
	torn := append(data, data[:cut]...)
	require.NoError(t, os.WriteFile(logPath, torn, 0o644))

	var out bytes.Buffer
	rep, err := Check(&out, dir, CheckOptions{})
	require.NoError(t, err)
	require.Len(t, rep.Problems(), 1, out.String())
	assert.Equal(t, end, rep.Problems()[0].Position)
	assert.Contains(t, rep.Problems()[0].Message, "partial batch")

	out.Reset()
	rep, err = Check(&out, dir, CheckOptions{Repair: true})
	require.NoError(t, err, out.String())
	assert.Empty(t, rep.Problems(), out.String())
	st, err := os.Stat(logPath)
	require.NoError(t, err)
	assert.Equal(t, end, st.Size())
	moved, err := os.ReadFile(fmt.Sprintf("%s.damaged-%d-%d", logPath, end, len(torn)))
	require.NoError(t, err, "the torn tail is moved aside, not lost")
	assert.Equal(t, torn[end:], moved)
}

func TestCheckBadIndexEntryThenRepair(t *testing.T) {
	t.Run("kfake", func(t *testing.T) {
		// franz-go's LZ4 batches with an offset index entry per batch,
		// written here in Kafka's layout, beside a real log dir.
		dir := filepath.Join(t.TempDir(), "data")
		testutil.CopyTree(t, fixture(t, "kafka0110-zk-sharaweil/data"), dir)
		log := kfakelog.Produce(t, kfakelog.Options{Codec: "lz4", Batches: 8, PerBatch: 3})
		part := filepath.Join(dir, "kfake-0")
		require.NoError(t, os.MkdirAll(part, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(part, "00000000000000000000.log"), log.Raw, 0o644))
		var idx []byte
		for pos := 0; pos < len(log.Raw); {
			size := 12 + int(binary.BigEndian.Uint32(log.Raw[pos+8:]))
			var b kmsg.RecordBatch
			require.NoError(t, b.ReadFrom(log.Raw[pos:pos+size]))
			idx = binary.BigEndian.AppendUint32(idx, uint32(b.FirstOffset+int64(b.LastOffsetDelta)))
			idx = binary.BigEndian.AppendUint32(idx, uint32(pos))
			pos += size
		}
		require.GreaterOrEqual(t, len(idx), 4*8)
		require.NoError(t, os.WriteFile(filepath.Join(part, "00000000000000000000.index"), idx, 0o644))
		var out bytes.Buffer
		rep, err := Check(&out, dir, CheckOptions{})
		require.NoError(t, err)
		require.Empty(t, rep.Problems(), out.String())
		badIndexEntryThenRepair(t, dir, filepath.Join(part, "00000000000000000000.index"))
	})
	t.Run("cp76", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "data")
		testutil.CopyTree(t, fixture(t, "cp76-kafka36-lz4-rjmfernandes/data"), dir)
		badIndexEntryThenRepair(t, dir, filepath.Join(dir, "_confluent-monitoring-0", "00000000000000000000.index"))
	})
}

// badIndexEntryThenRepair moves the position of entry 3 of idx into a
// batch: check reports that entry, repair rebuilds the index.
func badIndexEntryThenRepair(t *testing.T, dir, idx string) {
	data, err := os.ReadFile(idx)
	require.NoError(t, err)
	// Entry 3: move its position one byte into a batch.
	p := binary.BigEndian.Uint32(data[3*8+4:])
	binary.BigEndian.PutUint32(data[3*8+4:], p+1)
	require.NoError(t, os.WriteFile(idx, data, 0o644))

	var out bytes.Buffer
	rep, err := Check(&out, dir, CheckOptions{})
	require.NoError(t, err)
	require.Len(t, rep.Problems(), 1, out.String())
	assert.Equal(t, idx, rep.Problems()[0].Path)
	assert.EqualValues(t, 3*8, rep.Problems()[0].Position)
	assert.Contains(t, rep.Problems()[0].Message, "batch boundary")

	out.Reset()
	rep, err = Check(&out, dir, CheckOptions{Repair: true})
	require.NoError(t, err, out.String())
	assert.Empty(t, rep.Problems(), out.String(), "recovery rebuilt the index")
}

func TestCheckLeftovers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	testutil.CopyTree(t, fixture(t, "kafka0110-zk-sharaweil/data"), dir)
	part := filepath.Join(dir, "test0-2")
	for _, name := range []string{"00000000000000000000.log.deleted", "00000000000000000000.index.deleted", "00000000000000000005.log.cleaned"} {
		require.NoError(t, os.WriteFile(filepath.Join(part, name), nil, 0o644))
	}
	var out bytes.Buffer
	rep, err := Check(&out, dir, CheckOptions{})
	require.NoError(t, err)
	assert.Empty(t, rep.Problems(), "pending deletions and abandoned cleaner output are warnings: %s", out.String())
	assert.Len(t, partitionReport(t, rep, "test0", 2).Warnings, 3)

	swap := filepath.Join(part, "00000000000000000000.log.swap")
	require.NoError(t, os.WriteFile(swap, nil, 0o644))
	out.Reset()
	rep, err = Check(&out, dir, CheckOptions{})
	require.NoError(t, err)
	require.Len(t, rep.Problems(), 1, out.String())
	assert.Equal(t, swap, rep.Problems()[0].Path)
}

func TestCheckSinglePartitionDirAndErrors(t *testing.T) {
	var out bytes.Buffer
	rep, err := Check(&out, fixture(t, "kafka0110-zk-sharaweil/data/test0-0"), CheckOptions{})
	require.NoError(t, err)
	require.Len(t, rep.Partitions, 1)
	assert.EqualValues(t, 11, rep.Records)
	assert.Empty(t, rep.Problems())

	_, err = Check(&out, filepath.Join(t.TempDir(), "missing"), CheckOptions{})
	assert.ErrorIs(t, err, fs.ErrNotExist)

	// A checkpoint that does not parse is a problem.
	dir := filepath.Join(t.TempDir(), "data")
	testutil.CopyTree(t, fixture(t, "kafka0110-zk-sharaweil/data"), dir)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "recovery-point-offset-checkpoint"), []byte("0\n2\ntest0 0 11\n"), 0o644))
	out.Reset()
	rep, err = Check(&out, dir, CheckOptions{})
	require.NoError(t, err)
	require.Len(t, rep.Problems(), 1, out.String())
	assert.Contains(t, rep.Problems()[0].Path, "recovery-point-offset-checkpoint")
}

func TestCheckLeaderEpochAndTopicsConfig(t *testing.T) {
	tests := []struct {
		name, file, content string
		problems, warnings  int
	}{
		{"epochs fine", "test0-0/leader-epoch-checkpoint", "0\n2\n0 0\n3 7\n", 0, 0},
		{"empty epochs", "test0-0/leader-epoch-checkpoint", "", 0, 0},
		{"epochs count", "test0-0/leader-epoch-checkpoint", "0\n3\n0 0\n", 1, 0},
		{"epochs order", "test0-0/leader-epoch-checkpoint", "0\n2\n3 5\n1 7\n", 1, 0},
		{"epoch past the end", "test0-0/leader-epoch-checkpoint", "0\n1\n4 500\n", 0, 1},
		{"topics config fine", "topicfs-topics.json", `{"version":1,"topics":{"test0":{"retention.ms":"5"}}}`, 0, 0},
		{"topics config unknown setting", "topicfs-topics.json", `{"version":1,"topics":{"test0":{"no.such":"5"}}}`, 0, 1},
		{"topics config garbage", "topicfs-topics.json", `{"version":1,`, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			testutil.CopyTree(t, fixture(t, "kafka0110-zk-sharaweil/data"), dir)
			require.NoError(t, os.WriteFile(filepath.Join(dir, tt.file), []byte(tt.content), 0o644))
			var out bytes.Buffer
			rep, err := Check(&out, dir, CheckOptions{})
			require.NoError(t, err)
			assert.Len(t, rep.Problems(), tt.problems, out.String())
			warnings := len(rep.Warnings)
			for _, p := range rep.Partitions {
				warnings += len(p.Warnings)
			}
			assert.Equal(t, tt.warnings, warnings, out.String())
		})
	}
}

func TestCheckRepairRootFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	testutil.CopyTree(t, fixture(t, "kafka0110-zk-sharaweil/data"), dir)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "recovery-point-offset-checkpoint"), []byte("0\n2\ntest0 0 11\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "topicfs-topics.json"), []byte(`{"version":1,`), 0o644))
	var out bytes.Buffer
	rep, err := Check(&out, dir, CheckOptions{Repair: true})
	require.NoError(t, err, out.String())
	assert.Empty(t, rep.Problems(), out.String())
	require.NotNil(t, rep.Before)
	assert.Len(t, rep.Before.Problems(), 2)
	_, err = os.Stat(filepath.Join(dir, "recovery-point-offset-checkpoint"))
	assert.ErrorIs(t, err, fs.ErrNotExist)
	kept, err := os.ReadFile(filepath.Join(dir, "topicfs-topics.json.corrupt"))
	require.NoError(t, err)
	assert.Equal(t, `{"version":1,`, string(kept))
}

// TestCheckRepairSettlesASwap: an interrupted compaction swap (the cleaned
// copy written as .log.swap) is completed as recovery does, then the
// partition is checked again.
func TestCheckRepairSettlesASwap(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	testutil.CopyTree(t, fixture(t, "kafka0110-zk-sharaweil/data"), dir)
	logPath := filepath.Join(dir, "test0-2", "00000000000000000000.log")
	data, err := os.ReadFile(logPath)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(logPath+".swap", data, 0o644))

	var out bytes.Buffer
	rep, err := Check(&out, dir, CheckOptions{})
	require.NoError(t, err)
	require.Len(t, rep.Problems(), 1)
	assert.Contains(t, out.String(), "test0-2: would complete or roll back the interrupted compaction swap")

	out.Reset()
	rep, err = Check(&out, dir, CheckOptions{Repair: true})
	require.NoError(t, err, out.String())
	assert.Empty(t, rep.Problems(), out.String())
	assert.Equal(t, []string{"test0-2"}, rep.Repaired)
	assert.Contains(t, out.String(), "repair: test0-2: completed or rolled back the interrupted compaction swap")
	assert.NoFileExists(t, logPath+".swap")
	got, err := os.ReadFile(logPath)
	require.NoError(t, err)
	assert.Equal(t, data, got)
}

// TestCheckRepairKeepsEarlierAsideFiles: an aside file of the same name from
// an earlier repair (of the segment before it was rewritten) is not
// overwritten; the new bytes go to name.2.
func TestCheckRepairKeepsEarlierAsideFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	testutil.CopyTree(t, fixture(t, "kafka0110-zk-sharaweil/data"), dir)
	logPath := filepath.Join(dir, "test0-1", "00000000000000000000.log")
	data, err := os.ReadFile(logPath)
	require.NoError(t, err)
	pos := batchPositions(t, data)
	bad, end := pos[5], pos[6]
	data[bad+40] ^= 0x5a
	require.NoError(t, os.WriteFile(logPath, data, 0o644))
	earlier := fmt.Sprintf("%s.damaged-%d-%d", logPath, bad, end)
	older := bytes.Repeat([]byte{7}, int(end-bad))
	require.NoError(t, os.WriteFile(earlier, older, 0o644))

	var out bytes.Buffer
	rep, err := Check(&out, dir, CheckOptions{Repair: true})
	require.NoError(t, err, out.String())
	assert.Empty(t, rep.Problems(), out.String())
	assert.Contains(t, out.String(), filepath.Base(earlier)+".2;")
	got, err := os.ReadFile(earlier)
	require.NoError(t, err)
	assert.Equal(t, older, got, "the earlier aside file is untouched")
	got, err = os.ReadFile(earlier + ".2")
	require.NoError(t, err)
	assert.Equal(t, data[bad:end], got)
}
