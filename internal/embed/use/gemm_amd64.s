//go:build !purego

#include "textflag.h"

// func kern4x16(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)
// For r < 4 and j < 16: c[r·ldc+j] += Σ_{p<k} a[r·lda+p] · b[p·ldb+j]. The 4 × 16 block
// of c stays in eight registers for the whole sum: per step two loads of b, four
// broadcasts of a and eight fused multiply-adds, no stores (axpy stores y every step).
TEXT ·kern4x16(SB), NOSPLIT, $0-56
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ lda+16(FP), R8
	MOVQ b+24(FP), DI
	MOVQ ldb+32(FP), R9
	MOVQ c+40(FP), DX
	MOVQ ldc+48(FP), R10
	SHLQ $2, R8
	SHLQ $2, R9
	SHLQ $2, R10
	LEAQ (SI)(R8*1), R11
	LEAQ (R11)(R8*1), R12
	LEAQ (R12)(R8*1), R13

	MOVQ DX, AX
	VMOVUPS (AX), Y0
	VMOVUPS 32(AX), Y1
	ADDQ R10, AX
	VMOVUPS (AX), Y2
	VMOVUPS 32(AX), Y3
	ADDQ R10, AX
	VMOVUPS (AX), Y4
	VMOVUPS 32(AX), Y5
	ADDQ R10, AX
	VMOVUPS (AX), Y6
	VMOVUPS 32(AX), Y7

	XORQ AX, AX
	TESTQ CX, CX
	JZ store4

loop4:
	VMOVUPS (DI), Y8
	VMOVUPS 32(DI), Y9
	VBROADCASTSS (SI)(AX*1), Y10
	VFMADD231PS Y8, Y10, Y0
	VFMADD231PS Y9, Y10, Y1
	VBROADCASTSS (R11)(AX*1), Y11
	VFMADD231PS Y8, Y11, Y2
	VFMADD231PS Y9, Y11, Y3
	VBROADCASTSS (R12)(AX*1), Y12
	VFMADD231PS Y8, Y12, Y4
	VFMADD231PS Y9, Y12, Y5
	VBROADCASTSS (R13)(AX*1), Y13
	VFMADD231PS Y8, Y13, Y6
	VFMADD231PS Y9, Y13, Y7
	ADDQ $4, AX
	ADDQ R9, DI
	DECQ CX
	JNZ loop4

store4:
	MOVQ DX, AX
	VMOVUPS Y0, (AX)
	VMOVUPS Y1, 32(AX)
	ADDQ R10, AX
	VMOVUPS Y2, (AX)
	VMOVUPS Y3, 32(AX)
	ADDQ R10, AX
	VMOVUPS Y4, (AX)
	VMOVUPS Y5, 32(AX)
	ADDQ R10, AX
	VMOVUPS Y6, (AX)
	VMOVUPS Y7, 32(AX)
	VZEROUPPER
	RET

// func kern4x16idx(idx *int32, cnt int, a *float32, lda int, b *float32, c *float32, ldc int)
// kern4x16 over the steps listed in idx only (cnt of them), b one packed panel (row
// stride 16): for a mostly zero a, the steps where some row of a is not zero. A list
// instead of a test per step: which steps are zero follows no pattern a branch
// predictor learns.
TEXT ·kern4x16idx(SB), NOSPLIT, $0-56
	MOVQ idx+0(FP), BX
	MOVQ cnt+8(FP), CX
	MOVQ a+16(FP), SI
	MOVQ lda+24(FP), R8
	MOVQ b+32(FP), DI
	MOVQ c+40(FP), DX
	MOVQ ldc+48(FP), R10
	SHLQ $2, R8
	SHLQ $2, R10
	LEAQ (SI)(R8*1), R11
	LEAQ (R11)(R8*1), R12
	LEAQ (R12)(R8*1), R13

	MOVQ DX, AX
	VMOVUPS (AX), Y0
	VMOVUPS 32(AX), Y1
	ADDQ R10, AX
	VMOVUPS (AX), Y2
	VMOVUPS 32(AX), Y3
	ADDQ R10, AX
	VMOVUPS (AX), Y4
	VMOVUPS 32(AX), Y5
	ADDQ R10, AX
	VMOVUPS (AX), Y6
	VMOVUPS 32(AX), Y7

	TESTQ CX, CX
	JZ storeI

loopI:
	MOVLQSX (BX), AX
	MOVQ AX, R9
	SHLQ $6, R9
	VMOVUPS (DI)(R9*1), Y8
	VMOVUPS 32(DI)(R9*1), Y9
	VBROADCASTSS (SI)(AX*4), Y10
	VFMADD231PS Y8, Y10, Y0
	VFMADD231PS Y9, Y10, Y1
	VBROADCASTSS (R11)(AX*4), Y11
	VFMADD231PS Y8, Y11, Y2
	VFMADD231PS Y9, Y11, Y3
	VBROADCASTSS (R12)(AX*4), Y12
	VFMADD231PS Y8, Y12, Y4
	VFMADD231PS Y9, Y12, Y5
	VBROADCASTSS (R13)(AX*4), Y13
	VFMADD231PS Y8, Y13, Y6
	VFMADD231PS Y9, Y13, Y7
	ADDQ $4, BX
	DECQ CX
	JNZ loopI

storeI:
	MOVQ DX, AX
	VMOVUPS Y0, (AX)
	VMOVUPS Y1, 32(AX)
	ADDQ R10, AX
	VMOVUPS Y2, (AX)
	VMOVUPS Y3, 32(AX)
	ADDQ R10, AX
	VMOVUPS Y4, (AX)
	VMOVUPS Y5, 32(AX)
	ADDQ R10, AX
	VMOVUPS Y6, (AX)
	VMOVUPS Y7, 32(AX)
	VZEROUPPER
	RET

// func kern1x16(k int, a *float32, b *float32, c *float32)
// For j < 16: c[j] += Σ_{p<k} a[p] · b[16·p+j] (b is one packed panel), the 16 sums in
// two registers; a step whose a[p] is zero (most of the feed-forward input after relu)
// is skipped.
TEXT ·kern1x16(SB), NOSPLIT, $0-32
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ c+24(FP), DX
	VMOVUPS (DX), Y0
	VMOVUPS 32(DX), Y1
	VXORPS X14, X14, X14
	TESTQ CX, CX
	JZ store1

loop1:
	VMOVSS (SI), X10
	VUCOMISS X14, X10
	JNE do1
	JPS do1 // unordered: a NaN is not skipped
	JMP skip1

do1:
	VBROADCASTSS (SI), Y10
	VFMADD231PS (DI), Y10, Y0
	VFMADD231PS 32(DI), Y10, Y1

skip1:
	ADDQ $4, SI
	ADDQ $64, DI
	DECQ CX
	JNZ loop1

store1:
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VZEROUPPER
	RET

// func kern4x32z(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)
// kern4x16 with sixteen values to a register (AVX-512): a 4 × 32 block of c, b one
// packed panel of 32 (row stride ldb).
TEXT ·kern4x32z(SB), NOSPLIT, $0-56
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ lda+16(FP), R8
	MOVQ b+24(FP), DI
	MOVQ ldb+32(FP), R9
	MOVQ c+40(FP), DX
	MOVQ ldc+48(FP), R10
	SHLQ $2, R8
	SHLQ $2, R9
	SHLQ $2, R10
	LEAQ (SI)(R8*1), R11
	LEAQ (R11)(R8*1), R12
	LEAQ (R12)(R8*1), R13

	MOVQ DX, AX
	VMOVUPS (AX), Z0
	VMOVUPS 64(AX), Z1
	ADDQ R10, AX
	VMOVUPS (AX), Z2
	VMOVUPS 64(AX), Z3
	ADDQ R10, AX
	VMOVUPS (AX), Z4
	VMOVUPS 64(AX), Z5
	ADDQ R10, AX
	VMOVUPS (AX), Z6
	VMOVUPS 64(AX), Z7

	XORQ AX, AX
	TESTQ CX, CX
	JZ store4Z

loop4Z:
	VMOVUPS (DI), Z8
	VMOVUPS 64(DI), Z9
	VBROADCASTSS (SI)(AX*1), Z10
	VFMADD231PS Z8, Z10, Z0
	VFMADD231PS Z9, Z10, Z1
	VBROADCASTSS (R11)(AX*1), Z11
	VFMADD231PS Z8, Z11, Z2
	VFMADD231PS Z9, Z11, Z3
	VBROADCASTSS (R12)(AX*1), Z12
	VFMADD231PS Z8, Z12, Z4
	VFMADD231PS Z9, Z12, Z5
	VBROADCASTSS (R13)(AX*1), Z13
	VFMADD231PS Z8, Z13, Z6
	VFMADD231PS Z9, Z13, Z7
	ADDQ $4, AX
	ADDQ R9, DI
	DECQ CX
	JNZ loop4Z

store4Z:
	MOVQ DX, AX
	VMOVUPS Z0, (AX)
	VMOVUPS Z1, 64(AX)
	ADDQ R10, AX
	VMOVUPS Z2, (AX)
	VMOVUPS Z3, 64(AX)
	ADDQ R10, AX
	VMOVUPS Z4, (AX)
	VMOVUPS Z5, 64(AX)
	ADDQ R10, AX
	VMOVUPS Z6, (AX)
	VMOVUPS Z7, 64(AX)
	VZEROUPPER
	RET

// func kern4x32zidx(idx *int32, cnt int, a *float32, lda int, b *float32, c *float32, ldc int)
// kern4x16idx with sixteen values to a register (AVX-512), b one packed panel of 32.
TEXT ·kern4x32zidx(SB), NOSPLIT, $0-56
	MOVQ idx+0(FP), BX
	MOVQ cnt+8(FP), CX
	MOVQ a+16(FP), SI
	MOVQ lda+24(FP), R8
	MOVQ b+32(FP), DI
	MOVQ c+40(FP), DX
	MOVQ ldc+48(FP), R10
	SHLQ $2, R8
	SHLQ $2, R10
	LEAQ (SI)(R8*1), R11
	LEAQ (R11)(R8*1), R12
	LEAQ (R12)(R8*1), R13

	MOVQ DX, AX
	VMOVUPS (AX), Z0
	VMOVUPS 64(AX), Z1
	ADDQ R10, AX
	VMOVUPS (AX), Z2
	VMOVUPS 64(AX), Z3
	ADDQ R10, AX
	VMOVUPS (AX), Z4
	VMOVUPS 64(AX), Z5
	ADDQ R10, AX
	VMOVUPS (AX), Z6
	VMOVUPS 64(AX), Z7

	TESTQ CX, CX
	JZ storeIZ

loopIZ:
	MOVLQSX (BX), AX
	MOVQ AX, R9
	SHLQ $7, R9
	VMOVUPS (DI)(R9*1), Z8
	VMOVUPS 64(DI)(R9*1), Z9
	VBROADCASTSS (SI)(AX*4), Z10
	VFMADD231PS Z8, Z10, Z0
	VFMADD231PS Z9, Z10, Z1
	VBROADCASTSS (R11)(AX*4), Z11
	VFMADD231PS Z8, Z11, Z2
	VFMADD231PS Z9, Z11, Z3
	VBROADCASTSS (R12)(AX*4), Z12
	VFMADD231PS Z8, Z12, Z4
	VFMADD231PS Z9, Z12, Z5
	VBROADCASTSS (R13)(AX*4), Z13
	VFMADD231PS Z8, Z13, Z6
	VFMADD231PS Z9, Z13, Z7
	ADDQ $4, BX
	DECQ CX
	JNZ loopIZ

storeIZ:
	MOVQ DX, AX
	VMOVUPS Z0, (AX)
	VMOVUPS Z1, 64(AX)
	ADDQ R10, AX
	VMOVUPS Z2, (AX)
	VMOVUPS Z3, 64(AX)
	ADDQ R10, AX
	VMOVUPS Z4, (AX)
	VMOVUPS Z5, 64(AX)
	ADDQ R10, AX
	VMOVUPS Z6, (AX)
	VMOVUPS Z7, 64(AX)
	VZEROUPPER
	RET

// func kern1x32(k int, a *float32, b *float32, c *float32)
// kern1x16 for one packed panel of 32, the 32 sums in four registers.
TEXT ·kern1x32(SB), NOSPLIT, $0-32
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ c+24(FP), DX
	VMOVUPS (DX), Y0
	VMOVUPS 32(DX), Y1
	VMOVUPS 64(DX), Y2
	VMOVUPS 96(DX), Y3
	VXORPS X14, X14, X14
	TESTQ CX, CX
	JZ store32

loop32:
	VMOVSS (SI), X10
	VUCOMISS X14, X10
	JNE do32
	JPS do32 // unordered: a NaN is not skipped
	JMP skip32

do32:
	VBROADCASTSS (SI), Y10
	VFMADD231PS (DI), Y10, Y0
	VFMADD231PS 32(DI), Y10, Y1
	VFMADD231PS 64(DI), Y10, Y2
	VFMADD231PS 96(DI), Y10, Y3

skip32:
	ADDQ $4, SI
	ADDQ $128, DI
	DECQ CX
	JNZ loop32

store32:
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	VMOVUPS Y3, 96(DX)
	VZEROUPPER
	RET

// func dotAVX2(x, y []float32) float32
// Σ x[i]·y[i] for i < len(x); len(x) is a multiple of 16 and len(y) ≥ len(x).
TEXT ·dotAVX2(SB), NOSPLIT, $0-52
	MOVQ x_base+0(FP), SI
	MOVQ x_len+8(FP), CX
	MOVQ y_base+24(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	SHRQ $4, CX
	JZ dotdone

dotloop:
	VMOVUPS (SI), Y2
	VMOVUPS 32(SI), Y3
	VFMADD231PS (DI), Y2, Y0
	VFMADD231PS 32(DI), Y3, Y1
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ dotloop

dotdone:
	VADDPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	MOVSS X0, ret+48(FP)
	VZEROUPPER
	RET
