//go:build amd64

#include "textflag.h"

// Vectorised e^x and the elementwise helpers built on it (AVX2): expGeneric in elementwise.go,
// operation for operation. n = ⌊x·log2e + ½⌋, r = x − n·ln2 (in two parts), e^r by a degree-6
// polynomial, times 2^n; 0 below −87.3, +Inf where the float32 result overflows. The constants
// are 8-lane vectors, read as memory operands.

DATA expc<>+0(SB)/4, $0x3fb8aa3b // log2e
DATA expc<>+4(SB)/4, $0x3fb8aa3b
DATA expc<>+8(SB)/4, $0x3fb8aa3b
DATA expc<>+12(SB)/4, $0x3fb8aa3b
DATA expc<>+16(SB)/4, $0x3fb8aa3b
DATA expc<>+20(SB)/4, $0x3fb8aa3b
DATA expc<>+24(SB)/4, $0x3fb8aa3b
DATA expc<>+28(SB)/4, $0x3fb8aa3b
DATA expc<>+32(SB)/4, $0x3f000000 // 0.5
DATA expc<>+36(SB)/4, $0x3f000000
DATA expc<>+40(SB)/4, $0x3f000000
DATA expc<>+44(SB)/4, $0x3f000000
DATA expc<>+48(SB)/4, $0x3f000000
DATA expc<>+52(SB)/4, $0x3f000000
DATA expc<>+56(SB)/4, $0x3f000000
DATA expc<>+60(SB)/4, $0x3f000000
DATA expc<>+64(SB)/4, $0x3f318000 // ln2hi = 0.693359375
DATA expc<>+68(SB)/4, $0x3f318000
DATA expc<>+72(SB)/4, $0x3f318000
DATA expc<>+76(SB)/4, $0x3f318000
DATA expc<>+80(SB)/4, $0x3f318000
DATA expc<>+84(SB)/4, $0x3f318000
DATA expc<>+88(SB)/4, $0x3f318000
DATA expc<>+92(SB)/4, $0x3f318000
DATA expc<>+96(SB)/4, $0xb95e8083 // ln2lo = -2.12194440e-4
DATA expc<>+100(SB)/4, $0xb95e8083
DATA expc<>+104(SB)/4, $0xb95e8083
DATA expc<>+108(SB)/4, $0xb95e8083
DATA expc<>+112(SB)/4, $0xb95e8083
DATA expc<>+116(SB)/4, $0xb95e8083
DATA expc<>+120(SB)/4, $0xb95e8083
DATA expc<>+124(SB)/4, $0xb95e8083
DATA expc<>+128(SB)/4, $0x39506967 // 1.9875691500e-4
DATA expc<>+132(SB)/4, $0x39506967
DATA expc<>+136(SB)/4, $0x39506967
DATA expc<>+140(SB)/4, $0x39506967
DATA expc<>+144(SB)/4, $0x39506967
DATA expc<>+148(SB)/4, $0x39506967
DATA expc<>+152(SB)/4, $0x39506967
DATA expc<>+156(SB)/4, $0x39506967
DATA expc<>+160(SB)/4, $0x3ab743ce // 1.3981999507e-3
DATA expc<>+164(SB)/4, $0x3ab743ce
DATA expc<>+168(SB)/4, $0x3ab743ce
DATA expc<>+172(SB)/4, $0x3ab743ce
DATA expc<>+176(SB)/4, $0x3ab743ce
DATA expc<>+180(SB)/4, $0x3ab743ce
DATA expc<>+184(SB)/4, $0x3ab743ce
DATA expc<>+188(SB)/4, $0x3ab743ce
DATA expc<>+192(SB)/4, $0x3c088908 // 8.3334519073e-3
DATA expc<>+196(SB)/4, $0x3c088908
DATA expc<>+200(SB)/4, $0x3c088908
DATA expc<>+204(SB)/4, $0x3c088908
DATA expc<>+208(SB)/4, $0x3c088908
DATA expc<>+212(SB)/4, $0x3c088908
DATA expc<>+216(SB)/4, $0x3c088908
DATA expc<>+220(SB)/4, $0x3c088908
DATA expc<>+224(SB)/4, $0x3d2aa9c1 // 4.1665795894e-2
DATA expc<>+228(SB)/4, $0x3d2aa9c1
DATA expc<>+232(SB)/4, $0x3d2aa9c1
DATA expc<>+236(SB)/4, $0x3d2aa9c1
DATA expc<>+240(SB)/4, $0x3d2aa9c1
DATA expc<>+244(SB)/4, $0x3d2aa9c1
DATA expc<>+248(SB)/4, $0x3d2aa9c1
DATA expc<>+252(SB)/4, $0x3d2aa9c1
DATA expc<>+256(SB)/4, $0x3e2aaaaa // 1.6666665459e-1
DATA expc<>+260(SB)/4, $0x3e2aaaaa
DATA expc<>+264(SB)/4, $0x3e2aaaaa
DATA expc<>+268(SB)/4, $0x3e2aaaaa
DATA expc<>+272(SB)/4, $0x3e2aaaaa
DATA expc<>+276(SB)/4, $0x3e2aaaaa
DATA expc<>+280(SB)/4, $0x3e2aaaaa
DATA expc<>+284(SB)/4, $0x3e2aaaaa
DATA expc<>+288(SB)/4, $0x3f000000 // 5.0000001201e-1
DATA expc<>+292(SB)/4, $0x3f000000
DATA expc<>+296(SB)/4, $0x3f000000
DATA expc<>+300(SB)/4, $0x3f000000
DATA expc<>+304(SB)/4, $0x3f000000
DATA expc<>+308(SB)/4, $0x3f000000
DATA expc<>+312(SB)/4, $0x3f000000
DATA expc<>+316(SB)/4, $0x3f000000
DATA expc<>+320(SB)/4, $0x3f800000 // 1
DATA expc<>+324(SB)/4, $0x3f800000
DATA expc<>+328(SB)/4, $0x3f800000
DATA expc<>+332(SB)/4, $0x3f800000
DATA expc<>+336(SB)/4, $0x3f800000
DATA expc<>+340(SB)/4, $0x3f800000
DATA expc<>+344(SB)/4, $0x3f800000
DATA expc<>+348(SB)/4, $0x3f800000
DATA expc<>+352(SB)/4, $0xc2ae999a // -87.3
DATA expc<>+356(SB)/4, $0xc2ae999a
DATA expc<>+360(SB)/4, $0xc2ae999a
DATA expc<>+364(SB)/4, $0xc2ae999a
DATA expc<>+368(SB)/4, $0xc2ae999a
DATA expc<>+372(SB)/4, $0xc2ae999a
DATA expc<>+376(SB)/4, $0xc2ae999a
DATA expc<>+380(SB)/4, $0xc2ae999a
DATA expc<>+384(SB)/4, $0x42b20000 // 89 (clamp: above ln(MaxFloat32))
DATA expc<>+388(SB)/4, $0x42b20000
DATA expc<>+392(SB)/4, $0x42b20000
DATA expc<>+396(SB)/4, $0x42b20000
DATA expc<>+400(SB)/4, $0x42b20000
DATA expc<>+404(SB)/4, $0x42b20000
DATA expc<>+408(SB)/4, $0x42b20000
DATA expc<>+412(SB)/4, $0x42b20000
DATA expc<>+416(SB)/4, $0x0000007f // 127 (int32)
DATA expc<>+420(SB)/4, $0x0000007f
DATA expc<>+424(SB)/4, $0x0000007f
DATA expc<>+428(SB)/4, $0x0000007f
DATA expc<>+432(SB)/4, $0x0000007f
DATA expc<>+436(SB)/4, $0x0000007f
DATA expc<>+440(SB)/4, $0x0000007f
DATA expc<>+444(SB)/4, $0x0000007f
GLOBL expc<>(SB), RODATA|NOPTR, $448

// EXP8(x, t1, t2, t3, t4): x = e^x lane by lane; t1-t4 are clobbered. The operations and
// their order are expGeneric's, each rounded (no fused multiply-adds), so every lane equals
// expGeneric bit for bit for x ≤ 88 (above, where expGeneric calls math.Exp, it stays within
// the same error). 2^n is applied as 2^(n−⌊n/2⌋)·2^⌊n/2⌋, both normal for every clamped x and
// exact, so e^x overflows to +Inf where the float32 result does.
#define EXP8(x, t1, t2, t3, t4) \
	VCMPPS    $1, expc<>+352(SB), x, t3 \
	VMAXPS    expc<>+352(SB), x, x \
	VMINPS    expc<>+384(SB), x, x \
	VMULPS    expc<>+0(SB), x, t1 \
	VADDPS    expc<>+32(SB), t1, t1 \
	VROUNDPS  $1, t1, t1 \
	VMULPS    expc<>+64(SB), t1, t2 \
	VSUBPS    t2, x, x \
	VMULPS    expc<>+96(SB), t1, t2 \
	VSUBPS    t2, x, x \
	VMULPS    expc<>+128(SB), x, t2 \
	VADDPS    expc<>+160(SB), t2, t2 \
	VMULPS    x, t2, t2 \
	VADDPS    expc<>+192(SB), t2, t2 \
	VMULPS    x, t2, t2 \
	VADDPS    expc<>+224(SB), t2, t2 \
	VMULPS    x, t2, t2 \
	VADDPS    expc<>+256(SB), t2, t2 \
	VMULPS    x, t2, t2 \
	VADDPS    expc<>+288(SB), t2, t2 \
	VCVTPS2DQ t1, t1 \
	VPSRAD    $1, t1, t4 \
	VPSUBD    t4, t1, t1 \
	VPADDD    expc<>+416(SB), t1, t1 \
	VPSLLD    $23, t1, t1 \
	VPADDD    expc<>+416(SB), t4, t4 \
	VPSLLD    $23, t4, t4 \
	VMULPS    x, t2, t2 \
	VMULPS    x, t2, t2 \
	VADDPS    x, t2, t2 \
	VADDPS    expc<>+320(SB), t2, t2 \
	VMULPS    t1, t2, x \
	VMULPS    t4, x, x \
	VANDNPS   x, t3, x

// func expSumAVX2(dst, x *float32, n int, scale, shift float32) float64
// dst[i] = e^(x[i]·scale − shift) for i < n (a positive multiple of 8); returns their sum,
// accumulated in float64.
TEXT ·expSumAVX2(SB), NOSPLIT, $0-40
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS scale+24(FP), Y14
	VBROADCASTSS shift+28(FP), Y15
	VXORPD       Y0, Y0, Y0
	VXORPD       Y8, Y8, Y8

esloop:
	VMULPS       (SI), Y14, Y1
	VSUBPS       Y15, Y1, Y1
	EXP8(Y1, Y2, Y3, Y4, Y5)
	VMOVUPS      Y1, (DI)
	VCVTPS2PD    X1, Y6
	VADDPD       Y6, Y0, Y0
	VEXTRACTF128 $1, Y1, X6
	VCVTPS2PD    X6, Y6
	VADDPD       Y6, Y8, Y8
	ADDQ         $32, SI
	ADDQ         $32, DI
	SUBQ         $8, CX
	JNZ          esloop

	VADDPD       Y8, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPD       X1, X0, X0
	VHADDPD      X0, X0, X0
	VZEROUPPER
	MOVSD        X0, ret+32(FP)
	RET

// func swigluAVX2(h, gate, up *float32, n int)
// h[i] = g[i]·σ(g[i])·u[i], σ(x) = 1/(1 + e^−x), for i < n (a positive multiple of 8).
TEXT ·swigluAVX2(SB), NOSPLIT, $0-32
	MOVQ   h+0(FP), DI
	MOVQ   gate+8(FP), SI
	MOVQ   up+16(FP), DX
	MOVQ   n+24(FP), CX
	VXORPS Y15, Y15, Y15

swloop:
	VMOVUPS (SI), Y0
	VSUBPS  Y0, Y15, Y1 // −g
	EXP8(Y1, Y2, Y3, Y4, Y5)
	VADDPS  expc<>+320(SB), Y1, Y1
	VMOVAPS expc<>+320(SB), Y2
	VDIVPS  Y1, Y2, Y1 // σ(g)
	VMULPS  Y1, Y0, Y0
	VMULPS  (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     swloop
	VZEROUPPER
	RET

// func swigluBackAVX2(dg, du, dh, gate, up *float32, n int)
// s = σ(g); du[i] = dh·g·s, dg[i] = dh·u·s·(1 + g·(1 − s)) for i < n (a positive multiple of
// 8), in swigluBackGeneric's order of operations; each lane's inputs are read before its
// outputs are written, so dg or du may be dh.
TEXT ·swigluBackAVX2(SB), NOSPLIT, $0-48
	MOVQ   dg+0(FP), DI
	MOVQ   du+8(FP), R8
	MOVQ   dh+16(FP), R9
	MOVQ   gate+24(FP), SI
	MOVQ   up+32(FP), DX
	MOVQ   n+40(FP), CX
	VXORPS Y15, Y15, Y15

sbloop:
	VMOVUPS (SI), Y0
	VSUBPS  Y0, Y15, Y1 // −g
	EXP8(Y1, Y2, Y3, Y4, Y5)
	VADDPS  expc<>+320(SB), Y1, Y1
	VMOVAPS expc<>+320(SB), Y2
	VDIVPS  Y1, Y2, Y1 // s = σ(g)
	VMOVUPS (R9), Y6   // dh
	VMULPS  Y0, Y6, Y7 // dh·g
	VMULPS  Y1, Y7, Y7 // dh·g·s
	VMULPS  (DX), Y6, Y6 // dh·u
	VMULPS  Y1, Y6, Y6 // dh·u·s
	VSUBPS  Y1, Y2, Y3 // 1 − s
	VMULPS  Y3, Y0, Y3 // g·(1 − s)
	VADDPS  Y2, Y3, Y3 // 1 + g·(1 − s)
	VMULPS  Y3, Y6, Y6
	VMOVUPS Y7, (R8)
	VMOVUPS Y6, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, R9
	ADDQ    $32, R8
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     sbloop
	VZEROUPPER
	RET
