//go:build !purego

#include "textflag.h"

// The 4-row kernels come at two widths with the same steps: kern4x16 keeps a 4 × 16
// block of c in eight AVX2 registers (Y, 32 bytes each), kern4x32z a 4 × 32 block in
// eight AVX-512 registers (Z, 64 bytes each). The steps are written once, as macros whose
// arguments are the registers and their width w in bytes: c0…c7 hold the block of c (two
// registers a row), b0 and b1 a row of b, a0…a3 the four broadcasts of a. Every kernel
// finds c at DX with its rows R10 bytes apart, and a's four rows at SI, R11, R12, R13.

// LOADC4 loads the block of c into c0…c7.
#define LOADC4(w, c0, c1, c2, c3, c4, c5, c6, c7) \
	MOVQ DX, AX; \
	VMOVUPS (AX), c0; \
	VMOVUPS w(AX), c1; \
	ADDQ R10, AX; \
	VMOVUPS (AX), c2; \
	VMOVUPS w(AX), c3; \
	ADDQ R10, AX; \
	VMOVUPS (AX), c4; \
	VMOVUPS w(AX), c5; \
	ADDQ R10, AX; \
	VMOVUPS (AX), c6; \
	VMOVUPS w(AX), c7

// STOREC4 stores c0…c7 back into the block of c.
#define STOREC4(w, c0, c1, c2, c3, c4, c5, c6, c7) \
	MOVQ DX, AX; \
	VMOVUPS c0, (AX); \
	VMOVUPS c1, w(AX); \
	ADDQ R10, AX; \
	VMOVUPS c2, (AX); \
	VMOVUPS c3, w(AX); \
	ADDQ R10, AX; \
	VMOVUPS c4, (AX); \
	VMOVUPS c5, w(AX); \
	ADDQ R10, AX; \
	VMOVUPS c6, (AX); \
	VMOVUPS c7, w(AX)

// STEP4 is one step p of the sum: b's row p is in b0 and b1, and a's column p is at
// offset at of each of a's rows; c0…c7 += a[r][p] · (b0, b1) for the four rows r.
#define STEP4(at, b0, b1, a0, a1, a2, a3, c0, c1, c2, c3, c4, c5, c6, c7) \
	VBROADCASTSS (SI)(at), a0; \
	VFMADD231PS b0, a0, c0; \
	VFMADD231PS b1, a0, c1; \
	VBROADCASTSS (R11)(at), a1; \
	VFMADD231PS b0, a1, c2; \
	VFMADD231PS b1, a1, c3; \
	VBROADCASTSS (R12)(at), a2; \
	VFMADD231PS b0, a2, c4; \
	VFMADD231PS b1, a2, c5; \
	VBROADCASTSS (R13)(at), a3; \
	VFMADD231PS b0, a3, c6; \
	VFMADD231PS b1, a3, c7

// ROWS4 points R11, R12 and R13 at a's rows 1 to 3, R8 being lda in bytes.
#define ROWS4 \
	LEAQ (SI)(R8*1), R11; \
	LEAQ (R11)(R8*1), R12; \
	LEAQ (R12)(R8*1), R13

// KERN4 is kern4x16 (name ·kern4x16, Y registers, w 32) or kern4x32z (Z, w 64):
// c[r·ldc+j] += Σ_{p<k} a[r·lda+p] · b[p·ldb+j] for r < 4 and the 2w/4 columns j of c,
// the block of c held in c0…c7 for the whole sum.
#define KERN4(name, w, c0, c1, c2, c3, c4, c5, c6, c7, b0, b1, a0, a1, a2, a3) \
TEXT name(SB), NOSPLIT, $0-56; \
	MOVQ k+0(FP), CX; \
	MOVQ a+8(FP), SI; \
	MOVQ lda+16(FP), R8; \
	MOVQ b+24(FP), DI; \
	MOVQ ldb+32(FP), R9; \
	MOVQ c+40(FP), DX; \
	MOVQ ldc+48(FP), R10; \
	SHLQ $2, R8; \
	SHLQ $2, R9; \
	SHLQ $2, R10; \
	ROWS4; \
	LOADC4(w, c0, c1, c2, c3, c4, c5, c6, c7); \
	XORQ AX, AX; \
	TESTQ CX, CX; \
	JZ store; \
loop: \
	VMOVUPS (DI), b0; \
	VMOVUPS w(DI), b1; \
	STEP4(AX*1, b0, b1, a0, a1, a2, a3, c0, c1, c2, c3, c4, c5, c6, c7); \
	ADDQ $4, AX; \
	ADDQ R9, DI; \
	DECQ CX; \
	JNZ loop; \
store: \
	STOREC4(w, c0, c1, c2, c3, c4, c5, c6, c7); \
	VZEROUPPER; \
	RET

// KERN4IDX is kern4x16idx or kern4x32zidx: KERN4 over the steps listed in idx only (cnt
// of them), b one packed panel whose rows are 1<<shift bytes apart (64 or 128).
#define KERN4IDX(name, w, shift, c0, c1, c2, c3, c4, c5, c6, c7, b0, b1, a0, a1, a2, a3) \
TEXT name(SB), NOSPLIT, $0-56; \
	MOVQ idx+0(FP), BX; \
	MOVQ cnt+8(FP), CX; \
	MOVQ a+16(FP), SI; \
	MOVQ lda+24(FP), R8; \
	MOVQ b+32(FP), DI; \
	MOVQ c+40(FP), DX; \
	MOVQ ldc+48(FP), R10; \
	SHLQ $2, R8; \
	SHLQ $2, R10; \
	ROWS4; \
	LOADC4(w, c0, c1, c2, c3, c4, c5, c6, c7); \
	TESTQ CX, CX; \
	JZ store; \
loop: \
	MOVLQSX (BX), AX; \
	MOVQ AX, R9; \
	SHLQ $shift, R9; \
	VMOVUPS (DI)(R9*1), b0; \
	VMOVUPS w(DI)(R9*1), b1; \
	STEP4(AX*4, b0, b1, a0, a1, a2, a3, c0, c1, c2, c3, c4, c5, c6, c7); \
	ADDQ $4, BX; \
	DECQ CX; \
	JNZ loop; \
store: \
	STOREC4(w, c0, c1, c2, c3, c4, c5, c6, c7); \
	VZEROUPPER; \
	RET

// func kern4x16(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int)
// For r < 4 and j < 16: c[r·ldc+j] += Σ_{p<k} a[r·lda+p] · b[p·ldb+j]. The 4 × 16 block
// of c stays in eight registers for the whole sum: per step two loads of b, four
// broadcasts of a and eight fused multiply-adds, no stores (axpy stores y every step).
KERN4(·kern4x16, 32, Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13)

// func kern4x16idx(idx *int32, cnt int, a *float32, lda int, b *float32, c *float32, ldc int)
// kern4x16 over the steps listed in idx only (cnt of them), b one packed panel (row
// stride 16): for a mostly zero a, the steps where some row of a is not zero. A list
// instead of a test per step: which steps are zero follows no pattern a branch
// predictor learns.
KERN4IDX(·kern4x16idx, 32, 6, Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13)

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
KERN4(·kern4x32z, 64, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13)

// func kern4x32zidx(idx *int32, cnt int, a *float32, lda int, b *float32, c *float32, ldc int)
// kern4x16idx with sixteen values to a register (AVX-512), b one packed panel of 32.
KERN4IDX(·kern4x32zidx, 64, 7, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13)

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
