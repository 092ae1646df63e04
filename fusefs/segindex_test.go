package fusefs

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/engine/record"
)

// plainRecordsBatch encodes recs as one uncompressed v2 batch at base.
func plainRecordsBatch(t testing.TB, base int64, codec record.Codec, lat bool, recs []record.Record) []byte {
	t.Helper()
	spec := record.NewBatchSpec(base)
	spec.Codec = codec
	raw, err := record.Encode(nil, spec, recs)
	require.NoError(t, err)
	if lat {
		record.SetLogAppendTime(raw, 1_800_000_000_000)
	}
	return raw
}

// plainRecords collects what noneBatch yields for b.
func plainRecords(b *record.Batch, dst []record.Record) ([]record.Record, bool) {
	it, ok := newNoneBatch(b)
	if !ok {
		return dst, false
	}
	var r record.Record
	for it.next(&r) {
		dst = append(dst, r)
	}
	return dst, it.done()
}

// checkPlainRecords requires plainRecords to agree with Batch.Records
// whenever it accepts raw.
func checkPlainRecords(t *testing.T, raw []byte) bool {
	t.Helper()
	b, err := record.Parse(raw)
	if err != nil {
		return false
	}
	fast, ok := plainRecords(&b, nil)
	if !ok {
		return false
	}
	slow, err := b.Records(nil)
	require.NoError(t, err, "plainRecords accepted a batch Records refuses")
	require.Equal(t, slow, fast)
	f := viewFormat{printKey: true, separator: "=", nullMarker: "NULL"}
	var want []byte
	for i := range slow {
		want = appendPlainRecord(want, &slow[i], f)
	}
	got, ok := renderNone(nil, &b, f, math.MaxInt64, nil)
	require.True(t, ok)
	require.Equal(t, string(want), string(got))
	return true
}

func TestPlainRecords(t *testing.T) {
	recs := []record.Record{
		{Offset: 100, Timestamp: 1_700_000_000_000, Value: []byte("v0")},
		{Offset: 101, Timestamp: 1_700_000_000_005, Key: []byte("k"), Value: nil},
		{Offset: 103, Timestamp: 1_699_999_999_000, Key: []byte{}, Value: []byte{}},
		{Offset: 104, Timestamp: 1_700_000_000_001, Value: make([]byte, 300)},
	}
	withHeaders := []record.Record{{Offset: 7, Timestamp: 1, Value: []byte("x"), Headers: []record.Header{{Key: "h", Value: []byte("v")}}}}
	for _, tc := range []struct {
		name  string
		raw   []byte
		taken bool
	}{
		{"none", plainRecordsBatch(t, 100, record.None, false, recs), true},
		{"log-append-time", plainRecordsBatch(t, 100, record.None, true, recs), true},
		{"headers go to Records", plainRecordsBatch(t, 7, record.None, false, withHeaders), false},
		{"compressed goes to Records", plainRecordsBatch(t, 100, record.Gzip, false, recs), false},
		{"empty batch", plainRecordsBatch(t, 5, record.None, false, nil), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.taken, checkPlainRecords(t, tc.raw))
		})
	}
	// Every single-byte corruption of the records region is either refused
	// (left to Records) or decoded exactly as Records decodes it.
	raw := plainRecordsBatch(t, 100, record.None, false, recs)
	for i := record.HeaderSize; i < len(raw); i++ {
		for _, x := range []byte{0x01, 0x80, 0xff} {
			c := append([]byte(nil), raw...)
			c[i] ^= x
			checkPlainRecords(t, c)
		}
	}
}

func FuzzPlainRecords(f *testing.F) {
	f.Add([]byte("value"), []byte("key"), 0, byte(0))
	f.Add([]byte{}, []byte(nil), 70, byte(0x80))
	f.Fuzz(func(t *testing.T, value, key []byte, at int, x byte) {
		raw := plainRecordsBatch(t, 42, record.None, false, []record.Record{
			{Offset: 42, Timestamp: 10, Key: key, Value: value},
			{Offset: 43, Timestamp: 9, Value: value},
		})
		if at >= 0 && at < len(raw)-record.HeaderSize {
			raw[record.HeaderSize+at] ^= x
		}
		checkPlainRecords(t, raw)
	})
}
