package record

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// randomRecords makes n records of every shape: null/empty/long keys and
// values, headers, negative ("now") and out-of-order timestamps.
func randomRecords(rng *rand.Rand, n int) []Record {
	blob := bytes.Repeat([]byte("0123456789abcdefghijklmnopqrstuvwxyz"), 400)
	bs := func() []byte {
		switch rng.IntN(6) {
		case 0:
			return nil
		case 1:
			return []byte{}
		case 2:
			return blob[:rng.IntN(len(blob))]
		default:
			return blob[:rng.IntN(200)]
		}
	}
	recs := make([]Record, n)
	for i := range recs {
		r := Record{Offset: rng.Int64N(1000) - 500, Timestamp: 1_700_000_000_000 + rng.Int64N(1_000_000) - 500_000, Key: bs(), Value: bs()}
		if rng.IntN(4) == 0 {
			r.Timestamp = -1
		}
		for range rng.IntN(3) {
			r.Headers = append(r.Headers, Header{Key: string(blob[:rng.IntN(10)]), Value: bs()})
		}
		recs[i] = r
	}
	return recs
}

// sequentialByEncode is what EncodeSequential must produce: Encode of the
// first n records with offsets base+i and resolved timestamps.
func sequentialByEncode(t testing.TB, spec BatchSpec, recs []Record, nowMs int64, n int) []byte {
	t.Helper()
	rs := make([]Record, n)
	for i := range rs {
		rs[i] = recs[i]
		rs[i].Offset = spec.BaseOffset + int64(i)
		if spec.LogAppendTime || rs[i].Timestamp < 0 {
			rs[i].Timestamp = nowMs
		}
	}
	out, err := Encode(nil, spec, rs)
	require.NoError(t, err)
	return out
}

func TestEncodeSequentialMatchesEncode(t *testing.T) {
	const nowMs = 1_800_000_000_000
	specs := map[string]func(*BatchSpec){
		"plain":           func(*BatchSpec) {},
		"log append time": func(s *BatchSpec) { s.LogAppendTime = true },
		"delete horizon":  func(s *BatchSpec) { s.DeleteHorizonMs = 1_600_000_000_000 },
		"producer fields": func(s *BatchSpec) {
			s.ProducerID, s.ProducerEpoch, s.BaseSequence, s.PartitionLeaderEpoch = 7, 2, 40, 3
			s.Transactional = true
		},
		"forced last offset delta": func(s *BatchSpec) { s.LastOffsetDelta = 5000 },
	}
	for name, mut := range specs {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			for iter := range 40 {
				recs := randomRecords(rng, 1+rng.IntN(300))
				spec := NewBatchSpec(rng.Int64N(1 << 40))
				mut(&spec)
				prefix := []byte("prefix")
				out, info, err := EncodeSequential(prefix, spec, recs, nowMs, 1<<30)
				require.NoError(t, err)
				require.Equal(t, len(recs), info.Records)
				require.Equal(t, "prefix", string(out[:6]))
				want := sequentialByEncode(t, spec, recs, nowMs, len(recs))
				require.Equal(t, want, out[6:], "iteration %d", iter)
				assert.Equal(t, len(want), info.Size)
				b, got := decodeAll(t, out[6:])
				assert.Equal(t, b.MaxTimestamp, info.MaxTimestamp)
				assert.Equal(t, spec.BaseOffset, got[0].Offset)
			}
		})
	}
}

// TestEncodeSequentialLimit: the batch takes the longest prefix that fits.
func TestEncodeSequentialLimit(t *testing.T) {
	const nowMs = 1_800_000_000_000
	rng := rand.New(rand.NewPCG(5, 6))
	for iter := range 200 {
		recs := randomRecords(rng, 2+rng.IntN(100))
		spec := NewBatchSpec(1000)
		maxBytes := HeaderSize + 100 + rng.IntN(20000)
		out, info, err := EncodeSequential(nil, spec, recs, nowMs, maxBytes)
		if err != nil {
			require.ErrorIs(t, err, ErrBatchTooLarge)
			require.Empty(t, out)
			require.Greater(t, len(sequentialByEncode(t, spec, recs, nowMs, 1)), maxBytes)
			continue
		}
		require.LessOrEqual(t, len(out), maxBytes, "iteration %d", iter)
		require.Equal(t, sequentialByEncode(t, spec, recs, nowMs, info.Records), out)
		if info.Records < len(recs) {
			require.Greater(t, len(sequentialByEncode(t, spec, recs, nowMs, info.Records+1)), maxBytes,
				"iteration %d: one more record would have fit", iter)
		}
	}
}

func TestEncodeSequentialRejects(t *testing.T) {
	recs := sampleRecords(0, 5)
	spec := NewBatchSpec(0)
	spec.Codec = Zstd
	_, _, err := EncodeSequential(nil, spec, recs, 1, 1<<20)
	require.Error(t, err)
	_, _, err = EncodeSequential(nil, NewBatchSpec(0), nil, 1, 1<<20)
	require.Error(t, err)
	big := []Record{{Value: make([]byte, 1000)}}
	out, _, err := EncodeSequential([]byte("x"), NewBatchSpec(0), big, 1, 1000)
	require.ErrorIs(t, err, ErrBatchTooLarge)
	assert.Equal(t, "x", string(out))
	spec = NewBatchSpec(0)
	spec.LastOffsetDelta = 2
	_, _, err = EncodeSequential(nil, spec, recs, 1, 1<<20)
	require.Error(t, err, "LastOffsetDelta below the records'")
}

// TestEncodeSequentialCRCStrides: batches far longer than the CRC stride,
// with records straddling stride ends, verify.
func TestEncodeSequentialCRCStrides(t *testing.T) {
	for _, size := range []int{1, 100, 1000, crcStride - 3, 3 * crcStride} {
		recs := valueRecords(50, size, 0, 1_700_000_000_000)
		out, info, err := EncodeSequential(nil, NewBatchSpec(0), recs, 1, 1<<30)
		require.NoError(t, err)
		require.Equal(t, 50, info.Records)
		_, got := decodeAll(t, out)
		for i := range got {
			require.Equal(t, recs[i].Value, got[i].Value)
		}
		out[len(out)-1] ^= 1
		b, err := Parse(out)
		require.NoError(t, err)
		require.ErrorIs(t, b.Verify(), ErrCorrupt, "a flipped byte fails the CRC")
	}
}

func TestEncodeSequentialNoAllocs(t *testing.T) {
	for _, n := range []int{1, 64, 65, 1000} {
		recs := valueRecords(n, 100, 0, 1_700_000_000_000)
		spec := NewBatchSpec(0)
		buf := make([]byte, 0, EncodedSizeUpperBound(recs))
		assertNoAllocs(t, func() {
			out, _, err := EncodeSequential(buf[:0], spec, recs, 1, 1<<30)
			if err != nil || len(out) == 0 {
				t.Fatal(err)
			}
		}, "%d records", n)
	}
}

// FuzzEncodeSequential: for any records and limit, EncodeSequential writes
// Encode's bytes for the prefix it takes, and that prefix is the longest
// that fits.
func FuzzEncodeSequential(f *testing.F) {
	f.Add(uint64(1), uint64(2), 10, 4096, false)
	f.Add(uint64(3), uint64(4), 200, 100000, true)
	f.Fuzz(func(t *testing.T, s1, s2 uint64, n, maxBytes int, lat bool) {
		if n <= 0 || n > 500 || maxBytes < 0 || maxBytes > 1<<22 {
			return
		}
		rng := rand.New(rand.NewPCG(s1, s2))
		recs := randomRecords(rng, n)
		spec := NewBatchSpec(int64(s1 >> 20))
		spec.LogAppendTime = lat
		out, info, err := EncodeSequential(nil, spec, recs, 1_800_000_000_000, maxBytes)
		if err != nil {
			require.ErrorIs(t, err, ErrBatchTooLarge)
			require.Greater(t, len(sequentialByEncode(t, spec, recs, 1_800_000_000_000, 1)), maxBytes)
			return
		}
		require.LessOrEqual(t, len(out), maxBytes)
		require.Equal(t, sequentialByEncode(t, spec, recs, 1_800_000_000_000, info.Records), out)
		if info.Records < n {
			require.Greater(t, len(sequentialByEncode(t, spec, recs, 1_800_000_000_000, info.Records+1)), maxBytes)
		}
	})
}

// BenchmarkEncodeSequential encodes 1000-record uncompressed batches the
// way the engine's append path does (Encode is the comparison).
func BenchmarkEncodeSequential(b *testing.B) {
	for _, size := range []int{100, 1024} {
		recs := valueRecords(1000, size, 0, 1_700_000_000_000)
		for i := range recs {
			recs[i].Key, recs[i].Timestamp = nil, -1
		}
		buf := make([]byte, 0, EncodedSizeUpperBound(recs))
		b.Run(fmt.Sprintf("value=%dB/sequential", size), func(b *testing.B) {
			out, _, _ := EncodeSequential(buf[:0], NewBatchSpec(0), recs, 1, 1<<30)
			b.SetBytes(int64(len(out)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := EncodeSequential(buf[:0], NewBatchSpec(0), recs, 1_700_000_000_000, 1<<30); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)*1000/b.Elapsed().Seconds(), "records/s")
		})
		b.Run(fmt.Sprintf("value=%dB/encode", size), func(b *testing.B) {
			rs := make([]Record, len(recs))
			for i := range rs {
				rs[i] = recs[i]
				rs[i].Offset, rs[i].Timestamp = int64(i), 1_700_000_000_000
			}
			out, _ := Encode(buf[:0], NewBatchSpec(0), rs)
			b.SetBytes(int64(len(out)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Encode(buf[:0], NewBatchSpec(0), rs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)*1000/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// TestCRC32CCombine: the combined CRC of two parts is the CRC of their
// concatenation, for empty and long parts alike.
func TestCRC32CCombine(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for _, tc := range []struct{ a, b int }{{0, 0}, {0, 1}, {1, 0}, {40, 1}, {40, 8192}, {17, 100_000}, {61, 1<<20 - 61}, {3, 7}} {
		a, b := data[:tc.a], data[tc.a:tc.a+tc.b]
		got := crc32cCombine(crc32.Checksum(a, castagnoli), crc32.Checksum(b, castagnoli), len(b))
		assert.Equal(t, crc32.Checksum(data[:tc.a+tc.b], castagnoli), got, "a=%d b=%d", tc.a, tc.b)
	}
	for range 200 {
		la, lb := rng.IntN(300), rng.IntN(5000)
		a, b := data[:la], data[la:la+lb]
		got := crc32cCombine(crc32.Checksum(a, castagnoli), crc32.Checksum(b, castagnoli), lb)
		require.Equal(t, crc32.Checksum(data[:la+lb], castagnoli), got, "a=%d b=%d", la, lb)
	}
}

// TestEncodeSequentialGrowsSmallBuffers: a destination with bytes in front
// and little or no spare capacity grows as records are written; the bytes
// in front stay, the batch is Encode's.
func TestEncodeSequentialGrowsSmallBuffers(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	recs := randomRecords(rng, 300)
	spec := NewBatchSpec(77)
	want := sequentialByEncode(t, spec, recs, 1_700_000_000_123, len(recs))
	for _, spare := range []int{0, 1, HeaderSize - 1, HeaderSize, HeaderSize + 10, 5000} {
		dst := make([]byte, 5, 5+spare)
		copy(dst, "front")
		out, info, err := EncodeSequential(dst, spec, recs, 1_700_000_000_123, 1<<30)
		require.NoError(t, err)
		require.Equal(t, len(recs), info.Records)
		require.Equal(t, "front", string(out[:5]), "spare %d", spare)
		require.Equal(t, want, out[5:], "spare %d", spare)
		b, err := Parse(out[5:])
		require.NoError(t, err)
		require.NoError(t, b.Verify())
	}
}

// TestGF2MulCastagnoli: the nibble-wise product equals the bit-by-bit one.
func TestGF2MulCastagnoli(t *testing.T) {
	slow := func(a, b uint32) uint32 {
		var p uint32
		for m := uint32(1) << 31; m != 0; m >>= 1 {
			if a&m != 0 {
				p ^= b
			}
			b = mulxCastagnoli(b)
		}
		return p
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, c := range [][2]uint32{{0, 0}, {1 << 31, 12345}, {12345, 1 << 31}, {^uint32(0), ^uint32(0)}, {1, 1}} {
		assert.Equal(t, slow(c[0], c[1]), gf2MulCastagnoli(c[0], c[1]), "%#x*%#x", c[0], c[1])
	}
	for range 10000 {
		a, b := rng.Uint32(), rng.Uint32()
		require.Equal(t, slow(a, b), gf2MulCastagnoli(a, b), "%#x*%#x", a, b)
	}
}

// BenchmarkCRC32CCombine: the per-batch cost of EncodeSequential's
// header/body CRC combination (a 16 KiB body, the default batch.size).
func BenchmarkCRC32CCombine(b *testing.B) {
	crc := uint32(0x12345678)
	for b.Loop() {
		crc = crc32cCombine(crc, 0x9abcdef0, 16384-HeaderSize)
	}
	_ = crc
}

// TestEncodeSequentialValueOnly: the value-only fast path (key null, no
// headers) across its bounds: 1- and 2-byte size, offset delta and length
// varints, timestamp deltas of one byte and more, values at the 4 KiB
// cutoff, empty values, and buffers with and without spare bytes.
func TestEncodeSequentialValueOnly(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	blob := bytes.Repeat([]byte("abcdefghij"), 600)
	lens := []int{0, 1, 50, 56, 57, 58, 63, 64, 100, 120, 121, 122, 127, 128, 4094, 4095, 4096, 5000}
	const now = int64(1_700_000_000_000)
	recs := make([]Record, 9000)
	for i := range recs {
		recs[i] = Record{Timestamp: -1, Value: blob[:lens[rng.IntN(len(lens))]]}
		switch rng.IntN(8) {
		case 0:
			recs[i].Timestamp = now + rng.Int64N(200) - 100 // deltas of 1 and 2 bytes, negative too
		case 1:
			recs[i].Key = []byte("k")
		}
	}
	for _, n := range []int{1, 63, 64, 65, 8191, 8192, 8193, 9000} {
		spec := NewBatchSpec(5)
		want := sequentialByEncode(t, spec, recs[:n], now, n)
		for _, spare := range []int{0, 7, 16, 64} {
			dst := make([]byte, 0, len(want)+spare)
			out, info, err := EncodeSequential(dst, spec, recs[:n], now, 1<<30)
			require.NoError(t, err)
			require.Equal(t, n, info.Records)
			require.True(t, bytes.Equal(want, out), "n=%d spare=%d", n, spare)
		}
		// A limit that cuts the batch: the prefix that fits, as Encode.
		if n == 1 {
			continue
		}
		limit := len(want) / 2
		out, info, err := EncodeSequential(nil, spec, recs[:n], now, limit)
		require.NoError(t, err)
		require.LessOrEqual(t, len(out), limit)
		require.True(t, bytes.Equal(sequentialByEncode(t, spec, recs[:n], now, info.Records), out), "n=%d limit %d", n, limit)
	}
}
