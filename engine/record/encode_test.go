package record

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEncodeSpecFields(t *testing.T) {
	recs := sampleRecords(100, 5000)
	maxTs := int64(5000 + 100000)
	for _, tc := range []struct {
		name  string
		spec  func(s *BatchSpec)
		check func(t *testing.T, b *Batch, got []Record)
	}{
		{"idempotent", func(s *BatchSpec) { s.ProducerID, s.ProducerEpoch, s.BaseSequence = 12, 1, 300 }, func(t *testing.T, b *Batch, got []Record) {
			assert.Equal(t, int64(12), b.ProducerID)
			assert.Equal(t, int16(1), b.ProducerEpoch)
			assert.Equal(t, int32(300), b.BaseSequence)
			assert.Equal(t, recs, got)
		}},
		{"transactional", func(s *BatchSpec) { s.Transactional = true }, func(t *testing.T, b *Batch, got []Record) {
			assert.True(t, b.IsTransactional())
			assert.False(t, b.IsControl())
			assert.Equal(t, int16(0x10), b.Attributes&^attrCodecMask)
		}},
		{"log append time", func(s *BatchSpec) { s.LogAppendTime = true }, func(t *testing.T, b *Batch, got []Record) {
			assert.True(t, b.LogAppendTime())
			assert.Equal(t, maxTs, b.MaxTimestamp)
			for _, r := range got {
				assert.Equal(t, maxTs, r.Timestamp)
			}
		}},
		{"delete horizon", func(s *BatchSpec) { s.DeleteHorizonMs = 9_000_000 }, func(t *testing.T, b *Batch, got []Record) {
			assert.True(t, b.HasDeleteHorizon())
			assert.Equal(t, int64(9_000_000), b.DeleteHorizonMs())
			assert.Equal(t, int64(9_000_000), b.BaseTimestamp)
			assert.Equal(t, maxTs, b.MaxTimestamp)
			assert.Equal(t, recs, got, "timestamps stay absolute")
		}},
		{"forced last offset delta", func(s *BatchSpec) { s.LastOffsetDelta = 50 }, func(t *testing.T, b *Batch, got []Record) {
			assert.Equal(t, int64(150), b.LastOffset())
			assert.Equal(t, recs, got)
		}},
	} {
		for _, codec := range []Codec{None, Zstd} {
			t.Run(tc.name+"/"+codec.String(), func(t *testing.T) {
				spec := NewBatchSpec(100)
				spec.Codec = codec
				tc.spec(&spec)
				raw, err := Encode([]byte("prefix"), spec, recs)
				require.NoError(t, err)
				require.Equal(t, "prefix", string(raw[:6]))
				b, got := decodeAll(t, raw[6:])
				assert.Equal(t, codec, b.Codec())
				tc.check(t, &b, got)
			})
		}
	}
}

func TestEncodeEmptyBatchLikeWriteEmptyHeader(t *testing.T) {
	spec := NewBatchSpec(40)
	spec.Codec = LZ4
	spec.Transactional = true
	spec.ProducerID, spec.ProducerEpoch, spec.BaseSequence = 5, 2, 17
	spec.LastOffsetDelta = 3
	spec.DeleteHorizonMs = 1000
	raw, err := Encode(nil, spec, nil)
	require.NoError(t, err)
	require.Len(t, raw, HeaderSize)
	b, got := decodeAll(t, raw)
	assert.Empty(t, got)
	assert.Equal(t, int32(49), b.Length)
	assert.Equal(t, None, b.Codec())
	assert.False(t, b.HasDeleteHorizon())
	assert.True(t, b.IsTransactional())
	assert.Equal(t, int64(43), b.LastOffset())
	assert.Equal(t, int64(-1), b.BaseTimestamp)
	assert.Equal(t, int32(17), b.BaseSequence)
	assert.Equal(t, int32(0), b.RecordCount)

	// The cleaner keeps the old maxTimestamp of an emptied batch.
	SetMaxTimestamp(raw, 777)
	b, _ = decodeAll(t, raw)
	assert.Equal(t, int64(777), b.MaxTimestamp)
}

func TestEncodeRejects(t *testing.T) {
	recs := sampleRecords(100, 0)
	spec := NewBatchSpec(100)
	spec.Codec = 6
	_, err := Encode(nil, spec, recs)
	require.ErrorIs(t, err, ErrUnsupported)

	spec = NewBatchSpec(101)
	_, err = Encode(nil, spec, recs)
	require.ErrorIs(t, err, errEncode, "offset below base")

	spec = NewBatchSpec(100)
	_, err = Encode(nil, spec, []Record{{Offset: 100 + math.MaxInt32 + 1}})
	require.ErrorIs(t, err, errEncode, "offset delta past int32")

	spec = NewBatchSpec(100)
	spec.LastOffsetDelta = 2
	_, err = Encode(nil, spec, recs)
	require.ErrorIs(t, err, errEncode, "LastOffsetDelta below the last record")

	dst := []byte("keep")
	out, err := Encode(dst, BatchSpec{Codec: 9}, recs)
	require.Error(t, err)
	assert.Equal(t, "keep", string(out))
}

func TestEncodedSizeUpperBound(t *testing.T) {
	for _, recs := range [][]Record{nil, sampleRecords(0, 0), valueRecords(500, 100, 0, 1_700_000_000_000),
		{{Offset: 0, Timestamp: math.MinInt64 / 2, Key: []byte("k"), Headers: []Header{{Key: "x", Value: make([]byte, 200)}}}, {Offset: math.MaxInt32, Timestamp: math.MaxInt64 / 2}}} {
		raw := mustEncode(t, None, recs)
		assert.LessOrEqual(t, len(raw), EncodedSizeUpperBound(recs))
	}
}

func TestEncodeNoAllocsUncompressed(t *testing.T) {
	recs := valueRecords(1000, 100, 0, 1_700_000_000_000)
	spec := NewBatchSpec(0)
	buf := make([]byte, 0, EncodedSizeUpperBound(recs))
	assertNoAllocs(t, func() {
		out, err := Encode(buf[:0], spec, recs)
		if err != nil || len(out) == 0 {
			t.Fatal(err)
		}
	})
}

func TestControlBatches(t *testing.T) {
	spec := NewBatchSpec(0)
	spec.ProducerID, spec.ProducerEpoch, spec.PartitionLeaderEpoch = 4001, 2, 3
	for _, typ := range []int16{ControlCommit, ControlAbort} {
		raw, err := EncodeControlBatch(nil, spec, 77, 1_700_000_000_000, typ, 4)
		require.NoError(t, err)
		b, recs := decodeAll(t, raw)
		assert.True(t, b.IsControl())
		assert.True(t, b.IsTransactional())
		assert.Equal(t, int64(77), b.BaseOffset)
		assert.Equal(t, int64(77), b.LastOffset())
		assert.Equal(t, int64(4001), b.ProducerID)
		assert.Equal(t, int16(2), b.ProducerEpoch)
		assert.Equal(t, int32(-1), b.BaseSequence)
		assert.Equal(t, int32(3), b.PartitionLeaderEpoch)
		require.Len(t, recs, 1)
		assert.Equal(t, []byte{0, 0, 0, byte(typ)}, recs[0].Key)
		assert.Equal(t, []byte{0, 0, 0, 0, 0, 4}, recs[0].Value)
		got, err := b.ControlType()
		require.NoError(t, err)
		assert.Equal(t, typ, got)
		epoch, err := ParseEndTxnMarker(recs[0].Value)
		require.NoError(t, err)
		assert.Equal(t, int32(4), epoch)
	}
	b, _ := decodeAll(t, golden(t))
	_, err := b.ControlType()
	require.ErrorIs(t, err, ErrCorrupt, "not a control batch")

	_, err = ParseEndTxnMarker([]byte{0, 0, 0})
	require.ErrorIs(t, err, ErrCorrupt)
	_, err = ParseEndTxnMarker([]byte{0x80, 0, 0, 0, 0, 1})
	require.ErrorIs(t, err, ErrCorrupt)
	_, err = controlKeyType([]byte{0xff, 0xff, 0, 1})
	require.ErrorIs(t, err, ErrCorrupt)
	_, err = controlKeyType([]byte{0, 0})
	require.ErrorIs(t, err, ErrCorrupt)
	typ, err := controlKeyType([]byte{0, 1, 0, 2, 9}) // newer version, type still at byte 2
	require.NoError(t, err)
	assert.Equal(t, ControlLeaderChange, typ)
}

func TestSequences(t *testing.T) {
	assert.Equal(t, int32(10), IncrementSequence(7, 3))
	assert.Equal(t, int32(math.MaxInt32), IncrementSequence(math.MaxInt32-3, 3))
	assert.Equal(t, int32(0), IncrementSequence(math.MaxInt32, 1))
	assert.Equal(t, int32(2), IncrementSequence(math.MaxInt32-1, 4))
	b := Batch{Magic: 2, BaseSequence: 5, LastOffsetDelta: 9}
	assert.Equal(t, int32(14), b.LastSequence())
	b.BaseSequence = -1
	assert.Equal(t, int32(-1), b.LastSequence())
	b = Batch{Magic: 1, BaseSequence: 5}
	assert.Equal(t, int32(-1), b.LastSequence())
	// Broker-written __consumer_offsets batches: pid -1 but baseSequence 0.
	cb := Batch{Magic: 2, ProducerID: -1, BaseSequence: 0, LastOffsetDelta: 2}
	assert.Equal(t, int32(2), cb.LastSequence())
}
