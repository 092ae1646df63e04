package record

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVarintGolden(t *testing.T) {
	for _, tc := range []struct {
		v    int32
		want []byte
	}{
		{0, []byte{0x00}},
		{-1, []byte{0x01}},
		{1, []byte{0x02}},
		{-2, []byte{0x03}},
		{63, []byte{0x7e}},
		{-64, []byte{0x7f}},
		{64, []byte{0x80, 0x01}},
		{300, []byte{0xd8, 0x04}},
		{-300, []byte{0xd7, 0x04}},
		{math.MaxInt32, []byte{0xfe, 0xff, 0xff, 0xff, 0x0f}},
		{math.MinInt32, []byte{0xff, 0xff, 0xff, 0xff, 0x0f}},
	} {
		got := appendVarint(nil, tc.v)
		assert.Equal(t, tc.want, got, "varint %d", tc.v)
		assert.Equal(t, len(tc.want), varintSize(tc.v))
		back, n := readVarint(tc.want)
		assert.Equal(t, tc.v, back)
		assert.Equal(t, len(tc.want), n)
	}
	for _, tc := range []struct {
		v    int64
		want []byte
	}{
		{0, []byte{0x00}},
		{-1, []byte{0x01}},
		{1_700_000_000_000, nil},
		{math.MaxInt64, []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{math.MinInt64, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
	} {
		want := tc.want
		if want == nil { // the stdlib's zig-zag varint is an independent reference
			want = binary.AppendVarint(nil, tc.v)
		}
		assert.Equal(t, want, appendVarlong(nil, tc.v), "varlong %d", tc.v)
		assert.Equal(t, len(want), varlongSize(tc.v))
		back, n := readVarlong(want)
		assert.Equal(t, tc.v, back)
		assert.Equal(t, len(want), n)
	}
}

func TestVarintMatchesStdlib(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 127, -128, 8191, -8192, 1 << 20, -(1 << 35), math.MaxInt32, math.MinInt32} {
		std := binary.AppendVarint(nil, v)
		assert.Equal(t, std, appendVarlong(nil, v))
		if v >= math.MinInt32 && v <= math.MaxInt32 {
			assert.Equal(t, std, appendVarint(nil, int32(v)))
		}
	}
}

func TestVarintLimits(t *testing.T) {
	// Too long: 6 bytes for an int32, 11 for an int64 (Kafka rejects these).
	_, n := readVarint([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00})
	assert.Equal(t, -1, n)
	_, n = readVarlong([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00})
	assert.Equal(t, -1, n)
	// Truncated.
	_, n = readVarint([]byte{0x80, 0x80})
	assert.Equal(t, 0, n)
	_, n = readVarlong(nil)
	assert.Equal(t, 0, n)
	// Five bytes are fine (non-minimal encodings are accepted, like Kafka).
	v, n := readVarint([]byte{0x82, 0x80, 0x80, 0x80, 0x00})
	require.Equal(t, 5, n)
	assert.Equal(t, int32(1), v)
}

// TestVarintLen: VarintLen is the length binary.PutVarint (zig-zag) writes,
// at every length boundary and its neighbours.
func TestVarintLen(t *testing.T) {
	buf := make([]byte, binary.MaxVarintLen64)
	for shift := 0; shift < 64; shift++ {
		for _, d := range []int64{-1, 0, 1} {
			for _, v := range []int64{int64(1)<<shift + d, -(int64(1) << shift) + d} {
				if got, want := VarintLen(v), binary.PutVarint(buf, v); got != want {
					t.Errorf("VarintLen(%d) = %d, want %d", v, got, want)
				}
			}
		}
	}
}
