package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// A·B with few rows reads B in place (nnDirect): the same values as the packed path, bit for
// bit in the columns that fill whole vectors, and correct in the others; k spans several k
// blocks.
func TestNNDirectMatchesPacked(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, s := range []*simd{avx512, avx2} {
		if s == avx512 && !hasAVX512() || s == avx2 && !avx2OK() {
			continue
		}
		for _, m := range []int{1, 2, 3, s.mr} {
			for _, k := range []int{1, 63, kcBlock, kcBlock + 1, 600} {
				for _, n := range []int{7, 8, 16, 64, 100, 600} {
					t.Run(fmt.Sprintf("lanes=%d/m=%d/k=%d/n=%d", s.lanes, m, k, n), func(t *testing.T) {
						a, b := randSlice(r, m*k), randSlice(r, k*n)
						c0 := randSlice(r, m*n)
						for _, acc := range []bool{false, true} {
							got := append([]float32(nil), c0...)
							packed := append([]float32(nil), c0...)
							s.nnDirect(got, a, b, k, n, acc, 0, m, 0, n)
							s.gemm(kindNN, packed, a, b, m, k, n, acc, 0, m, 0, n)
							want, mag := refMM(kindNN, c0, a, b, m, k, n, acc)
							jv := n / s.lanes * s.lanes
							for i := range got {
								if j := i % n; j < jv && math.Float32bits(got[i]) != math.Float32bits(packed[i]) {
									t.Fatalf("acc=%v [%d,%d] = %g, packed %g", acc, i/n, j, got[i], packed[i])
								}
								if d := math.Abs(float64(got[i]) - want[i]); d > 1e-5*mag[i]+1e-6 {
									t.Fatalf("acc=%v [%d,%d] = %g, want %g", acc, i/n, i%n, got[i], want[i])
								}
							}
						}
					})
				}
			}
		}
	}
}
