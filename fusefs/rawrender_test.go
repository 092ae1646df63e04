package fusefs

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"github.com/topicfs/topicfs/backend"
	"math"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
	"github.com/topicfs/topicfs/internal/testutil"
)

// rawRender renders batch b in plain format f the way a cursor does:
// putPlainRaw into room-byte buffers while it takes records, and the rest
// of the batch through RecordsInto when it stops at a record it does not
// take. It returns the rendering and how many records putPlainRaw took.
func rawRender(t *testing.T, b *record.Batch, f viewFormat, room int) ([]byte, int) {
	t.Helper()
	data := b.Raw[record.HeaderSize:]
	guarded := testutil.Guarded(t, data) // a read past data faults
	var out []byte
	p, left, done := 0, int(b.RecordCount), 0
	dst := make([]byte, 2+room)
	for left > 0 {
		n, np, m := putPlainRaw(dst, 2, guarded, p, left, f.nullMarker)
		out = append(out, dst[2:n]...)
		p, left, done = np, left-m, done+m
		if m == 0 {
			break
		}
	}
	fast := done
	if left > 0 || p != len(data) {
		recs, err := b.Records(nil)
		require.NoError(t, err)
		require.LessOrEqual(t, done, len(recs))
		for i := done; i < len(recs); i++ {
			out = f.appendRecord(out, &recs[i])
		}
	}
	return out, fast
}

func encodeBatch(t testing.TB, recs []record.Record, codec record.Codec) record.Batch {
	t.Helper()
	spec := record.NewBatchSpec(100)
	spec.Codec = codec
	raw, err := record.Encode(nil, spec, recs)
	require.NoError(t, err)
	b, err := record.Parse(raw)
	require.NoError(t, err)
	return b
}

func TestPutPlainRawMatchesRecords(t *testing.T) {
	rng := rand.New(rand.NewSource(11))
	simple := func(i int) record.Record {
		r := record.Record{Offset: 100 + int64(i), Timestamp: 1_700_000_000_000 + int64(i), Value: bytes.Repeat([]byte{'a' + byte(i%26)}, rng.Intn(300))}
		if rng.Intn(3) == 0 {
			r.Key = []byte(fmt.Sprint("k", rng.Intn(100)))
		}
		if rng.Intn(10) == 0 {
			r.Value = nil
		}
		return r
	}
	for _, tc := range []struct {
		name     string
		rec      func(i int) record.Record
		allFast  bool // putPlainRaw takes every record
		someFast bool
	}{
		{"simple", simple, true, true},
		{"empty values", func(i int) record.Record {
			return record.Record{Offset: 100 + int64(i), Timestamp: 5, Value: []byte{}}
		}, true, true},
		{"headers sometimes", func(i int) record.Record {
			r := simple(i)
			if i%7 == 3 {
				r.Headers = []record.Header{{Key: "h", Value: []byte("v")}}
			}
			return r
		}, false, true},
		{"3-byte value length", func(i int) record.Record {
			r := simple(i)
			if i%5 == 4 {
				r.Value = bytes.Repeat([]byte{'z'}, 9000)
			}
			return r
		}, false, true},
		{"far timestamps", func(i int) record.Record {
			r := simple(i)
			r.Timestamp = 1_700_000_000_000 + int64(i)*1_000_000_000
			return r
		}, false, true},
		{"random", func(i int) record.Record {
			r := randomRecord(rng)
			r.Offset = 100 + int64(i)
			return r
		}, false, false},
	} {
		for _, f := range []viewFormat{{}, {nullMarker: "NULL"}} {
			t.Run(fmt.Sprintf("%s/%+v", tc.name, f), func(t *testing.T) {
				recs := make([]record.Record, 60)
				for i := range recs {
					recs[i] = tc.rec(i)
				}
				b := encodeBatch(t, recs, record.None)
				require.True(t, rawEligible(&b, f))
				var want []byte
				for i := range recs {
					want = f.appendRecord(want, &recs[i])
				}
				if n, ok := measurePlainRaw(b.Raw[record.HeaderSize:], int(b.RecordCount), f.nullMarker); ok || tc.allFast {
					assert.True(t, ok)
					assert.Equal(t, int64(len(want)), n, "measured without rendering")
				}
				for _, room := range []int{1, 5, 64, 301, 4096, len(want) + 10} {
					got, fast := rawRender(t, &b, f, room)
					require.Equal(t, string(want), string(got), "room %d", room)
					if room > len(want) {
						if tc.allFast {
							assert.Equal(t, len(recs), fast, "every record straight from the batch")
						}
						if tc.someFast {
							assert.Positive(t, fast)
						}
					}
				}
			})
		}
	}
}

func TestRawEligible(t *testing.T) {
	recs := []record.Record{{Offset: 100, Value: []byte("x")}}
	plain := encodeBatch(t, recs, record.None)
	gz := encodeBatch(t, recs, record.Gzip)
	assert.True(t, rawEligible(&plain, viewFormat{}))
	assert.False(t, rawEligible(&plain, viewFormat{printKey: true}), "keys are rendered from records")
	assert.False(t, rawEligible(&plain, viewFormat{json: true}))
	assert.False(t, rawEligible(&gz, viewFormat{}), "compressed batches are decoded")
	spec := record.NewBatchSpec(100)
	spec.Control = true
	spec.ProducerID, spec.ProducerEpoch = 7, 0
	ctl, err := record.EncodeControlBatch(nil, spec, 100, 0, 1, 0)
	require.NoError(t, err)
	cb, err := record.Parse(ctl)
	require.NoError(t, err)
	assert.False(t, rawEligible(&cb, viewFormat{}))
}

// TestRawViewsMatchDecodedViews reads plain views of batches of every kind
// (compressed, with headers, long values, transactional with an aborted
// transaction) through a cursor, in reads of many sizes, against the
// rendering of the decoded records.
func TestRawViewsMatchDecodedViews(t *testing.T) {
	cfg := engine.DefaultConfig()
	cfg.SegmentBytes = 64 << 10
	p := openTestPartition(t, cfg)
	rng := rand.New(rand.NewSource(5))
	var all []record.Record
	for b := range 80 {
		batch := make([]record.Record, 1+rng.Intn(30))
		for i := range batch {
			r := record.Record{Timestamp: 1_700_000_000_000 + int64(len(all)+i), Value: fmt.Appendf(nil, "v%d-%s", len(all)+i, bytes.Repeat([]byte{'q'}, rng.Intn(200)))}
			switch rng.Intn(12) {
			case 0:
				r.Value = nil
			case 1:
				r.Headers = []record.Header{{Key: "a", Value: []byte("b")}}
			case 2:
				r.Value = bytes.Repeat([]byte{'L'}, 10000)
			}
			batch[i] = r
		}
		var (
			first int64
			err   error
		)
		if b%9 == 4 {
			for i := range batch {
				batch[i].Offset = 100 + int64(i)
			}
			gz := encodeBatch(t, batch, record.Gzip)
			first, _, err = p.AppendBatch(gz.Raw)
		} else {
			first, _, err = p.Append(batch)
		}
		require.NoError(t, err)
		for i := range batch {
			batch[i].Offset = first + int64(i)
		}
		all = append(all, batch...)
	}
	ps := newPartState(newFsys(nil, Options{}), asPart(p))
	for _, f := range []viewFormat{{}, {nullMarker: "-"}} {
		want := renderAll(f, all, 3)
		st, err := newViewState(context.Background(), ps, f, snapshotFrom(ps.p, backend.FromStart), func(*backend.Snapshot) (int64, error) { return 3, nil })
		require.NoError(t, err)
		require.Equal(t, int64(len(want)), st.size())
		for _, size := range []int{1, 7, 100, 4096, 65536, 1 << 20} {
			var c cursor
			got := readWholeView(t, st, &c, make([]byte, size), true)
			require.Equal(t, len(want), len(got), "%+v in %d-byte reads", f, size)
			require.True(t, bytes.Equal(want, got), "%+v in %d-byte reads", f, size)
			c.rd.free()
		}
		st.release()
	}
}

// FuzzPutPlainRaw feeds arbitrary record sections: putPlainRaw never
// panics, never reads past them (they end where an unreadable page begins),
// and whatever it renders of a section
// that decodes is exactly the rendering of the decoded records.
func FuzzPutPlainRaw(f *testing.F) {
	seed := encodeBatch(f, []record.Record{{Offset: 100, Value: []byte("hello")}, {Offset: 101, Key: []byte("k")}, {Offset: 102, Value: []byte{}}}, record.None)
	f.Add(seed.Raw[record.HeaderSize:], uint8(3), 16)
	f.Add([]byte{0x0c, 0, 0, 0, 1, 2, 'x', 0}, uint8(1), 3)
	f.Add([]byte{}, uint8(1), 10)
	f.Fuzz(func(t *testing.T, data []byte, count uint8, room int) {
		room = min(max(room, 1), 1<<16)
		raw := make([]byte, record.HeaderSize, record.HeaderSize+len(data))
		raw = append(raw, data...)
		binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-record.LogOverhead))
		raw[16] = 2 // magic
		binary.BigEndian.PutUint32(raw[57:], uint32(count))
		b, err := record.Parse(raw)
		if err != nil {
			t.Skip()
		}
		dst := make([]byte, room)
		n, p, m := putPlainRaw(dst, 0, testutil.Guarded(t, data), 0, int(count), "N")
		require.LessOrEqual(t, m, int(count))
		require.LessOrEqual(t, p, len(data))
		require.LessOrEqual(t, n, room)
		measured, measuredOK := measurePlainRaw(data, int(count), "N")
		recs, err := b.Records(nil)
		if err != nil {
			require.False(t, measuredOK, "measured a batch that does not decode")
			return
		}
		var want []byte
		f := viewFormat{nullMarker: "N"}
		for i := range recs[:m] {
			want = f.appendRecord(want, &recs[i])
		}
		require.Equal(t, string(want), string(dst[:n]))
		if measuredOK {
			var all []byte
			for i := range recs {
				all = f.appendRecord(all, &recs[i])
			}
			require.Equal(t, int64(len(all)), measured)
		}
	})
}

// TestWalkPlainRaw: walking records without rendering them passes exactly
// the records putPlainRaw would render before an offset or a rendered
// length, with their rendered length, and stops where putPlainRaw would
// at a record it does not take.
func TestWalkPlainRaw(t *testing.T) {
	rng := rand.New(rand.NewSource(12))
	for round := range 40 {
		recs := make([]record.Record, 50)
		for i := range recs {
			r := record.Record{Offset: 100 + int64(i), Timestamp: 1_700_000_000_000, Value: bytes.Repeat([]byte{'v'}, rng.Intn(200))}
			switch rng.Intn(12) {
			case 0:
				r.Value = nil
			case 1:
				r.Key = []byte("key")
			case 2:
				if round%2 == 1 {
					r.Headers = []record.Header{{Key: "h"}} // not taken
				}
			}
			recs[i] = r
		}
		b := encodeBatch(t, recs, record.None)
		data := testutil.Guarded(t, b.Raw[record.HeaderSize:])
		f := viewFormat{nullMarker: "NULL"}
		lens := make([]int64, len(recs)+1) // rendered length of the first i records
		for i := range recs {
			lens[i+1] = lens[i] + int64(len(f.appendRecord(nil, &recs[i])))
		}
		taken := 0 // records putPlainRaw takes from the start
		for taken < len(recs) && len(recs[taken].Headers) == 0 {
			taken++
		}
		for hi := int64(0); hi <= int64(len(recs)); hi++ {
			p, done, n, ok := walkPlainRaw(data, 0, len(recs), f.nullMarker, hi, math.MaxInt64)
			want := min(int(hi), taken)
			require.Equal(t, want, done, "round %d hi %d", round, hi)
			require.Equal(t, lens[done], n)
			require.Equal(t, int(hi) < taken || taken == len(recs), ok, "round %d hi %d", round, hi)
			if done == len(recs) {
				require.Equal(t, len(data), p)
			}
		}
		for range 30 {
			budget := rng.Int63n(lens[len(recs)] + 2)
			_, done, n, ok := walkPlainRaw(data, 0, len(recs), f.nullMarker, math.MaxInt64, budget)
			require.LessOrEqual(t, n, budget)
			require.Equal(t, lens[done], n)
			if ok && done < len(recs) {
				require.Greater(t, lens[done+1], budget, "stops before the record that crosses the budget")
			}
			if !ok {
				require.Equal(t, taken, done)
			}
		}
	}
}

// TestPlainRawLargeBatch: a batch of more than 8192 records has offset
// deltas of three bytes; measuring, rendering and walking take them
// straight from the batch, as they take the first 8192 (a 1 MiB batch of
// 100-byte values holds about 9,000 records: before, the rest of every
// such batch was decoded).
func TestPlainRawLargeBatch(t *testing.T) {
	const n = 10_000
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Offset: 100 + int64(i), Timestamp: 1_700_000_000_000 + int64(i)*3, Value: []byte(fmt.Sprintf("value-%05d", i))}
	}
	b := encodeBatch(t, recs, record.None)
	f := viewFormat{}
	require.True(t, rawEligible(&b, f))
	var want []byte
	for i := range recs {
		want = f.appendRecord(want, &recs[i])
	}
	data := b.Raw[record.HeaderSize:]
	m, ok := measurePlainRaw(data, n, f.nullMarker)
	require.True(t, ok, "measured straight from the batch")
	assert.Equal(t, int64(len(want)), m)
	got, fast := rawRender(t, &b, f, len(want)+10)
	assert.Equal(t, string(want), string(got))
	assert.Equal(t, n, fast, "every record straight from the batch")
	p, done, k, ok := walkPlainRaw(data, 0, n, f.nullMarker, 9_000, math.MaxInt64)
	require.True(t, ok)
	assert.Equal(t, 9_000, done, "stops before offset delta 9000")
	assert.Equal(t, int64(9_000*len("value-00000\n")), k)
	_, done2, _, ok := walkPlainRaw(data, p, n-done, f.nullMarker, math.MaxInt64, math.MaxInt64)
	assert.True(t, ok)
	assert.Equal(t, n-9_000, done2)
}
