package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"citizen/internal/cputime"
)

// Shapes of the two model sizes (hidden 256/512, intermediate 688/1376,
// vocab 2048/4096). For MatMulNT (forward y = x·Wᵀ): m tokens, k = in,
// n = out. For MatMulNN (dx = dy·W): m tokens, k = out, n = in. For MatMulTN
// (dW = dyᵀ·x): m = out, k = tokens, n = in.
var benchShapes = map[string][][3]int{
	"NT": {
		{1, 256, 688}, {1, 512, 1376}, {1, 512, 4096},
		{16, 512, 1376}, {16, 512, 4096},
		{512, 256, 688}, {512, 688, 256}, {512, 512, 1376}, {512, 1376, 512}, {512, 512, 4096},
		{512, 512, 8}, // LoRA down-projection u = x·Aᵀ, rank 8
		{64, 64, 512}, // attention scores, one 64-row tile, head dim 64
	},
	"NN": {
		{512, 688, 256}, {512, 1376, 512}, {512, 4096, 512},
		{512, 512, 8}, // LoRA du = dy·B, rank 8
		{64, 512, 64}, // attention output P·V
	},
	"TN": {
		{688, 512, 256}, {1376, 512, 512}, {4096, 512, 512},
		{512, 512, 8}, // LoRA dB = dyᵀ·u, rank 8
		{512, 64, 64}, // attention dV = Pᵀ·dO
	},
}

func benchMM(b *testing.B, name string, kind int) {
	for _, s := range benchShapes[name] {
		m, k, n := s[0], s[1], s[2]
		r := rand.New(rand.NewPCG(1, 1))
		a, bb, c := randSlice(r, m*k), randSlice(r, k*n), make([]float32, m*n)
		b.Run(fmt.Sprintf("m=%d,k=%d,n=%d", m, k, n), func(b *testing.B) {
			for _, imp := range impls {
				im := imp.name
				for _, th := range []int{1, 2} {
					b.Run(fmt.Sprintf("impl=%s/threads=%d", im, th), func(b *testing.B) {
						restore, _ := setImpl(im)
						defer restore()
						prev := Threads()
						SetThreads(th)
						defer SetThreads(prev)
						b.ReportAllocs()
						if m <= 16 {
							// Small m is bound by reading B: report its bandwidth.
							b.SetBytes(int64(k) * int64(n) * 4)
						}
						cpu0 := cputime.Seconds()
						for b.Loop() {
							callMM(kind, c, a, bb, m, k, n, false)
						}
						reportFlops(b, 2*float64(m)*float64(k)*float64(n), cputime.Seconds()-cpu0)
					})
				}
			}
		})
	}
}

// reportFlops reports GFLOP/s over wall time and GFLOP per CPU-second (the
// rate while the benchmark's threads were actually running: per core with
// threads=1, per core summed over cores with threads=2).
func reportFlops(b *testing.B, flopsPerOp, cpu float64) {
	total := flopsPerOp * float64(b.N)
	b.ReportMetric(total/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	if cpu > 0 {
		b.ReportMetric(total/cpu/1e9, "GFLOP/cpu-s")
	}
}

func BenchmarkMatMulNT(b *testing.B) { benchMM(b, "NT", kindNT) }
func BenchmarkMatMulNN(b *testing.B) { benchMM(b, "NN", kindNN) }
func BenchmarkMatMulTN(b *testing.B) { benchMM(b, "TN", kindTN) }

func BenchmarkDot(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, n := range []int{512, 1376} {
		x, y := randSlice(r, n), randSlice(r, n)
		for _, im := range []string{impls[0].name, "portable"} {
			b.Run(fmt.Sprintf("n=%d/impl=%s", n, im), func(b *testing.B) {
				restore, _ := setImpl(im)
				defer restore()
				var s float32
				cpu0 := cputime.Seconds()
				for b.Loop() {
					s += Dot(x, y)
				}
				reportFlops(b, 2*float64(n), cputime.Seconds()-cpu0)
			})
		}
	}
}
