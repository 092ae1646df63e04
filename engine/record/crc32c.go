package record

import (
	"hash/crc32"
	"math/bits"
)

// CRC-32C (Castagnoli) of batches, the cost every read and append pays per
// byte. Where the CPU multiplies carry-less on 512-bit registers
// (VPCLMULQDQ with AVX-512), long inputs are folded 256 bytes at a time
// (crc32c_amd64.s); elsewhere, and for the last bytes, hash/crc32 (its
// SSE4.2 three-stream loop on amd64).
//
// Folding. Read the input as a polynomial over GF(2), bit 0 of byte 0 the
// highest power (CRC-32C is bit-reflected). A 128-bit block A (16 bytes,
// loaded little-endian: its low quadword U the first 8 bytes, its high L
// the last) that lies D bits before a block B can be moved onto B without
// changing the CRC:
//
//	A·x^D = U·x^(D+64) + L·x^D ≡ U·(x^(D+64) mod P) + L·(x^D mod P)  (mod P)
//
// and both products are 64 × 32-bit carry-less multiplications whose
// results (at most 96 bits) are xored into B. Carry-less multiplication of
// two bit-reflected operands yields the reflected product shifted by one
// bit (one power of x too many), so the constants are x^(D+63) mod P and
// x^(D-1) mod P, each bit-reflected into 64 bits. The loop keeps 16 blocks
// in four 512-bit registers and moves each 2048 bits forward per step;
// then the registers fold into one (512 bits apart), its four lanes into
// the last (128 bits apart), and the 16 bytes left have the input's CRC
// from a zero state, which the CRC32 instruction computes. The CRC state
// going in is xored into the first four bytes (for a reflected CRC, a
// state S before data D is the zero state before D with S xored into its
// first four bytes).

// foldKeys are the folding constants: per distance, the quadword that
// multiplies U and the one that multiplies L.
type foldKeys struct {
	d2048 [2]uint64
	d512  [2]uint64
	d128  [2]uint64
}

var (
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
	keys       = newFoldKeys()
)

// castagnoliPolyNormal is CRC-32C's polynomial with x^32 left out, highest
// power first (castagnoliPoly reflected).
const castagnoliPolyNormal = 0x1edc6f41

// xPowMod returns x^e mod P (P the CRC-32C polynomial), highest power at
// bit 31.
func xPowMod(e int) uint64 {
	r := uint64(1)
	for range e {
		r <<= 1
		if r&(1<<32) != 0 {
			r ^= 1<<32 | castagnoliPolyNormal
		}
	}
	return r
}

// foldKey is the pair of constants that moves a block d bits forward.
func foldKey(d int) [2]uint64 {
	return [2]uint64{bits.Reverse64(xPowMod(d + 63)), bits.Reverse64(xPowMod(d - 1))}
}

func newFoldKeys() *foldKeys {
	return &foldKeys{d2048: foldKey(2048), d512: foldKey(512), d128: foldKey(128)}
}

// foldMin is the shortest input worth folding: below it the setup and the
// final reduction cost more than hash/crc32's loop saves.
const foldMin = 1024

// updateCastagnoli is crc32.Update(crc, castagnoli, p), folded where the
// CPU allows (canFold).
func updateCastagnoli(crc uint32, p []byte) uint32 {
	if canFold && len(p) >= foldMin {
		n := len(p) &^ 255
		crc = ^foldCastagnoli(^crc, p[:n], keys)
		p = p[n:]
	}
	return crc32.Update(crc, castagnoli, p)
}

// checksumCastagnoli is crc32.Checksum(p, castagnoli).
func checksumCastagnoli(p []byte) uint32 { return updateCastagnoli(0, p) }
