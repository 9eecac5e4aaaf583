package kernels

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"citizen/internal/cputime"
)

// BenchmarkTuneNTDot compares the packing-free inner-product path of
// MatMulNT with the packed GEMM path across m, to place each level's dotMaxM. It only
// runs with KERNELS_TUNE=1:
//
//	KERNELS_TUNE=1 go test ./model/kernels -run '^$' -bench TuneNTDot -count 3
func BenchmarkTuneNTDot(b *testing.B) {
	if os.Getenv("KERNELS_TUNE") == "" {
		b.Skip("set KERNELS_TUNE=1 to run")
	}
	for _, lv := range []struct {
		name string
		s    *simd
	}{{"avx512", avx512}, {"avx2", avx2}} {
		for _, m := range []int{4, 16, 32, 48, 64, 96, 128} {
			for _, kn := range [][2]int{{512, 1376}, {256, 688}} {
				k, n := kn[0], kn[1]
				r := rand.New(rand.NewPCG(1, 1))
				a, bb, c := randSlice(r, m*k), randSlice(r, k*n), make([]float32, m*n)
				for _, th := range []int{1 << 30, 0} {
					b.Run(fmt.Sprintf("impl=%s/m=%d,k=%d,n=%d/dotmax=%d", lv.name, m, k, n, min(th, 999)), func(b *testing.B) {
						restore, ok := setImpl(lv.name)
						defer restore()
						if !ok {
							b.Skip("not available")
						}
						prev := lv.s.dotMaxM
						lv.s.dotMaxM = th
						defer func() { lv.s.dotMaxM = prev }()
						prevT := Threads()
						SetThreads(1)
						defer SetThreads(prevT)
						cpu0 := cputime.Seconds()
						for b.Loop() {
							MatMulNT(c, a, bb, m, k, n, false)
						}
						reportFlops(b, 2*float64(m)*float64(k)*float64(n), cputime.Seconds()-cpu0)
					})
				}
			}
		}
	}
}

// BenchmarkPeakFMA measures this core's fp32 peak at its current clock: a
// register-only loop of independent AVX-512 FMAs (2 flops × 16 lanes each).
// The matmul benchmarks' fraction of peak is taken against this figure.
func BenchmarkPeakFMA(b *testing.B) {
	if !hasAVX512() {
		b.Skip("no AVX-512")
	}
	const iters = 1 << 16
	cpu0 := cputime.Seconds()
	for b.Loop() {
		fmaPeak(iters)
	}
	reportFlops(b, 24*16*2*float64(iters), cputime.Seconds()-cpu0)
}
