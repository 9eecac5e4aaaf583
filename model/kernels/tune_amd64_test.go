package kernels

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
)

// BenchmarkTuneNTDot compares the packing-free inner-product path of
// MatMulNT with the packed GEMM path across m, to place ntDotMaxM. It only
// runs with KERNELS_TUNE=1:
//
//	KERNELS_TUNE=1 go test ./model/kernels -run '^$' -bench TuneNTDot -count 3
func BenchmarkTuneNTDot(b *testing.B) {
	if os.Getenv("KERNELS_TUNE") == "" {
		b.Skip("set KERNELS_TUNE=1 to run")
	}
	for _, m := range []int{8, 16, 24, 32, 48, 64} {
		for _, kn := range [][2]int{{512, 1376}, {256, 688}} {
			k, n := kn[0], kn[1]
			r := rand.New(rand.NewPCG(1, 1))
			a, bb, c := randSlice(r, m*k), randSlice(r, k*n), make([]float32, m*n)
			for _, th := range []int{1 << 30, 0} {
				b.Run(fmt.Sprintf("m=%d,k=%d,n=%d/dotmax=%d", m, k, n, min(th, 999)), func(b *testing.B) {
					prev := ntDotMaxM
					ntDotMaxM = th
					defer func() { ntDotMaxM = prev }()
					prevT := Threads()
					SetThreads(1)
					defer SetThreads(prevT)
					for b.Loop() {
						MatMulNT(c, a, bb, m, k, n, false)
					}
					b.ReportMetric(2*float64(m)*float64(k)*float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
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
	cpu0 := cpuSeconds()
	for b.Loop() {
		fmaPeak(iters)
	}
	reportFlops(b, 24*16*2*float64(iters), cpuSeconds()-cpu0)
}
