package kernels

import (
	"fmt"
	"os"
	"sync/atomic"
)

// Layouts of the three products.
const (
	kindNT = iota // C (+)= A·Bᵀ, A [m×k], B [n×k]
	kindNN        // C (+)= A·B,  A [m×k], B [k×n]
	kindTN        // C (+)= Aᵀ·B, A [k×m], B [k×n]
)

// impl is one implementation of the primitives. mm computes the sub-block
// C[i0:i1, j0:j1] of a product whose full shapes are m, k, n.
type impl struct {
	name  string
	mm    func(kind int, c, a, b []float32, m, k, n int, acc bool, i0, i1, j0, j1 int)
	dot   func(a, b []float32) float32
	axpy  func(alpha float32, x, y []float32)
	scale func(alpha float32, x []float32)
	// gemvQ and dequant are the quantized primitives (see quant.go): len(out) rows of nb
	// blocks against one quantized activation row; one row of nb blocks into dst.
	gemvQ   func(t QType, out []float32, w []byte, nb int, xq []int8, xds []float32)
	gemvQ16 func(t QType, out []float32, w []byte, nb int, xq []int16, xds []float32)
	dequant func(t QType, dst []float32, row []byte, nb int)
	// gemmQ16B is the batched integer product: len(out)/lanes rows of nb blocks against
	// lanes int16 activation rows in the transposed layout of transposeAct (out[lanes·r+i]);
	// scr holds batchScratch(nb) floats. batchLanes is the lanes it takes.
	gemmQ16B   func(t QType, out []float32, w []byte, nb, lanes int, xt []int16, xdt, scr []float32)
	batchLanes int
	// scatter16 writes (or adds, acc) a full 16 × 16 tile of the 16-lane batched kernels'
	// output to C: o[16·r+i] to c[i·ldc+r] for lanes i < lanes (scatter16Go's contract).
	scatter16 func(c []float32, ldc int, o *[256]float32, lanes int, acc bool)
	// transposePairs writes a full group of L int16 activation rows of k values (q16) in
	// transposeAct's layout (xt, np·2L values); nil: transposeAct's loops.
	transposePairs func(xt, q16 []int16, k, L int)
	// quantAct and quantAct16 quantize one activation row (quantizeAct, quantizeAct16).
	quantAct   func(q []int8, ds, x []float32)
	quantAct16 func(q []int16, ds, x []float32)
	// expSum, swiglu and swigluBack are ExpSum, SwiGLU and SwiGLUBackward on slices of
	// equal length.
	expSum     func(dst, x []float32, scale, shift float32) float64
	swiglu     func(h, g, u []float32)
	swigluBack func(dg, du, dh, g, u []float32)
	// qnt and qnn are the products of many rows with a QMatrix that dequantize W's blocks
	// straight into the GEMM's packed panels (quant_gemm_amd64.go): qnt computes
	// C[:, j0:j1] (+)= A·W[j0:j1, :]ᵀ (MatMulQ), qnn C[:, j0:j1] (+)= A·W[:, j0:j1] (MatMulQNN);
	// j0 and j1 are multiples of qnnAlign for qnn. nil: dequantized tiles and mm.
	qnt func(c, a []float32, w *QMatrix, m int, acc bool, j0, j1 int)
	qnn func(c, a []float32, w *QMatrix, m int, acc bool, j0, j1 int)
	// qgemm16 is MatMulQInt's kernel for many rows (quant_int.go: qgemm16Generic's contract);
	// nil: MatMulQInt runs MatMulQ's integer paths.
	qgemm16 func(mr, nblk int, a []int16, lda int, ds []float32, ldds int, b []uint32, sb, mb, c []float32, ldc int, load bool)
}

var portable = &impl{name: "portable", mm: genericMM, dot: dotGeneric, axpy: axpyGeneric, scale: scaleGeneric,
	gemvQ: gemvQGeneric, gemvQ16: gemvQ16Generic, gemmQ16B: gemmQ16BGeneric, batchLanes: 8, scatter16: scatter16Go, dequant: dequantGeneric,
	quantAct: quantizeAct, quantAct16: quantizeAct16, expSum: expSumGeneric, swiglu: swigluGeneric, swigluBack: swigluBackGeneric}

// impls lists the implementations this CPU can run, best first; the last is
// always portable. Filled by init functions of the architecture files.
var impls = []*impl{portable}

var current atomic.Pointer[impl]

// selectImpl stores the best implementation, or the one named by the
// CITIZEN_KERNELS environment variable ("portable", "avx2", "avx512") when
// this CPU can run it: a switch for debugging and for comparing results.
func selectImpl() {
	current.Store(impls[0])
	if name := os.Getenv("CITIZEN_KERNELS"); name != "" {
		setImpl(name)
	}
}

func init() { selectImpl() }

// Implementation names the implementation in use ("avx512", "avx2" or
// "portable"). Safe for concurrent use.
func Implementation() string { return current.Load().name }

// setImpl forces the named implementation (tests and benchmarks only) and
// returns a function restoring the previous one. It reports false when the
// CPU cannot run it.
func setImpl(name string) (restore func(), ok bool) {
	for _, im := range impls {
		if im.name == name {
			prev := current.Swap(im)
			return func() { current.Store(prev) }, true
		}
	}
	return func() {}, false
}

func checkMM(op string, c, a, b []float32, m, k, n int) {
	if m < 0 || k < 0 || n < 0 {
		panic(fmt.Sprintf("kernels: %s: negative shape m=%d k=%d n=%d", op, m, k, n))
	}
	if len(a) < m*k || len(b) < k*n || len(c) < m*n {
		panic(fmt.Sprintf("kernels: %s: slices too short for m=%d k=%d n=%d: len(a)=%d len(b)=%d len(c)=%d",
			op, m, k, n, len(a), len(b), len(c)))
	}
}

// Shared contract of MatMulNT, MatMulNN and MatMulTN: all matrices are
// dense row-major; a, b and c must hold at least m·k, k·n and m·n elements
// (a shorter slice or a negative size panics); only c[:m·n] is written;
// c must not overlap a or b. m, n or k may be 0 (k = 0 gives C = 0, or
// leaves C unchanged when acc). Results agree with exact arithmetic to about
// 4·sqrt(k)·2⁻²³·Σ|a·b| per element; they may differ in the last bits
// between implementations, thread counts and shapes (summation order), but
// one call is deterministic for a given implementation, shape and
// SetThreads value. Safe for concurrent use.

// MatMulNT computes C[m×n] = A[m×k]·B[n×k]ᵀ, or adds the product into C when
// acc is true. It is the forward linear layer y = x·Wᵀ with W stored
// [out,in] as in Hugging Face checkpoints (m tokens, k = in, n = out).
// With m=1 it is a matrix-vector product and runs at memory bandwidth.
// c must not overlap a or b. Safe for concurrent use.
func MatMulNT(c, a, b []float32, m, k, n int, acc bool) {
	checkMM("MatMulNT", c, a, b, m, k, n)
	matmul(kindNT, c, a, b, m, k, n, acc)
}

// MatMulNN computes C[m×n] = A[m×k]·B[k×n], or adds the product into C when
// acc is true (the input gradient dx = dy·W of a linear layer).
// c must not overlap a or b. Safe for concurrent use.
func MatMulNN(c, a, b []float32, m, k, n int, acc bool) {
	checkMM("MatMulNN", c, a, b, m, k, n)
	matmul(kindNN, c, a, b, m, k, n, acc)
}

// MatMulTN computes C[m×n] = A[k×m]ᵀ·B[k×n], or adds the product into C when
// acc is true (the weight gradient dW += dyᵀ·x of a linear layer: A = dy
// [tokens×out], B = x [tokens×in], C = dW [out×in]).
// c must not overlap a or b. Safe for concurrent use.
func MatMulTN(c, a, b []float32, m, k, n int, acc bool) {
	checkMM("MatMulTN", c, a, b, m, k, n)
	matmul(kindTN, c, a, b, m, k, n, acc)
}

func matmul(kind int, c, a, b []float32, m, k, n int, acc bool) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		if !acc {
			clear(c[:m*n])
		}
		return
	}
	im := current.Load()
	if parts := splitParts(m, k, n); parts > 1 {
		parallelMM(im, kind, c, a, b, m, k, n, acc, parts)
		return
	}
	im.mm(kind, c, a, b, m, k, n, acc, 0, m, 0, n)
}

// Dot returns the inner product of a and b; b must be at least as long as a.
// Safe for concurrent use.
func Dot(a, b []float32) float32 {
	if len(b) < len(a) {
		panic("kernels: Dot: len(b) < len(a)")
	}
	return current.Load().dot(a, b)
}

// Axpy computes y += alpha·x over len(x) elements; y must be at least as long
// as x and must not overlap it. Safe for concurrent use.
func Axpy(alpha float32, x, y []float32) {
	if len(y) < len(x) {
		panic("kernels: Axpy: len(y) < len(x)")
	}
	current.Load().axpy(alpha, x, y)
}

// Scale computes x *= alpha in place. Safe for concurrent use.
func Scale(alpha float32, x []float32) {
	current.Load().scale(alpha, x)
}
