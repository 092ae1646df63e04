package record

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/internal/testutil"
)

// collectEach runs EachRecord over b and returns copies of the records it
// saw (headers copied, since EachRecord reuses their backing array; an empty
// header list normalised to nil as Records returns it).
func collectEach(b *Batch, scratch []byte) ([]Record, []byte, error) {
	var out []Record
	scratch, err := b.EachRecord(scratch, func(r *Record) error {
		c := *r
		c.Headers = nil
		if len(r.Headers) > 0 {
			c.Headers = slices.Clone(r.Headers)
		}
		out = append(out, c)
		return nil
	})
	return out, scratch, err
}

func TestEachRecordMatchesRecords(t *testing.T) {
	var scratch []byte
	for _, codec := range allCodecs {
		for i, recs := range [][]Record{
			sampleRecords(100, 1_700_000_000_000),
			valueRecords(500, 200, 1000, 1_700_000_000_000),
			valueRecords(300, 99, 1<<40, 5), // two-byte lengths and offset deltas
			{{Offset: 5, Timestamp: 1}},
		} {
			t.Run(fmt.Sprintf("%s/%d", codec, i), func(t *testing.T) {
				raw := mustEncode(t, codec, recs)
				b, err := Parse(raw)
				require.NoError(t, err)
				want, err := b.Records(nil)
				require.NoError(t, err)
				var got []Record
				got, scratch, err = collectEach(&b, scratch)
				require.NoError(t, err)
				assert.Equal(t, want, got)
				if codec == None {
					for _, r := range got {
						if len(r.Value) > 0 {
							assert.True(t, within(r.Value, b.Raw), "codec none values alias Raw")
						}
					}
				}
			})
		}
	}
}

func TestEachRecordLogAppendTimeAndHeadersReuse(t *testing.T) {
	spec := NewBatchSpec(7)
	spec.LogAppendTime = true
	recs := sampleRecords(7, 1_700_000_000_000)
	raw, err := Encode(nil, spec, recs)
	require.NoError(t, err)
	SetLogAppendTime(raw, 1_234)
	b, err := Parse(raw)
	require.NoError(t, err)
	want, err := b.Records(nil)
	require.NoError(t, err)
	got, _, err := collectEach(&b, nil)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	for _, r := range got {
		assert.Equal(t, int64(1_234), r.Timestamp)
	}
	// The record passed to fn is one reused value.
	var ptrs []*Record
	_, err = b.EachRecord(nil, func(r *Record) error { ptrs = append(ptrs, r); return nil })
	require.NoError(t, err)
	require.Len(t, ptrs, len(recs))
	assert.Same(t, ptrs[0], ptrs[len(ptrs)-1])
}

func TestEachRecordStopsOnCallbackError(t *testing.T) {
	raw := mustEncode(t, LZ4, valueRecords(10, 50, 0, 1))
	b, err := Parse(raw)
	require.NoError(t, err)
	stop := errors.New("stop")
	n := 0
	_, err = b.EachRecord(nil, func(*Record) error {
		n++
		if n == 3 {
			return stop
		}
		return nil
	})
	require.ErrorIs(t, err, stop)
	assert.Equal(t, 3, n)
}

func TestEachRecordCorrupt(t *testing.T) {
	recs := valueRecords(5, 40, 0, 1)
	raw := mustEncode(t, None, recs)
	// Make the third record's value length run past the batch: a structural
	// error even though we fix the CRC (EachRecord does not check it).
	bad := slices.Clone(raw)
	b, err := Parse(bad)
	require.NoError(t, err)
	p := HeaderSize
	for range 2 {
		l, n := readVarint(bad[p:])
		p += n + int(l)
	}
	bad[p] = 0x7e // length 63: too long for what follows (the records are 40-byte values)
	updateCRC(bad)
	b, err = Parse(bad)
	require.NoError(t, err)
	require.NoError(t, b.Verify())
	seen := 0
	_, err = b.EachRecord(nil, func(*Record) error { seen++; return nil })
	require.ErrorIs(t, err, ErrCorrupt)
	_, rerr := b.Records(nil)
	require.ErrorIs(t, rerr, ErrCorrupt)
	assert.LessOrEqual(t, seen, 2, "no record at or after the bad one")

	// Trailing bytes after the declared records.
	b, err = Parse(raw)
	require.NoError(t, err)
	b.RecordCount--
	_, err = b.EachRecord(nil, func(*Record) error { return nil })
	require.ErrorIs(t, err, ErrCorrupt)

	// Unknown codec.
	b, err = Parse(raw)
	require.NoError(t, err)
	b.Attributes |= 6
	_, err = b.EachRecord(nil, func(*Record) error { return nil })
	require.ErrorIs(t, err, ErrUnsupported)

	// Empty batch: fn is never called.
	empty, err := Encode(nil, NewBatchSpec(3), nil)
	require.NoError(t, err)
	b, err = Parse(empty)
	require.NoError(t, err)
	_, err = b.EachRecord(nil, func(*Record) error { t.Fatal("called"); return nil })
	require.NoError(t, err)
}

func TestEachRecordLegacyAndFixtures(t *testing.T) {
	in1 := func(rel, ts int64, v string) []byte {
		return legacyEntry(rel, legacyMsg(1, 0, ts, []byte("k"), []byte(v)))
	}
	raw := legacyWrapper(t, 1, Gzip, false, 300, 10, in1(0, 100, "a"), in1(1, 300, "b"), in1(2, 200, "c"))
	b, err := Parse(raw)
	require.NoError(t, err)
	got, _, err := collectEach(&b, nil)
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Equal(t, []int64{8, 9, 10}, []int64{got[0].Offset, got[1].Offset, got[2].Offset})
	assert.Equal(t, "c", string(got[2].Value))

	// Every real broker file decodes the same through EachRecord.
	var scratch []byte
	files := fixtureFiles(t, func(name string) bool { return strings.HasSuffix(name, ".log") })
	require.GreaterOrEqual(t, len(files), 71, "testdata/kafka-real alone holds 71")
	for _, f := range files {
		path := f.path
		for _, fb := range readFixture(t, path) {
			b := fb.Batch
			var got []Record
			got, scratch, err = collectEach(&b, scratch)
			require.NoError(t, err, "%s at %d", path, fb.Pos)
			if len(fb.Recs) == 0 {
				assert.Empty(t, got)
				continue
			}
			assert.Equal(t, fb.Recs, got, "%s at %d", path, fb.Pos)
		}
	}
}

// FuzzEachRecord feeds the seed files' batches (with fuzzed bodies behind a
// correct CRC) to EachRecord and Records: both must agree.
func FuzzEachRecord(f *testing.F) {
	lowerDecompressLimit(f)
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for pos := int64(0); pos < int64(len(data)); {
			b, err := ReadAt(bytes.NewReader(data), pos, int64(len(data)), nil)
			if err != nil { // io.EOF or a bad frame: FuzzReadAt's business
				return
			}
			pos += int64(b.Size())
			if b.Magic == 2 && len(b.Raw) >= HeaderSize {
				updateCRC(b.Raw)
				b.CRC = uint32(b.Raw[offCRC])<<24 | uint32(b.Raw[offCRC+1])<<16 | uint32(b.Raw[offCRC+2])<<8 | uint32(b.Raw[offCRC+3])
			}
			b2 := b
			want, werr := b.Records(nil)
			got, _, gerr := collectEach(&b2, nil)
			if werr != nil {
				require.Error(t, gerr, "Records failed with %v", werr)
				continue
			}
			require.NoError(t, gerr)
			if len(want) == 0 {
				require.Empty(t, got)
				continue
			}
			require.Equal(t, want, got)
		}
	})
}

func BenchmarkEachRecord(b *testing.B) {
	for _, size := range []int{100, 1024} {
		recs := valueRecords(1000, size, 0, 1_700_000_000_000)
		for _, c := range []Codec{None, LZ4, Zstd} {
			b.Run(fmt.Sprintf("%s/1000x%dB", c, size), func(b *testing.B) { benchEachRecord(b, c, recs) })
		}
	}
	// Records with a key and a header: decodeRun takes none of them,
	// decodeRecordInto decodes every one.
	recs := valueRecords(1000, 100, 0, 1_700_000_000_000)
	for i := range recs {
		recs[i].Key = fmt.Appendf(nil, "key-%d", i)
		recs[i].Headers = []Header{{Key: "trace", Value: []byte("0123456789")}}
	}
	b.Run("headers/none/1000x100B", func(b *testing.B) { benchEachRecord(b, None, recs) })
}

// benchEachRecord times EachRecord over one batch of recs encoded with c.
func benchEachRecord(b *testing.B, c Codec, recs []Record) {
	raw := 0
	for i := range recs {
		raw += len(recs[i].Value)
	}
	batch, err := Parse(mustEncode(b, c, recs))
	if err != nil {
		b.Fatal(err)
	}
	var scratch []byte
	n, vb := 0, 0
	fn := func(r *Record) error { n++; vb += len(r.Value); return nil }
	b.SetBytes(int64(raw))
	b.ReportAllocs()
	for b.Loop() {
		if scratch, err = batch.EachRecord(scratch, fn); err != nil {
			b.Fatal(err)
		}
	}
	if n != len(recs)*b.N || vb != raw*b.N {
		b.Fatalf("saw %d records, %d value bytes", n, vb)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
}

// checkWindow asserts that decodeRun (through decodeWindow), when it accepts the record at
// data[s:], agrees with the full decoder decodeRecordInto on every field and
// on the size; it returns whether decodeWindow accepted it.
func checkWindow(t *testing.T, data []byte, s int) bool {
	t.Helper()
	var fast Record
	next := decodeWindow(&fast, testutil.Guarded(t, data), s, 1000, 5000)
	var full Record
	n, err := decodeRecordInto(&full, data[s:], false)
	if next == 0 {
		return false
	}
	require.NoError(t, err, "decodeWindow accepted what the full decoder rejects")
	assert.Equal(t, s+n, next)
	assert.Equal(t, full.Offset+1000, fast.Offset)
	assert.Equal(t, full.Timestamp+5000, fast.Timestamp)
	assert.Equal(t, full.Key, fast.Key)
	assert.Equal(t, full.Key == nil, fast.Key == nil)
	assert.Equal(t, full.Value, fast.Value)
	assert.Equal(t, full.Value == nil, fast.Value == nil)
	assert.Empty(t, full.Headers)
	return true
}

// TestDecodeWindow covers the hot-path decoder's edges: what it must accept
// and what it must leave to the full decoder (which then decodes it or says
// what is wrong).
func TestDecodeWindow(t *testing.T) {
	rec := func(r Record) []byte {
		return appendRecordForTest(r)
	}
	long := bytes.Repeat([]byte("v"), 99)
	for _, tc := range []struct {
		name   string
		data   []byte
		accept bool
	}{
		{"99-byte value, null key", rec(Record{Offset: 70, Timestamp: 3, Value: long}), true},
		{"empty key and value", append(rec(Record{Key: []byte{}, Value: []byte{}}), make([]byte, 16)...), true},
		{"null value", rec(Record{Key: []byte("key-0123456789"), Value: nil}), true},
		{"negative two-byte timestamp delta", rec(Record{Offset: 1, Timestamp: -100, Value: long}), true},
		{"three-byte offset delta", rec(Record{Offset: 100_000, Value: long}), false},
		{"three-byte timestamp delta", rec(Record{Timestamp: 1 << 20, Value: long}), false},
		{"headers", rec(Record{Value: long, Headers: []Header{{Key: "h", Value: []byte("v")}}}), false},
		{"too short for the window", rec(Record{Value: []byte("x")}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.accept, checkWindow(t, tc.data, 0))
			// The same record later in the buffer.
			shifted := append(bytes.Repeat([]byte{0xff}, 5), tc.data...)
			assert.Equal(t, tc.accept, checkWindow(t, shifted, 5))
		})
	}

	// Framing errors are never accepted: every single-byte change of a good
	// record either still decodes the same way in both decoders or is left
	// to the full decoder.
	good := rec(Record{Offset: 70, Timestamp: 3, Key: []byte("k"), Value: long})
	for i := range good {
		for _, v := range []byte{0x00, 0x01, 0x02, 0x7f, 0x80, 0xc8, 0xff} {
			bad := slices.Clone(good)
			bad[i] = v
			checkWindow(t, bad, 0)
		}
	}
	// A record cut anywhere is rejected (and decodeWindow reads nothing
	// past the cut: the page after it is unreadable).
	for cut := range len(good) {
		var r Record
		assert.Zero(t, decodeWindow(&r, testutil.Guarded(t, good[:cut]), 0, 0, 0), "cut at %d", cut)
	}
	// A position at or past the end is rejected.
	var r Record
	assert.Zero(t, decodeWindow(&r, good, len(good), 0, 0))
	assert.Zero(t, decodeWindow(&r, good, -1, 0, 0))
}

// appendRecordForTest encodes one record as it sits in a batch body, with
// r.Offset and r.Timestamp as its raw deltas (Encode's appendRecord with
// base offset and timestamp 0).
func appendRecordForTest(r Record) []byte {
	return appendRecord(nil, &r, 0, 0, int32(recordBodySize(&r, int32(r.Offset), r.Timestamp)))
}

// FuzzDecodeWindow: whatever the bytes, decodeWindow only accepts records
// the full decoder decodes identically.
func FuzzDecodeWindow(f *testing.F) {
	f.Add(appendRecordForTest(Record{Offset: 70, Timestamp: 3, Value: bytes.Repeat([]byte("v"), 99)}), 0)
	f.Add(appendRecordForTest(Record{Key: []byte("k"), Value: []byte("0123456789abcdef")}), 0)
	f.Fuzz(func(t *testing.T, data []byte, s int) {
		if s < 0 || s >= len(data) {
			var r Record
			require.Zero(t, decodeWindow(&r, data, s, 0, 0))
			return
		}
		checkWindow(t, data, s)
	})
}

// decodeWindow decodes the one record at data[s:] with decodeRun's fast
// path into *r (deltas plus baseOff and baseTs) and returns the position
// after it, or 0 when decodeRun leaves it to the full decoder.
func decodeWindow(r *Record, data []byte, s int, baseOff, baseTs int64) int {
	var rs [1]Record
	next, i, _ := decodeRun(data, s, 0, 1, &runBase{off: baseOff, ts: baseTs}, rs[:], nil, nil)
	if i == 0 {
		return 0
	}
	*r = rs[0]
	return next
}
