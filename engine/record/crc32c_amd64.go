package record

// foldCastagnoli returns the raw CRC-32C state after p from state crc; len(p)
// is a non-zero multiple of 256 (crc32c_amd64.s).
//
//go:noescape
func foldCastagnoli(crc uint32, p []byte, k *foldKeys) uint32

func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)
func xgetbv() (eax uint32)

// canFold reports VPCLMULQDQ on 512-bit registers with the registers'
// state saved by the OS, and SSE4.2's CRC32 instruction.
var canFold = detectFold()

func detectFold() bool {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return false
	}
	_, _, ecx1, _ := cpuid(1, 0)
	const (
		sse42     = 1 << 20
		osxsave   = 1 << 27
		pclmulqdq = 1 << 1
	)
	if ecx1&(sse42|osxsave|pclmulqdq) != sse42|osxsave|pclmulqdq {
		return false
	}
	// XCR0: SSE, AVX, opmask, upper ZMM0-15, ZMM16-31 state enabled.
	if xgetbv()&0xe6 != 0xe6 {
		return false
	}
	_, ebx7, ecx7, _ := cpuid(7, 0)
	const (
		avx512f    = 1 << 16 // ebx
		vpclmulqdq = 1 << 10 // ecx
	)
	return ebx7&avx512f != 0 && ecx7&vpclmulqdq != 0
}
