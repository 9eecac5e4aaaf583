//go:build amd64

#include "textflag.h"

// Integer dot products of quantized weight rows with one int8-quantized activation row, and
// dequantization to float32, for AVX2 + FMA + F16C. See quant.go for the row layout (scales
// first, padded to groups of 8 blocks, then the quants) and for the generic versions these
// must match.
//
// gemv*: for r in [0, nrows): out[r] = Σ_b d_w·d_x·Σ_j q_w·q_x + offset term, rows back to back
// from w, nb blocks a row; xq holds the activation's int8 values, xds its d[nbp] then s[nbp].
//
// Each group prefetches the quants 2 KB ahead (hardware prefetch alone left decode, whose weights
// stream from DRAM, at a third of the in-cache speed).
//
// Registers: DI out, SI row, CX rows left, R10 nb, R11 xq, R12 xds; per row BX d, R14 m,
// DX quants, R13 xd, R15 xs, R9 xq, R8 blocks left, AX tail index. Y0/Y8 accumulators (even
// and odd blocks), Y7 offset accumulator, Y15 0x0f bytes, Y14 int16 ones, scale-32(SP) the
// current group's eight d_w·d_x.

#define CONSTS \
	MOVL $0x0f0f0f0f, AX \
	VMOVD AX, X15 \
	VPBROADCASTD X15, Y15 \
	MOVL $0x00010001, AX \
	VMOVD AX, X14 \
	VPBROADCASTD X14, Y14

#define ARGS \
	MOVQ out+0(FP), DI \
	MOVQ w+8(FP), SI \
	MOVQ nrows+16(FP), CX \
	MOVQ nb+24(FP), R10 \
	MOVQ xq+32(FP), R11 \
	MOVQ xds+40(FP), R12

// ROW_START: AX = 2·nbp (bytes of nbp halves); pointers of the row.
#define ROW_START \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y8, Y8, Y8 \
	VXORPS Y7, Y7, Y7 \
	MOVQ R10, AX \
	ADDQ $7, AX \
	ANDQ $-8, AX \
	SHLQ $1, AX \
	MOVQ SI, BX \
	LEAQ (SI)(AX*1), R14 \
	MOVQ R12, R13 \
	LEAQ (R12)(AX*2), R15 \
	MOVQ R11, R9 \
	MOVQ R10, R8

// HSUM leaves the sum of Y0's lanes in X0's low lane.
#define HSUM \
	VADDPS Y8, Y0, Y0 \
	VEXTRACTF128 $1, Y0, X1 \
	VADDPS X1, X0, X0 \
	VHADDPS X0, X0, X0 \
	VHADDPS X0, X0, X0

// HSUM7 leaves the sum of Y7's lanes in X7's low lane.
#define HSUM7 \
	VEXTRACTF128 $1, Y7, X1 \
	VADDPS X1, X7, X7 \
	VHADDPS X7, X7, X7 \
	VHADDPS X7, X7, X7

// Q4DOT: Y1 = float32 of the 8 int32 partial dots of the nibbles at q(DX) with xq at x(R9).
#define Q4DOT(q, x) \
	VMOVDQU     q(DX), X1 \
	VPSRLW      $4, X1, X2 \
	VINSERTI128 $1, X2, Y1, Y1 \
	VPAND       Y15, Y1, Y1 \
	VPMADDUBSW  x(R9), Y1, Y1 \
	VPMADDWD    Y14, Y1, Y1 \
	VCVTDQ2PS   Y1, Y1

#define Q8DOT(q, x) \
	VMOVDQU     q(DX), Y1 \
	VPABSB      Y1, Y2 \
	VMOVDQU     x(R9), Y3 \
	VPSIGNB     Y1, Y3, Y3 \
	VPMADDUBSW  Y3, Y2, Y1 \
	VPMADDWD    Y14, Y1, Y1 \
	VCVTDQ2PS   Y1, Y1

#define FMA_SCALE(s, acc) \
	VBROADCASTSS scale-32+s(SP), Y6 \
	VFMADD231PS  Y6, Y1, acc

// GROUP8(DOT, qstride): eight blocks with constant offsets.
#define GROUP8(DOT, qs) \
	DOT(0, 0) \
	FMA_SCALE(0, Y0) \
	DOT(qs, 32) \
	FMA_SCALE(4, Y8) \
	DOT(2*qs, 64) \
	FMA_SCALE(8, Y0) \
	DOT(3*qs, 96) \
	FMA_SCALE(12, Y8) \
	DOT(4*qs, 128) \
	FMA_SCALE(16, Y0) \
	DOT(5*qs, 160) \
	FMA_SCALE(20, Y8) \
	DOT(6*qs, 192) \
	FMA_SCALE(24, Y0) \
	DOT(7*qs, 224) \
	FMA_SCALE(28, Y8)

// func gemvQ4_1AVX2(out *float32, w *byte, nrows, nb int, xq *int8, xds *float32)
TEXT ·gemvQ4_1AVX2(SB), NOSPLIT, $32-48
	ARGS
	CONSTS
q41row:
	TESTQ CX, CX
	JZ    q41done
	ROW_START
	LEAQ  (SI)(AX*2), DX
q41grp:
	PREFETCHT0  2048(DX)
	PREFETCHT0  2112(DX)
	PREFETCHT0  2176(DX)
	VCVTPH2PS   (BX), Y4
	VMULPS      (R13), Y4, Y4
	VMOVUPS     Y4, scale-32(SP)
	VCVTPH2PS   (R14), Y5
	VFMADD231PS (R15), Y5, Y7
	CMPQ        R8, $8
	JB          q41tail
	GROUP8(Q4DOT, 16)
	ADDQ        $128, DX
	ADDQ        $256, R9
	ADDQ        $16, BX
	ADDQ        $16, R14
	ADDQ        $32, R13
	ADDQ        $32, R15
	SUBQ        $8, R8
	JNZ         q41grp
	JMP         q41end
q41tail:
	XORQ        AX, AX
q41tblk:
	Q4DOT(0, 0)
	VBROADCASTSS scale-32(SP)(AX*4), Y6
	VFMADD231PS Y6, Y1, Y0
	ADDQ        $16, DX
	ADDQ        $32, R9
	INCQ        AX
	CMPQ        AX, R8
	JB          q41tblk
q41end:
	HSUM
	HSUM7
	VADDSS      X7, X0, X0
	VMOVSS      X0, (DI)
	ADDQ        $4, DI
	MOVQ        DX, SI
	DECQ        CX
	JMP         q41row
q41done:
	VZEROUPPER
	RET

// func gemvQ4_0AVX2(out *float32, w *byte, nrows, nb int, xq *int8, xds *float32)
TEXT ·gemvQ4_0AVX2(SB), NOSPLIT, $32-48
	ARGS
	CONSTS
q40row:
	TESTQ CX, CX
	JZ    q40done
	ROW_START
	MOVQ  R14, DX
q40grp:
	PREFETCHT0  2048(DX)
	PREFETCHT0  2112(DX)
	PREFETCHT0  2176(DX)
	VCVTPH2PS   (BX), Y4
	VFMADD231PS (R15), Y4, Y7 // Σ d·s
	VMULPS      (R13), Y4, Y4
	VMOVUPS     Y4, scale-32(SP)
	CMPQ        R8, $8
	JB          q40tail
	GROUP8(Q4DOT, 16)
	ADDQ        $128, DX
	ADDQ        $256, R9
	ADDQ        $16, BX
	ADDQ        $32, R13
	ADDQ        $32, R15
	SUBQ        $8, R8
	JNZ         q40grp
	JMP         q40end
q40tail:
	XORQ        AX, AX
q40tblk:
	Q4DOT(0, 0)
	VBROADCASTSS scale-32(SP)(AX*4), Y6
	VFMADD231PS Y6, Y1, Y0
	ADDQ        $16, DX
	ADDQ        $32, R9
	INCQ        AX
	CMPQ        AX, R8
	JB          q40tblk
q40end:
	HSUM
	HSUM7
	MOVL        $0xc1000000, AX // −8
	VMOVD       AX, X2
	VFMADD231SS X2, X7, X0
	VMOVSS      X0, (DI)
	ADDQ        $4, DI
	MOVQ        DX, SI
	DECQ        CX
	JMP         q40row
q40done:
	VZEROUPPER
	RET

// func gemvQ8_0AVX2(out *float32, w *byte, nrows, nb int, xq *int8, xds *float32)
TEXT ·gemvQ8_0AVX2(SB), NOSPLIT, $32-48
	ARGS
	CONSTS
q80row:
	TESTQ CX, CX
	JZ    q80done
	ROW_START
	MOVQ  R14, DX
q80grp:
	PREFETCHT0  2048(DX)
	PREFETCHT0  2112(DX)
	PREFETCHT0  2176(DX)
	VCVTPH2PS   (BX), Y4
	VMULPS      (R13), Y4, Y4
	VMOVUPS     Y4, scale-32(SP)
	CMPQ        R8, $8
	JB          q80tail
	GROUP8(Q8DOT, 32)
	ADDQ        $256, DX
	ADDQ        $256, R9
	ADDQ        $16, BX
	ADDQ        $32, R13
	SUBQ        $8, R8
	JNZ         q80grp
	JMP         q80end
q80tail:
	XORQ        AX, AX
q80tblk:
	Q8DOT(0, 0)
	VBROADCASTSS scale-32(SP)(AX*4), Y6
	VFMADD231PS Y6, Y1, Y0
	ADDQ        $32, DX
	ADDQ        $32, R9
	INCQ        AX
	CMPQ        AX, R8
	JB          q80tblk
q80end:
	HSUM
	VMOVSS      X0, (DI)
	ADDQ        $4, DI
	MOVQ        DX, SI
	DECQ        CX
	JMP         q80row
q80done:
	VZEROUPPER
	RET

// Dequantization of one row: nb blocks, scales at d (and m), quants at q, into 32·nb floats at
// dst; ggml's arithmetic (no FMA).

// func dequantQ4_1AVX2(dst *float32, d, m, q *byte, nb int)
TEXT ·dequantQ4_1AVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ d+8(FP), BX
	MOVQ m+16(FP), R14
	MOVQ q+24(FP), SI
	MOVQ nb+32(FP), CX
	MOVL $0x0f0f0f0f, AX
	VMOVD AX, X15
	VPBROADCASTD X15, X15
	TESTQ CX, CX
	JZ    dq41done
dq41:
	VPBROADCASTW (BX), X4
	VCVTPH2PS    X4, Y5
	VPBROADCASTW (R14), X4
	VCVTPH2PS    X4, Y6
	VMOVDQU      (SI), X1
	VPAND        X15, X1, X2
	VPSRLW       $4, X1, X3
	VPAND        X15, X3, X3
	VPMOVZXBD    X2, Y8
	VPSRLDQ      $8, X2, X2
	VPMOVZXBD    X2, Y9
	VPMOVZXBD    X3, Y10
	VPSRLDQ      $8, X3, X3
	VPMOVZXBD    X3, Y11
	VCVTDQ2PS    Y8, Y8
	VCVTDQ2PS    Y9, Y9
	VCVTDQ2PS    Y10, Y10
	VCVTDQ2PS    Y11, Y11
	VMULPS       Y5, Y8, Y8
	VMULPS       Y5, Y9, Y9
	VMULPS       Y5, Y10, Y10
	VMULPS       Y5, Y11, Y11
	VADDPS       Y6, Y8, Y8
	VADDPS       Y6, Y9, Y9
	VADDPS       Y6, Y10, Y10
	VADDPS       Y6, Y11, Y11
	VMOVUPS      Y8, (DI)
	VMOVUPS      Y9, 32(DI)
	VMOVUPS      Y10, 64(DI)
	VMOVUPS      Y11, 96(DI)
	ADDQ         $2, BX
	ADDQ         $2, R14
	ADDQ         $16, SI
	ADDQ         $128, DI
	DECQ         CX
	JNZ          dq41
dq41done:
	VZEROUPPER
	RET

// func dequantQ4_0AVX2(dst *float32, d, q *byte, nb int)
TEXT ·dequantQ4_0AVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ d+8(FP), BX
	MOVQ q+16(FP), SI
	MOVQ nb+24(FP), CX
	MOVL $0x0f0f0f0f, AX
	VMOVD AX, X15
	VPBROADCASTD X15, X15
	MOVL $8, AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	TESTQ CX, CX
	JZ    dq40done
dq40:
	VPBROADCASTW (BX), X4
	VCVTPH2PS    X4, Y5
	VMOVDQU      (SI), X1
	VPAND        X15, X1, X2
	VPSRLW       $4, X1, X3
	VPAND        X15, X3, X3
	VPMOVZXBD    X2, Y8
	VPSRLDQ      $8, X2, X2
	VPMOVZXBD    X2, Y9
	VPMOVZXBD    X3, Y10
	VPSRLDQ      $8, X3, X3
	VPMOVZXBD    X3, Y11
	VPSUBD       Y14, Y8, Y8
	VPSUBD       Y14, Y9, Y9
	VPSUBD       Y14, Y10, Y10
	VPSUBD       Y14, Y11, Y11
	VCVTDQ2PS    Y8, Y8
	VCVTDQ2PS    Y9, Y9
	VCVTDQ2PS    Y10, Y10
	VCVTDQ2PS    Y11, Y11
	VMULPS       Y5, Y8, Y8
	VMULPS       Y5, Y9, Y9
	VMULPS       Y5, Y10, Y10
	VMULPS       Y5, Y11, Y11
	VMOVUPS      Y8, (DI)
	VMOVUPS      Y9, 32(DI)
	VMOVUPS      Y10, 64(DI)
	VMOVUPS      Y11, 96(DI)
	ADDQ         $2, BX
	ADDQ         $16, SI
	ADDQ         $128, DI
	DECQ         CX
	JNZ          dq40
dq40done:
	VZEROUPPER
	RET

// func dequantQ8_0AVX2(dst *float32, d, q *byte, nb int)
TEXT ·dequantQ8_0AVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ d+8(FP), BX
	MOVQ q+16(FP), SI
	MOVQ nb+24(FP), CX
	TESTQ CX, CX
	JZ    dq80done
dq80:
	VPBROADCASTW (BX), X4
	VCVTPH2PS    X4, Y5
	VPMOVSXBD    (SI), Y8
	VPMOVSXBD    8(SI), Y9
	VPMOVSXBD    16(SI), Y10
	VPMOVSXBD    24(SI), Y11
	VCVTDQ2PS    Y8, Y8
	VCVTDQ2PS    Y9, Y9
	VCVTDQ2PS    Y10, Y10
	VCVTDQ2PS    Y11, Y11
	VMULPS       Y5, Y8, Y8
	VMULPS       Y5, Y9, Y9
	VMULPS       Y5, Y10, Y10
	VMULPS       Y5, Y11, Y11
	VMOVUPS      Y8, (DI)
	VMOVUPS      Y9, 32(DI)
	VMOVUPS      Y10, 64(DI)
	VMOVUPS      Y11, 96(DI)
	ADDQ         $2, BX
	ADDQ         $32, SI
	ADDQ         $128, DI
	DECQ         CX
	JNZ          dq80
dq80done:
	VZEROUPPER
	RET

// The same products with int16 activations (xq holds 32 int16 a block, 64 bytes): weights
// widened to int16, VPMADDWD on both halves of the block.

// Q4DOT16: Y1 = float32 of the 8 int32 partial dots of the nibbles at q(DX) with the int16
// activations at x(R9).
#define Q4DOT16(q, x) \
	VMOVDQU     q(DX), X1 \
	VPSRLW      $4, X1, X2 \
	VPAND       X15, X1, X1 \
	VPAND       X15, X2, X2 \
	VPMOVZXBW   X1, Y1 \
	VPMOVZXBW   X2, Y2 \
	VPMADDWD    x(R9), Y1, Y1 \
	VPMADDWD    x+32(R9), Y2, Y2 \
	VPADDD      Y2, Y1, Y1 \
	VCVTDQ2PS   Y1, Y1

#define Q8DOT16(q, x) \
	VPMOVSXBW   q(DX), Y1 \
	VPMOVSXBW   q+16(DX), Y2 \
	VPMADDWD    x(R9), Y1, Y1 \
	VPMADDWD    x+32(R9), Y2, Y2 \
	VPADDD      Y2, Y1, Y1 \
	VCVTDQ2PS   Y1, Y1

#define GROUP8W(DOT, qs) \
	DOT(0, 0) \
	FMA_SCALE(0, Y0) \
	DOT(qs, 64) \
	FMA_SCALE(4, Y8) \
	DOT(2*qs, 128) \
	FMA_SCALE(8, Y0) \
	DOT(3*qs, 192) \
	FMA_SCALE(12, Y8) \
	DOT(4*qs, 256) \
	FMA_SCALE(16, Y0) \
	DOT(5*qs, 320) \
	FMA_SCALE(20, Y8) \
	DOT(6*qs, 384) \
	FMA_SCALE(24, Y0) \
	DOT(7*qs, 448) \
	FMA_SCALE(28, Y8)

// func gemvQ4_1x16AVX2(out *float32, w *byte, nrows, nb int, xq *int16, xds *float32)
TEXT ·gemvQ4_1x16AVX2(SB), NOSPLIT, $32-48
	ARGS
	CONSTS
w41row:
	TESTQ CX, CX
	JZ    w41done
	ROW_START
	LEAQ  (SI)(AX*2), DX
w41grp:
	PREFETCHT0  2048(DX)
	PREFETCHT0  2112(DX)
	PREFETCHT0  2176(DX)
	VCVTPH2PS   (BX), Y4
	VMULPS      (R13), Y4, Y4
	VMOVUPS     Y4, scale-32(SP)
	VCVTPH2PS   (R14), Y5
	VFMADD231PS (R15), Y5, Y7
	CMPQ        R8, $8
	JB          w41tail
	GROUP8W(Q4DOT16, 16)
	ADDQ        $128, DX
	ADDQ        $512, R9
	ADDQ        $16, BX
	ADDQ        $16, R14
	ADDQ        $32, R13
	ADDQ        $32, R15
	SUBQ        $8, R8
	JNZ         w41grp
	JMP         w41end
w41tail:
	XORQ        AX, AX
w41tblk:
	Q4DOT16(0, 0)
	VBROADCASTSS scale-32(SP)(AX*4), Y6
	VFMADD231PS Y6, Y1, Y0
	ADDQ        $16, DX
	ADDQ        $64, R9
	INCQ        AX
	CMPQ        AX, R8
	JB          w41tblk
w41end:
	HSUM
	HSUM7
	VADDSS      X7, X0, X0
	VMOVSS      X0, (DI)
	ADDQ        $4, DI
	MOVQ        DX, SI
	DECQ        CX
	JMP         w41row
w41done:
	VZEROUPPER
	RET

// func gemvQ4_0x16AVX2(out *float32, w *byte, nrows, nb int, xq *int16, xds *float32)
TEXT ·gemvQ4_0x16AVX2(SB), NOSPLIT, $32-48
	ARGS
	CONSTS
w40row:
	TESTQ CX, CX
	JZ    w40done
	ROW_START
	MOVQ  R14, DX
w40grp:
	PREFETCHT0  2048(DX)
	PREFETCHT0  2112(DX)
	PREFETCHT0  2176(DX)
	VCVTPH2PS   (BX), Y4
	VFMADD231PS (R15), Y4, Y7 // Σ d·s
	VMULPS      (R13), Y4, Y4
	VMOVUPS     Y4, scale-32(SP)
	CMPQ        R8, $8
	JB          w40tail
	GROUP8W(Q4DOT16, 16)
	ADDQ        $128, DX
	ADDQ        $512, R9
	ADDQ        $16, BX
	ADDQ        $32, R13
	ADDQ        $32, R15
	SUBQ        $8, R8
	JNZ         w40grp
	JMP         w40end
w40tail:
	XORQ        AX, AX
w40tblk:
	Q4DOT16(0, 0)
	VBROADCASTSS scale-32(SP)(AX*4), Y6
	VFMADD231PS Y6, Y1, Y0
	ADDQ        $16, DX
	ADDQ        $64, R9
	INCQ        AX
	CMPQ        AX, R8
	JB          w40tblk
w40end:
	HSUM
	HSUM7
	MOVL        $0xc1000000, AX // −8
	VMOVD       AX, X2
	VFMADD231SS X2, X7, X0
	VMOVSS      X0, (DI)
	ADDQ        $4, DI
	MOVQ        DX, SI
	DECQ        CX
	JMP         w40row
w40done:
	VZEROUPPER
	RET

// func gemvQ8_0x16AVX2(out *float32, w *byte, nrows, nb int, xq *int16, xds *float32)
TEXT ·gemvQ8_0x16AVX2(SB), NOSPLIT, $32-48
	ARGS
	CONSTS
w80row:
	TESTQ CX, CX
	JZ    w80done
	ROW_START
	MOVQ  R14, DX
w80grp:
	PREFETCHT0  2048(DX)
	PREFETCHT0  2112(DX)
	PREFETCHT0  2176(DX)
	VCVTPH2PS   (BX), Y4
	VMULPS      (R13), Y4, Y4
	VMOVUPS     Y4, scale-32(SP)
	CMPQ        R8, $8
	JB          w80tail
	GROUP8W(Q8DOT16, 32)
	ADDQ        $256, DX
	ADDQ        $512, R9
	ADDQ        $16, BX
	ADDQ        $32, R13
	SUBQ        $8, R8
	JNZ         w80grp
	JMP         w80end
w80tail:
	XORQ        AX, AX
w80tblk:
	Q8DOT16(0, 0)
	VBROADCASTSS scale-32(SP)(AX*4), Y6
	VFMADD231PS Y6, Y1, Y0
	ADDQ        $32, DX
	ADDQ        $64, R9
	INCQ        AX
	CMPQ        AX, R8
	JB          w80tblk
w80end:
	HSUM
	VMOVSS      X0, (DI)
	ADDQ        $4, DI
	MOVQ        DX, SI
	DECQ        CX
	JMP         w80row
w80done:
	VZEROUPPER
	RET
