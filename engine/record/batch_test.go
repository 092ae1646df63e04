package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goldenBatch is a hand-built uncompressed v2 batch (82 bytes):
//
//	00 00 00 00 00 00 00 05   baseOffset 5
//	00 00 00 46               length 70 (= 49 + 21 bytes of records)
//	00 00 00 07               partitionLeaderEpoch 7
//	02                        magic 2
//	4f a1 bc 20               crc: CRC-32C over [21, 82) (goldenCRC)
//	00 00                     attributes: none, CreateTime
//	00 00 00 01               lastOffsetDelta 1
//	00 00 00 00 00 00 03 e8   baseTimestamp 1000
//	00 00 00 00 00 00 03 f2   maxTimestamp 1010
//	ff ff ff ff ff ff ff ff   producerId -1
//	ff ff                     producerEpoch -1
//	ff ff ff ff               baseSequence -1
//	00 00 00 02               recordsCount 2
//	record 0: 12 (length 9) 00 (attrs) 00 (tsDelta 0) 00 (offDelta 0)
//	          02 6b (key "k") 04 76 31 (value "v1") 00 (no headers)
//	record 1: 14 (length 10) 00 14 (tsDelta 10) 02 (offDelta 1) 01 (null key)
//	          02 76 (value "v") 02 (1 header) 02 68 (key "h") 01 (null value)
var goldenBatch = []byte{
	0, 0, 0, 0, 0, 0, 0, 5,
	0, 0, 0, 0x46,
	0, 0, 0, 7,
	2,
	0xcc, 0xcc, 0xcc, 0xcc,
	0, 0,
	0, 0, 0, 1,
	0, 0, 0, 0, 0, 0, 0x03, 0xe8,
	0, 0, 0, 0, 0, 0, 0x03, 0xf2,
	0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	0xff, 0xff,
	0xff, 0xff, 0xff, 0xff,
	0, 0, 0, 2,
	0x12, 0x00, 0x00, 0x00, 0x02, 0x6b, 0x04, 0x76, 0x31, 0x00,
	0x14, 0x00, 0x14, 0x02, 0x01, 0x02, 0x76, 0x02, 0x02, 0x68, 0x01,
}

// goldenCRC is the CRC-32C of goldenBatch[21:].
const goldenCRC = 0x4fa1bc20

func golden(t *testing.T) []byte {
	t.Helper()
	raw := append([]byte(nil), goldenBatch...)
	binary.BigEndian.PutUint32(raw[17:], goldenCRC)
	return raw
}

func TestGoldenBatch(t *testing.T) {
	require.Len(t, goldenBatch, 82)
	require.Equal(t, uint32(goldenCRC), crc32.Checksum(goldenBatch[21:], crc32.MakeTable(crc32.Castagnoli)))
	raw := golden(t)
	b, err := Parse(raw)
	require.NoError(t, err)
	assert.Equal(t, int64(5), b.BaseOffset)
	assert.Equal(t, int32(70), b.Length)
	assert.Equal(t, 82, b.Size())
	assert.Equal(t, int32(7), b.PartitionLeaderEpoch)
	assert.Equal(t, int8(2), b.Magic)
	assert.Equal(t, uint32(goldenCRC), b.CRC)
	assert.Equal(t, int16(0), b.Attributes)
	assert.Equal(t, None, b.Codec())
	assert.False(t, b.LogAppendTime())
	assert.False(t, b.IsTransactional())
	assert.False(t, b.IsControl())
	assert.False(t, b.HasDeleteHorizon())
	assert.Equal(t, int64(-1), b.DeleteHorizonMs())
	assert.Equal(t, int32(1), b.LastOffsetDelta)
	assert.Equal(t, int64(6), b.LastOffset())
	assert.Equal(t, int64(7), b.NextOffset())
	assert.Equal(t, int64(1000), b.BaseTimestamp)
	assert.Equal(t, int64(1010), b.MaxTimestamp)
	assert.Equal(t, int64(-1), b.ProducerID)
	assert.Equal(t, int16(-1), b.ProducerEpoch)
	assert.Equal(t, int32(-1), b.BaseSequence)
	assert.Equal(t, int32(2), b.RecordCount)
	require.NoError(t, b.Verify())

	recs, err := b.Records(nil)
	require.NoError(t, err)
	want := []Record{
		{Offset: 5, Timestamp: 1000, Key: []byte("k"), Value: []byte("v1")},
		{Offset: 6, Timestamp: 1010, Key: nil, Value: []byte("v"), Headers: []Header{{Key: "h", Value: nil}}},
	}
	assert.Equal(t, want, recs)

	// Encode writes the same bytes.
	spec := NewBatchSpec(5)
	spec.PartitionLeaderEpoch = 7
	enc, err := Encode(nil, spec, want)
	require.NoError(t, err)
	assert.Equal(t, raw, enc)
}

func TestHeaderConstants(t *testing.T) {
	assert.Equal(t, 61, HeaderSize)
	assert.Equal(t, 12, LogOverhead)
	assert.Equal(t, HeaderSize, offRecordCount+4)
	assert.Equal(t, 17, headerUpToMagic)
	assert.Equal(t, HeaderSize, len(mustEncode(t, None, nil)))
}

func TestVerifyDetectsCorruption(t *testing.T) {
	raw := golden(t)
	for i := 0; i < len(raw); i++ {
		c := append([]byte(nil), raw...)
		c[i] ^= 0x01
		b, err := Parse(c)
		if err != nil {
			assert.True(t, errors.Is(err, ErrCorrupt) || errors.Is(err, ErrTruncated), "byte %d: %v", i, err)
			continue
		}
		err = b.Verify()
		switch {
		case i < 17: // baseOffset, length, leader epoch, magic: outside the CRC
			if i >= 8 && i < 12 {
				t.Fatalf("length change must fail Parse")
			}
			assert.NoError(t, err, "byte %d is outside the CRC", i)
		default:
			require.ErrorIs(t, err, ErrCorrupt, "byte %d", i)
			assert.Contains(t, err.Error(), "offset 5")
		}
	}
	b, err := Parse(raw)
	require.NoError(t, err)
	b.Raw = b.Raw[:70]
	require.ErrorIs(t, b.Verify(), ErrCorrupt)
}

func TestParseErrors(t *testing.T) {
	raw := golden(t)
	_, err := Parse(raw[:16])
	assert.ErrorIs(t, err, ErrTruncated)
	_, err = Parse(raw[:81])
	assert.ErrorIs(t, err, ErrTruncated)
	_, err = Parse(append(append([]byte(nil), raw...), 0))
	assert.ErrorIs(t, err, ErrCorrupt)
	c := append([]byte(nil), raw...)
	c[16] = 3
	_, err = Parse(c)
	assert.ErrorIs(t, err, ErrCorrupt)
	// A "v2" batch shorter than the 61-byte header.
	short := append([]byte(nil), raw[:40]...)
	binary.BigEndian.PutUint32(short[8:], 28)
	_, err = Parse(short)
	assert.ErrorIs(t, err, ErrCorrupt)
}

// errReaderAt fails every read.
type errReaderAt struct{}

var errDisk = errors.New("disk on fire")

func (errReaderAt) ReadAt([]byte, int64) (int, error) { return 0, errDisk }

func TestReadAtFraming(t *testing.T) {
	one := golden(t)
	two := append(append([]byte(nil), one...), mustEncode(t, None, sampleRecords(7, 5))...)
	zeros := append(append([]byte(nil), one...), make([]byte, 100)...)
	hugeSize := append([]byte(nil), one...)
	binary.BigEndian.PutUint32(hugeSize[8:], 0x7fffffff)
	negSize := append([]byte(nil), one...)
	binary.BigEndian.PutUint32(negSize[8:], 0xffffffff)
	badMagic := append([]byte(nil), one...)
	badMagic[16] = 9
	negMagic := append([]byte(nil), one...)
	negMagic[16] = 0x80
	tests := []struct {
		name    string
		data    []byte
		pos     int64
		end     int64 // 0 = len(data)
		wantErr error
		wantOff int64
	}{
		{name: "first", data: two, pos: 0, wantOff: 5},
		{name: "second", data: two, pos: 82, wantOff: 7},
		{name: "clean end", data: two, pos: int64(len(two)), wantErr: io.EOF},
		{name: "past end", data: two, pos: int64(len(two)) + 5, wantErr: io.EOF},
		{name: "partial header", data: one, pos: 0, end: 16, wantErr: ErrTruncated},
		{name: "partial body", data: one, pos: 0, end: 81, wantErr: ErrTruncated},
		{name: "zero tail", data: zeros, pos: 82, wantErr: ErrCorrupt},
		{name: "huge size", data: hugeSize, pos: 0, wantErr: ErrTruncated},
		{name: "negative size", data: negSize, pos: 0, wantErr: ErrCorrupt},
		{name: "unknown magic", data: badMagic, pos: 0, wantErr: ErrCorrupt},
		{name: "negative magic", data: negMagic, pos: 0, wantErr: ErrCorrupt},
		{name: "end beyond file", data: one[:50], pos: 0, end: 82, wantErr: ErrTruncated},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			end := tc.end
			if end == 0 {
				end = int64(len(tc.data))
			}
			b, err := ReadAt(bytes.NewReader(tc.data), tc.pos, end, nil)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.NoError(t, b.Verify())
			assert.Equal(t, tc.wantOff, b.BaseOffset)
		})
	}
	_, err := ReadAt(errReaderAt{}, 0, 100, nil)
	require.ErrorIs(t, err, errDisk)
}

// TestPeekHeader: the fields of an entry from its first bytes, each only
// when the bytes hold it, and ReadAt's checks in Kafka's order.
func TestPeekHeader(t *testing.T) {
	one := golden(t)
	full, err := Parse(one)
	require.NoError(t, err)
	full.Raw = nil

	h, err := PeekHeader(one[:HeaderSize], int64(len(one)))
	require.NoError(t, err)
	assert.Equal(t, full, h, "a whole v2 header: every field")
	h, err = PeekHeader(one[:43], int64(len(one)))
	require.NoError(t, err)
	assert.Equal(t, full.MaxTimestamp, h.MaxTimestamp, "43 bytes reach maxTimestamp")
	assert.Zero(t, h.ProducerID, "and no further")
	assert.Zero(t, h.RecordCount)

	_, err = PeekHeader(one[:16], int64(len(one)))
	assert.ErrorIs(t, err, ErrTruncated, "16 bytes do not reach the magic")
	_, err = PeekHeader(make([]byte, 40), 40)
	assert.ErrorIs(t, err, ErrCorrupt, "a zero-filled tail: size 0")
	_, err = PeekHeader(one[:HeaderSize], int64(len(one))-1)
	assert.ErrorIs(t, err, ErrTruncated, "the entry runs past what the file holds")
	bad := bytes.Clone(one)
	bad[16] = 9
	_, err = PeekHeader(bad, 10)
	assert.ErrorIs(t, err, ErrTruncated, "past the end comes before the magic, as in Kafka")
	h, err = PeekHeader(bad, int64(len(bad)))
	assert.ErrorIs(t, err, ErrCorrupt, "unknown magic")
	assert.Equal(t, []any{full.BaseOffset, full.Length, int8(9)}, []any{h.BaseOffset, h.Length, h.Magic}, "what it saw")
	short := bytes.Clone(one)
	binary.BigEndian.PutUint32(short[8:], 20)
	_, err = PeekHeader(short, int64(len(short)))
	assert.ErrorIs(t, err, ErrCorrupt, "a v2 batch shorter than its header")

	legacy := legacyEntry(42, legacyMsg(1, int8(Gzip), 1_700_000_000_000, nil, []byte("v")))
	h, err = PeekHeader(legacy[:26], int64(len(legacy)))
	require.NoError(t, err)
	assert.Equal(t, []any{int64(42), int8(1), int16(Gzip), int64(1_700_000_000_000), int32(-1), int64(-1)},
		[]any{h.BaseOffset, h.Magic, h.Attributes, h.MaxTimestamp, h.RecordCount, h.ProducerID})
	h, err = PeekHeader(legacy[:17], int64(len(legacy)))
	require.NoError(t, err)
	assert.Zero(t, h.MaxTimestamp, "a v1 timestamp the bytes do not hold is unknown, not -1")
	short = bytes.Clone(legacy)
	binary.BigEndian.PutUint32(short[8:], 20)
	_, err = PeekHeader(short, int64(len(short)))
	assert.ErrorIs(t, err, ErrCorrupt, "a v1 message shorter than 22 bytes")
}

func TestReadAtReusesBuffer(t *testing.T) {
	one := golden(t)
	buf := make([]byte, 0, 4096)
	b, err := ReadAt(bytes.NewReader(one), 0, int64(len(one)), buf)
	require.NoError(t, err)
	assert.Equal(t, &buf[:1][0], &b.Raw[0], "Raw lives in buf")
	r := bytes.NewReader(one)
	allocs := testing.AllocsPerRun(50, func() {
		if _, err := ReadAt(r, 0, int64(len(one)), buf); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs, "no allocation when buf is large enough")
	small := make([]byte, 0, 10)
	b, err = ReadAt(bytes.NewReader(one), 0, int64(len(one)), small)
	require.NoError(t, err)
	assert.Equal(t, 82, cap(b.Raw))
}

func TestSetters(t *testing.T) {
	raw := golden(t)
	SetBaseOffset(raw, 1<<40)
	SetPartitionLeaderEpoch(raw, 99)
	b, err := Parse(raw)
	require.NoError(t, err)
	require.NoError(t, b.Verify(), "base offset and leader epoch are outside the CRC")
	assert.Equal(t, int64(1<<40), b.BaseOffset)
	assert.Equal(t, int32(99), b.PartitionLeaderEpoch)
	recs, err := b.Records(nil)
	require.NoError(t, err)
	assert.Equal(t, int64(1<<40+1), recs[1].Offset)

	SetLogAppendTime(raw, 123456)
	b, err = Parse(raw)
	require.NoError(t, err)
	require.NoError(t, b.Verify())
	assert.True(t, b.LogAppendTime())
	assert.Equal(t, int64(123456), b.MaxTimestamp)
	recs, err = b.Records(nil)
	require.NoError(t, err)
	for _, r := range recs {
		assert.Equal(t, int64(123456), r.Timestamp)
	}

	SetMaxTimestamp(raw, 42)
	b, err = Parse(raw)
	require.NoError(t, err)
	require.NoError(t, b.Verify())
	assert.Equal(t, int64(42), b.MaxTimestamp)

	// The setters touch only the first batch of a longer buffer.
	two := append(golden(t), golden(t)...)
	SetLogAppendTime(two, 7)
	b, err = Parse(two[:82])
	require.NoError(t, err)
	require.NoError(t, b.Verify())
	assert.Equal(t, golden(t), two[82:])
}

func TestRecordsRejectsMalformed(t *testing.T) {
	raw := golden(t)
	fix := func(c []byte) []byte {
		binary.BigEndian.PutUint32(c[17:], crc32.Checksum(c[21:], castagnoli))
		return c
	}
	for _, tc := range []struct {
		name string
		mut  func(c []byte) []byte
	}{
		{"count too high", func(c []byte) []byte { binary.BigEndian.PutUint32(c[57:], 3); return c }},
		{"count too low leaves bytes", func(c []byte) []byte { binary.BigEndian.PutUint32(c[57:], 1); return c }},
		{"negative count", func(c []byte) []byte { binary.BigEndian.PutUint32(c[57:], 0xffffffff); return c }},
		{"record length too long", func(c []byte) []byte { c[61] = 0x14; return c }},
		{"record length too short", func(c []byte) []byte { c[61] = 0x10; return c }},
		{"key length past record", func(c []byte) []byte { c[65] = 0x20; return c }},
		{"negative header count", func(c []byte) []byte { c[78] = 0x01; return c }},
		{"null header key", func(c []byte) []byte { c[79] = 0x01; return c }},
		{"unknown codec", func(c []byte) []byte { c[22] = 5; return c }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fix(tc.mut(append([]byte(nil), raw...)))
			b, err := Parse(c)
			require.NoError(t, err)
			require.NoError(t, b.Verify())
			got, err := b.Records([]Record{{Offset: 1}})
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrCorrupt) || errors.Is(err, ErrUnsupported), err)
			assert.Len(t, got, 1, "dst keeps its length on error")
		})
	}
}

func TestRecordsAppendsToDst(t *testing.T) {
	raw := golden(t)
	b, err := Parse(raw)
	require.NoError(t, err)
	dst := make([]Record, 1, 10)
	got, err := b.Records(dst)
	require.NoError(t, err)
	assert.Len(t, got, 3)
	assert.Equal(t, int64(5), got[1].Offset)
}
