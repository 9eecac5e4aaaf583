//go:build amd64

#include "textflag.h"

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
