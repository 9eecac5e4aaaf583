package main

import (
	"bytes"
	"fmt"
)

// The quantized matrix-vector kernels (quant_amd64.s): one generator for every weight type
// (Q4_0, Q4_1, Q8_0) and activation width (int8, int16), so that the variants share their
// loop, reduction and offset code and differ only in how a block's 32 products are formed.
//
//	func gemv<T>x<A>AVX2(out *float32, w *byte, nrows, nb int, xq *int<A>, xds *float32)
//
// For r in [0, nrows): out[r] = Σ_b d_w·d_x·Σ_j q_w·q_x + the block's offset term (Q4_1:
// m_w·s_x, Q4_0: −8·d_w·s_x), over rows back to back from w in QMatrix's layout (nb blocks a
// row: half scales d (and m), then the quants); xq holds the activation row, xds its d[nbp]
// then s[nbp] (s = d·Σq; nbp is nb rounded up to a multiple of 8, zero-padded). AVX2, FMA and
// F16C.
//
// A group of 8 blocks: each block's products are summed to 8 int32 lanes, the 8 blocks' lanes
// are reduced to one vector of 8 block sums (pairwise: 32-bit, then 64-bit unpacks and adds,
// then the two 128-bit halves; measured a little faster than VPHADDD on Zen 3), which is
// converted once and multiplied by the 8 blocks' d_w·d_x (one VCVTPH2PS, one VMULPS). The
// nb mod 8 blocks of a row's last group are done one at a time, each with lane 0 of the group's
// scales, rotated down a lane after each block. The quants are prefetched 2 KB ahead (decode
// streams the weights from memory).
//
// Registers: DI out, SI row, CX rows left, R10 nb, R11 xq, R12 xds; per row BX d, R14 m,
// DX quants, R13 xd, R15 xs, R9 xq, R8 blocks left, AX tail index; Y0 sum, Y7 offset terms,
// Y4 the group's scales, Y5 the group's m (Q4_1), Y15 nibble mask, Y14 int16 ones (int8
// activations), Y13 the lane rotation, Y1-Y3 and Y6 temporaries, Y8-Y12 the group's reduction.

// Software prefetch of the quants: instruction and distance in bytes.
const (
	prefetchOp    = "PREFETCHT0"
	prefetchAhead = 2048
)

type qkern struct {
	typ  string // Q4_0 | Q4_1 | Q8_0
	bits int    // activation width: 8 | 16
}

func (k qkern) name() string { return fmt.Sprintf("gemv%sx%dAVX2", k.typ, k.bits) }

// qsBytes is the bytes of one block's quants; xBytes of one block's activations.
func (k qkern) qsBytes() int {
	if k.typ == "Q8_0" {
		return 32
	}
	return 16
}

func (k qkern) xBytes() int { return 32 * k.bits / 8 }

func (k qkern) xType() string { return fmt.Sprintf("int%d", k.bits) }

var qs bytes.Buffer

func q(format string, args ...any) { fmt.Fprintf(&qs, "\t"+format+"\n", args...) }

func ql(label string) { fmt.Fprintf(&qs, "%s:\n", label) }

// blockDot writes the 8 int32 partial sums of the block whose quants are at qo(DX) and
// activations at xo(R9) into register dst (Y1, Y2, Y3 are clobbered; dst may be one of them).
func (k qkern) blockDot(qo, xo int, dst string) {
	switch {
	case k.typ != "Q8_0" && k.bits == 16:
		// 16 bytes → 16 words; low nibbles are q_0..q_15, high nibbles q_16..q_31.
		q("VPMOVZXBW %d(DX), Y1", qo)
		q("VPSRLW $4, Y1, Y2")
		q("VPAND Y15, Y1, Y1")
		q("VPMADDWD %d(R9), Y1, Y1", xo)
		q("VPMADDWD %d(R9), Y2, Y2", xo+32)
		q("VPADDD Y2, Y1, %s", dst)
	case k.typ == "Q8_0" && k.bits == 16:
		q("VPMOVSXBW %d(DX), Y1", qo)
		q("VPMOVSXBW %d(DX), Y2", qo+16)
		q("VPMADDWD %d(R9), Y1, Y1", xo)
		q("VPMADDWD %d(R9), Y2, Y2", xo+32)
		q("VPADDD Y2, Y1, %s", dst)
	case k.typ != "Q8_0":
		// nibbles → 32 bytes (low half q_0..q_15, high half q_16..q_31), unsigned × signed.
		q("VMOVDQU %d(DX), X1", qo)
		q("VPSRLW $4, X1, X2")
		q("VINSERTI128 $1, X2, Y1, Y1")
		q("VPAND Y15, Y1, Y1")
		q("VPMADDUBSW %d(R9), Y1, Y1", xo)
		q("VPMADDWD Y14, Y1, %s", dst)
	default:
		// signed × signed through |w| and the sign moved onto x.
		q("VMOVDQU %d(DX), Y1", qo)
		q("VPABSB Y1, Y2")
		q("VMOVDQU %d(R9), Y3", xo)
		q("VPSIGNB Y1, Y3, Y3")
		q("VPMADDUBSW Y3, Y2, Y1")
		q("VPMADDWD Y14, Y1, %s", dst)
	}
}

// blockDot16 is blockDot for int16 activations with the quants at qo(base), into dst with the
// temporaries t1 and t2 (dst may be t1).
func (k qkern) blockDot16(qo, xo int, base, dst, t1, t2 string) {
	if k.typ == "Q8_0" {
		q("VPMOVSXBW %d%s, %s", qo, base, t1)
		q("VPMOVSXBW %d%s, %s", qo+16, base, t2)
	} else {
		q("VPMOVZXBW %d%s, %s", qo, base, t1)
		q("VPSRLW $4, %s, %s", t1, t2)
		q("VPAND Y15, %s, %s", t1, t1)
	}
	q("VPMADDWD %d(R9), %s, %s", xo, t1, t1)
	q("VPMADDWD %d(R9), %s, %s", xo+32, t2, t2)
	q("VPADDD %s, %s, %s", t2, t1, dst)
}

// gen2 writes the two-row kernel for int16 activations:
//
//	func gemv2<T>x16AVX2(out *float32, w *byte, nrows, nb int, xq *int16, xds *float32)
//
// nrows even; rows r and r+1 go together, sharing the loop, the activation loads' addresses
// and the reduction: each block's two vectors (row A, row B) are folded together, so the 8
// blocks × 2 rows reduce to two vectors [A0 B0 A1 B1 | A4 B4 A5 B5] and [A2 B2 A3 B3 | A6 B6 A7
// B7], scaled by the matching interleave of the rows' d_w·d_x. Row B is row A + AX bytes
// (AX = the row size). Y0 the interleaved sums, Y7 and Y14 row A's and row B's offset terms
// and last-group blocks, Y8-Y11 the group's pairs, Y13 the pending pair (the rotation in the
// last group), Y1-Y6 and Y12 temporaries.
func (k qkern) gen2() {
	n := fmt.Sprintf("gemv2%sx16AVX2", k.typ)
	lbl := func(s string) string { return n + "_" + s }
	qb, xb := k.qsBytes(), k.xBytes()
	bb := map[string]int{"Q4_0": 18, "Q4_1": 20, "Q8_0": 34}[k.typ]
	fmt.Fprintf(&qs, "\n// func %s(out *float32, w *byte, nrows, nb int, xq *int16, xds *float32)\n", n)
	fmt.Fprintf(&qs, "TEXT ·%s(SB), NOSPLIT, $0-48\n", n)
	q("MOVQ out+0(FP), DI")
	q("MOVQ w+8(FP), SI")
	q("MOVQ nrows+16(FP), CX")
	q("MOVQ nb+24(FP), R10")
	q("MOVQ xq+32(FP), R11")
	q("MOVQ xds+40(FP), R12")
	if k.typ != "Q8_0" {
		q("MOVL $0x000f000f, AX")
		q("VMOVD AX, X15")
		q("VPBROADCASTD X15, Y15")
	}
	ql(lbl("row"))
	q("TESTQ CX, CX")
	q("JZ %s", lbl("done"))
	q("VXORPS Y0, Y0, Y0")
	q("VXORPS Y7, Y7, Y7")
	q("VXORPS Y14, Y14, Y14")
	q("MOVQ R10, AX")
	q("ADDQ $7, AX")
	q("ANDQ $-8, AX")
	q("LEAQ (R12)(AX*4), R15")
	q("MOVQ R10, AX")
	q("SHLQ $1, AX")
	q("MOVQ SI, BX")
	q("MOVQ R12, R13")
	q("MOVQ R11, R9")
	q("MOVQ R10, R8")
	if k.typ == "Q4_1" {
		q("LEAQ (SI)(AX*1), R14")
		q("LEAQ (SI)(AX*2), DX")
	} else {
		q("LEAQ (SI)(AX*1), DX")
	}
	q("IMUL3Q $%d, R10, AX", bb)
	ql(lbl("grp"))
	for off := 0; off < 8*qb; off += 64 {
		q("%s %d(DX)", prefetchOp, prefetchAhead+off)
		q("%s %d(DX)(AX*1)", prefetchOp, prefetchAhead+off)
	}
	q("CMPQ R8, $8")
	q("JB %s", lbl("tail"))
	pair32 := func(a, b, dst string) {
		q("VPUNPCKLDQ %s, %s, Y12", b, a)
		q("VPUNPCKHDQ %s, %s, %s", b, a, dst)
		q("VPADDD Y12, %s, %s", dst, dst)
	}
	pair64 := func(a, b, dst string) {
		q("VPUNPCKLQDQ %s, %s, Y12", b, a)
		q("VPUNPCKHQDQ %s, %s, %s", b, a, dst)
		q("VPADDD Y12, %s, %s", dst, dst)
	}
	for b := 0; b < 8; b++ {
		k.blockDot16(b*qb, b*xb, "(DX)", "Y1", "Y1", "Y2")
		k.blockDot16(b*qb, b*xb, "(DX)(AX*1)", "Y3", "Y3", "Y6")
		if b%2 == 0 {
			pair32("Y1", "Y3", "Y13") // [A B A B | A B A B] of block b
		} else {
			pair32("Y1", "Y3", "Y1")
			pair64("Y13", "Y1", fmt.Sprintf("Y%d", 8+b/2)) // blocks b-1, b
		}
	}
	// Y8..Y11 = blocks (0,1), (2,3), (4,5), (6,7): [A B A' B' | the same over the high lanes].
	q("VPERM2I128 $0x20, Y10, Y8, Y1")
	q("VPERM2I128 $0x31, Y10, Y8, Y2")
	q("VPADDD Y2, Y1, Y1")
	q("VCVTDQ2PS Y1, Y1") // [A0 B0 A1 B1 | A4 B4 A5 B5]
	q("VPERM2I128 $0x20, Y11, Y9, Y2")
	q("VPERM2I128 $0x31, Y11, Y9, Y3")
	q("VPADDD Y3, Y2, Y2")
	q("VCVTDQ2PS Y2, Y2") // [A2 B2 A3 B3 | A6 B6 A7 B7]
	q("VCVTPH2PS (BX), Y4")
	q("VCVTPH2PS (BX)(AX*1), Y5")
	k.offsets2(false)
	q("VMULPS (R13), Y4, Y4")
	q("VMULPS (R13), Y5, Y5")
	q("VUNPCKLPS Y5, Y4, Y3")
	q("VFMADD231PS Y3, Y1, Y0")
	q("VUNPCKHPS Y5, Y4, Y3")
	q("VFMADD231PS Y3, Y2, Y0")
	q("ADDQ $%d, DX", 8*qb)
	q("ADDQ $%d, R9", 8*xb)
	q("ADDQ $16, BX")
	if k.typ == "Q4_1" {
		q("ADDQ $16, R14")
	}
	q("ADDQ $32, R13")
	q("ADDQ $32, R15")
	q("SUBQ $8, R8")
	q("JNZ %s", lbl("grp"))
	q("JMP %s", lbl("end"))
	// The last R8 < 8 blocks one at a time into Y7 and Y14; the halves past the row's nb
	// are masked off.
	ql(lbl("tail"))
	q("VMOVD R8, X6")
	q("VPBROADCASTD X6, Y6")
	q("VPCMPGTD lanes<>(SB), Y6, Y6")
	q("VCVTPH2PS (BX), Y4")
	q("VCVTPH2PS (BX)(AX*1), Y5")
	q("VANDPS Y6, Y4, Y4")
	q("VANDPS Y6, Y5, Y5")
	k.offsets2(true)
	q("VMULPS (R13), Y4, Y4")
	q("VMULPS (R13), Y5, Y5")
	q("VMOVDQU rotate<>(SB), Y13")
	ql(lbl("tblk"))
	k.blockDot16(0, 0, "(DX)", "Y1", "Y1", "Y2")
	q("VCVTDQ2PS Y1, Y1")
	q("VBROADCASTSS X4, Y2")
	q("VFMADD231PS Y2, Y1, Y7")
	k.blockDot16(0, 0, "(DX)(AX*1)", "Y3", "Y3", "Y6")
	q("VCVTDQ2PS Y3, Y3")
	q("VBROADCASTSS X5, Y6")
	q("VFMADD231PS Y6, Y3, Y14")
	q("VPERMPS Y4, Y13, Y4")
	q("VPERMPS Y5, Y13, Y5")
	q("ADDQ $%d, DX", qb)
	q("ADDQ $%d, R9", xb)
	q("DECQ R8")
	q("JNZ %s", lbl("tblk"))
	ql(lbl("end"))
	// Y0 = [A B A B | A B A B]; Y7, Y14 row A's and row B's.
	q("VEXTRACTF128 $1, Y0, X1")
	q("VADDPS X1, X0, X0")
	q("VPERMILPS $0x4e, X0, X1")
	q("VADDPS X1, X0, X0") // [A B A B]
	q("VEXTRACTF128 $1, Y7, X1")
	q("VADDPS X1, X7, X7")
	q("VEXTRACTF128 $1, Y14, X2")
	q("VADDPS X2, X14, X14")
	q("VHADDPS X14, X7, X1")
	q("VHADDPS X1, X1, X1") // [a b a b]
	q("VADDPS X1, X0, X0")
	q("VMOVQ X0, (DI)")
	q("ADDQ $8, DI")
	q("LEAQ (DX)(AX*1), SI")
	q("SUBQ $2, CX")
	q("JMP %s", lbl("row"))
	ql(lbl("done"))
	q("VZEROUPPER")
	q("RET")
}

// offsets2 adds the group's offset terms of rows A (d in Y4, m at (R14)) and B (d in Y5, m at
// (R14)(AX*1)) into Y7 and Y14: Q4_0 −8·d·s, Q4_1 m·s. masked: the tail group, whose m halves
// past nb are cleared with the mask in Y6 (Y4 and Y5 already are).
func (k qkern) offsets2(masked bool) {
	switch k.typ {
	case "Q4_1":
		for i, acc := range []string{"Y7", "Y14"} {
			if i == 0 {
				q("VCVTPH2PS (R14), Y3")
			} else {
				q("VCVTPH2PS (R14)(AX*1), Y3")
			}
			if masked {
				q("VANDPS Y6, Y3, Y3")
			}
			q("VFMADD231PS (R15), Y3, %s", acc)
		}
	case "Q4_0":
		q("VMULPS neg8<>(SB), Y4, Y3")
		q("VFMADD231PS (R15), Y3, Y7")
		q("VMULPS neg8<>(SB), Y5, Y3")
		q("VFMADD231PS (R15), Y3, Y14")
	}
}

// offsets adds the group's offset terms into Y7 and makes Y4 the group's d_w·d_x.
func (k qkern) offsets() {
	switch k.typ {
	case "Q4_1":
		q("VFMADD231PS (R15), Y5, Y7")
	case "Q4_0":
		q("VFMADD231PS (R15), Y4, Y7")
	}
	q("VMULPS (R13), Y4, Y4")
}

func (k qkern) gen() {
	n := k.name()
	lbl := func(s string) string { return n + "_" + s }
	qb, xb := k.qsBytes(), k.xBytes()
	fmt.Fprintf(&qs, "\n// func %s(out *float32, w *byte, nrows, nb int, xq *%s, xds *float32)\n", n, k.xType())
	fmt.Fprintf(&qs, "TEXT ·%s(SB), NOSPLIT, $0-48\n", n)
	q("MOVQ out+0(FP), DI")
	q("MOVQ w+8(FP), SI")
	q("MOVQ nrows+16(FP), CX")
	q("MOVQ nb+24(FP), R10")
	q("MOVQ xq+32(FP), R11")
	q("MOVQ xds+40(FP), R12")
	if k.typ != "Q8_0" {
		if k.bits == 16 {
			q("MOVL $0x000f000f, AX")
		} else {
			q("MOVL $0x0f0f0f0f, AX")
		}
		q("VMOVD AX, X15")
		q("VPBROADCASTD X15, Y15")
	}
	if k.bits == 8 {
		q("MOVL $0x00010001, AX")
		q("VMOVD AX, X14")
		q("VPBROADCASTD X14, Y14")
	}
	q("VMOVDQU rotate<>(SB), Y13")
	ql(lbl("row"))
	q("TESTQ CX, CX")
	q("JZ %s", lbl("done"))
	q("VXORPS Y0, Y0, Y0")
	if k.typ != "Q8_0" {
		q("VXORPS Y7, Y7, Y7")
	}
	// AX = 2·nb: the bytes of one row's d (or m) halves; R15 = xds + 4·nbp: the sums s.
	q("MOVQ R10, AX")
	q("ADDQ $7, AX")
	q("ANDQ $-8, AX")
	q("LEAQ (R12)(AX*4), R15")
	q("MOVQ R10, AX")
	q("SHLQ $1, AX")
	q("MOVQ SI, BX")
	q("MOVQ R12, R13")
	q("MOVQ R11, R9")
	q("MOVQ R10, R8")
	if k.typ == "Q4_1" {
		q("LEAQ (SI)(AX*1), R14")
		q("LEAQ (SI)(AX*2), DX")
	} else {
		q("LEAQ (SI)(AX*1), DX")
	}
	ql(lbl("grp"))
	for off := 0; off < 8*qb; off += 64 {
		q("%s %d(DX)", prefetchOp, prefetchAhead+off)
	}
	q("VCVTPH2PS (BX), Y4")
	if k.typ == "Q4_1" {
		q("VCVTPH2PS (R14), Y5")
	}
	q("CMPQ R8, $8")
	q("JAE %s", lbl("full"))
	// The last group's halves past the row's nb read the next array of the row (m or the
	// quants): keep only the lanes of its R8 blocks.
	q("VMOVD R8, X6")
	q("VPBROADCASTD X6, Y6")
	q("VPCMPGTD lanes<>(SB), Y6, Y6")
	q("VANDPS Y6, Y4, Y4")
	if k.typ == "Q4_1" {
		q("VANDPS Y6, Y5, Y5")
	}
	k.offsets()
	q("JMP %s", lbl("tail"))
	ql(lbl("full"))
	k.offsets()
	// Eight blocks, reduced pairwise as they come: Y8 ← blocks 0-3, Y9 ← blocks 4-7.
	// t(a,b) = unpacklo32(a,b) + unpackhi32(a,b): lanes [a0+a2 b0+b2 a1+a3 b1+b3 | …].
	pair32 := func(a, b, dst string) {
		q("VPUNPCKLDQ %s, %s, Y12", b, a)
		q("VPUNPCKHDQ %s, %s, %s", b, a, dst)
		q("VPADDD Y12, %s, %s", dst, dst)
	}
	pair64 := func(a, b, dst string) {
		q("VPUNPCKLQDQ %s, %s, Y12", b, a)
		q("VPUNPCKHQDQ %s, %s, %s", b, a, dst)
		q("VPADDD Y12, %s, %s", dst, dst)
	}
	k.blockDot(0, 0, "Y8")
	k.blockDot(qb, xb, "Y9")
	pair32("Y8", "Y9", "Y8") // [0 1 0 1 | …]
	k.blockDot(2*qb, 2*xb, "Y9")
	k.blockDot(3*qb, 3*xb, "Y10")
	pair32("Y9", "Y10", "Y9")
	pair64("Y8", "Y9", "Y8") // [0 1 2 3 | 0 1 2 3]
	k.blockDot(4*qb, 4*xb, "Y9")
	k.blockDot(5*qb, 5*xb, "Y10")
	pair32("Y9", "Y10", "Y9")
	k.blockDot(6*qb, 6*xb, "Y10")
	k.blockDot(7*qb, 7*xb, "Y11")
	pair32("Y10", "Y11", "Y10")
	pair64("Y9", "Y10", "Y9")
	// Y8 = [b0..b3 low halves | b0..b3 high halves], Y9 likewise for b4..b7.
	q("VPERM2I128 $0x20, Y9, Y8, Y10")
	q("VPERM2I128 $0x31, Y9, Y8, Y11")
	q("VPADDD Y11, Y10, Y10")
	q("VCVTDQ2PS Y10, Y10")
	q("VFMADD231PS Y4, Y10, Y0")
	q("ADDQ $%d, DX", 8*qb)
	q("ADDQ $%d, R9", 8*xb)
	q("ADDQ $16, BX")
	if k.typ == "Q4_1" {
		q("ADDQ $16, R14")
	}
	q("ADDQ $32, R13")
	q("ADDQ $32, R15")
	q("SUBQ $8, R8")
	q("JNZ %s", lbl("grp"))
	q("JMP %s", lbl("end"))
	// The last nb mod 8 blocks one at a time: the block's scale is Y4's lane 0, then Y4 is
	// rotated down a lane (Y13 = the rotation's indices).
	ql(lbl("tail"))
	k.blockDot(0, 0, "Y1")
	q("VCVTDQ2PS Y1, Y1")
	q("VBROADCASTSS X4, Y6")
	q("VPERMPS Y4, Y13, Y4")
	q("VFMADD231PS Y6, Y1, Y0")
	q("ADDQ $%d, DX", qb)
	q("ADDQ $%d, R9", xb)
	q("DECQ R8")
	q("JNZ %s", lbl("tail"))
	ql(lbl("end"))
	switch k.typ {
	case "Q4_1":
		q("VADDPS Y7, Y0, Y0")
	case "Q4_0":
		q("MOVL $0xc1000000, AX // −8")
		q("VMOVD AX, X2")
		q("VBROADCASTSS X2, Y2")
		q("VFMADD231PS Y2, Y7, Y0")
	}
	q("VEXTRACTF128 $1, Y0, X1")
	q("VADDPS X1, X0, X0")
	q("VPERMILPS $0x4e, X0, X1")
	q("VADDPS X1, X0, X0")
	q("VPERMILPS $0xb1, X0, X1")
	q("VADDPS X1, X0, X0")
	q("VMOVSS X0, (DI)")
	q("ADDQ $4, DI")
	q("MOVQ DX, SI")
	q("DECQ CX")
	q("JMP %s", lbl("row"))
	ql(lbl("done"))
	q("VZEROUPPER")
	q("RET")
}

// genBatch writes the batched kernel for int16 activations, L rows of A at a time (L = 8
// with AVX2, 16 with AVX-512 BW):
//
//	func gemm<L><T>x16<ISA>(out *float32, w *byte, nrows, nb int, xt *int16, xdt *float32, scr *float32)
//
// For W row r in [0, nrows) and activation row i in [0, L): out[L·r+i] = Σ_b d_w·d_x·Σ_j
// q_w·q_x + the block's offset term, as gemv<T>x16AVX2 computes for one row (the blocks summed
// in order). The activations are transposed so that a vector's L lanes are the L rows of A:
// xt holds, for block b and pair p (weights 2p, 2p+1 of the block), the L rows' two int16
// values (4L bytes at (16b+p)·4L); xdt holds, per block, the L rows' d then their s (8L bytes
// at 8L·b). Each W row is first widened to int16 into scr (64 bytes a block) and its half
// scales to float32 (after the weights: nbp floats of d, then nbp of m for Q4_1); then each
// pair of weights is broadcast to all lanes from scr and multiplied with VPMADDWD: the 16
// products of a block sum to the L rows' block sums in one vector, with no horizontal
// reduction; the block's scale vector is d_w (broadcast) times the L rows' d_x. The weights
// go through memory because a broadcast from memory takes no shuffle unit.
//
// Registers: DI out, SI row, CX rows left, R10 nb, R11 xt, R12 xdt, BX scr; per row DX quants,
// R15 the row's int16 weights, R14 its float scales, R9 xt, R13 xdt, R8 blocks left, AX
// 4·nbp; V0 sums, V7 offset terms, Y15 nibble mask, Y1 Y2 a block's weights, V3 and V5 the
// block's two integer accumulators, V4 V6 temporaries, V8 −8 (Q4_0); V is Y (AVX2) or Z
// (AVX-512).
//
// With vnni (AVX-512 only) a block's products after the first two accumulate with VPDPWSSD,
// one instruction for VPMADDWD and VPADDD: the same wrapping int32 sums, so the results are
// bit for bit those of the AVX-512 kernel.
func (k qkern) genBatch(avx512, vnni bool) {
	L, v, isa := 8, "Y", "AVX2"
	if avx512 {
		L, v, isa = 16, "Z", "AVX512"
	}
	if vnni {
		isa = "AVX512VNNI"
	}
	r := func(i int) string { return fmt.Sprintf("%s%d", v, i) }
	n := fmt.Sprintf("gemm%d%sx16%s", L, k.typ, isa)
	lbl := func(s string) string { return n + "_" + s }
	qb := k.qsBytes()
	ns := 1
	if k.typ == "Q4_1" {
		ns = 2
	}
	fmt.Fprintf(&qs, "\n// func %s(out *float32, w *byte, nrows, nb int, xt *int16, xdt *float32, scr *float32)\n", n)
	fmt.Fprintf(&qs, "TEXT ·%s(SB), NOSPLIT, $0-56\n", n)
	q("MOVQ out+0(FP), DI")
	q("MOVQ w+8(FP), SI")
	q("MOVQ nrows+16(FP), CX")
	q("MOVQ nb+24(FP), R10")
	q("MOVQ xt+32(FP), R11")
	q("MOVQ xdt+40(FP), R12")
	q("MOVQ scr+48(FP), BX")
	if k.typ != "Q8_0" {
		q("MOVL $0x000f000f, AX")
		q("VMOVD AX, X15")
		q("VPBROADCASTD X15, Y15")
	}
	if k.typ == "Q4_0" {
		q("MOVL $0xc1000000, AX // −8")
		q("VMOVD AX, X8")
		q("VBROADCASTSS X8, %s", r(8))
	}
	// AX = 4·nbp: the bytes of one array of float scales in scr.
	q("MOVQ R10, AX")
	q("ADDQ $7, AX")
	q("ANDQ $-8, AX")
	q("SHLQ $2, AX")
	ql(lbl("row"))
	q("TESTQ CX, CX")
	q("JZ %s", lbl("done"))
	// The row's half scales (d, then m) to float32 in scr, 8 at a time; lanes past nb read
	// the row's next array and are never used.
	q("MOVQ R10, R14")
	q("SHLQ $6, R14")
	q("ADDQ BX, R14")
	q("MOVQ SI, DX")
	q("MOVQ R10, R8")
	ql(lbl("cvt"))
	q("VCVTPH2PS (DX), Y1")
	q("VMOVUPS Y1, (R14)")
	if ns == 2 {
		q("VCVTPH2PS (DX)(R10*2), Y1")
		q("VMOVUPS Y1, (R14)(AX*1)")
	}
	q("ADDQ $16, DX")
	q("ADDQ $32, R14")
	q("SUBQ $8, R8")
	q("JG %s", lbl("cvt"))
	// The row's weights widened to int16 in scr, 64 bytes a block.
	q("LEAQ (SI)(R10*%d), DX", 2*ns)
	q("MOVQ BX, R15")
	q("MOVQ R10, R8")
	ql(lbl("unpack"))
	q("%s %d(DX)", prefetchOp, prefetchAhead)
	if k.typ == "Q8_0" {
		q("VPMOVSXBW (DX), Y1")
		q("VPMOVSXBW 16(DX), Y2")
	} else {
		q("VPMOVZXBW (DX), Y1")
		q("VPSRLW $4, Y1, Y2")
		q("VPAND Y15, Y1, Y1")
	}
	q("VMOVDQU Y1, (R15)")
	q("VMOVDQU Y2, 32(R15)")
	q("ADDQ $%d, DX", qb)
	q("ADDQ $64, R15")
	q("DECQ R8")
	q("JNZ %s", lbl("unpack"))
	q("MOVQ DX, SI") // the next row
	q("MOVQ R10, R14")
	q("SHLQ $6, R14")
	q("ADDQ BX, R14")
	q("MOVQ BX, R15")
	q("MOVQ R11, R9")
	q("MOVQ R12, R13")
	q("MOVQ R10, R8")
	if avx512 {
		q("VPXORD Z0, Z0, Z0")
		q("VPXORD Z7, Z7, Z7")
	} else {
		q("VXORPS Y0, Y0, Y0")
		q("VXORPS Y7, Y7, Y7")
	}
	ql(lbl("blk"))
	for p := 0; p < 16; p++ {
		acc, t := r(3), r(4)
		if p%2 == 1 {
			acc, t = r(5), r(6)
		}
		q("VPBROADCASTD %d(R15), %s", 4*p, t)
		if p < 2 {
			q("VPMADDWD %d(R9), %s, %s", 4*L*p, t, acc)
		} else if vnni {
			q("VPDPWSSD %d(R9), %s, %s", 4*L*p, t, acc)
		} else {
			q("VPMADDWD %d(R9), %s, %s", 4*L*p, t, t)
			q("VPADDD %s, %s, %s", t, acc, acc)
		}
	}
	q("VPADDD %s, %s, %s", r(5), r(3), r(3))
	q("VCVTDQ2PS %s, %s", r(3), r(3))
	q("VBROADCASTSS (R14), %s", r(4))
	switch k.typ {
	case "Q4_1":
		q("VBROADCASTSS (R14)(AX*1), %s", r(6))
		q("VFMADD231PS %d(R13), %s, %s", 4*L, r(6), r(7))
	case "Q4_0":
		q("VFMADD231PS %d(R13), %s, %s", 4*L, r(4), r(7))
	}
	q("VMULPS (R13), %s, %s", r(4), r(4))
	q("VFMADD231PS %s, %s, %s", r(4), r(3), r(0))
	q("ADDQ $64, R15")
	q("ADDQ $%d, R9", 64*L)
	q("ADDQ $%d, R13", 8*L)
	q("ADDQ $4, R14")
	q("DECQ R8")
	q("JNZ %s", lbl("blk"))
	switch k.typ {
	case "Q4_1":
		q("VADDPS %s, %s, %s", r(7), r(0), r(0))
	case "Q4_0":
		q("VFMADD231PS %s, %s, %s", r(8), r(7), r(0))
	}
	q("VMOVUPS %s, (DI)", r(0))
	q("ADDQ $%d, DI", 4*L)
	q("DECQ CX")
	q("JMP %s", lbl("row"))
	ql(lbl("done"))
	q("VZEROUPPER")
	q("RET")
}

// quantAct writes the activation quantizer for width bits (generic: quantizeAct16 and
// quantizeAct in quant.go, whose results it equals bit for bit):
//
//	func quantAct<bits>AVX2(q *int<bits>, ds *float32, x *float32, nb, nbp int)
//
// Per 32-block of x: d = max|x|/L (L = 32767 or 127, a float32 division), q = x·(1/d) rounded
// to nearest even (VCVTPS2DQ; q = 0 when d = 0), s = d·Σq; d goes to ds[b], s to ds[nbp+b].
func quantAct(bits int) {
	n := fmt.Sprintf("quantAct%dAVX2", bits)
	lbl := func(s string) string { return n + "_" + s }
	levels := map[int]string{16: "0x46fffe00", 8: "0x42fe0000"}[bits] // 32767.0, 127.0
	fmt.Fprintf(&qs, "\n// func %s(q *int%d, ds *float32, x *float32, nb, nbp int)\n", n, bits)
	fmt.Fprintf(&qs, "TEXT ·%s(SB), NOSPLIT, $0-40\n", n)
	q("MOVQ q+0(FP), DI")
	q("MOVQ ds+8(FP), BX")
	q("MOVQ x+16(FP), SI")
	q("MOVQ nb+24(FP), CX")
	q("MOVQ nbp+32(FP), DX")
	q("LEAQ (BX)(DX*4), DX")
	q("MOVL $0x7fffffff, AX")
	q("VMOVD AX, X15")
	q("VPBROADCASTD X15, Y15")
	q("MOVL $%s, AX", levels)
	q("VMOVD AX, X14")
	q("MOVL $0x3f800000, AX") // 1.0
	q("VMOVD AX, X13")
	if bits == 8 {
		q("MOVQ $0x0703060205010400, AX") // VPERMD order after the two packs
		q("VMOVQ AX, X12")
		q("VPMOVZXBD X12, Y12")
	}
	q("TESTQ CX, CX")
	q("JZ %s", lbl("done"))
	ql(lbl("blk"))
	for i := 0; i < 4; i++ {
		q("VMOVUPS %d(SI), Y%d", 32*i, i)
	}
	q("VANDPS Y15, Y0, Y4")
	for i := 1; i < 4; i++ {
		q("VANDPS Y15, Y%d, Y5", i)
		q("VMAXPS Y5, Y4, Y4")
	}
	q("VEXTRACTF128 $1, Y4, X5")
	q("VMAXPS X5, X4, X4")
	q("VPERMILPS $0x4e, X4, X5")
	q("VMAXPS X5, X4, X4")
	q("VPERMILPS $0xb1, X4, X5")
	q("VMAXPS X5, X4, X4")
	q("VDIVSS X14, X4, X6") // d
	q("VMOVSS X6, (BX)")
	q("VDIVSS X6, X13, X7") // 1/d
	q("VXORPS X8, X8, X8")
	q("VCMPSS $4, X8, X6, X9") // d ≠ 0
	q("VANDPS X9, X7, X7")
	q("VBROADCASTSS X7, Y7")
	for i := 0; i < 4; i++ {
		q("VMULPS Y7, Y%d, Y%d", i, i)
		q("VCVTPS2DQ Y%d, Y%d", i, i)
	}
	q("VPADDD Y1, Y0, Y8")
	q("VPADDD Y3, Y2, Y9")
	q("VPADDD Y9, Y8, Y8")
	q("VEXTRACTI128 $1, Y8, X9")
	q("VPADDD X9, X8, X8")
	q("VPSHUFD $0x4e, X8, X9")
	q("VPADDD X9, X8, X8")
	q("VPSHUFD $0xb1, X8, X9")
	q("VPADDD X9, X8, X8")
	q("VCVTDQ2PS X8, X8")
	q("VMULSS X8, X6, X8") // s = d·Σq
	q("VMOVSS X8, (DX)")
	q("VPACKSSDW Y1, Y0, Y0") // [0-3 8-11 | 4-7 12-15]
	q("VPACKSSDW Y3, Y2, Y2")
	if bits == 16 {
		q("VPERMQ $0xd8, Y0, Y0")
		q("VPERMQ $0xd8, Y2, Y2")
		q("VMOVDQU Y0, (DI)")
		q("VMOVDQU Y2, 32(DI)")
		q("ADDQ $64, DI")
	} else {
		q("VPACKSSWB Y2, Y0, Y0") // dwords [0 2 4 6 | 1 3 5 7] of the block's groups of 4
		q("VPERMD Y0, Y12, Y0")
		q("VMOVDQU Y0, (DI)")
		q("ADDQ $32, DI")
	}
	q("ADDQ $128, SI")
	q("ADDQ $4, BX")
	q("ADDQ $4, DX")
	q("DECQ CX")
	q("JNZ %s", lbl("blk"))
	ql(lbl("done"))
	q("VZEROUPPER")
	q("RET")
}

// quantKernels returns quant_amd64.s.
func quantKernels() []byte {
	qs.Reset()
	qs.WriteString(`// Code generated by internal/gen; DO NOT EDIT.

//go:build amd64

#include "textflag.h"

DATA lanes<>+0(SB)/8, $0x0000000100000000
DATA lanes<>+8(SB)/8, $0x0000000300000002
DATA lanes<>+16(SB)/8, $0x0000000500000004
DATA lanes<>+24(SB)/8, $0x0000000700000006
GLOBL lanes<>(SB), RODATA|NOPTR, $32

DATA rotate<>+0(SB)/8, $0x0000000200000001
DATA rotate<>+8(SB)/8, $0x0000000400000003
DATA rotate<>+16(SB)/8, $0x0000000600000005
DATA rotate<>+24(SB)/8, $0x0000000000000007
GLOBL rotate<>(SB), RODATA|NOPTR, $32

DATA neg8<>+0(SB)/8, $0xc1000000c1000000
DATA neg8<>+8(SB)/8, $0xc1000000c1000000
DATA neg8<>+16(SB)/8, $0xc1000000c1000000
DATA neg8<>+24(SB)/8, $0xc1000000c1000000
GLOBL neg8<>(SB), RODATA|NOPTR, $32

// Integer dot products of quantized weight rows with one quantized activation row; see
// internal/gen/quant.go for the algorithm and registers, and quant.go for the row layout and
// the generic versions these match.
`)
	for _, bits := range []int{8, 16} {
		for _, t := range []string{"Q4_1", "Q4_0", "Q8_0"} {
			qkern{t, bits}.gen()
			if bits == 16 {
				qkern{t, bits}.gen2()
				qkern{t, bits}.genBatch(false, false)
				qkern{t, bits}.genBatch(true, false)
				qkern{t, bits}.genBatch(true, true)
			}
		}
		quantAct(bits)
	}
	return bytes.Clone(qs.Bytes())
}
