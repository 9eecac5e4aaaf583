package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
)

// QType is the block format of a QMatrix: one of ggml's (GGUF's) layouts of 32 weights per block,
// byte for byte, so a GGUF tensor of that type is a QMatrix as it lies in the file.
type QType uint8

// Block formats (little-endian; d and m are IEEE halves; q are the block's 32 weights).
const (
	// Q8_0 is d, then 32 int8 q: w = d·q. 34 bytes, 8.5 bits a weight.
	Q8_0 QType = iota + 1
	// Q4_0 is d, then 16 bytes; byte j holds q_j in its low nibble and q_{j+16} in its high
	// nibble: w = d·(q−8). 18 bytes, 4.5 bits a weight.
	Q4_0
	// Q4_1 is d, m, then 16 bytes of nibbles as Q4_0: w = d·q + m. 20 bytes, 5 bits a weight.
	Q4_1
)

// QBlock is the number of weights in one block of every QType.
const QBlock = 32

// BlockBytes is the size of one block of t, or 0 for an unknown type.
func (t QType) BlockBytes() int {
	switch t {
	case Q8_0:
		return 34
	case Q4_0:
		return 18
	case Q4_1:
		return 20
	}
	return 0
}

func (t QType) String() string {
	switch t {
	case Q8_0:
		return "Q8_0"
	case Q4_0:
		return "Q4_0"
	case Q4_1:
		return "Q4_1"
	}
	return fmt.Sprintf("QType(%d)", uint8(t))
}

// QMatrix is a row-major [Rows, Cols] weight matrix of quantized blocks, the W of y = x·Wᵀ
// stored [out, in] as a linear layer's weight. Each row holds the Cols/32 blocks of one row of
// a GGUF tensor of Type, regrouped for the kernels: first the blocks' half scales (d, then m for
// Q4_1), so that eight of them load as one vector, then the blocks' quants in GGUF's byte
// order. Values and size are those of the GGUF blocks, byte for byte. A QMatrix is immutable
// and safe for concurrent use.
type QMatrix struct {
	Type       QType
	Rows, Cols int

	data     []byte
	nb       int // blocks a row
	rowBytes int // nb · Type.BlockBytes()

	tOnce sync.Once    // builds t
	t     *qTransposed // Wᵀ's integer panels for MatMulQNNInt (quant_qnnint.go)
}

// qsBytes is the size of one block's quants.
func (t QType) qsBytes() int {
	if t == Q8_0 {
		return 32
	}
	return 16
}

// scales is the number of half scales a block of t carries (d, or d and m).
func (t QType) scales() int {
	if t == Q4_1 {
		return 2
	}
	return 1
}

// NewQMatrix builds a QMatrix from data, rows × cols weights (cols a multiple of 32) as GGUF
// blocks of type t, row after row. data is copied (regrouped), not kept.
func NewQMatrix(t QType, rows, cols int, data []byte) (*QMatrix, error) {
	bb := t.BlockBytes()
	switch {
	case bb == 0:
		return nil, fmt.Errorf("kernels: unknown quantized type %d", t)
	case rows <= 0 || cols <= 0 || cols%QBlock != 0:
		return nil, fmt.Errorf("kernels: %s matrix of %d × %d: columns must be a positive multiple of %d", t, rows, cols, QBlock)
	case rows > math.MaxInt/cols || len(data)/bb/rows != cols/QBlock || len(data)%(bb*rows) != 0:
		return nil, fmt.Errorf("kernels: %s matrix of %d × %d needs %d bytes, got %d", t, rows, cols, rows*(cols/QBlock)*bb, len(data))
	}
	w := &QMatrix{Type: t, Rows: rows, Cols: cols, nb: cols / QBlock}
	ns, qb := t.scales(), t.qsBytes()
	w.rowBytes = w.nb * bb
	w.data = make([]byte, rows*w.rowBytes)
	for r := 0; r < rows; r++ {
		src := data[r*w.nb*bb : (r+1)*w.nb*bb]
		dst := w.data[r*w.rowBytes : (r+1)*w.rowBytes]
		qs := dst[2*ns*w.nb:]
		for b := 0; b < w.nb; b++ {
			blk := src[b*bb : (b+1)*bb]
			for s := 0; s < ns; s++ {
				copy(dst[2*(s*w.nb+b):], blk[2*s:2*s+2])
			}
			copy(qs[b*qb:(b+1)*qb], blk[2*ns:])
		}
	}
	return w, nil
}

// Bytes is the memory the matrix holds.
func (w *QMatrix) Bytes() int { return len(w.data) }

// Blocks returns row r as GGUF blocks of Type (the inverse of NewQMatrix's regrouping).
func (w *QMatrix) Blocks(r int) []byte {
	bb, ns, qb := w.Type.BlockBytes(), w.Type.scales(), w.Type.qsBytes()
	row := w.data[r*w.rowBytes : (r+1)*w.rowBytes]
	out := make([]byte, w.nb*bb)
	for b := 0; b < w.nb; b++ {
		for s := 0; s < ns; s++ {
			copy(out[b*bb+2*s:], row[2*(s*w.nb+b):2*(s*w.nb+b)+2])
		}
		copy(out[b*bb+2*ns:(b+1)*bb], row[2*ns*w.nb+b*qb:])
	}
	return out
}

// DequantizeRows writes rows [r0, r1) as float32 into dst (row-major, (r1−r0) × Cols). The
// arithmetic is ggml's, in float32 without fused multiply-adds, so the values equal ggml's
// dequantization bit for bit.
func (w *QMatrix) DequantizeRows(dst []float32, r0, r1 int) {
	if r0 < 0 || r1 > w.Rows || r0 > r1 || len(dst) < (r1-r0)*w.Cols {
		panic(fmt.Sprintf("kernels: DequantizeRows [%d, %d) of %d rows into %d floats", r0, r1, w.Rows, len(dst)))
	}
	if r0 == r1 {
		return
	}
	im := current.Load()
	for r := r0; r < r1; r++ {
		im.dequant(w.Type, dst[(r-r0)*w.Cols:(r-r0+1)*w.Cols], w.data[r*w.rowBytes:(r+1)*w.rowBytes], w.nb)
	}
}

// QuantizeQ8_0 encodes src (a multiple of 32 weights) as Q8_0 blocks into dst (len(src)/32·34
// bytes), the way ggml does: per block d = max|x|/127 (stored as a half) and q = round(x/d).
// The error per weight is at most about d/2 plus the half rounding of d: under 0.5% of the
// block's largest magnitude.
func QuantizeQ8_0(dst []byte, src []float32) error {
	if len(src)%QBlock != 0 || len(dst) != len(src)/QBlock*34 {
		return fmt.Errorf("kernels: QuantizeQ8_0: %d weights into %d bytes", len(src), len(dst))
	}
	for b := 0; b < len(src)/QBlock; b++ {
		x := src[b*QBlock : (b+1)*QBlock]
		o := dst[b*34 : (b+1)*34]
		var amax float32
		for _, v := range x {
			amax = max(amax, abs32(v))
		}
		d := amax / 127
		id := float32(0)
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(o, float32ToHalf(d))
		for j, v := range x {
			o[2+j] = byte(int8(roundEven(v * id)))
		}
	}
	return nil
}

func abs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }

func roundEven(x float32) float32 { return float32(math.RoundToEven(float64(x))) }

// float32ToHalf rounds x to the nearest IEEE half (ties to even), saturating to ±Inf.
func float32ToHalf(x float32) uint16 {
	b := math.Float32bits(x)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23&0xff) - 127 + 15
	man := b & 0x7fffff
	switch {
	case b&0x7fffffff > 0x7f800000: // NaN
		return sign | 0x7e00
	case exp >= 31:
		return sign | 0x7c00
	case exp <= 0: // subnormal half or zero
		if exp < -10 {
			return sign
		}
		man |= 0x800000
		shift := uint(14 - exp)
		h := man >> shift
		rem := man & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || rem == half && h&1 == 1 {
			h++
		}
		return sign | uint16(h)
	}
	h := uint32(exp)<<10 | man>>13
	rem := man & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && h&1 == 1 {
		h++ // may carry into the exponent, up to Inf: correct
	}
	return sign | uint16(h)
}

// halfToFloat32 decodes an IEEE half.
func halfToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp == 0:
		v := float32(man) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}

// q8Act is a row of activations quantized per 32-block to int8, as ggml's Q8_1 does for its
// integer dot products: x ≈ d·q with d = max|x|/127; s = d·Σq feeds the offset terms of Q4_0
// (−8·d_w·s) and Q4_1 (m_w·s).
type q8Act struct {
	q   []int8
	q16 []int16   // the int16 form (SetQuantActBits(16)): d = max|x|/32767
	ds  []float32 // per row: d of each block, then s of each block, each padded to nbp
	// The batched path's transposed form of q16 and ds, per group of 8 rows (transposeAct).
	xt  []int16
	xdt []float32
}

// grow sizes a for m rows of k activations, as int8 or (wide) int16.
func (a *q8Act) grow(m, k int, wide bool) {
	n := m * 2 * roundUp(k/QBlock, 8)
	if wide {
		if cap(a.q16) < m*k {
			a.q16 = make([]int16, m*k)
		}
		a.q16 = a.q16[:m*k]
	} else {
		if cap(a.q) < m*k {
			a.q = make([]int8, m*k)
		}
		a.q = a.q[:m*k]
	}
	if cap(a.ds) < n {
		a.ds = make([]float32, n)
	}
	a.ds = a.ds[:n]
}

// actDS is the length of one row's ds for k activations.
func actDS(k int) int { return 2 * roundUp(k/QBlock, 8) }

// quantizeAct fills q and ds (actDS(len(x)): d[nbp], then s[nbp], zero-padded) from x.
func quantizeAct(q []int8, ds []float32, x []float32) {
	nbp := len(ds) / 2
	clear(ds)
	for b := 0; b < len(x)/QBlock; b++ {
		xb := x[b*QBlock : (b+1)*QBlock]
		qb := q[b*QBlock : (b+1)*QBlock]
		var amax float32
		for _, v := range xb {
			amax = max(amax, abs32(v))
		}
		d := amax / 127
		id := float32(0)
		if d != 0 {
			id = 1 / d
		}
		sum := 0
		for j, v := range xb {
			r := int8(roundEven(v * id))
			qb[j] = r
			sum += int(r)
		}
		ds[b], ds[nbp+b] = d, d*float32(sum)
	}
}

// quantizeAct16 is quantizeAct with int16 values: d = max|x|/32767, q = round(x/d).
func quantizeAct16(q []int16, ds []float32, x []float32) {
	nbp := len(ds) / 2
	clear(ds)
	for b := 0; b < len(x)/QBlock; b++ {
		xb := x[b*QBlock : (b+1)*QBlock]
		qb := q[b*QBlock : (b+1)*QBlock]
		var amax float32
		for _, v := range xb {
			amax = max(amax, abs32(v))
		}
		d := amax / 32767
		id := float32(0)
		if d != 0 {
			id = 1 / d
		}
		sum := 0
		for j, v := range xb {
			r := int16(max(-32767, min(32767, roundEven(v*id))))
			qb[j] = r
			sum += int(r)
		}
		ds[b], ds[nbp+b] = d, d*float32(sum)
	}
}

// gemvQ16Generic is gemvQGeneric for int16 activations.
func gemvQ16Generic(t QType, out []float32, w []byte, nb int, xq []int16, xds []float32) {
	nbp := roundUp(nb, 8)
	ns, qb := t.scales(), t.qsBytes()
	rowBytes := nb * t.BlockBytes()
	le := binary.LittleEndian
	for r := range out {
		row := w[r*rowBytes : (r+1)*rowBytes]
		qs := row[2*ns*nb:]
		var sum, off float32
		for b := 0; b < nb; b++ {
			q := qs[b*qb : (b+1)*qb]
			x := xq[b*QBlock : (b+1)*QBlock]
			dx, sx := xds[b], xds[nbp+b]
			d := halfToFloat32(le.Uint16(row[2*b:]))
			var si int32
			switch t {
			case Q8_0:
				for j, v := range q {
					si += int32(int8(v)) * int32(x[j])
				}
			case Q4_0, Q4_1:
				if t == Q4_1 {
					off += halfToFloat32(le.Uint16(row[2*(nb+b):])) * sx
				} else {
					off += -8 * d * sx
				}
				for j, v := range q {
					si += int32(v&15)*int32(x[j]) + int32(v>>4)*int32(x[j+16])
				}
			}
			sum += d * dx * float32(si)
		}
		out[r] = sum + off
	}
}

// transposeAct writes the rows [0, rows) (rows ≤ L) of the int16 activations q16 (rows × k)
// and their ds (actDS(k) each) in the layout of the batched kernels for L rows at a time: xt
// holds, for block b and pair p (the block's values 2p and 2p+1), the two values of each of
// L rows at xt[((16b+p)·L+i)·2:], and xdt the rows' d of block b at xdt[2L·b+i] and their s
// at xdt[2L·b+L+i]. Rows past rows are zero (their results are zero and unused).
func transposeAct(im *impl, xt []int16, xdt []float32, q16 []int16, ds []float32, rows, k, L int) {
	nb, nds := k/QBlock, actDS(k)
	nbp := nds / 2
	np := k / 2 // pairs of a row: pair j of row i goes to xt[2(L·j+i):]
	xt, xdt = xt[:np*2*L], xdt[:nb*2*L]
	if rows < L {
		clear(xt)
		clear(xdt)
	}
	if rows == L && im.transposePairs != nil {
		im.transposePairs(xt, q16[:L*k], k, L)
	} else {
		// In spans of pairs, so that the span of xt that all rows write stays in L1.
		const span = 128
		for j0 := 0; j0 < np; j0 += span {
			j1 := min(j0+span, np)
			for i := 0; i < rows; i++ {
				x := q16[i*k+2*j0 : i*k+2*j1]
				o := 2 * (L*j0 + i)
				for j := 0; j+1 < len(x); j += 2 {
					xt[o], xt[o+1] = x[j], x[j+1]
					o += 2 * L
				}
			}
		}
	}
	for i := 0; i < rows; i++ {
		d := ds[i*nds : (i+1)*nds]
		for b := 0; b < nb; b++ {
			xdt[2*L*b+i], xdt[2*L*b+L+i] = d[b], d[nbp+b]
		}
	}
}

// batchScratch is the number of floats of scratch the batched kernels take for rows of nb
// blocks: a row's weights as int16, then its d and m as float32.
func batchScratch(nb int) int { return 16*nb + 2*roundUp(nb, 8) }

// gemmQ16BGeneric writes out[L·r+i] = row r of w (len(out)/L rows of nb blocks in
// QMatrix's layout, back to back) · activation row i of the L in xt, xdt (transposeAct's
// layout): the portable form of the batched integer products, the same arithmetic as
// gemvQ16Generic per row with the blocks summed in order.
func gemmQ16BGeneric(t QType, out []float32, w []byte, nb, L int, xt []int16, xdt, _ []float32) {
	ns, qb := t.scales(), t.qsBytes()
	rowBytes := nb * t.BlockBytes()
	le := binary.LittleEndian
	var wq [QBlock]int32
	sum, off := make([]float32, L), make([]float32, L)
	for r := 0; r < len(out)/L; r++ {
		row := w[r*rowBytes : (r+1)*rowBytes]
		qs := row[2*ns*nb:]
		clear(sum)
		clear(off)
		for b := 0; b < nb; b++ {
			q := qs[b*qb : (b+1)*qb]
			d := halfToFloat32(le.Uint16(row[2*b:]))
			switch t {
			case Q8_0:
				for j, v := range q {
					wq[j] = int32(int8(v))
				}
			default:
				for j, v := range q {
					wq[j], wq[j+16] = int32(v&15), int32(v>>4)
				}
			}
			var mw float32
			if t == Q4_1 {
				mw = halfToFloat32(le.Uint16(row[2*(nb+b):]))
			}
			x := xt[b*QBlock*L : (b+1)*QBlock*L]
			for i := 0; i < L; i++ {
				var si int32
				for p := 0; p < QBlock/2; p++ {
					si += wq[2*p]*int32(x[2*L*p+2*i]) + wq[2*p+1]*int32(x[2*L*p+2*i+1])
				}
				dx, sx := xdt[2*L*b+i], xdt[2*L*b+L+i]
				sum[i] += float32(si) * (d * dx)
				switch t {
				case Q4_1:
					off[i] += mw * sx
				case Q4_0:
					off[i] += d * sx
				}
			}
		}
		for i := 0; i < L; i++ {
			switch t {
			case Q4_1:
				sum[i] += off[i]
			case Q4_0:
				sum[i] += -8 * off[i]
			}
			out[L*r+i] = sum[i]
		}
	}
}

// gemvQGeneric writes out[r] = row r of w (rows of nb blocks in QMatrix's layout, back to back)
// · the quantized activation row (xq, xds): the portable integer dot products.
func gemvQGeneric(t QType, out []float32, w []byte, nb int, xq []int8, xds []float32) {
	nbp := roundUp(nb, 8)
	ns, qb := t.scales(), t.qsBytes()
	rowBytes := nb * t.BlockBytes()
	le := binary.LittleEndian
	for r := range out {
		row := w[r*rowBytes : (r+1)*rowBytes]
		qs := row[2*ns*nb:]
		var sum, off float32
		for b := 0; b < nb; b++ {
			q := qs[b*qb : (b+1)*qb]
			x := xq[b*QBlock : (b+1)*QBlock]
			dx, sx := xds[b], xds[nbp+b]
			d := halfToFloat32(le.Uint16(row[2*b:]))
			var si int32
			switch t {
			case Q8_0:
				for j, v := range q {
					si += int32(int8(v)) * int32(x[j])
				}
			case Q4_0, Q4_1:
				if t == Q4_1 {
					off += halfToFloat32(le.Uint16(row[2*(nb+b):])) * sx
				} else {
					off += -8 * d * sx
				}
				for j, v := range q {
					si += int32(v&15)*int32(x[j]) + int32(v>>4)*int32(x[j+16])
				}
			}
			sum += d * dx * float32(si)
		}
		out[r] = sum + off
	}
}

// dequantGeneric decodes one row of nb blocks (QMatrix's layout) into dst.
func dequantGeneric(t QType, dst []float32, row []byte, nb int) {
	ns, qb := t.scales(), t.qsBytes()
	qs := row[2*ns*nb:]
	le := binary.LittleEndian
	for b := 0; b < nb; b++ {
		q := qs[b*qb : (b+1)*qb]
		y := dst[b*QBlock : (b+1)*QBlock]
		d := halfToFloat32(le.Uint16(row[2*b:]))
		switch t {
		case Q8_0:
			for j, v := range q {
				y[j] = d * float32(int8(v))
			}
		case Q4_0:
			for j, v := range q {
				y[j] = d * float32(int(v&15)-8)
				y[j+16] = d * float32(int(v>>4)-8)
			}
		case Q4_1:
			m := halfToFloat32(le.Uint16(row[2*(nb+b):]))
			for j, v := range q {
				y[j] = float32(d*float32(v&15)) + m
				y[j+16] = float32(d*float32(v>>4)) + m
			}
		}
	}
}

// Products with at least qDequantMinRows rows of A dequantize tiles of W to float32 and run
// the packed float32 GEMM; fewer rows use integer dot products against quantized
// activations: one row at a time up to half the batched kernels' lanes (8 with AVX2, 16
// with AVX-512, 8 portable), then a group of lanes rows at a time (int16 activations; int8
// ones stay one row at a time). The default is at the measured crossover (BenchmarkMatMulQ).
const qDequantMinRows = 32

// batchMinRows is the fewest rows of A that im's batched integer kernels take.
func (im *impl) batchMinRows() int { return im.batchLanes/2 + 1 }

var quantFloatRows atomic.Int64

func init() { quantFloatRows.Store(qDequantMinRows) }

// SetQuantFloatRows sets from how many rows of A MatMulQ switches from integer dot products to
// dequantized tiles and the float32 GEMM (default 32; n < 1 means 1; math.MaxInt keeps every
// product on the integer path, as decode runs, which accuracy checks use) and returns the
// previous value. Safe for concurrent use; calls already running keep their choice.
func SetQuantFloatRows(n int) int {
	return int(quantFloatRows.Swap(int64(max(n, 1))))
}

// quantActBits is the width of the integer path's activations: 16 (default) or 8.
var quantActBits atomic.Int64

func init() { quantActBits.Store(16) }

// SetQuantActBits sets the width of the activations on MatMulQ's integer path, 16 or 8 (any
// other value means 16), and returns the previous value. With 16 (the default) each 32-block
// of a row is quantized to int16 (d = max|x|/32767): each value moves by at most 2⁻¹⁶ of its
// block's largest magnitude. With 8 (ggml's Q8_0/Q8_1 activations,
// d = max|x|/127) the rounding is 258 times coarser; on SmolLM2-135M it changes greedy
// answers (docs/benchmarks/quantized.md). Safe for concurrent use; calls already running keep
// their choice.
func SetQuantActBits(bits int) int {
	if bits != 8 {
		bits = 16
	}
	return int(quantActBits.Swap(int64(bits)))
}

// Tiles: the integer path walks W in groups of qRowTile rows (a few KB, kept in L1 while every
// row of A passes over them); the dequantizing path converts qDequantTile rows at a time.
const (
	qRowTile     = 16
	qRowTile1    = 128 // the group with a single row of A
	qDequantTile = 256
)

type qScratch struct {
	act  q8Act
	w, c []float32
}

var qScratchPool = sync.Pool{New: func() any { return new(qScratch) }}

func checkQ(op string, c, a []float32, w *QMatrix, m, k, n int) {
	if w == nil || m < 0 {
		panic(fmt.Sprintf("kernels: %s: nil matrix or negative rows %d", op, m))
	}
	if len(a) < m*k || len(c) < m*n {
		panic(fmt.Sprintf("kernels: %s: slices too short for m=%d k=%d n=%d: len(a)=%d len(c)=%d", op, m, k, n, len(a), len(c)))
	}
}

// MatMulQ computes C[m×n] = A[m×k]·Wᵀ with W a [n×k] QMatrix (n = w.Rows, k = w.Cols), or adds
// the product into C when acc is true: the forward linear layer on quantized weights.
//
// With few rows (decode) each row of A is quantized per 32-block to int16 (d = max|x|/32767;
// int8 with d = max|x|/127, as llama.cpp does, after SetQuantActBits(8)) and multiplied with
// integer dot products: besides the weights' own rounding, the result carries the
// activations' (each value moves by at most half a step, 2⁻¹⁶ of its block's largest magnitude
// for int16, 2⁻⁸ for int8). With more rows, W is dequantized tile by tile and the
// float32 GEMM runs: the result is then the float32 product with the dequantized weights. The
// shared contract of MatMulNT applies otherwise (c must not overlap a; deterministic for a
// given implementation, shape and SetThreads value). Safe for concurrent use.
func MatMulQ(c, a []float32, w *QMatrix, m int, acc bool) {
	MatMulQs(a, m, QProduct{C: c, W: w, Acc: acc})
}

// QProduct is one of the products MatMulQs computes from a shared A: C = A·Wᵀ, or C += A·Wᵀ
// when Acc.
type QProduct struct {
	C   []float32
	W   *QMatrix
	Acc bool
}

// MatMulQs computes every product of ps from the same A [m×k] (every W has k columns), each
// exactly as MatMulQ computes it alone; on the integer path A's rows are quantized once for
// all of them (the projections of one input: attention's q, k and v, the MLP's gate and up).
// No C may overlap a or another product's C. Safe for concurrent use.
func MatMulQs(a []float32, m int, ps ...QProduct) { matMulQs(a, m, false, ps) }

// MatMulQInt is MatMulQ on the integer path for any number of rows: each row of A quantized
// per 32-block to int16 (d = max|x|/32767; SetQuantActBits does not apply), integer dot
// products with W's quants, scaled per block by both d (for Q4_1 plus W's minimums times the
// activation block's sum). Each row's result is what MatMulQ's integer path gives it alone
// within float rounding. With 16 rows or more on AVX-512 VNNI a register-blocked kernel
// (vnni_amd64.s) takes the product, about 1.5 times the float32 GEMM's rate; elsewhere
// MatMulQ's integer kernels do. For products whose inputs tolerate the activations' rounding
// (training's forward pass on a frozen base). Safe for concurrent use.
func MatMulQInt(c, a []float32, w *QMatrix, m int, acc bool) {
	im := current.Load()
	if im.qgemm16 == nil || m < 16 {
		matMulQs(a, m, true, []QProduct{{C: c, W: w, Acc: acc}})
		return
	}
	checkQ("MatMulQInt", c, a, w, m, w.Cols, w.Rows)
	mulQIntMany(im, c, a, w, m, acc)
}

func matMulQs(a []float32, m int, intOnly bool, ps []QProduct) {
	if len(ps) == 0 {
		return
	}
	k := ps[0].W.Cols
	for _, p := range ps {
		if p.W == nil || p.W.Cols != k {
			panic("kernels: MatMulQs: nil matrix or matrices of different widths")
		}
		checkQ("MatMulQ", p.C, a, p.W, m, k, p.W.Rows)
	}
	if m == 0 {
		return
	}
	im := current.Load()
	if !intOnly && m >= int(quantFloatRows.Load()) {
		for _, p := range ps {
			mulQFloat(im, p.C, a, p.W, m, p.Acc)
		}
		return
	}
	sc := qScratchPool.Get().(*qScratch)
	defer qScratchPool.Put(sc)
	wide := intOnly || quantActBits.Load() != 8
	sc.act.grow(m, k, wide)
	nds := actDS(k)
	for i := 0; i < m; i++ {
		if wide {
			im.quantAct16(sc.act.q16[i*k:(i+1)*k], sc.act.ds[i*nds:(i+1)*nds], a[i*k:(i+1)*k])
		} else {
			im.quantAct(sc.act.q[i*k:(i+1)*k], sc.act.ds[i*nds:(i+1)*nds], a[i*k:(i+1)*k])
		}
	}
	if wide && m >= im.batchMinRows() {
		L, nb := im.batchLanes, k/QBlock
		ng := (m + L - 1) / L
		xs, xds := nb*QBlock*L, nb*2*L
		sc.act.xt = growI16(sc.act.xt, ng*xs)
		sc.act.xdt = growF(&sc.act.xdt, ng*xds)
		for g := 0; g < ng; g++ {
			transposeAct(im, sc.act.xt[g*xs:], sc.act.xdt[g*xds:], sc.act.q16[g*L*k:], sc.act.ds[g*L*nds:], min(L, m-L*g), k, L)
		}
		mulQBatch(im, ps, &sc.act, m)
		return
	}
	for _, p := range ps {
		mulQInt(im, p.C, &sc.act, wide, p.W, m, p.Acc)
	}
}

func growI16(b []int16, n int) []int16 {
	if cap(b) < n {
		return make([]int16, n)
	}
	return b[:n]
}

// mulQBatch is MatMulQ's batched integer path for every product of ps on the transposed
// groups of rows in act: one parallel loop over all the products' tiles of qRowTile rows of W
// (the projections of one input share the hand-off to the pool and its balance).
func mulQBatch(im *impl, ps []QProduct, act *q8Act, m int) {
	k, L := ps[0].W.Cols, im.batchLanes
	nb := k / QBlock
	ng := (m + L - 1) / L
	xs, xds := nb*QBlock*L, nb*2*L
	var firstArr [8]int
	first := firstArr[:0] // the first tile of each product, then the total
	tiles, work := 0, 0
	for _, p := range ps {
		first = append(first, tiles)
		tiles += (p.W.Rows + qRowTile - 1) / qRowTile
		work += m * k * p.W.Rows / 4
	}
	first = append(first, tiles)
	parallelFor(tiles, 1, work, func(lo, hi int) {
		sc := qScratchPool.Get().(*qScratch)
		defer qScratchPool.Put(sc)
		scr := growF(&sc.w, batchScratch(nb))
		tmp := growF(&sc.c, qRowTile*L)
		pi := 0
		for t := lo; t < hi; t++ {
			for first[pi+1] <= t {
				pi++
			}
			p := ps[pi]
			w, n := p.W, p.W.Rows
			j0 := (t - first[pi]) * qRowTile
			j1 := min(j0+qRowTile, n)
			rows := w.data[j0*w.rowBytes : j1*w.rowBytes]
			out := tmp[:(j1-j0)*L]
			for g := 0; g < ng; g++ {
				im.gemmQ16B(w.Type, out, rows, nb, L, act.xt[g*xs:(g+1)*xs], act.xdt[g*xds:(g+1)*xds], scr)
				scatterLanes(p.C[L*g*n+j0:], n, out, j1-j0, L, min(L, m-L*g), p.Acc)
			}
		}
	})
}

// scatterLanes writes the batched kernels' out[L·r+i] (rows r < rows of W, lanes i < lanes)
// to c[i·ldc+r], or adds it there when acc.
func scatterLanes(c []float32, ldc int, out []float32, rows, L, lanes int, acc bool) {
	if rows == 16 && L == 16 {
		current.Load().scatter16(c, ldc, (*[256]float32)(out), lanes, acc)
		return
	}
	for i := 0; i < lanes; i++ {
		dst := c[i*ldc : i*ldc+rows]
		if acc {
			for r := range dst {
				dst[r] += out[L*r+i]
			}
		} else {
			for r := range dst {
				dst[r] = out[L*r+i]
			}
		}
	}
}

// scatter16Go is scatterLanes for a full tile of 16 rows of W and 16 lanes.
func scatter16Go(c []float32, ldc int, o *[256]float32, lanes int, acc bool) {
	for i := range min(lanes, 16) {
		d := (*[16]float32)(c[i*ldc : i*ldc+16])
		if acc {
			for r := range 16 {
				d[r] += o[16*r+i]
			}
		} else {
			for r := range 16 {
				d[r] = o[16*r+i]
			}
		}
	}
}

// mulQFloat is MatMulQ's dequantizing path.
func mulQFloat(im *impl, c, a []float32, w *QMatrix, m int, acc bool) {
	k, n := w.Cols, w.Rows
	if im.qnt != nil {
		parallelFor(n, 64, m*k*n, func(lo, hi int) { im.qnt(c, a, w, m, acc, lo, hi) })
		return
	}
	parallelFor(n, qDequantTile, m*k*n, func(lo, hi int) {
		sc := qScratchPool.Get().(*qScratch)
		defer qScratchPool.Put(sc)
		for j0 := lo; j0 < hi; j0 += qDequantTile {
			j1 := min(j0+qDequantTile, hi)
			nc := j1 - j0
			wt := growF(&sc.w, nc*k)
			w.DequantizeRows(wt, j0, j1)
			ct := growF(&sc.c, m*nc)
			im.mm(kindNT, ct, a, wt, m, k, nc, false, 0, m, 0, nc)
			for i := 0; i < m; i++ {
				dst, src := c[i*n+j0:i*n+j1], ct[i*nc:(i+1)*nc]
				if acc {
					for j, v := range src {
						dst[j] += v
					}
				} else {
					copy(dst, src)
				}
			}
		}
	})
}

// mulQInt is MatMulQ's integer path on the quantized rows of A in act.
func mulQInt(im *impl, c []float32, act *q8Act, wide bool, w *QMatrix, m int, acc bool) {
	k, n := w.Cols, w.Rows
	nds := actDS(k)
	rb := w.rowBytes
	tile := qRowTile
	if m == 1 {
		tile = qRowTile1 // nothing to keep in L1: fewer, longer kernel calls
	}
	parallelFor(n, qRowTile, m*k*n/4, func(lo, hi int) {
		var tmp [qRowTile1]float32
		for j0 := lo; j0 < hi; j0 += tile {
			j1 := min(j0+tile, hi)
			rows := w.data[j0*rb : j1*rb]
			for i := 0; i < m; i++ {
				dst := c[i*n+j0 : i*n+j1]
				out := dst
				if acc {
					out = tmp[:j1-j0]
				}
				if wide {
					im.gemvQ16(w.Type, out, rows, w.nb, act.q16[i*k:(i+1)*k], act.ds[i*nds:(i+1)*nds])
				} else {
					im.gemvQ(w.Type, out, rows, w.nb, act.q[i*k:(i+1)*k], act.ds[i*nds:(i+1)*nds])
				}
				if acc {
					for j, v := range out {
						dst[j] += v
					}
				}
			}
		}
	})
}

// MatMulQNN computes C[m×k] = A[m×n]·W with W a [n×k] QMatrix, or adds the product into C when
// acc is true: the input gradient dx = dy·W of a linear layer whose weights are quantized. W is
// dequantized (exactly, as DequantizeRows) block by block into the float32 GEMM's packed panels
// (AVX-512; elsewhere into tiles that the float32 products then read). c must not overlap a.
// Safe for concurrent use.
// qnnAlign is the column alignment of impl.qnn's ranges: whole blocks.
const qnnAlign = QBlock

func MatMulQNN(c, a []float32, w *QMatrix, m int, acc bool) {
	k, n := w.Cols, w.Rows
	checkQ("MatMulQNN", c, a, w, m, n, k) // a is [m×n], c is [m×k]
	if m == 0 {
		return
	}
	if im := current.Load(); im.qnn != nil {
		parallelFor(k, 2*qnnAlign, m*n*k, func(lo, hi int) { im.qnn(c, a, w, m, acc, lo, hi) })
		return
	}
	if !acc {
		clear(c[:m*k])
	}
	sc := qScratchPool.Get().(*qScratch)
	defer qScratchPool.Put(sc)
	for j0 := 0; j0 < n; j0 += qDequantTile {
		j1 := min(j0+qDequantTile, n)
		nc := j1 - j0
		wt := growF(&sc.w, nc*k)
		w.DequantizeRows(wt, j0, j1)
		at := growF(&sc.c, m*nc)
		for i := 0; i < m; i++ {
			copy(at[i*nc:(i+1)*nc], a[i*n+j0:i*n+j1])
		}
		matmul(kindNN, c, at, wt, m, nc, k, true)
	}
}

func growF(b *[]float32, n int) []float32 {
	if cap(*b) < n {
		*b = make([]float32, n)
	}
	return (*b)[:n]
}
