package record

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

var allCodecs = []Codec{None, Gzip, Snappy, LZ4, Zstd}

// sampleRecords returns records covering the nullable cases: keys, null keys,
// empty keys, null and empty values, headers with null values, offset gaps
// and a negative timestamp delta.
func sampleRecords(base, ts int64) []Record {
	return []Record{
		{Offset: base, Timestamp: ts, Key: []byte("key-0"), Value: []byte("value-0")},
		{Offset: base + 1, Timestamp: ts + 5, Key: nil, Value: []byte("null key")},
		{Offset: base + 2, Timestamp: ts - 3, Key: []byte{}, Value: []byte("empty key")},
		{Offset: base + 3, Timestamp: ts + 1, Key: []byte("tombstone"), Value: nil},
		{Offset: base + 4, Timestamp: ts + 2, Key: []byte("empty value"), Value: []byte{}},
		{Offset: base + 5, Timestamp: ts + 2, Key: []byte("h"), Value: []byte("headers"), Headers: []Header{
			{Key: "a", Value: []byte("1")}, {Key: "null", Value: nil}, {Key: "", Value: []byte{}},
		}},
		{Offset: base + 9, Timestamp: ts + 100000, Key: []byte("gap"), Value: bytes.Repeat([]byte("x"), 300)},
	}
}

// valueRecords returns n records of size-byte values that compress somewhat,
// like typical text payloads.
func valueRecords(n, size int, base, ts int64) []Record {
	rng := rand.New(rand.NewPCG(uint64(n), uint64(size)))
	words := []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "{\"id\":", "\"name\":"}
	recs := make([]Record, n)
	for i := range recs {
		var v []byte
		for len(v) < size {
			v = append(v, words[rng.IntN(len(words))]...)
			v = append(v, fmt.Sprint(rng.IntN(1000))...)
		}
		recs[i] = Record{Offset: base + int64(i), Timestamp: ts + int64(i/10), Value: v[:size]}
	}
	return recs
}

// mustEncode encodes recs with codec at recs[0].Offset (or base 0).
func mustEncode(t testing.TB, codec Codec, recs []Record) []byte {
	t.Helper()
	base := int64(0)
	if len(recs) > 0 {
		base = recs[0].Offset
	}
	spec := NewBatchSpec(base)
	spec.Codec = codec
	raw, err := Encode(nil, spec, recs)
	require.NoError(t, err)
	return raw
}

// decodeAll parses, verifies and decodes one batch.
func decodeAll(t testing.TB, raw []byte) (Batch, []Record) {
	t.Helper()
	b, err := Parse(raw)
	require.NoError(t, err)
	require.NoError(t, b.Verify())
	recs, err := b.Records(nil)
	require.NoError(t, err)
	return b, recs
}
