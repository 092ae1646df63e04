package record

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// legacyMsg builds a legacy Message (crc, magic, attrs, [ts], key, value).
func legacyMsg(magic, attrs int8, ts int64, key, value []byte) []byte {
	m := make([]byte, 4, 64)
	m = append(m, byte(magic), byte(attrs))
	if magic == 1 {
		m = binary.BigEndian.AppendUint64(m, uint64(ts))
	}
	for _, f := range [][]byte{key, value} {
		if f == nil {
			m = binary.BigEndian.AppendUint32(m, 0xffffffff)
		} else {
			m = binary.BigEndian.AppendUint32(m, uint32(len(f)))
			m = append(m, f...)
		}
	}
	binary.BigEndian.PutUint32(m, crc32.ChecksumIEEE(m[4:]))
	return m
}

// legacyEntry frames a message as a LogEntry.
func legacyEntry(offset int64, msg []byte) []byte {
	e := binary.BigEndian.AppendUint64(nil, uint64(offset))
	e = binary.BigEndian.AppendUint32(e, uint32(len(msg)))
	return append(e, msg...)
}

// legacyWrapper builds a compressed wrapper entry holding inner entries.
func legacyWrapper(t testing.TB, magic int8, codec Codec, logAppend bool, ts, offset int64, inner ...[]byte) []byte {
	t.Helper()
	payload, err := compress(nil, codec, bytes.Join(inner, nil))
	require.NoError(t, err)
	attrs := int8(codec)
	if logAppend {
		attrs |= attrLogAppendTime
	}
	return legacyEntry(offset, legacyMsg(magic, attrs, ts, nil, payload))
}

func TestLegacyPlainMessages(t *testing.T) {
	v0 := legacyEntry(3, legacyMsg(0, 0, 0, []byte("k0"), []byte("v0")))
	v1 := legacyEntry(4, legacyMsg(1, 0, 1234, nil, []byte("v1")))
	v1lat := legacyEntry(5, legacyMsg(1, attrLogAppendTime, 5678, []byte{}, nil))
	file := bytes.Join([][]byte{v0, v1, v1lat}, nil)
	r := bytes.NewReader(file)

	b, err := ReadAt(r, 0, int64(len(file)), nil)
	require.NoError(t, err)
	require.NoError(t, b.Verify())
	assert.Equal(t, int8(0), b.Magic)
	assert.Equal(t, 26+4, b.Size())
	assert.Equal(t, int64(3), b.BaseOffset)
	assert.Equal(t, int64(3), b.LastOffset())
	assert.Equal(t, int64(4), b.NextOffset())
	assert.Equal(t, int64(-1), b.MaxTimestamp)
	assert.Equal(t, int64(-1), b.ProducerID)
	assert.Equal(t, int32(-1), b.PartitionLeaderEpoch)
	assert.Equal(t, int32(1), b.RecordCount)
	assert.False(t, b.IsControl())
	recs, err := b.Records(nil)
	require.NoError(t, err)
	assert.Equal(t, []Record{{Offset: 3, Timestamp: -1, Key: []byte("k0"), Value: []byte("v0")}}, recs)

	pos := int64(b.Size())
	b, err = ReadAt(r, pos, int64(len(file)), nil)
	require.NoError(t, err)
	require.NoError(t, b.Verify())
	assert.Equal(t, int64(1234), b.MaxTimestamp)
	assert.False(t, b.LogAppendTime())
	recs, err = b.Records(nil)
	require.NoError(t, err)
	assert.Equal(t, []Record{{Offset: 4, Timestamp: 1234, Key: nil, Value: []byte("v1")}}, recs)

	pos += int64(b.Size())
	b, err = ReadAt(r, pos, int64(len(file)), nil)
	require.NoError(t, err)
	require.NoError(t, b.Verify())
	assert.True(t, b.LogAppendTime())
	recs, err = b.Records(nil)
	require.NoError(t, err)
	assert.Equal(t, []Record{{Offset: 5, Timestamp: 5678, Key: []byte{}, Value: nil}}, recs)

	pos += int64(b.Size())
	_, err = ReadAt(r, pos, int64(len(file)), nil)
	assert.Equal(t, len(file), int(pos))
	require.ErrorIs(t, err, io.EOF)
}

func TestLegacyWrappers(t *testing.T) {
	in1 := func(rel, ts int64, v string) []byte {
		return legacyEntry(rel, legacyMsg(1, 0, ts, []byte("k"), []byte(v)))
	}
	in0 := func(abs int64, v string) []byte { return legacyEntry(abs, legacyMsg(0, 0, 0, nil, []byte(v))) }
	for _, codec := range []Codec{Gzip, Snappy, LZ4} {
		t.Run(codec.String(), func(t *testing.T) {
			// v1, relative inner offsets 0..2, wrapper at 10 => 8, 9, 10.
			raw := legacyWrapper(t, 1, codec, false, 300, 10, in1(0, 100, "a"), in1(1, 300, "b"), in1(2, 200, "c"))
			b, err := Parse(raw)
			require.NoError(t, err)
			require.NoError(t, b.Verify())
			assert.Equal(t, codec, b.Codec())
			assert.Equal(t, int64(10), b.BaseOffset)
			assert.Equal(t, int32(-1), b.RecordCount)
			recs, err := b.Records(nil)
			require.NoError(t, err)
			require.Len(t, recs, 3)
			for i, want := range []struct {
				off, ts int64
				v       string
			}{{8, 100, "a"}, {9, 300, "b"}, {10, 200, "c"}} {
				assert.Equal(t, want.off, recs[i].Offset)
				assert.Equal(t, want.ts, recs[i].Timestamp)
				assert.Equal(t, want.v, string(recs[i].Value))
				assert.Equal(t, "k", string(recs[i].Key))
			}
			assert.Equal(t, int64(8), b.BaseOffset, "Records sets the first inner offset")
			assert.Equal(t, int64(10), b.LastOffset())
			assert.Equal(t, int32(3), b.RecordCount)

			// LogAppendTime: every inner message reads the wrapper timestamp.
			raw = legacyWrapper(t, 1, codec, true, 999, 10, in1(0, 100, "a"), in1(1, 300, "b"))
			b, err = Parse(raw)
			require.NoError(t, err)
			recs, err = b.Records(nil)
			require.NoError(t, err)
			for _, r := range recs {
				assert.Equal(t, int64(999), r.Timestamp)
			}

			// Wrapper offset 0 quirk: base 0.
			raw = legacyWrapper(t, 1, codec, false, 1, 0, in1(0, 1, "a"), in1(1, 1, "b"))
			b, err = Parse(raw)
			require.NoError(t, err)
			recs, err = b.Records(nil)
			require.NoError(t, err)
			assert.Equal(t, []int64{0, 1}, []int64{recs[0].Offset, recs[1].Offset})

			// v0: absolute inner offsets, no timestamps.
			raw = legacyWrapper(t, 0, codec, false, 0, 22, in0(20, "x"), in0(21, "y"), in0(22, "z"))
			b, err = Parse(raw)
			require.NoError(t, err)
			require.NoError(t, b.Verify())
			recs, err = b.Records(nil)
			require.NoError(t, err)
			require.Len(t, recs, 3)
			for i, r := range recs {
				assert.Equal(t, int64(20+i), r.Offset)
				assert.Equal(t, int64(-1), r.Timestamp)
				assert.Nil(t, r.Key)
			}
		})
	}
}

func TestLegacyLZ4KAFKA3160(t *testing.T) {
	inner := legacyEntry(0, legacyMsg(0, 0, 0, nil, []byte("old lz4 client")))
	frame := appendLZ4(nil, inner)
	frame[6] = byte(xxh32(frame[0:6], 0) >> 8) // HC over magic+FLG+BD
	for _, tc := range []struct {
		magic int8
		ok    bool
	}{{0, true}, {1, false}} {
		raw := legacyEntry(0, legacyMsg(tc.magic, int8(LZ4), 5, nil, frame))
		b, err := Parse(raw)
		require.NoError(t, err)
		require.NoError(t, b.Verify())
		recs, err := b.Records(nil)
		if !tc.ok {
			require.ErrorIs(t, err, ErrCorrupt, "magic 1 verifies the header checksum")
			continue
		}
		require.NoError(t, err)
		require.Len(t, recs, 1)
		assert.Equal(t, "old lz4 client", string(recs[0].Value))
	}
}

func TestLegacyRejects(t *testing.T) {
	plain := legacyEntry(1, legacyMsg(1, 0, 5, nil, []byte("v")))
	nested := legacyWrapper(t, 1, Gzip, false, 0, 1, legacyWrapper(t, 1, Gzip, false, 0, 0, plain))
	zstdWrapper := legacyEntry(0, legacyMsg(1, int8(Zstd), 0, nil, appendZstdT(t, plain)))
	nullValue := legacyEntry(0, legacyMsg(1, int8(Gzip), 0, nil, nil))
	empty := legacyWrapper(t, 1, Gzip, false, 0, 0)
	garbage := legacyWrapper(t, 1, Gzip, false, 0, 0, plain, []byte{1, 2, 3})
	for name, raw := range map[string][]byte{"nested": nested, "zstd": zstdWrapper, "null value": nullValue, "empty": empty, "garbage": garbage} {
		b, err := Parse(raw)
		require.NoError(t, err, name)
		require.NoError(t, b.Verify(), name)
		_, err = b.Records(nil)
		require.ErrorIs(t, err, ErrCorrupt, name)
	}

	// CRC-32 (IEEE) over [magic, end).
	c := append([]byte(nil), plain...)
	c[len(c)-1] ^= 0xff
	b, err := Parse(c)
	require.NoError(t, err)
	require.ErrorIs(t, b.Verify(), ErrCorrupt)

	// Key length past the end (CRC fixed up so only the structure is wrong).
	c = append([]byte(nil), plain...)
	binary.BigEndian.PutUint32(c[12+14:], 100)
	binary.BigEndian.PutUint32(c[12:], crc32.ChecksumIEEE(c[16:]))
	b, err = Parse(c)
	require.NoError(t, err)
	require.ErrorIs(t, b.Verify(), ErrCorrupt)
	_, err = b.Records(nil)
	require.ErrorIs(t, err, ErrCorrupt)

	// v1 minimum message size is 22.
	short := legacyEntry(0, legacyMsg(0, 0, 0, nil, nil)) // 14-byte body
	short[16] = 1
	_, err = Parse(short)
	require.ErrorIs(t, err, ErrCorrupt)
}

func appendZstdT(t *testing.T, b []byte) []byte {
	t.Helper()
	out, err := appendZstd(nil, b)
	require.NoError(t, err)
	return out
}

func TestLegacyMessagesExposeCRC(t *testing.T) {
	good := legacyEntry(0, legacyMsg(1, 0, 6, nil, []byte("a")))
	bad := legacyEntry(1, legacyMsg(1, 0, 7, nil, []byte("b")))
	bad[len(bad)-1] = 'B' // inner CRC now wrong; the wrapper CRC covers the compressed bytes
	raw := legacyWrapper(t, 1, Gzip, false, 7, 11, good, bad)
	b, err := Parse(raw)
	require.NoError(t, err)
	require.NoError(t, b.Verify())
	msgs, err := b.LegacyMessages(nil)
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	assert.Equal(t, int64(10), msgs[0].Offset)
	assert.Equal(t, int64(11), msgs[1].Offset)
	assert.True(t, msgs[0].Valid)
	assert.False(t, msgs[1].Valid)
	assert.Equal(t, binary.BigEndian.Uint32(good[12:]), msgs[0].CRC)
	assert.Equal(t, int8(1), msgs[1].Magic)
	assert.Equal(t, "B", string(msgs[1].Value))

	plain, err := Parse(good)
	require.NoError(t, err)
	msgs, err = plain.LegacyMessages(nil)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	assert.True(t, msgs[0].Valid)

	v2, _ := decodeAll(t, golden(t))
	_, err = v2.LegacyMessages(nil)
	require.ErrorIs(t, err, ErrCorrupt)
}
