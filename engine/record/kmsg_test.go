package record

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"hash/crc32"
	"io"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Cross-checks against an independent implementation of the v2 format:
// franz-go's kmsg (RecordBatch/Record), with independent decompressors
// (stdlib gzip, pierrec's lz4 frame reader, klauspost's streaming zstd, a
// hand-rolled xerial parser over s2's snappy block decoder).

// independentDecompress decodes a records region without our codec code.
func independentDecompress(t *testing.T, c Codec, src []byte) []byte {
	t.Helper()
	switch c {
	case None:
		return src
	case Gzip:
		r, err := gzip.NewReader(bytes.NewReader(src))
		require.NoError(t, err)
		out, err := io.ReadAll(r)
		require.NoError(t, err)
		return out
	case Snappy:
		require.Equal(t, "\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01", string(src[:16]))
		var out []byte
		for p := 16; p < len(src); {
			n := int(binary.BigEndian.Uint32(src[p:]))
			d, err := s2.Decode(nil, src[p+4:p+4+n])
			require.NoError(t, err)
			out = append(out, d...)
			p += 4 + n
		}
		return out
	case LZ4:
		out, err := io.ReadAll(lz4.NewReader(bytes.NewReader(src)))
		require.NoError(t, err)
		return out
	case Zstd:
		d, err := zstd.NewReader(bytes.NewReader(src), zstd.WithDecoderConcurrency(1))
		require.NoError(t, err)
		defer d.Close()
		out, err := io.ReadAll(d)
		require.NoError(t, err)
		return out
	}
	t.Fatalf("codec %v", c)
	return nil
}

// independentCompress compresses with libraries other than our writers.
func independentCompress(t *testing.T, c Codec, src []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch c {
	case None:
		return src
	case Gzip:
		w := gzip.NewWriter(&buf)
		_, err := w.Write(src)
		require.NoError(t, err)
		require.NoError(t, w.Close())
	case Snappy:
		return s2.EncodeSnappy(nil, src) // raw block, SnappyInputStream's fallback
	case LZ4:
		w := lz4.NewWriter(&buf) // pierrec's defaults: 4 MiB blocks, content checksum
		_, err := w.Write(src)
		require.NoError(t, err)
		require.NoError(t, w.Close())
	case Zstd:
		w, err := zstd.NewWriter(&buf, zstd.WithEncoderCRC(true))
		require.NoError(t, err)
		_, err = w.Write(src)
		require.NoError(t, err)
		require.NoError(t, w.Close())
	}
	return buf.Bytes()
}

// splitKmsgRecords decodes a records region with kmsg.Record, using
// encoding/binary's zig-zag Varint to find each record's length.
func splitKmsgRecords(t *testing.T, data []byte, n int) []kmsg.Record {
	t.Helper()
	out := make([]kmsg.Record, n)
	for i := range out {
		l, m := binary.Varint(data)
		require.Positive(t, m)
		end := m + int(l)
		require.NoError(t, out[i].ReadFrom(data[:end]))
		data = data[end:]
	}
	require.Empty(t, data, "no bytes after the last record")
	return out
}

func TestEncodeDecodesWithKmsg(t *testing.T) {
	recs := sampleRecords(1000, 1_700_000_000_123)
	for _, codec := range allCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			spec := BatchSpec{
				BaseOffset: 1000, Codec: codec, Transactional: true,
				ProducerID: 77, ProducerEpoch: 3, BaseSequence: 42, PartitionLeaderEpoch: 9,
				DeleteHorizonMs: -1, LastOffsetDelta: -1,
			}
			raw, err := Encode(nil, spec, recs)
			require.NoError(t, err)

			var kb kmsg.RecordBatch
			require.NoError(t, kb.ReadFrom(raw))
			assert.Equal(t, int64(1000), kb.FirstOffset)
			assert.Equal(t, int32(len(raw)-12), kb.Length)
			assert.Equal(t, int32(9), kb.PartitionLeaderEpoch)
			assert.Equal(t, int8(2), kb.Magic)
			assert.Equal(t, uint32(kb.CRC), crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
			assert.Equal(t, int16(codec)|0x10, kb.Attributes)
			assert.Equal(t, int32(9), kb.LastOffsetDelta)
			assert.Equal(t, recs[0].Timestamp, kb.FirstTimestamp)
			assert.Equal(t, recs[0].Timestamp+100000, kb.MaxTimestamp)
			assert.Equal(t, int64(77), kb.ProducerID)
			assert.Equal(t, int16(3), kb.ProducerEpoch)
			assert.Equal(t, int32(42), kb.FirstSequence)
			assert.Equal(t, int32(len(recs)), kb.NumRecords)
			assert.Equal(t, kb.AppendTo(nil), raw, "kmsg re-serialises the same bytes")

			kr := splitKmsgRecords(t, independentDecompress(t, codec, kb.Records), int(kb.NumRecords))
			for i, r := range recs {
				assert.Equal(t, int8(0), kr[i].Attributes)
				assert.Equal(t, r.Timestamp-kb.FirstTimestamp, kr[i].TimestampDelta64)
				assert.Equal(t, int32(r.Offset-1000), kr[i].OffsetDelta)
				assert.Equal(t, r.Key, kr[i].Key)
				assert.Equal(t, r.Value, kr[i].Value)
				require.Len(t, kr[i].Headers, len(r.Headers))
				for j, h := range r.Headers {
					assert.Equal(t, h.Key, kr[i].Headers[j].Key)
					assert.Equal(t, h.Value, kr[i].Headers[j].Value)
				}
			}
		})
	}
}

// kmsgBatch builds a batch with kmsg from recs (CRC computed here, as kmsg
// leaves it to the caller).
func kmsgBatch(t *testing.T, codec Codec, base int64, attrsExtra int16, firstTs, maxTs int64, recs []Record) []byte {
	t.Helper()
	var body []byte
	for _, r := range recs {
		kr := kmsg.Record{
			TimestampDelta64: r.Timestamp - firstTs,
			OffsetDelta:      int32(r.Offset - base),
			Key:              r.Key,
			Value:            r.Value,
		}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		probe := kr.AppendTo(nil) // Length 0 encodes as one byte
		kr.Length = int32(len(probe) - 1)
		body = kr.AppendTo(body)
	}
	kb := kmsg.RecordBatch{
		FirstOffset:          base,
		PartitionLeaderEpoch: 4,
		Magic:                2,
		Attributes:           int16(codec) | attrsExtra,
		LastOffsetDelta:      int32(recs[len(recs)-1].Offset - base),
		FirstTimestamp:       firstTs,
		MaxTimestamp:         maxTs,
		ProducerID:           -1,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(len(recs)),
		Records:              independentCompress(t, codec, body),
	}
	kb.Length = int32(49 + len(kb.Records))
	raw := kb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

func TestKmsgBatchesDecode(t *testing.T) {
	recs := sampleRecords(50, 1_600_000_000_000)
	big := valueRecords(300, 1000, 60, 1_600_000_000_000) // > 64 KiB: several blocks/chunks
	for _, codec := range allCodecs {
		t.Run(codec.String(), func(t *testing.T) {
			raw := kmsgBatch(t, codec, 50, 0, recs[0].Timestamp, recs[len(recs)-1].Timestamp, recs)
			b, got := decodeAll(t, raw)
			assert.Equal(t, codec, b.Codec())
			assert.Equal(t, int32(4), b.PartitionLeaderEpoch)
			assert.Equal(t, recs, got)

			raw = kmsgBatch(t, codec, 60, 0, big[0].Timestamp, big[len(big)-1].Timestamp, big)
			_, got = decodeAll(t, raw)
			assert.Equal(t, big, got)

			// LogAppendTime: every record reads the batch maxTimestamp.
			raw = kmsgBatch(t, codec, 50, attrLogAppendTime, recs[0].Timestamp, 1_999_000_000_000, recs)
			b, got = decodeAll(t, raw)
			assert.True(t, b.LogAppendTime())
			for i, r := range got {
				assert.Equal(t, int64(1_999_000_000_000), r.Timestamp)
				assert.Equal(t, recs[i].Offset, r.Offset)
			}

			// Delete horizon: baseTimestamp holds the horizon, deltas are from it.
			const horizon = 1_650_000_000_000
			raw = kmsgBatch(t, codec, 50, attrDeleteHorizon, horizon, recs[len(recs)-1].Timestamp, recs)
			b, got = decodeAll(t, raw)
			assert.True(t, b.HasDeleteHorizon())
			assert.Equal(t, int64(horizon), b.DeleteHorizonMs())
			assert.Equal(t, recs, got)
		})
	}
}
