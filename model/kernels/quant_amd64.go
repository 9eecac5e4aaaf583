//go:build amd64

package kernels

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// quantAVX2OK: the quantized kernels need AVX2 and FMA, and F16C for the blocks' half scales.
func quantAVX2OK() bool { return avx2OK() && cpu.X86.HasF16C }

//go:noescape
func gemvQ4_1x8AVX2(out *float32, w *byte, nrows, nb int, xq *int8, xds *float32)

//go:noescape
func gemvQ4_0x8AVX2(out *float32, w *byte, nrows, nb int, xq *int8, xds *float32)

//go:noescape
func gemvQ8_0x8AVX2(out *float32, w *byte, nrows, nb int, xq *int8, xds *float32)

//go:noescape
func dequantQ4_1AVX2(dst *float32, d, m, q *byte, nb int)

//go:noescape
func dequantQ4_0AVX2(dst *float32, d, q *byte, nb int)

//go:noescape
func dequantQ8_0AVX2(dst *float32, d, q *byte, nb int)

func gemvQAVX2(t QType, out []float32, w []byte, nb int, xq []int8, xds []float32) {
	n := len(out)
	if n == 0 {
		return
	}
	nbp := roundUp(nb, 8)
	if nb == 0 || len(w) < n*nb*t.BlockBytes() || len(xq) < nb*QBlock || len(xds) < 2*nbp {
		panic("kernels: gemvQ: short slices")
	}
	switch t {
	case Q4_1:
		gemvQ4_1x8AVX2(&out[0], &w[0], n, nb, &xq[0], &xds[0])
	case Q4_0:
		gemvQ4_0x8AVX2(&out[0], &w[0], n, nb, &xq[0], &xds[0])
	case Q8_0:
		gemvQ8_0x8AVX2(&out[0], &w[0], n, nb, &xq[0], &xds[0])
	default:
		panic("kernels: gemvQ: unknown type")
	}
}

func dequantAVX2(t QType, dst []float32, row []byte, nb int) {
	if nb == 0 {
		return
	}
	if len(dst) < nb*QBlock || len(row) < nb*t.BlockBytes() {
		panic("kernels: dequant: short slices")
	}
	switch t {
	case Q4_1:
		dequantQ4_1AVX2(&dst[0], &row[0], &row[2*nb], &row[4*nb], nb)
	case Q4_0:
		dequantQ4_0AVX2(&dst[0], &row[0], &row[2*nb], nb)
	case Q8_0:
		dequantQ8_0AVX2(&dst[0], &row[0], &row[2*nb], nb)
	default:
		panic("kernels: dequant: unknown type")
	}
}

//go:noescape
func gemvQ4_1x16AVX2(out *float32, w *byte, nrows, nb int, xq *int16, xds *float32)

//go:noescape
func gemvQ4_0x16AVX2(out *float32, w *byte, nrows, nb int, xq *int16, xds *float32)

//go:noescape
func gemvQ8_0x16AVX2(out *float32, w *byte, nrows, nb int, xq *int16, xds *float32)

//go:noescape
func gemv2Q4_1x16AVX2(out *float32, w *byte, nrows, nb int, xq *int16, xds *float32)

//go:noescape
func gemv2Q4_0x16AVX2(out *float32, w *byte, nrows, nb int, xq *int16, xds *float32)

//go:noescape
func gemv2Q8_0x16AVX2(out *float32, w *byte, nrows, nb int, xq *int16, xds *float32)

// gemvQ16AVX2 runs the rows two at a time (gemv2*), an odd last row alone.
func gemvQ16AVX2(t QType, out []float32, w []byte, nb int, xq []int16, xds []float32) {
	n := len(out)
	if n == 0 {
		return
	}
	nbp := roundUp(nb, 8)
	if nb == 0 || len(w) < n*nb*t.BlockBytes() || len(xq) < nb*QBlock || len(xds) < 2*nbp {
		panic("kernels: gemvQ16: short slices")
	}
	if n2 := n &^ 1; n2 > 0 {
		switch t {
		case Q4_1:
			gemv2Q4_1x16AVX2(&out[0], &w[0], n2, nb, &xq[0], &xds[0])
		case Q4_0:
			gemv2Q4_0x16AVX2(&out[0], &w[0], n2, nb, &xq[0], &xds[0])
		case Q8_0:
			gemv2Q8_0x16AVX2(&out[0], &w[0], n2, nb, &xq[0], &xds[0])
		default:
			panic("kernels: gemvQ16: unknown type")
		}
	}
	if n&1 == 0 {
		return
	}
	last, row := &out[n-1], &w[(n-1)*nb*t.BlockBytes()]
	switch t {
	case Q4_1:
		gemvQ4_1x16AVX2(last, row, 1, nb, &xq[0], &xds[0])
	case Q4_0:
		gemvQ4_0x16AVX2(last, row, 1, nb, &xq[0], &xds[0])
	case Q8_0:
		gemvQ8_0x16AVX2(last, row, 1, nb, &xq[0], &xds[0])
	default:
		panic("kernels: gemvQ16: unknown type")
	}
}

//go:noescape
func quantAct8AVX2(q *int8, ds *float32, x *float32, nb, nbp int)

//go:noescape
func quantAct16AVX2(q *int16, ds *float32, x *float32, nb, nbp int)

// quantActAVX2 is quantizeAct: q and ds (actDS(len(x))) from x.
func quantActAVX2(q []int8, ds, x []float32) {
	clear(ds)
	nb := len(x) / QBlock
	if nb == 0 {
		return
	}
	if len(q) < nb*QBlock || len(ds) < 2*roundUp(nb, 8) {
		panic("kernels: quantAct: short slices")
	}
	quantAct8AVX2(&q[0], &ds[0], &x[0], nb, len(ds)/2)
}

// quantAct16AVX2Row is quantizeAct16.
func quantAct16AVX2Row(q []int16, ds, x []float32) {
	clear(ds)
	nb := len(x) / QBlock
	if nb == 0 {
		return
	}
	if len(q) < nb*QBlock || len(ds) < 2*roundUp(nb, 8) {
		panic("kernels: quantAct16: short slices")
	}
	quantAct16AVX2(&q[0], &ds[0], &x[0], nb, len(ds)/2)
}

//go:noescape
func gemm8Q4_1x16AVX2(out *float32, w *byte, nrows, nb int, xt *int16, xdt *float32, scr *float32)

//go:noescape
func gemm8Q4_0x16AVX2(out *float32, w *byte, nrows, nb int, xt *int16, xdt *float32, scr *float32)

//go:noescape
func gemm8Q8_0x16AVX2(out *float32, w *byte, nrows, nb int, xt *int16, xdt *float32, scr *float32)

//go:noescape
func gemm16Q4_1x16AVX512(out *float32, w *byte, nrows, nb int, xt *int16, xdt *float32, scr *float32)

//go:noescape
func gemm16Q4_0x16AVX512(out *float32, w *byte, nrows, nb int, xt *int16, xdt *float32, scr *float32)

//go:noescape
func gemm16Q8_0x16AVX512(out *float32, w *byte, nrows, nb int, xt *int16, xdt *float32, scr *float32)

//go:noescape
func gemm16Q4_1x16AVX512VNNI(out *float32, w *byte, nrows, nb int, xt *int16, xdt *float32, scr *float32)

//go:noescape
func gemm16Q4_0x16AVX512VNNI(out *float32, w *byte, nrows, nb int, xt *int16, xdt *float32, scr *float32)

//go:noescape
func gemm16Q8_0x16AVX512VNNI(out *float32, w *byte, nrows, nb int, xt *int16, xdt *float32, scr *float32)

// checkBatch panics unless the slices hold len(out)/lanes rows of w against lanes rows.
func checkBatch(t QType, out []float32, w []byte, nb, lanes int, xt []int16, xdt, scr []float32) {
	n := len(out) / lanes
	if nb == 0 || len(w) < n*nb*t.BlockBytes() || len(xt) < nb*QBlock*lanes || len(xdt) < nb*2*lanes || len(scr) < batchScratch(nb) {
		panic("kernels: gemmQ16B: short slices")
	}
}

// gemmQ16BAVX2 is gemmQ16BGeneric for 8 lanes.
func gemmQ16BAVX2(t QType, out []float32, w []byte, nb, lanes int, xt []int16, xdt, scr []float32) {
	n := len(out) / 8
	if lanes != 8 {
		panic("kernels: gemmQ16B: the AVX2 kernels take 8 rows")
	}
	if n == 0 {
		return
	}
	checkBatch(t, out, w, nb, lanes, xt, xdt, scr)
	switch t {
	case Q4_1:
		gemm8Q4_1x16AVX2(&out[0], &w[0], n, nb, &xt[0], &xdt[0], &scr[0])
	case Q4_0:
		gemm8Q4_0x16AVX2(&out[0], &w[0], n, nb, &xt[0], &xdt[0], &scr[0])
	case Q8_0:
		gemm8Q8_0x16AVX2(&out[0], &w[0], n, nb, &xt[0], &xdt[0], &scr[0])
	default:
		panic("kernels: gemmQ16B: unknown type")
	}
}

// gemmQ16BAVX512 is gemmQ16BGeneric for 16 lanes (AVX-512 F and BW).
func gemmQ16BAVX512(t QType, out []float32, w []byte, nb, lanes int, xt []int16, xdt, scr []float32) {
	gemmQ16B16(t, out, w, nb, lanes, xt, xdt, scr, false)
}

// gemmQ16BVNNI is gemmQ16BAVX512 with its block sums accumulated by VPDPWSSD (AVX-512
// VNNI): the same results bit for bit, in fewer instructions.
func gemmQ16BVNNI(t QType, out []float32, w []byte, nb, lanes int, xt []int16, xdt, scr []float32) {
	gemmQ16B16(t, out, w, nb, lanes, xt, xdt, scr, true)
}

// gemmQ16B16 runs the 16-lane kernels, the VNNI ones when vnni is set.
func gemmQ16B16(t QType, out []float32, w []byte, nb, lanes int, xt []int16, xdt, scr []float32, vnni bool) {
	n := len(out) / 16
	if lanes != 16 {
		panic("kernels: gemmQ16B: the AVX-512 kernels take 16 rows")
	}
	if n == 0 {
		return
	}
	checkBatch(t, out, w, nb, lanes, xt, xdt, scr)
	var k batchKernel
	switch t {
	case Q4_1:
		k = gemm16Q4_1x16AVX512
		if vnni {
			k = gemm16Q4_1x16AVX512VNNI
		}
	case Q4_0:
		k = gemm16Q4_0x16AVX512
		if vnni {
			k = gemm16Q4_0x16AVX512VNNI
		}
	case Q8_0:
		k = gemm16Q8_0x16AVX512
		if vnni {
			k = gemm16Q8_0x16AVX512VNNI
		}
	default:
		panic("kernels: gemmQ16B: unknown type")
	}
	k(&out[0], &w[0], n, nb, &xt[0], &xdt[0], &scr[0])
}

// batchKernel is the signature of the generated batched kernels.
type batchKernel func(out *float32, w *byte, nrows, nb int, xt *int16, xdt *float32, scr *float32)

// scatter16AVX2 is scatter16Go with 8 × 8 transpositions (transpose8) when the lanes are 8
// or 16; adding goes through a transposed copy.
func scatter16AVX2(c []float32, ldc int, o *[256]float32, lanes int, acc bool) {
	if lanes != 16 && lanes != 8 {
		scatter16Go(c, ldc, o, lanes, acc)
		return
	}
	_ = c[(lanes-1)*ldc+15] // bounds for the assembly
	n8 := lanes / 8
	if !acc {
		transpose8(&o[0], 64, &c[0], 4*ldc, n8)
		transpose8(&o[128], 64, &c[8], 4*ldc, n8)
		return
	}
	var t [256]float32
	transpose8(&o[0], 64, &t[0], 64, n8)
	transpose8(&o[128], 64, &t[8], 64, n8)
	for i := range lanes {
		d, ti := (*[16]float32)(c[i*ldc:i*ldc+16]), (*[16]float32)(t[16*i:16*i+16])
		for r := range 16 {
			d[r] += ti[r]
		}
	}
}

// transposePairsAVX2 is transposeAct's layout for a full group of 8 or 16 rows: the rows'
// pairs of int16 values moved as 32-bit words by 8 × 8 transpositions (transpose8; moves
// only, so every bit stays).
func transposePairsAVX2(xt, q16 []int16, k, L int) {
	np := k / 2
	if L != 8 && L != 16 || np%8 != 0 || len(q16) < L*k || len(xt) < np*2*L {
		panic("kernels: transposePairs: bad shape")
	}
	for r0 := 0; r0 < L; r0 += 8 {
		src := (*float32)(unsafe.Pointer(&q16[r0*k]))
		dst := (*float32)(unsafe.Pointer(&xt[2*r0]))
		transpose8(src, 2*k, dst, 4*L, np/8)
	}
}
