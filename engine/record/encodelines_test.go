package record

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// linesOf returns n random '\n'-terminated lines (some empty, some longer
// than EncodeSequential's fast path) and the records they stand for.
func linesOf(rng *rand.Rand, n int) ([]byte, []Record) {
	var lines []byte
	recs := make([]Record, n)
	for i := range recs {
		var sz int
		switch rng.IntN(10) {
		case 0:
			sz = 0
		case 1:
			sz = 4000 + rng.IntN(300) // around the 4 KiB fast-path bound
		default:
			sz = rng.IntN(200)
		}
		start := len(lines)
		for range sz {
			lines = append(lines, byte('a'+rng.IntN(26)))
		}
		recs[i] = Record{Timestamp: -1, Value: lines[start:len(lines):len(lines)]}
		lines = append(lines, '\n')
	}
	// The values alias lines: re-slice after the appends moved it.
	off := 0
	for i := range recs {
		l := len(recs[i].Value)
		recs[i].Value = lines[off : off+l : off+l]
		off += l + 1
	}
	return lines, recs
}

// TestEncodeLinesMatchesSequential: EncodeLines writes exactly
// EncodeSequential's batch for the same records, cut at the same record,
// and says how many line bytes it took; also past 8192 records (offset
// deltas beyond two varint bytes) and with LogAppendTime.
func TestEncodeLinesMatchesSequential(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct {
		n, maxBytes int
		lat         bool
	}{{1, 1 << 20, false}, {50, 1 << 20, false}, {500, 16 << 10, false}, {20000, 8 << 20, false}, {300, 1 << 20, true}, {300, 5000, false}} {
		lines, recs := linesOf(rng, tc.n)
		spec := NewBatchSpec(1234)
		spec.LogAppendTime = tc.lat
		const now = 1_800_000_000_000
		dst := []byte("prefix")
		got, info, used, err := EncodeLines(dst, spec, lines, now, tc.maxBytes)
		require.NoError(t, err)
		want, winfo, err := EncodeSequential([]byte("prefix"), spec, recs, now, tc.maxBytes)
		require.NoError(t, err)
		require.Equal(t, want, got, "n=%d maxBytes=%d", tc.n, tc.maxBytes)
		assert.Equal(t, winfo, info)
		// used covers exactly the encoded records' lines.
		assert.Equal(t, info.Records, bytes.Count(lines[:used], []byte{'\n'}))
		assert.Equal(t, byte('\n'), lines[used-1])
		b, err := Parse(got[len("prefix"):])
		require.NoError(t, err)
		require.NoError(t, b.Verify())
	}
}

// TestEncodeLinesRejects: unterminated input, a compressed spec, a delete
// horizon, and a first line too large for maxBytes write nothing.
func TestEncodeLinesRejects(t *testing.T) {
	spec := NewBatchSpec(0)
	for name, tc := range map[string]struct {
		lines []byte
		spec  func(*BatchSpec)
	}{
		"empty":        {nil, nil},
		"unterminated": {[]byte("a\nb"), nil},
		"compressed":   {[]byte("a\n"), func(s *BatchSpec) { s.Codec = Zstd }},
		"horizon":      {[]byte("a\n"), func(s *BatchSpec) { s.DeleteHorizonMs = 5 }},
	} {
		s := spec
		if tc.spec != nil {
			tc.spec(&s)
		}
		out, _, used, err := EncodeLines([]byte("x"), s, tc.lines, 1, 1<<20)
		require.Error(t, err, name)
		assert.Equal(t, []byte("x"), out, name)
		assert.Zero(t, used, name)
	}
	long := append(bytes.Repeat([]byte("y"), 200), '\n')
	out, _, used, err := EncodeLines(nil, spec, append(long, "z\n"...), 1, 100)
	require.ErrorIs(t, err, ErrBatchTooLarge)
	assert.Empty(t, out)
	assert.Zero(t, used)
}

// TestEncodeLinesNoAllocs: with room in dst, encoding allocates nothing.
func TestEncodeLinesNoAllocs(t *testing.T) {
	lines := bytes.Repeat(append(bytes.Repeat([]byte("v"), 99), '\n'), 1000)
	dst := make([]byte, 0, 1<<20)
	spec := NewBatchSpec(0)
	assertNoAllocs(t, func() {
		_, _, _, _ = EncodeLines(dst[:0], spec, lines, 1, 1<<20)
	})
}

func FuzzEncodeLines(f *testing.F) {
	f.Add(uint64(1), uint64(2), 10, 4096, false)
	f.Add(uint64(3), uint64(4), 300, 100000, true)
	f.Fuzz(func(t *testing.T, s1, s2 uint64, n, maxBytes int, lat bool) {
		if n <= 0 || n > 500 || maxBytes < 0 || maxBytes > 1<<22 {
			return
		}
		lines, recs := linesOf(rand.New(rand.NewPCG(s1, s2)), n)
		spec := NewBatchSpec(int64(s1 >> 20))
		spec.LogAppendTime = lat
		got, info, used, err := EncodeLines(nil, spec, lines, 1_800_000_000_000, maxBytes)
		want, winfo, werr := EncodeSequential(nil, spec, recs, 1_800_000_000_000, maxBytes)
		if werr != nil {
			require.ErrorIs(t, err, ErrBatchTooLarge)
			require.ErrorIs(t, werr, ErrBatchTooLarge)
			return
		}
		require.NoError(t, err)
		require.Equal(t, want, got)
		require.Equal(t, winfo, info)
		require.Equal(t, info.Records, bytes.Count(lines[:used], []byte{'\n'}))
	})
}

// BenchmarkEncodeLines frames and encodes 1 MiB of 100-byte lines (what
// one WRITE to an append file carries) into 16 KiB batches.
func BenchmarkEncodeLines(b *testing.B) {
	lines := bytes.Repeat(append(bytes.Repeat([]byte("v"), 99), '\n'), 10486)
	dst := make([]byte, 0, 2<<20)
	spec := NewBatchSpec(0)
	b.SetBytes(int64(len(lines)))
	for b.Loop() {
		out := dst[:0]
		for rest := lines; len(rest) > 0; {
			var used int
			var err error
			out, _, used, err = EncodeLines(out, spec, rest, 1, 16<<10)
			if err != nil {
				b.Fatal(err)
			}
			rest = rest[used:]
		}
	}
}
