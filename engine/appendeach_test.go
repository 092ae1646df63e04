package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
)

// groupsOf cuts makeRecs(from, Σsizes) into groups of the given sizes.
func groupsOf(from int, ts0 int64, sizes ...int) [][]record.Record {
	var out [][]record.Record
	for _, n := range sizes {
		out = append(out, makeRecs(from, n, ts0+int64(from)))
		from += n
	}
	return out
}

// batchBounds lists (first, last) offsets of every batch of the partition.
func batchBounds(t *testing.T, p *Partition) [][2]int64 {
	t.Helper()
	snap := p.Snapshot()
	defer snap.Release()
	var out [][2]int64
	for _, s := range snap.Segments {
		for pos := int64(0); ; {
			b, err := s.ReadBatch(pos, nil)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err)
			out = append(out, [2]int64{b.BaseOffset, b.LastOffset()})
			pos += int64(b.Size())
		}
	}
	return out
}

// logBytes concatenates the partition's .log files.
func logBytes(t *testing.T, fs vfs.FS, p *Partition) []byte {
	t.Helper()
	var out []byte
	for _, si := range p.Segments() {
		b, err := vfs.ReadFile(fs, p.segmentPaths(si.BaseOffset).log)
		require.NoError(t, err)
		out = append(out, b...)
	}
	return out
}

func TestAppendEachOffsetsAndBatches(t *testing.T) {
	clock := &fakeClock{t: time.UnixMilli(7_000_000)}
	cfg := testConfig()
	p := openTest(t, vfs.NewMem(), "/d/t-0", cfg, func(o *PartitionOptions) { o.Now = clock.Now })
	defer p.Close()

	first, last, err := p.AppendEach(nil)
	require.NoError(t, err)
	assert.Equal(t, int64(0), first)
	assert.Equal(t, int64(-1), last)

	groups := groupsOf(0, 100, 3, 0, 5, 1)
	groups[3][0].Timestamp = -1 // now
	first, last, err = p.AppendEach(groups)
	require.NoError(t, err)
	assert.Equal(t, int64(0), first)
	assert.Equal(t, int64(8), last)
	assert.Equal(t, [][2]int64{{0, 2}, {3, 7}, {8, 8}}, batchBounds(t, p), "one batch per non-empty group")
	got := readAll(t, p)
	require.Equal(t, seq(0, 9), offsetsOf(got))
	for i, r := range got[:8] {
		assert.Equal(t, fmt.Sprintf("value-%06d", i), string(r.Value))
		assert.Equal(t, int64(100+i), r.Timestamp)
	}
	assert.Equal(t, int64(7_000_000), got[8].Timestamp)
	st := p.Stats()
	assert.Equal(t, int64(9), st.RecordsAppended)
	assert.Equal(t, int64(3), st.BatchesAppended)

	first, last, err = p.AppendEach([][]record.Record{{}, nil})
	require.NoError(t, err)
	assert.Equal(t, int64(9), first)
	assert.Equal(t, int64(8), last)

	// The caller's records are not modified (Offset and Timestamp stay).
	assert.Equal(t, int64(0), groups[2][0].Offset)
	assert.Equal(t, int64(-1), groups[3][0].Timestamp)
}

// TestAppendEachMatchesAppend: AppendEach writes exactly the bytes Append of
// each group in turn writes, whatever the codec, timestamp type and limits.
func TestAppendEachMatchesAppend(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 100) // 1600 bytes
	mixed := func(from int) []record.Record {
		rs := makeRecs(from, 7, 500)
		rs[1].Key = nil
		rs[2].Value = nil
		rs[3].Value = big
		rs[4].Headers = []record.Header{{Key: "h", Value: []byte("v")}, {Key: "n", Value: nil}}
		rs[5].Timestamp = -1
		rs[6].Key = []byte{}
		return rs
	}
	for _, codec := range []string{"none", "lz4", "zstd"} {
		for _, tsType := range []string{"CreateTime", "LogAppendTime"} {
			t.Run(codec+"/"+tsType, func(t *testing.T) {
				cfg := testConfig()
				cfg.SegmentBytes = 8 << 10
				cfg.MaxMessageBytes = 3000
				cfg.CompressionType = codec
				cfg.MessageTimestampType = tsType
				var groups [][]record.Record
				for g := 0; g < 12; g++ {
					groups = append(groups, mixed(g*7))
				}
				groups = append(groups, makeRecs(84, 40, 9)) // split by max.message.bytes
				run := func(each bool) ([]byte, PartitionStats) {
					clock := &fakeClock{t: time.UnixMilli(9_000_000)}
					fs := vfs.NewMem()
					p := openTest(t, fs, "/d/t-0", cfg, func(o *PartitionOptions) { o.Now = clock.Now })
					defer p.Close()
					if each {
						first, last, err := p.AppendEach(groups)
						require.NoError(t, err)
						assert.Equal(t, int64(0), first)
						assert.Equal(t, int64(123), last)
					} else {
						for _, g := range groups {
							_, _, err := p.Append(g)
							require.NoError(t, err)
						}
					}
					checkIndexes(t, p)
					return logBytes(t, fs, p), p.Stats()
				}
				want, wantSt := run(false)
				got, gotSt := run(true)
				require.Equal(t, want, got)
				assert.Equal(t, wantSt.BytesAppended, gotSt.BytesAppended)
				assert.Equal(t, wantSt.BatchesAppended, gotSt.BatchesAppended)
				assert.Equal(t, wantSt.Rolls, gotSt.Rolls)
				if codec == "none" {
					assert.Positive(t, gotSt.Rolls)
				}
			})
		}
	}
}

func TestAppendEachRollsInTheMiddle(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 10
	cfg.IndexIntervalBytes = 100
	p := openTest(t, fs, "/d/t-0", cfg)
	var sizes []int
	for i := 0; i < 40; i++ {
		sizes = append(sizes, 1+i%4)
	}
	groups := groupsOf(0, 1, sizes...)
	first, last, err := p.AppendEach(groups)
	require.NoError(t, err)
	assert.Equal(t, int64(0), first)
	assert.Equal(t, int64(99), last)
	segs := p.Segments()
	require.Greater(t, len(segs), 3, "segment.bytes forces rolls inside the call")
	for i, s := range segs {
		assert.LessOrEqual(t, s.Size, cfg.SegmentBytes)
		if i > 0 {
			assert.Equal(t, segs[i-1].NextOffset, s.BaseOffset)
		}
	}
	assert.Equal(t, int64(len(segs)-1), p.Stats().Rolls)
	require.Equal(t, seq(0, 100), offsetsOf(readAll(t, p)))
	checkIndexes(t, p)
	// Every group is one whole batch in one segment.
	var want [][2]int64
	off := int64(0)
	for _, n := range sizes {
		want = append(want, [2]int64{off, off + int64(n) - 1})
		off += int64(n)
	}
	assert.Equal(t, want, batchBounds(t, p))
	require.NoError(t, p.Close())

	p = openTest(t, fs, "/d/t-0", cfg, func(o *PartitionOptions) { o.CleanShutdown = false })
	defer p.Close()
	assert.Equal(t, int64(100), p.LogEndOffset())
	require.Equal(t, seq(0, 100), offsetsOf(readAll(t, p)))
	checkIndexes(t, p)
}

func TestAppendEachRejectsTooLargeGroup(t *testing.T) {
	cfg := testConfig()
	cfg.MaxMessageBytes = 1000
	p := openTest(t, vfs.NewMem(), "/d/t-0", cfg)
	defer p.Close()
	groups := groupsOf(0, 1, 4, 4, 4, 4)
	groups[2][1].Value = make([]byte, 2000)
	first, last, err := p.AppendEach(groups)
	require.ErrorIs(t, err, ErrRecordTooLarge)
	assert.Equal(t, int64(0), first)
	assert.Contains(t, []int64{-1, 3, 7}, last, "only whole groups before the failing one")
	assert.Equal(t, last+1, p.LogEndOffset())
	require.Equal(t, seq(0, last+1), offsetsOf(readAll(t, p)))

	// Still appendable, and the failing group's records never show up.
	f2, l2, err := p.AppendEach(groupsOf(100, 1, 2, 3))
	require.NoError(t, err)
	assert.Equal(t, last+1, f2)
	assert.Equal(t, last+5, l2)
	got := readAll(t, p)
	require.Equal(t, seq(0, last+6), offsetsOf(got))
	for _, r := range got {
		assert.Less(t, len(r.Value), 1000)
	}
}

func TestAppendEachFlushMessages(t *testing.T) {
	cfg := testConfig()
	cfg.FlushMessages = 5
	p := openTest(t, vfs.NewMem(), "/d/t-0", cfg)
	defer p.Close()
	_, _, err := p.AppendEach(groupsOf(0, 1, 2, 2))
	require.NoError(t, err)
	assert.Equal(t, int64(0), p.RecoveryPoint(), "4 records < flush.messages")
	_, last, err := p.AppendEach(groupsOf(4, 1, 1))
	require.NoError(t, err)
	assert.Equal(t, last+1, p.RecoveryPoint(), "the 5th record flushes")
	flushes := p.Stats().Flushes
	_, last, err = p.AppendEach(groupsOf(5, 1, 3, 3, 3, 3))
	require.NoError(t, err)
	assert.Equal(t, last+1, p.RecoveryPoint())
	assert.Equal(t, flushes+1, p.Stats().Flushes, "one flush per call")

	cfg.FlushMessages = math.MaxInt64
	p.SetConfig(cfg)
	_, _, err = p.AppendEach(groupsOf(17, 1, 3, 3))
	require.NoError(t, err)
	assert.Equal(t, last+1, p.RecoveryPoint())
}

// TestAppendEachWriteFailure: a failed write leaves no partial batch visible;
// the log stays appendable in the same process and recoverable after a crash.
func TestAppendEachWriteFailure(t *testing.T) {
	for _, tc := range []struct {
		name    string
		written int
		failTru bool // the truncate after the failed write fails too
	}{
		{"nothing written", 0, false},
		{"short write", 100, false},
		{"short write, truncate fails", 150, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			sw := &vfs.Switchable{}
			fs := vfs.NewErrorFS(mem, sw)
			cfg := testConfig()
			p := openTest(t, fs, "/d/t-0", cfg)
			defer p.Close()
			_, _, err := p.AppendEach(groupsOf(0, 1, 5))
			require.NoError(t, err)
			require.NoError(t, p.Flush())
			writes := 0
			sw.Set(vfs.InjectorFunc(func(op vfs.Op) *vfs.Fault {
				switch op.Kind {
				case vfs.OpWrite, vfs.OpWriteAt:
					if writes++; writes == 1 {
						return &vfs.Fault{Err: enospc, Written: tc.written}
					}
				case vfs.OpTruncate:
					if tc.failTru {
						return &vfs.Fault{Err: enospc}
					}
				}
				return nil
			}))
			first, last, err := p.AppendEach(groupsOf(5, 1, 5, 5, 5))
			require.ErrorIs(t, err, enospc)
			sw.Set(nil)
			assert.Equal(t, int64(5), first)
			leo := p.LogEndOffset()
			assert.Equal(t, last+1, leo)
			assert.Zero(t, leo%5, "no partial group")
			got := readAll(t, p)
			require.Equal(t, seq(0, leo), offsetsOf(got))

			// Appendable: the next call continues at the log end.
			f2, l2, err := p.AppendEach(groupsOf(int(leo), 1, 5))
			require.NoError(t, err)
			assert.Equal(t, leo, f2)
			assert.Equal(t, leo+4, l2)
			require.NoError(t, p.Flush())
			require.Equal(t, seq(0, leo+5), offsetsOf(readAll(t, p)))
			for i, r := range readAll(t, p) {
				require.Equal(t, fmt.Sprintf("value-%06d", i), string(r.Value))
			}

			// Recoverable: a crash now keeps exactly what was flushed.
			q := openTest(t, mem.Crash(), "/d/t-0", cfg)
			defer q.Close()
			assert.Equal(t, leo+5, q.LogEndOffset())
			require.Equal(t, seq(0, leo+5), offsetsOf(readAll(t, q)))
			checkIndexes(t, q)
		})
	}
}

// TestAppendEachPartialWriteRecovered: a short write whose garbage cannot be
// truncated, then fsynced by a flush, is cut off by recovery.
func TestAppendEachPartialWriteRecovered(t *testing.T) {
	mem := vfs.NewMem()
	sw := &vfs.Switchable{}
	cfg := testConfig()
	p := openTest(t, vfs.NewErrorFS(mem, sw), "/d/t-0", cfg)
	_, _, err := p.AppendEach(groupsOf(0, 1, 3, 3))
	require.NoError(t, err)
	sw.Set(vfs.InjectorFunc(func(op vfs.Op) *vfs.Fault {
		switch op.Kind {
		case vfs.OpWriteAt:
			return &vfs.Fault{Err: enospc, Written: op.Len - 7}
		case vfs.OpTruncate:
			return &vfs.Fault{Err: enospc}
		}
		return nil
	}))
	_, last, err := p.AppendEach(groupsOf(6, 1, 3, 3))
	require.ErrorIs(t, err, enospc)
	sw.Set(nil)
	require.NoError(t, p.Flush()) // makes the garbage durable too
	q := openTest(t, mem.Crash(), "/d/t-0", cfg)
	defer q.Close()
	// Whole batches that reached the disk before the cut may be recovered
	// (never acknowledged, like a broker's after a crash); the cut one is not.
	leo := q.LogEndOffset()
	assert.GreaterOrEqual(t, leo, last+1)
	assert.Less(t, leo, int64(12))
	assert.Zero(t, leo%3, "no partial group")
	got := readAll(t, q)
	require.Equal(t, seq(0, leo), offsetsOf(got))
	for i, r := range got {
		require.Equal(t, fmt.Sprintf("value-%06d", i), string(r.Value))
	}
	_, _, err = q.AppendEach(groupsOf(int(leo), 1, 2))
	require.NoError(t, err)
	require.Equal(t, seq(0, leo+2), offsetsOf(readAll(t, q)))
	checkIndexes(t, q)
	p.Close()
}

// TestAppendEachCrashAtEveryOp: whatever operation a crash stops at, the
// recovered log holds whole groups only, at least those acknowledged by a
// flush, and takes appends again.
func TestAppendEachCrashAtEveryOp(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 1 << 10
	cfg.IndexIntervalBytes = 100
	const dir = "/data/t-0"
	scenario := func(fs vfs.FS) (acked int64) {
		p, err := OpenPartition(fs, dir, "t", 0, PartitionOptions{Config: cfg, RecoveryPoint: -1,
			LogStartOffset: -1, FirstDirty: -1, Logger: quietLogger()})
		if err != nil {
			return 0
		}
		defer p.Close()
		for i := 0; i < 8; i++ {
			_, last, err := p.AppendEach(groupsOf(i*15, 1, 5, 5, 5))
			if err != nil {
				return acked
			}
			if i%2 == 1 {
				if p.Flush() != nil {
					return acked
				}
				acked = last + 1
			}
		}
		return acked
	}
	counter := vfs.NewCounter()
	require.Equal(t, int64(120), scenario(vfs.NewErrorFS(vfs.NewMem(), counter)))
	n := counter.Count()
	for i := int64(0); i < n; i++ {
		mem := vfs.NewMem()
		acked := scenario(vfs.NewErrorFS(mem, vfs.CrashAt(i)))
		p := openTest(t, mem.Crash(), dir, cfg)
		leo := p.LogEndOffset()
		require.GreaterOrEqual(t, leo, acked, "crash at op %d lost acknowledged records", i)
		require.Zero(t, leo%5, "crash at op %d: log ends inside a group", i)
		got := readAll(t, p)
		require.Equal(t, seq(0, leo), offsetsOf(got), "crash at op %d", i)
		for j, r := range got {
			require.Equal(t, fmt.Sprintf("value-%06d", j), string(r.Value))
		}
		checkIndexes(t, p)
		_, _, err := p.AppendEach(groupsOf(int(leo), 1, 5))
		require.NoError(t, err)
		require.NoError(t, p.Close())
	}
}

// TestAppendNearLimitRecords: records whose size bound exceeds
// max.message.bytes but whose exact batch fits are appended intact, next to
// small ones, whatever the codec.
func TestAppendNearLimitRecords(t *testing.T) {
	for _, codec := range []string{"none", "lz4"} {
		t.Run(codec, func(t *testing.T) {
			cfg := testConfig()
			cfg.MaxMessageBytes = 1000
			cfg.CompressionType = codec
			p := openTest(t, vfs.NewMem(), "/d/t-0", cfg)
			defer p.Close()
			var recs []record.Record
			for i := range 12 {
				n := 100
				if i%3 == 1 {
					n = 920 + i // bound + header > 1000, exact batch < 1000
				}
				v := make([]byte, n)
				for j := range v {
					v[j] = byte('a' + (i+j)%26)
				}
				recs = append(recs, record.Record{Timestamp: 5, Value: v})
			}
			first, last, err := p.Append(recs)
			require.NoError(t, err)
			assert.Equal(t, int64(0), first)
			assert.Equal(t, int64(11), last)
			_, _, err = p.AppendEach([][]record.Record{recs[:2], recs[2:5], recs[5:]})
			require.NoError(t, err)
			got := readAll(t, p)
			require.Len(t, got, 24)
			for i, r := range got {
				require.Equal(t, recs[i%12].Value, r.Value, "record %d", i)
			}
			checkIndexes(t, p)
		})
	}
}
