package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMatMulQNNInt checks the integer input gradient against MatMulQNN (W dequantized exactly,
// float32 products) on every implementation and with the generic kernel in the VNNI one's
// place: each output within Wᵀ's requantization bound (Σ|a|·half a step, the step its block's
// largest |w| / 2047) plus 3e-5 of the products' magnitude Σ|a|·|w| (the int16 activations'
// rounding), shapes with a last partial panel, W's rows not whole blocks (MatMulQNN itself)
// and, with acc, C's previous values added.
func TestMatMulQNNInt(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	check := func(t *testing.T, use *impl) {
		for _, qt := range qTypes {
			for _, sh := range []struct{ m, n, k int }{{5, 64, 96}, {16, 32, 64}, {21, 96, 160}, {37, 320, 608}, {20, 50, 64}} {
				for _, acc := range []bool{false, true} {
					w := randQMatrix(r, qt, sh.n, sh.k)
					a := randSlice(r, sh.m*sh.n)
					if sh.m > 16 {
						clear(a[3*sh.n : 4*sh.n]) // a zero row
					}
					c0 := randSlice(r, sh.m*sh.k)
					got := slices.Clone(c0)
					prev := current.Load()
					current.Store(use)
					MatMulQNNInt(got, a, w, sh.m, acc)
					current.Store(prev)
					want := slices.Clone(c0)
					MatMulQNN(want, a, w, sh.m, acc)
					wf := make([]float32, sh.n*sh.k)
					w.DequantizeRows(wf, 0, sh.n)
					bmax := make([]float64, sh.n*sh.k) // per row and column: its block's largest |w|
					for p := range sh.n {
						for j := range sh.k {
							for q := p / QBlock * QBlock; q < min(p/QBlock+1, sh.n/QBlock)*QBlock; q++ {
								bmax[p*sh.k+j] = max(bmax[p*sh.k+j], math.Abs(float64(wf[q*sh.k+j])))
							}
						}
					}
					for i := range sh.m {
						for j := range sh.k {
							var mag, step float64 // Σ|a|·|w|; Σ|a|·(half a requantization step)
							for p := range sh.n {
								mag += math.Abs(float64(a[i*sh.n+p]) * float64(wf[p*sh.k+j]))
								step += math.Abs(float64(a[i*sh.n+p])) * bmax[p*sh.k+j] / (2 * qtMax)
							}
							x := i*sh.k + j
							if d := math.Abs(float64(got[x] - want[x])); d > 1.01*step+3e-5*mag+1e-5*math.Abs(float64(c0[x]))+1e-6 {
								t.Fatalf("%s m=%d n=%d k=%d acc=%v: [%d,%d] = %g, MatMulQNN %g (magnitude %g)", qt, sh.m, sh.n, sh.k, acc, i, j, got[x], want[x], mag)
							}
						}
					}
				}
			}
		}
	}
	eachImpl(t, func(t *testing.T) {
		check(t, current.Load())
		generic := *current.Load()
		generic.qgemm16 = qgemm16Generic
		check(t, &generic)
	})
}

// TestTransposedPanels checks Wᵀ's panels entry by entry: each int16 times its scale within
// half a step (scale/2) of the dequantized weight, and every quant within ±qtMax.
func TestTransposedPanels(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 34))
	for _, qt := range qTypes {
		n, k := 64, 160
		w := randQMatrix(r, qt, n, k)
		wf := make([]float32, n*k)
		w.DequantizeRows(wf, 0, n)
		tp := w.transposed()
		for j := range k {
			p, jj := j/qPanel, j%qPanel
			for i := range n {
				bk, u := i/QBlock, i%QBlock
				word := tp.b[p*tp.pb+(bk*16+u/2)*qPanel+jj]
				q := int16(word)
				if u%2 == 1 {
					q = int16(word >> 16)
				}
				s := tp.sb[p*tp.ps+bk*qPanel+jj]
				if q > qtMax || q < -qtMax {
					t.Fatalf("%s: quant %d out of range", qt, q)
				}
				if d := math.Abs(float64(float32(q)*s - wf[i*k+j])); d > float64(s)/2*1.001+1e-12 {
					t.Fatalf("%s: W[%d,%d] = %g, panel %d × %g (off by %g)", qt, i, j, wf[i*k+j], q, s, d)
				}
			}
		}
	}
}
