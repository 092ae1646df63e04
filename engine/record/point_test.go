package record

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRecordFrameAndDecodeRecord: walking a batch with RecordFrame finds
// every record's offset delta and end, and DecodeRecord at each start
// decodes what Records does.
func TestRecordFrameAndDecodeRecord(t *testing.T) {
	for _, recs := range [][]Record{sampleRecords(1000, 1_700_000_000_000), valueRecords(300, 100, 7, 1_700_000_000_000)} {
		raw := mustEncode(t, None, recs)
		b, want := decodeAll(t, raw)
		p := HeaderSize
		for i, w := range want {
			delta, end, err := RecordFrame(raw, p)
			require.NoError(t, err, "record %d", i)
			assert.Equal(t, w.Offset-b.BaseOffset, int64(delta))
			var got Record
			next, err := b.DecodeRecord(raw, p, &got)
			require.NoError(t, err)
			assert.Equal(t, end, next)
			assert.Equal(t, w, got)
			p = end
		}
		assert.Equal(t, len(raw), p)
	}
}

// TestRecordFrameMalformed: cut or damaged records are ErrCorrupt, never a
// panic or a record that runs past the data.
func TestRecordFrameMalformed(t *testing.T) {
	raw := mustEncode(t, None, sampleRecords(0, 1_700_000_000_000))
	b, err := Parse(raw)
	require.NoError(t, err)
	_, end, err := RecordFrame(raw, HeaderSize)
	require.NoError(t, err)
	for cut := HeaderSize; cut < end; cut++ {
		_, _, err := RecordFrame(raw[:cut], HeaderSize)
		require.ErrorIs(t, err, ErrCorrupt, "cut at %d", cut)
		var r Record
		_, err = b.DecodeRecord(raw[:cut], HeaderSize, &r)
		require.ErrorIs(t, err, ErrCorrupt, "cut at %d", cut)
	}
	for _, p := range []int{-1, len(raw)} {
		_, _, err := RecordFrame(raw, p)
		require.ErrorIs(t, err, ErrCorrupt)
		var r Record
		_, err = b.DecodeRecord(raw, p, &r)
		require.ErrorIs(t, err, ErrCorrupt)
	}
	for i := HeaderSize; i < len(raw); i++ {
		bad := append([]byte(nil), raw...)
		for _, v := range []byte{0xff, 0x80, 0x01, 0x00} {
			bad[i] = v
			for p := HeaderSize; p < len(bad); p++ {
				if _, e, err := RecordFrame(bad, p); err == nil {
					assert.LessOrEqual(t, e, len(bad))
					assert.Greater(t, e, p)
				}
				var r Record
				_, _ = b.DecodeRecord(bad, p, &r)
			}
		}
	}
}
