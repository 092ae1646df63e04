#include "textflag.h"

// CRC-32C by carry-less multiplication (crc32c.go explains the folding and
// the constants). Go's operand order: VPCLMULQDQ $imm, src2, src1, dst;
// imm 0x00 multiplies the low quadwords of src1 and src2, 0x11 the high ones.

// func foldCastagnoli(crc uint32, p []byte, k *foldKeys) uint32
// crc is the raw state (not inverted); len(p) is a non-zero multiple of 256.
TEXT ·foldCastagnoli(SB), NOSPLIT, $0-44
	MOVL  crc+0(FP), AX
	MOVQ  p_base+8(FP), SI
	MOVQ  p_len+16(FP), CX
	MOVQ  k+32(FP), DX

	// Four accumulators of four 128-bit lanes: the first 256 bytes, the
	// state xored into the first four.
	VMOVDQU64 (SI), Z0
	VMOVDQU64 64(SI), Z1
	VMOVDQU64 128(SI), Z2
	VMOVDQU64 192(SI), Z3
	VMOVD     AX, X4 // zeroes the rest of Z4
	VPXORQ    Z4, Z0, Z0
	ADDQ      $256, SI
	SUBQ      $256, CX

	// Fold each lane 2048 bits forward into the next 256 bytes.
	VBROADCASTI32X4 0(DX), Z5

loop256:
	CMPQ CX, $256
	JB   reduce
	VPCLMULQDQ $0x00, Z5, Z0, Z6
	VPCLMULQDQ $0x11, Z5, Z0, Z0
	VPCLMULQDQ $0x00, Z5, Z1, Z7
	VPCLMULQDQ $0x11, Z5, Z1, Z1
	VPCLMULQDQ $0x00, Z5, Z2, Z8
	VPCLMULQDQ $0x11, Z5, Z2, Z2
	VPCLMULQDQ $0x00, Z5, Z3, Z9
	VPCLMULQDQ $0x11, Z5, Z3, Z3
	VPTERNLOGQ $0x96, (SI), Z6, Z0
	VPTERNLOGQ $0x96, 64(SI), Z7, Z1
	VPTERNLOGQ $0x96, 128(SI), Z8, Z2
	VPTERNLOGQ $0x96, 192(SI), Z9, Z3
	ADDQ       $256, SI
	SUBQ       $256, CX
	JMP        loop256

reduce:
	// Z0 into Z1, Z1 into Z2, Z2 into Z3: 512 bits forward each.
	VBROADCASTI32X4 16(DX), Z5
	VPCLMULQDQ      $0x00, Z5, Z0, Z6
	VPCLMULQDQ      $0x11, Z5, Z0, Z0
	VPTERNLOGQ      $0x96, Z6, Z0, Z1
	VPCLMULQDQ      $0x00, Z5, Z1, Z6
	VPCLMULQDQ      $0x11, Z5, Z1, Z1
	VPTERNLOGQ      $0x96, Z6, Z1, Z2
	VPCLMULQDQ      $0x00, Z5, Z2, Z6
	VPCLMULQDQ      $0x11, Z5, Z2, Z2
	VPTERNLOGQ      $0x96, Z6, Z2, Z3

	// The four lanes of Z3 into its last: 128 bits forward each.
	VMOVDQU         32(DX), X5
	VEXTRACTI32X4   $1, Z3, X1
	VEXTRACTI32X4   $2, Z3, X2
	VEXTRACTI32X4   $3, Z3, X7
	VPCLMULQDQ      $0x00, X5, X3, X6
	VPCLMULQDQ      $0x11, X5, X3, X3
	VPXOR           X6, X1, X1
	VPXOR           X3, X1, X1
	VPCLMULQDQ      $0x00, X5, X1, X6
	VPCLMULQDQ      $0x11, X5, X1, X1
	VPXOR           X6, X2, X2
	VPXOR           X1, X2, X2
	VPCLMULQDQ      $0x00, X5, X2, X6
	VPCLMULQDQ      $0x11, X5, X2, X2
	VPXOR           X6, X7, X7
	VPXOR           X2, X7, X7

	// What is left is 16 bytes with the same CRC: the CRC32 instruction
	// takes them from a zero state.
	VMOVQ   X7, R8
	VPEXTRQ $1, X7, R9
	VZEROUPPER
	XORL    AX, AX
	CRC32Q  R8, AX
	CRC32Q  R9, AX
	MOVL    AX, ret+40(FP)
	RET

// func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL leaf+0(FP), AX
	MOVL sub+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// func xgetbv() (eax uint32)
TEXT ·xgetbv(SB), NOSPLIT, $0-4
	MOVL $0, CX
	XGETBV
	MOVL AX, eax+0(FP)
	RET
