package record

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// within reports whether non-empty a lies inside b's backing array (up to cap).
func within(a, b []byte) bool {
	if len(a) == 0 || cap(b) == 0 {
		return false
	}
	pa := uintptr(unsafe.Pointer(unsafe.SliceData(a)))
	pb := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa >= pb && pa+uintptr(len(a)) <= pb+uintptr(cap(b))
}

func TestRecordsIntoRoundTrip(t *testing.T) {
	var scratch []byte
	var dst []Record
	for _, codec := range allCodecs {
		for _, recs := range [][]Record{
			sampleRecords(100, 1_700_000_000_000),
			valueRecords(500, 200, 1000, 1_700_000_000_000),
			{{Offset: 5, Timestamp: 1}},
		} {
			raw := mustEncode(t, codec, recs)
			b, err := Parse(raw)
			require.NoError(t, err)
			want, err := b.Records(nil)
			require.NoError(t, err)
			require.Len(t, want, len(recs))
			// Append after a record already in dst: it must survive.
			dst = append(dst[:0], Record{Offset: -7})
			var got []Record
			got, scratch, err = b.RecordsInto(dst, scratch)
			require.NoError(t, err, codec)
			require.Equal(t, int64(-7), got[0].Offset)
			assert.Equal(t, want, got[1:], codec)
			for i, r := range got[1:] {
				assert.Equal(t, recs[i].Key, r.Key)
				assert.Equal(t, recs[i].Value, r.Value)
			}
			dst = got
		}
	}
}

func TestRecordsIntoAliasing(t *testing.T) {
	recs := valueRecords(20, 100, 0, 1_700_000_000_000)
	t.Run("none aliases Raw", func(t *testing.T) {
		raw := mustEncode(t, None, recs)
		b, err := Parse(raw)
		require.NoError(t, err)
		got, scratch, err := b.RecordsInto(nil, nil)
		require.NoError(t, err)
		assert.Nil(t, scratch, "codec none needs no scratch")
		for _, r := range got {
			require.True(t, within(r.Value, raw), "value aliases Raw")
		}
		got[3].Value[0] ^= 0xff // writes go to Raw
		require.ErrorIs(t, b.Verify(), ErrCorrupt, "the write landed in Raw")
	})
	t.Run("Records copies", func(t *testing.T) {
		raw := mustEncode(t, None, recs)
		b, err := Parse(raw)
		require.NoError(t, err)
		got, err := b.Records(nil)
		require.NoError(t, err)
		for _, r := range got {
			require.False(t, within(r.Value, raw))
		}
	})
	for _, codec := range allCodecs[1:] {
		t.Run(codec.String()+" decompresses into scratch", func(t *testing.T) {
			raw := mustEncode(t, codec, recs)
			b, err := Parse(raw)
			require.NoError(t, err)
			scratch := make([]byte, 0, 1<<20)
			got, out, err := b.RecordsInto(nil, scratch)
			require.NoError(t, err)
			require.True(t, within(out, scratch), "warm scratch reused")
			for _, r := range got {
				require.True(t, within(r.Value, scratch))
				require.False(t, within(r.Value, raw))
			}
			// A scratch too small is replaced by a bigger one the caller keeps.
			got, out, err = b.RecordsInto(nil, make([]byte, 0, 8))
			require.NoError(t, err)
			require.GreaterOrEqual(t, cap(out), len(recs)*100)
			assert.Equal(t, recs[5].Value, got[5].Value)
		})
	}
}

func TestRecordsIntoLegacy(t *testing.T) {
	raw := legacyWrapper(t, 1, Gzip, false, 99, 12,
		legacyEntry(0, legacyMsg(1, 0, 10, []byte("k"), []byte("v1"))),
		legacyEntry(1, legacyMsg(1, 0, 11, nil, []byte("v2"))))
	b, err := Parse(raw)
	require.NoError(t, err)
	b2 := b
	want, err := b.Records(nil)
	require.NoError(t, err)
	got, _, err := b2.RecordsInto(nil, nil)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	require.Len(t, got, 2)
	assert.Equal(t, int64(12), got[1].Offset)
}

func TestRecordsIntoErrorKeepsDst(t *testing.T) {
	raw := mustEncode(t, None, valueRecords(10, 50, 0, 1))
	raw[HeaderSize] = 0x01 // first record's length: zig-zag -1
	b, err := Parse(raw)
	require.NoError(t, err)
	dst := []Record{{Offset: 1}}
	got, _, err := b.RecordsInto(dst, nil)
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Len(t, got, 1)
	got, err = b.Records(dst)
	require.ErrorIs(t, err, ErrCorrupt)
	assert.Len(t, got, 1)
}

func TestRecordsIntoNoAllocs(t *testing.T) {
	raw := mustEncode(t, None, valueRecords(100, 200, 0, 1_700_000_000_000))
	b, err := Parse(raw)
	require.NoError(t, err)
	dst := make([]Record, 0, 100)
	allocs := testing.AllocsPerRun(50, func() {
		got, _, err := b.RecordsInto(dst[:0], nil)
		if err != nil || len(got) != 100 {
			t.Fatal(err, len(got))
		}
	})
	assert.Zero(t, allocs, "codec none with a warm dst")

	for _, codec := range []Codec{Snappy, LZ4} {
		raw := mustEncode(t, codec, valueRecords(100, 200, 0, 1_700_000_000_000))
		b, err := Parse(raw)
		require.NoError(t, err)
		_, scratch, err := b.RecordsInto(dst[:0], nil)
		require.NoError(t, err)
		allocs := testing.AllocsPerRun(50, func() {
			var got []Record
			got, scratch, err = b.RecordsInto(dst[:0], scratch)
			if err != nil || len(got) != 100 {
				t.Fatal(err, len(got))
			}
		})
		assert.Zero(t, allocs, "%v with a warm scratch", codec)
	}
}

// Records must grow dst geometrically: collecting n one-record batches
// reallocates O(log n) times, not n times.
func TestRecordsGrowsGeometrically(t *testing.T) {
	raw := mustEncode(t, None, []Record{{Offset: 0, Timestamp: 1, Value: []byte("v")}})
	b, err := Parse(raw)
	require.NoError(t, err)
	var dst []Record
	grows := 0
	for i := 0; i < 4096; i++ {
		before := cap(dst)
		dst, err = b.Records(dst)
		require.NoError(t, err)
		if cap(dst) != before {
			grows++
		}
	}
	require.Len(t, dst, 4096)
	assert.Less(t, grows, 40)
}
