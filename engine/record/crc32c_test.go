package record

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestUpdateCastagnoli: the folded CRC equals hash/crc32's for every
// length around the folding's thresholds and steps, at odd alignments and
// from any state.
func TestUpdateCastagnoli(t *testing.T) {
	t.Logf("folding: %v", canFold)
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 64<<10+64)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	lengths := []int{0, 1, 15, 255, 256, 257, foldMin - 1, foldMin, foldMin + 1, 1279, 1280, 1281, 4096, 8191, 8192, 65536}
	for range 200 {
		lengths = append(lengths, rng.IntN(64<<10))
	}
	for _, n := range lengths {
		for _, align := range []int{0, 1, 7, 33} {
			p := buf[align : align+n]
			crc := rng.Uint32()
			require.Equal(t, crc32.Update(crc, castagnoli, p), updateCastagnoli(crc, p), "len %d align %d", n, align)
			require.Equal(t, crc32.Checksum(p, castagnoli), checksumCastagnoli(p), "len %d align %d", n, align)
		}
	}
	zeros := make([]byte, 4096)
	require.Equal(t, crc32.Checksum(zeros, castagnoli), checksumCastagnoli(zeros))
}

func BenchmarkCastagnoli(b *testing.B) {
	for _, n := range []int{1 << 10, 16 << 10, 1 << 20} {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(i * 7)
		}
		b.Run("hash-crc32/"+sizeLabel(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				crc32.Checksum(p, castagnoli)
			}
		})
		b.Run("folded/"+sizeLabel(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				checksumCastagnoli(p)
			}
		})
	}
}

func sizeLabel(n int) string {
	if n >= 1<<20 {
		return string(rune('0'+n>>20)) + "MiB"
	}
	return itoa(n>>10) + "KiB"
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}
