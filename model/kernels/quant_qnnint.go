package kernels

import "math"

// The input gradient dx = dy·W on the integer path (MatMulQNNInt). The product's sums run over
// W's rows, across its blocks, so W's quants cannot be used as they are: Wᵀ is requantized
// once, per column and block of 32 rows, to int16 in MatMulQInt's panel layout (no minimums),
// and kept with W. Its quants are at most qtMax in magnitude, so that a block's 32 products
// with int16 activations (each at most 32767) sum within int32 on VPDPWSSD.
const qtMax = 2047

// qtMaxRows is the most rows of W that MatMulQNNInt takes: its panels are W's columns, so A's
// int16 copy (m × W.Rows) streams once per panel, and an output head (a vocabulary of rows) is
// faster on MatMulQNN's float32 GEMM, whose blocking keeps A's tiles in cache.
const qtMaxRows = 8192

// qTransposed is Wᵀ's panels: panel p (Wᵀ's rows, i.e. W's columns [p·qPanel, (p+1)·qPanel),
// W.Rows/QBlock blocks) at b[p·pb:], its scales at sb[p·ps:].
type qTransposed struct {
	b      []uint32
	sb     []float32
	pb, ps int
}

// transposed returns Wᵀ's panels, building them on first use (2 bytes per weight), or nil
// when W's rows are not whole blocks.
func (w *QMatrix) transposed() *qTransposed {
	if w.Rows%QBlock != 0 {
		return nil
	}
	w.tOnce.Do(func() { w.t = buildTransposed(w) })
	return w.t
}

func buildTransposed(w *QMatrix) *qTransposed {
	n, k := w.Rows, w.Cols
	nb := n / QBlock
	np := (k + qPanel - 1) / qPanel
	t := &qTransposed{pb: nb * 16 * qPanel, ps: nb * qPanel}
	t.b = make([]uint32, np*t.pb)
	t.sb = make([]float32, np*t.ps)
	parallelFor(nb, 1, n*k*64, func(lo, hi int) {
		tile := make([]float32, QBlock*k)
		var q [QBlock]int32
		for bk := lo; bk < hi; bk++ {
			w.DequantizeRows(tile, bk*QBlock, (bk+1)*QBlock)
			for j := range k {
				var mx float32
				for i := range QBlock {
					mx = max(mx, abs32(tile[i*k+j]))
				}
				p, jj := j/qPanel, j%qPanel
				if mx == 0 {
					continue // quants and scale stay zero
				}
				s := mx / qtMax
				inv := qtMax / mx
				for i := range QBlock {
					q[i] = int32(math.RoundToEven(float64(tile[i*k+j] * inv)))
					q[i] = min(max(q[i], -qtMax), qtMax)
				}
				out := t.b[p*t.pb+bk*16*qPanel+jj:]
				for u := range 16 {
					out[u*qPanel] = uint32(uint16(int16(q[2*u]))) | uint32(uint16(int16(q[2*u+1])))<<16
				}
				t.sb[p*t.ps+bk*qPanel+jj] = s
			}
		}
	})
	return t
}

// MatMulQNNInt computes C[m×k] = A[m×n]·W with W a [n×k] QMatrix, or adds the product into C
// when acc is true: MatMulQNN on the integer path. A's rows are quantized to int16 per 32-block
// (as MatMulQInt's), Wᵀ requantized to int16 per column and 32-block of rows (at most 2047 in
// magnitude: relative error up to 2.5e-4 of the block's largest weight) on first use and kept
// with W, 2 bytes per weight, for as long as W lives. With fewer than 16 rows, W's rows not
// whole blocks or more than 8,192 of them (an output head), or no integer many-row kernel
// (only AVX-512 VNNI has one) it is MatMulQNN.
// c must not overlap a. Safe for concurrent use.
func MatMulQNNInt(c, a []float32, w *QMatrix, m int, acc bool) {
	im := current.Load()
	if im.qgemm16 == nil || m < 16 {
		MatMulQNN(c, a, w, m, acc)
		return
	}
	k, n := w.Cols, w.Rows
	checkQ("MatMulQNNInt", c, a, w, m, n, k)
	if n > qtMaxRows {
		MatMulQNN(c, a, w, m, acc)
		return
	}
	t := w.transposed()
	if t == nil {
		MatMulQNN(c, a, w, m, acc)
		return
	}
	pack := func(_ *qPanelBuf, j0 int) *qPanelBuf {
		p := j0 / qPanel
		return &qPanelBuf{b: t.b[p*t.pb : (p+1)*t.pb], sb: t.sb[p*t.ps : (p+1)*t.ps]}
	}
	mulQPanels(im, c, a, m, n, k, false, pack, acc)
}
