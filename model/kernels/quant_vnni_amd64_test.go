package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"golang.org/x/sys/cpu"
)

// The VNNI batch kernels equal the AVX-512 ones bit for bit (the same wrapping int32 sums),
// on extreme activations too.
func TestBatchKernelsVNNI(t *testing.T) {
	if !vnniOK() || !cpu.X86.HasAVX512BW {
		t.Skip("no AVX-512 VNNI")
	}
	r := rand.New(rand.NewPCG(15, 16))
	for _, qt := range qTypes {
		for _, cols := range []int{32, 576, 1536} {
			const wrows, L = 9, 16
			w := randQMatrix(r, qt, wrows, cols)
			nb := cols / QBlock
			xt, xdt := make([]int16, nb*QBlock*L), make([]float32, nb*2*L)
			for i := range xt {
				xt[i] = int16(r.IntN(65536) - 32768)
				if i%7 == 0 {
					xt[i] = 32767
				}
			}
			for i := range xdt {
				xdt[i] = r.Float32()
			}
			a, b := make([]float32, L*wrows), make([]float32, L*wrows)
			gemmQ16BAVX512(qt, a, w.data, nb, L, xt, xdt, make([]float32, batchScratch(nb)))
			gemmQ16BVNNI(qt, b, w.data, nb, L, xt, xdt, make([]float32, batchScratch(nb)))
			for i := range a {
				if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
					t.Fatalf("%s cols=%d: out[%d] VNNI %g, AVX-512 %g", qt, cols, i, b[i], a[i])
				}
			}
		}
	}
}
