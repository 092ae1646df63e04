package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/engine/vfs"
	"github.com/topicfs/topicfs/internal/testutil"
)

// scanBase is the base offset of the segments these tests build; the next
// segment starts at scanNext.
const (
	scanBase = 1000
	scanNext = 2000
)

type builtBatch struct{ pos, size, base, last int64 }

// buildSegment encodes n batches of 1 to 4 records (every fifth gzip),
// starting at scanBase, with a one-offset compaction gap after batch 7.
func buildSegment(t testing.TB, n int) ([]byte, []builtBatch) {
	t.Helper()
	var data []byte
	var out []builtBatch
	off := int64(scanBase)
	for i := range n {
		spec := record.NewBatchSpec(off)
		if i%5 == 4 {
			spec.Codec = record.Gzip
		}
		var recs []record.Record
		for j := range 1 + i%4 {
			recs = append(recs, record.Record{Offset: off + int64(j), Timestamp: int64(1_000_000 + i*10 + j),
				Value: []byte(fmt.Sprintf("value %d.%d", i, j))})
		}
		pos := int64(len(data))
		var err error
		data, err = record.Encode(data, spec, recs)
		require.NoError(t, err)
		out = append(out, builtBatch{pos: pos, size: int64(len(data)) - pos, base: off, last: off + int64(len(recs)) - 1})
		off += int64(len(recs))
		if i == 7 {
			off++
		}
	}
	return data, out
}

func planBytes(t testing.TB, data []byte, hasNext bool) SegmentPlan {
	t.Helper()
	lim := ScanLimits{Base: scanBase, Limit: 1 << 62}
	if hasNext {
		lim.Limit, lim.HasNext = scanNext, true
	}
	plan, err := PlanSegment(bytes.NewReader(data), int64(len(data)), lim)
	require.NoError(t, err)
	return plan
}

// keptBatches walks the kept spans of a plan over data, batch by batch.
func keptBatches(t testing.TB, data []byte, p SegmentPlan) []scanBatch {
	t.Helper()
	var out []scanBatch
	for _, sp := range p.Kept {
		for pos := sp.Pos; pos < sp.End; {
			require.LessOrEqual(t, pos+12, sp.End)
			size := 12 + int64(binary.BigEndian.Uint32(data[pos+8:]))
			require.LessOrEqual(t, pos+size, sp.End, "kept spans hold whole batches")
			b, err := record.Parse(data[pos : pos+size])
			require.NoError(t, err)
			require.NoError(t, b.Verify())
			recs, err := b.Records(nil)
			require.NoError(t, err)
			out = append(out, scanBatch{Pos: pos, Size: size, Base: recs[0].Offset, Last: b.LastOffset(), Records: int64(len(recs))})
			pos += size
		}
	}
	return out
}

func keptPositions(t testing.TB, data []byte, p SegmentPlan) []int64 {
	var out []int64
	for _, k := range keptBatches(t, data, p) {
		out = append(out, k.Pos)
	}
	return out
}

func allBut(bs []builtBatch, skip ...int) []int64 {
	var out []int64
	for i, b := range bs {
		if !slices.Contains(skip, i) {
			out = append(out, b.pos)
		}
	}
	return out
}

func TestPlanSegmentKeepsEveryIntactBatch(t *testing.T) {
	orig, bs := buildSegment(t, 16)
	cases := []struct {
		name    string
		damage  func(d []byte) []byte
		kept    []int64
		damaged [][2]int64
	}{
		{"healthy", func(d []byte) []byte { return d }, allBut(bs), nil},
		{"one bit in the records of batch 5", func(d []byte) []byte { d[bs[5].pos+bs[5].size-3] ^= 0x04; return d },
			allBut(bs, 5), [][2]int64{{bs[5].pos, bs[5].pos + bs[5].size}}},
		{"length field of batch 3 grown to cover batch 4", func(d []byte) []byte {
			binary.BigEndian.PutUint32(d[bs[3].pos+8:], uint32(bs[3].size+bs[4].size-12))
			return d
		}, allBut(bs, 3), [][2]int64{{bs[3].pos, bs[3].pos + bs[3].size}}},
		{"zeros over batches 8 to 10", func(d []byte) []byte {
			clear(d[bs[8].pos+20 : bs[10].pos+30])
			return d
		}, allBut(bs, 8, 9, 10), [][2]int64{{bs[8].pos, bs[11].pos}}},
		{"torn tail", func(d []byte) []byte { return append(d, d[:40]...) }, allBut(bs), [][2]int64{{int64(len(orig)), int64(len(orig)) + 40}}},
		{"first batch damaged", func(d []byte) []byte { d[30] ^= 0xff; return d }, allBut(bs, 0), [][2]int64{{0, bs[1].pos}}},
		{"base offset of batch 6 beyond the next segment", func(d []byte) []byte {
			binary.BigEndian.PutUint64(d[bs[6].pos:], scanNext)
			return d
		}, allBut(bs, 6), [][2]int64{{bs[6].pos, bs[7].pos}}},
		{"base offset of batch 10 raised by one, into batch 11's offsets", func(d []byte) []byte {
			binary.BigEndian.PutUint64(d[bs[10].pos:], uint64(bs[10].base+1))
			return d
		}, allBut(bs, 10), [][2]int64{{bs[10].pos, bs[11].pos}}},
		{"base offset of batch 9 lowered below batch 7's", func(d []byte) []byte {
			binary.BigEndian.PutUint64(d[bs[9].pos:], uint64(bs[7].base))
			return d
		}, allBut(bs, 9), [][2]int64{{bs[9].pos, bs[10].pos}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := tc.damage(slices.Clone(orig))
			plan := planBytes(t, data, true)
			assert.Equal(t, tc.kept, keptPositions(t, data, plan))
			var got [][2]int64
			for _, r := range plan.Damaged {
				got = append(got, [2]int64{r.Pos, r.End})
			}
			assert.Equal(t, tc.damaged, got)
			requirePlanInvariants(t, orig, data, bs, plan, true)
		})
	}
}

// TestPlanSegmentNamesAnAmbiguousConflict: a one-record batch whose base
// offset field (outside the CRC) now claims the next batch's offset. Both
// verify and nothing tells which is right, so both move aside and the plan
// names them.
func TestPlanSegmentNamesAnAmbiguousConflict(t *testing.T) {
	var data []byte
	var bs []builtBatch
	for i := range 6 {
		pos := int64(len(data))
		var err error
		data, err = record.Encode(data, record.NewBatchSpec(scanBase+int64(i)),
			[]record.Record{{Offset: scanBase + int64(i), Timestamp: 5, Value: []byte{byte('a' + i)}}})
		require.NoError(t, err)
		bs = append(bs, builtBatch{pos: pos, size: int64(len(data)) - pos, base: scanBase + int64(i), last: scanBase + int64(i)})
	}
	orig := slices.Clone(data)
	binary.BigEndian.PutUint64(data[bs[2].pos:], scanBase+3) // batch 2 now claims offset 1003
	plan := planBytes(t, data, false)
	assert.Equal(t, allBut(bs, 2, 3), keptPositions(t, data, plan))
	require.Len(t, plan.Damaged, 1)
	r := plan.Damaged[0]
	assert.Equal(t, [2]int64{bs[2].pos, bs[4].pos}, [2]int64{r.Pos, r.End})
	assert.Equal(t, []DroppedBatch{
		{Pos: bs[2].pos, Size: bs[2].size, Base: scanBase + 3, Last: scanBase + 3, ConflictPos: bs[3].pos},
		{Pos: bs[3].pos, Size: bs[3].size, Base: scanBase + 3, Last: scanBase + 3, ConflictPos: bs[2].pos},
	}, r.Dropped)
	requirePlanInvariants(t, orig, data, bs, plan, false)
}

// requirePlanInvariants checks what every repair plan guarantees, whatever
// the damage:
//   - the kept batches and the damaged ranges cover the file exactly, in
//     order, without overlap;
//   - kept batches verify and their offsets increase within the limits;
//   - every original batch whose bytes are intact is kept at its position,
//     unless a batch whose base offset field was changed (it is outside
//     the CRC) claims its offsets: then it is named as dropped, conflicting
//     with that batch;
//   - carrying the plan out (applySegmentPlan) leaves a .log that scans
//     clean with the same batches, and aside files holding the damaged
//     bytes unchanged.
func requirePlanInvariants(t testing.TB, orig, data []byte, bs []builtBatch, plan SegmentPlan, hasNext bool) {
	t.Helper()
	type piece struct {
		pos, end int64
		kept     bool
	}
	var pieces []piece
	kept := keptBatches(t, data, plan)
	for _, k := range plan.Kept {
		pieces = append(pieces, piece{k.Pos, k.End, true})
	}
	for _, r := range plan.Damaged {
		require.Less(t, r.Pos, r.End)
		pieces = append(pieces, piece{r.Pos, r.End, false})
	}
	slices.SortFunc(pieces, func(a, b piece) int { return int(a.pos - b.pos) })
	at := int64(0)
	for _, p := range pieces {
		require.Equal(t, at, p.pos, "pieces cover the file in order: %+v", pieces)
		at = p.end
	}
	require.Equal(t, int64(len(data)), at)

	prev := int64(scanBase - 1)
	var records int64
	for _, k := range kept {
		require.Greater(t, k.Base, prev, "kept offsets increase")
		prev = k.Last
		records += k.Records
	}
	require.Equal(t, plan.KeptBatches, int64(len(kept)))
	require.Equal(t, plan.KeptRecords, records)

	intact := func(b builtBatch) bool {
		return b.pos+b.size <= int64(len(data)) && bytes.Equal(orig[b.pos:b.pos+b.size], data[b.pos:b.pos+b.size])
	}
	byPos := map[int64]builtBatch{}
	for _, b := range bs {
		byPos[b.pos] = b
	}
	keptPos := keptPositions(t, data, plan)
	for _, b := range bs {
		if !intact(b) || slices.Contains(keptPos, b.pos) {
			continue
		}
		var why *DroppedBatch
		for _, r := range plan.Damaged {
			for i := range r.Dropped {
				if r.Dropped[i].Pos == b.pos {
					why = &r.Dropped[i]
				}
			}
		}
		require.NotNil(t, why, "intact batch at %d (offsets %d..%d) was lost: plan %+v", b.pos, b.base, b.last, plan)
		other, ok := byPos[why.ConflictPos]
		require.True(t, ok, "the conflicting batch at %d is an original batch position", why.ConflictPos)
		require.False(t, bytes.Equal(orig[other.pos:other.pos+8], data[other.pos:other.pos+8]),
			"intact batch at %d dropped for a conflict with the batch at %d, whose base offset is unchanged", b.pos, other.pos)
	}

	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll("/p", 0o755))
	f, err := mem.OpenFile("/p/00000000000000001000.log", os.O_CREATE|os.O_RDWR, 0o644)
	require.NoError(t, err)
	_, err = f.WriteAt(data, 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	plan.Path = "/p/00000000000000001000.log"
	if len(plan.Damaged) == 0 {
		return
	}
	require.NoError(t, ApplySegmentPlan(mem, plan))
	fixed, err := vfs.ReadFile(mem, plan.Path)
	require.NoError(t, err)
	again := planBytes(t, fixed, hasNext)
	assert.Empty(t, again.Damaged, "the repaired .log scans clean")
	assert.Equal(t, plan.KeptRecords, again.KeptRecords)
	for _, r := range plan.Damaged {
		moved, err := vfs.ReadFile(mem, AsidePath(plan.Path, r))
		require.NoError(t, err)
		require.Equal(t, data[r.Pos:r.End], moved, "aside file of %d..%d", r.Pos, r.End)
	}
}

// FuzzRepairScanner corrupts a valid segment at random (flipped bytes,
// zeroed or overwritten ranges, a cut tail): the repair plan never loses a
// batch whose bytes are intact (except for a conflict with a changed base
// offset field, which it names), never panics, and carrying it out gives a
// clean .log and aside files with the damaged bytes. The seeds are in
// testdata/fuzz/FuzzRepairScanner.
func FuzzRepairScanner(f *testing.F) {
	orig, bs := buildSegment(f, 24)
	f.Fuzz(func(t *testing.T, script []byte, hasNext bool) {
		data := slices.Clone(orig)
		for len(script) >= 4 && len(data) > 0 {
			op, pos, arg := script[0], int(binary.BigEndian.Uint16(script[1:]))%len(data), script[3]
			script = script[4:]
			switch op % 4 {
			case 0: // flip bits
				data[pos] ^= arg | 1
			case 1: // zero a range
				clear(data[pos:min(len(data), pos+int(arg))])
			case 2: // overwrite a range with a pattern
				for i := pos; i < min(len(data), pos+int(arg)); i++ {
					data[i] = byte(i*31) ^ arg
				}
			case 3: // cut the tail
				data = data[:pos]
			}
		}
		plan := planBytes(t, data, hasNext)
		requirePlanInvariants(t, orig, data, bs, plan, hasNext)
	})
}

// TestPlanSegmentLegacyMessages: the resync scan finds legacy (magic 0 and
// 1) messages after a damaged one too.
func TestPlanSegmentLegacyMessages(t *testing.T) {
	for _, p := range []string{
		"kafka-go-fetch-v1v2-gzip-segmentio/extracted/v1c-v1-v1c/00000000000000000000.log",
		"kafka0110-zk-sharaweil/data/test0-0/00000000000000000000.log",
	} {
		orig, err := os.ReadFile(testutil.KafkaFixture(t, p))
		require.NoError(t, err)
		var bs []builtBatch
		for pos := int64(0); pos < int64(len(orig)); {
			b, err := record.ReadAt(bytes.NewReader(orig), pos, int64(len(orig)), nil)
			require.NoError(t, err)
			recs, err := b.Records(nil)
			require.NoError(t, err)
			bs = append(bs, builtBatch{pos: pos, size: int64(b.Size()), base: recs[0].Offset, last: b.LastOffset()})
			pos += int64(b.Size())
		}
		require.GreaterOrEqual(t, len(bs), 3, p)
		mid := len(bs) / 2
		data := slices.Clone(orig)
		data[bs[mid].pos+bs[mid].size-2] ^= 0x20
		plan, err := PlanSegment(bytes.NewReader(data), int64(len(data)), ScanLimits{Base: 0, Limit: 1 << 62})
		require.NoError(t, err)
		assert.Equal(t, allBut(bs, mid), keptPositions(t, data, plan), p)
		require.Len(t, plan.Damaged, 1, p)
		assert.Equal(t, [2]int64{bs[mid].pos, bs[mid].pos + bs[mid].size}, [2]int64{plan.Damaged[0].Pos, plan.Damaged[0].End}, p)
	}
}
