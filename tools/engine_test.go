package tools

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// This file checks that what the engine writes passes Check and dumps
// cleanly: several codecs, many segments and index entries, multi-batch
// appends, producer batches with committed and aborted transactions, a
// compacted segment (swap protocol) and retention leftovers.

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

type engineData struct {
	dir string
	d   *engine.LogDir
	leo map[string]int64 // "<topic>-<p>" -> log end offset
}

func txnSpec(pid int64, seq int32) record.BatchSpec {
	s := record.NewBatchSpec(0)
	s.ProducerID, s.ProducerEpoch, s.BaseSequence, s.Transactional = pid, 1, seq, true
	return s
}

// writeEngineData writes the data set; appends is the number of Append
// calls per partition (40 for the full set, fewer for tests that only need
// some data).
func writeEngineData(t *testing.T, appends int) engineData {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	opts := engine.LogDirOptions{Logger: quiet(), Overrides: map[string]map[string]string{}}
	small := map[string]string{"segment.bytes": "4096", "index.interval.bytes": "200", "max.message.bytes": "2000"}
	for name, codec := range map[string]string{"plain": "none", "gz": "gzip", "snap": "snappy", "lz": "lz4", "zs": "zstd"} {
		kv := map[string]string{"compression.type": codec}
		for k, v := range small {
			kv[k] = v
		}
		opts.Overrides[name] = kv
	}
	opts.Overrides["txn"] = small
	opts.Overrides["lat"] = map[string]string{"message.timestamp.type": "LogAppendTime", "index.interval.bytes": "100"}
	d, err := engine.OpenLogDir(vfs.OS, dir, opts)
	require.NoError(t, err)
	ed := engineData{dir: dir, d: d, leo: map[string]int64{}}

	for _, name := range []string{"plain", "gz", "snap", "lz", "zs", "lat"} {
		tp, err := d.CreateTopic(name, 2)
		require.NoError(t, err)
		for _, p := range tp.Partitions() {
			n := 0
			for a := range appends {
				var recs []record.Record
				for i := range 1 + a%7 {
					r := record.Record{Timestamp: 1_700_000_000_000 + int64(n*10) - int64(i%3), Value: []byte(fmt.Sprintf("%s value %d %s", name, n, strings.Repeat("x", a*7%90)))}
					if n%3 != 0 {
						r.Key = []byte(fmt.Sprintf("key-%d", n%11))
					}
					if n%5 == 0 {
						r.Headers = []record.Header{{Key: "h", Value: []byte("v")}}
					}
					recs = append(recs, r)
					n++
				}
				_, _, err := p.Append(recs)
				require.NoError(t, err)
			}
			// Appends larger than max.message.bytes split into several batches.
			var big []record.Record
			for i := range 12 {
				big = append(big, record.Record{Timestamp: -1, Value: bytes.Repeat([]byte{byte('a' + i)}, 300)})
			}
			_, _, err := p.Append(big)
			require.NoError(t, err)
		}
	}

	// Producer batches with transactions.
	tp, err := d.CreateTopic("txn", 1)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	appendRaw := func(spec record.BatchSpec, recs []record.Record) {
		raw, err := record.Encode(nil, spec, recs)
		require.NoError(t, err)
		_, _, err = p.AppendBatch(raw)
		require.NoError(t, err)
	}
	marker := func(pid int64, typ int16) {
		raw, err := record.EncodeControlBatch(nil, txnSpec(pid, -1), 0, 1_700_000_000_500, typ, 3)
		require.NoError(t, err)
		_, _, err = p.AppendBatch(raw)
		require.NoError(t, err)
	}
	for round := range 10 {
		for _, pid := range []int64{100, 200} {
			spec := txnSpec(pid, int32(round*2))
			spec.Codec = record.Codec(round % 5)
			appendRaw(spec, []record.Record{
				{Offset: 0, Timestamp: 1_700_000_000_000 + int64(round), Key: []byte("k"), Value: []byte(fmt.Sprintf("txn %d round %d a", pid, round))},
				{Offset: 1, Timestamp: 1_700_000_000_000 + int64(round), Key: []byte("k"), Value: []byte(fmt.Sprintf("txn %d round %d b", pid, round))},
			})
		}
		marker(100, record.ControlCommit)
		marker(200, record.ControlAbort)
	}

	// Compact a sealed segment of plain-0: keep every other batch, byte for
	// byte, under the segment's base (Kafka's swap protocol).
	plain, err := d.Topic("plain")
	require.NoError(t, err)
	p0, err := plain.Partition(0)
	require.NoError(t, err)
	segs := p0.Segments()
	require.Greater(t, len(segs), 2, "small segment.bytes makes several segments")
	snap := p0.Snapshot()
	old := snap.Segments[1]
	w, err := p0.NewCleanedSegment(old.BaseOffset())
	require.NoError(t, err)
	kept := 0
	for pos, i := int64(0), 0; pos < old.Size(); i++ {
		b, err := old.ReadBatch(pos, nil)
		require.NoError(t, err)
		if i%2 == 1 {
			require.NoError(t, w.AppendBatch(b.Raw))
			kept++
		}
		pos += int64(b.Size())
	}
	snap.Release()
	require.Positive(t, kept)
	require.NoError(t, w.Finish())
	require.NoError(t, p0.ReplaceSegments([]int64{segs[1].BaseOffset}, []*engine.SegmentWriter{w}))

	// Retention on plain-1 leaves .deleted files for file.delete.delay.ms.
	p1, err := plain.Partition(1)
	require.NoError(t, err)
	_, err = p1.DeleteOldestSegments(1, "test")
	require.NoError(t, err)

	for _, p := range d.Partitions() {
		require.NoError(t, p.Flush())
		ed.leo[fmt.Sprintf("%s-%d", p.Topic(), p.ID())] = p.LogEndOffset()
	}
	return ed
}

func assertCheckPasses(t *testing.T, ed engineData, stage string) CheckReport {
	t.Helper()
	var out bytes.Buffer
	rep, err := Check(&out, ed.dir, CheckOptions{})
	require.NoError(t, err)
	require.Empty(t, rep.Problems(), "%s:\n%s", stage, out.String())
	for _, p := range rep.Partitions {
		name := fmt.Sprintf("%s-%d", p.Topic, p.Partition)
		assert.Equal(t, ed.leo[name], p.NextOffset, "%s: %s log end", stage, name)
	}
	return rep
}

func TestCheckAndDumpWhatTheEngineWrites(t *testing.T) {
	ed := writeEngineData(t, 40)
	// While open (active segments with preallocated, untrimmed indexes).
	rep := assertCheckPasses(t, ed, "open")
	var deleted int
	for _, p := range rep.Partitions {
		for _, w := range p.Warnings {
			if strings.Contains(w.Message, "pending deletion") {
				deleted++
			}
		}
	}
	assert.Positive(t, deleted, "retention left .deleted files, reported as warnings")
	require.NoError(t, ed.d.Close())
	rep = assertCheckPasses(t, ed, "closed")
	assert.Greater(t, rep.Segments, int64(20))

	// Every file dumps without an error; the txn index holds the aborts.
	var files []string
	require.NoError(t, filepath.WalkDir(ed.dir, func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() && filepath.Base(filepath.Dir(p)) != "data" {
			files = append(files, p)
		}
		return err
	}))
	var out, errOut bytes.Buffer
	require.NoError(t, Dump(&out, &errOut, files, DumpOptions{DeepIteration: true}), errOut.String())
	assert.Equal(t, 10, strings.Count(out.String(), "endTxnMarker: ABORT coordinatorEpoch: 3"))
	assert.Equal(t, 10, strings.Count(out.String(), "endTxnMarker: COMMIT coordinatorEpoch: 3"))
	assert.Equal(t, 10, strings.Count(out.String(), "version: 0 producerId: 200 firstOffset: "))
	assert.NotContains(t, errOut.String(), "Found timestamp mismatch")
	assert.NotContains(t, errOut.String(), "not found in the log")
	assert.NotContains(t, errOut.String(), "out of order timestamp")
}

func TestCheckRepairOnEngineCrashImage(t *testing.T) {
	ed := writeEngineData(t, 20)
	require.NoError(t, ed.d.Close())
	// A torn append on the active segment of gz-0, as a crash leaves it.
	gz := filepath.Join(ed.dir, "gz-0")
	entries, err := os.ReadDir(gz)
	require.NoError(t, err)
	var last string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".log") {
			last = filepath.Join(gz, e.Name())
		}
	}
	st, err := os.Stat(last)
	require.NoError(t, err)
	f, err := os.OpenFile(last, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.Write(bytes.Repeat([]byte{0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 1, 0}, 3))
	require.NoError(t, err)
	require.NoError(t, f.Close())

	var out bytes.Buffer
	rep, err := Check(&out, ed.dir, CheckOptions{})
	require.NoError(t, err)
	require.Len(t, rep.Problems(), 1, out.String())
	assert.Equal(t, last, rep.Problems()[0].Path)
	assert.Equal(t, st.Size(), rep.Problems()[0].Position)

	out.Reset()
	rep, err = Check(&out, ed.dir, CheckOptions{Repair: true})
	require.NoError(t, err, out.String())
	assert.Empty(t, rep.Problems(), out.String())
	assert.Equal(t, []string{"gz-0"}, rep.Repaired)
	st2, err := os.Stat(last)
	require.NoError(t, err)
	assert.Equal(t, st.Size(), st2.Size())

	// The repaired directory mounts again with the same log end.
	d, err := engine.OpenLogDir(vfs.OS, ed.dir, engine.LogDirOptions{Logger: quiet(), ReadOnly: true})
	require.NoError(t, err)
	tp, err := d.Topic("gz")
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	assert.Equal(t, ed.leo["gz-0"], p.LogEndOffset())
	require.NoError(t, d.Close())
}

func TestCheckRepairRefusesALockedDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	d, err := engine.OpenLogDir(vfs.OS, dir, engine.LogDirOptions{Logger: quiet()})
	require.NoError(t, err)
	defer d.Close()
	tp, err := d.CreateTopic("t", 1)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	_, _, err = p.Append([]record.Record{{Timestamp: -1, Value: []byte("v")}})
	require.NoError(t, err)
	require.NoError(t, p.Flush())

	// Nothing to repair: refused all the same (it used to return OK).
	var out bytes.Buffer
	_, err = Check(&out, dir, CheckOptions{Repair: true})
	require.ErrorIs(t, err, engine.ErrLocked, "the mount holds the data dir")
	_, err = Check(&out, filepath.Join(dir, "t-0"), CheckOptions{Repair: true})
	require.ErrorIs(t, err, engine.ErrLocked, "a partition directory of a mounted data dir")

	logPath := filepath.Join(dir, "t-0", "00000000000000000000.log")
	f, err := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte{1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 99, 1, 1, 1, 1, 1})
	require.NoError(t, err)
	require.NoError(t, f.Close())
	before, err := os.ReadFile(logPath)
	require.NoError(t, err)
	_, err = Check(&out, dir, CheckOptions{Repair: true})
	require.ErrorIs(t, err, engine.ErrLocked)
	after, err := os.ReadFile(logPath)
	require.NoError(t, err)
	assert.Equal(t, before, after, "a refused repair writes nothing")
	rep, err := Check(&out, dir, CheckOptions{})
	require.NoError(t, err, "check without --repair reads a mounted directory")
	assert.NotEmpty(t, rep.Problems())
}

// fileBytes reads every file of dir by name.
func fileBytes(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	out := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		out[e.Name()] = b
	}
	return out
}

// readAllValues reads a partition through the engine: offset -> value.
func readAllValues(t *testing.T, p *engine.Partition) map[int64]string {
	t.Helper()
	r := p.NewReader(p.LogStartOffset(), engine.ReaderOptions{})
	defer r.Close()
	out := map[int64]string{}
	for {
		b, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		recs, err := b.Records(nil)
		require.NoError(t, err)
		for _, rec := range recs {
			out[rec.Offset] = string(rec.Value)
		}
	}
}

// TestCheckRepairCorruptSealedSegment flips one bit in the middle of a
// sealed segment of a multi-segment log. check names the segment and
// position and prints the plan without writing; --repair moves exactly the
// damaged batch aside and keeps every other record at its offset; later
// segments are byte-identical (it used to truncate there and drop them).
func TestCheckRepairCorruptSealedSegment(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	d, err := engine.OpenLogDir(vfs.OS, dir, engine.LogDirOptions{Logger: quiet(),
		Overrides: map[string]map[string]string{"c": {"segment.bytes": "1024", "index.interval.bytes": "100"}}})
	require.NoError(t, err)
	tp, err := d.CreateTopic("c", 1)
	require.NoError(t, err)
	p, err := tp.Partition(0)
	require.NoError(t, err)
	for i := range 60 {
		_, _, err := p.Append([]record.Record{{Timestamp: int64(1000 + i), Value: []byte(fmt.Sprintf("record %03d %s", i, strings.Repeat("-", 40)))}})
		require.NoError(t, err)
	}
	want := readAllValues(t, p)
	leo := p.LogEndOffset()
	segs := p.Segments()
	require.Greater(t, len(segs), 3)
	require.NoError(t, d.Close())

	partDir := filepath.Join(dir, "c-0")
	victim := segs[1]
	name := fmt.Sprintf("%020d", victim.BaseOffset)
	logPath := filepath.Join(partDir, name+".log")
	data, err := os.ReadFile(logPath)
	require.NoError(t, err)
	pos := batchPositions(t, data)
	require.Greater(t, len(pos), 3)
	bad, end := pos[len(pos)/2], pos[len(pos)/2+1]
	badOffset := victim.BaseOffset + int64(len(pos)/2) // one record per batch
	data[bad+70] ^= 0x01                               // one bit in the records
	require.NoError(t, os.WriteFile(logPath, data, 0o644))
	before := fileBytes(t, partDir)

	var out bytes.Buffer
	rep, err := Check(&out, dir, CheckOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, rep.Problems())
	assert.Equal(t, logPath, rep.Problems()[0].Path, out.String())
	assert.Equal(t, bad, rep.Problems()[0].Position)
	aside := fmt.Sprintf("%s.log.damaged-%d-%d", name, bad, end)
	assert.Contains(t, out.String(), fmt.Sprintf("c-0: would move bytes %d..%d (%d bytes) of %s.log to %s; offset %d lost, between intact offsets %d and %d",
		bad, end, end-bad, name, aside, badOffset, badOffset-1, badOffset+1), out.String())
	assert.Contains(t, out.String(), fmt.Sprintf("c-0: would rewrite %s.log to its %d intact batches (%d records)", name, len(pos)-1, len(pos)-1))
	assert.Equal(t, before, fileBytes(t, partDir), "check without --repair writes nothing")

	out.Reset()
	rep, err = Check(&out, dir, CheckOptions{Repair: true})
	require.NoError(t, err, out.String())
	require.Empty(t, rep.Problems(), out.String())
	pr := partitionReport(t, rep, "c", 0)
	assert.Equal(t, leo, pr.NextOffset, "the log end is unchanged")
	assert.EqualValues(t, len(segs), pr.Segments, "every segment is kept")

	after := fileBytes(t, partDir)
	assert.Equal(t, data[bad:end], after[aside], "the damaged bytes, byte for byte")
	assert.Equal(t, append(data[:bad:bad], data[end:]...), after[name+".log"])
	for f, b := range before {
		if !strings.HasPrefix(f, name) {
			assert.Equal(t, b, after[f], "%s is untouched", f)
		}
	}
	// Rebuilt with the default index.interval.bytes (a mount's settings
	// are not known offline), so the offset index may be empty; the time
	// index holds at least the segment's final entry.
	assert.Contains(t, after, name+".index")
	assert.NotEmpty(t, after[name+".timeindex"])

	d, err = engine.OpenLogDir(vfs.OS, dir, engine.LogDirOptions{Logger: quiet()})
	require.NoError(t, err)
	p, err = interopTopicPartition(d, "c", 0)
	require.NoError(t, err)
	delete(want, badOffset)
	assert.Equal(t, want, readAllValues(t, p), "every intact record at its offset")
	first, _, err := p.Append([]record.Record{{Timestamp: -1, Value: []byte("after repair")}})
	require.NoError(t, err)
	assert.Equal(t, leo, first, "appends continue at the log end")
	require.NoError(t, d.Close())
	out.Reset()
	rep, err = Check(&out, dir, CheckOptions{})
	require.NoError(t, err)
	assert.Empty(t, rep.Problems(), out.String())
}

func interopTopicPartition(d *engine.LogDir, topic string, id int) (*engine.Partition, error) {
	tp, err := d.Topic(topic)
	if err != nil {
		return nil, err
	}
	return tp.Partition(id)
}
