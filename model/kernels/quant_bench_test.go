package kernels

import (
	"citizen/internal/cputime"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// BenchmarkMatMulQ measures the quantized products at SmolLM2-135M's shapes (hidden 576,
// intermediate 1536) on one thread, next to MatMulNT on the dequantized float32 weights. m is
// the number of activation rows (1: decode; 16: a batch of 16 sequences); path=int keeps the
// product on the integer path (one row at a time up to half the batched kernels'
// lanes, the batched kernels from there), path=tiles on dequantized tiles and the float32 GEMM. GB/s counts the
// weight bytes read once per call; GFLOP/cpu-s is per CPU-second (the machine is shared).
func BenchmarkMatMulQ(b *testing.B) {
	defer SetThreads(Threads())
	SetThreads(1)
	defer SetQuantFloatRows(SetQuantFloatRows(qDequantMinRows))
	r := rand.New(rand.NewPCG(1, 1))
	for _, sh := range []struct{ n, k int }{{1536, 576}, {576, 1536}} {
		for _, m := range []int{1, 2, 4, 8, 16, 32, 64} {
			for _, qt := range []QType{0, Q8_0, Q4_0, Q4_1} {
				for _, path := range []string{"int", "tiles"} {
					name := "F32"
					if qt != 0 {
						name = qt.String()
					} else if path != "int" {
						continue
					}
					b.Run(fmt.Sprintf("type=%s/m=%d/n=%d/k=%d/path=%s", name, m, sh.n, sh.k, path), func(b *testing.B) {
						if path == "int" {
							SetQuantFloatRows(math.MaxInt)
						} else {
							SetQuantFloatRows(1)
						}
						w := randQMatrix(r, max(qt, Q8_0), sh.n, sh.k)
						a := randSlice(r, m*sh.k)
						c := make([]float32, m*sh.n)
						bytes := w.Bytes()
						var wf []float32
						if qt == 0 {
							wf = make([]float32, sh.n*sh.k)
							w.DequantizeRows(wf, 0, sh.n)
							bytes = 4 * len(wf)
						}
						b.SetBytes(int64(bytes))
						cpu0 := cputime.Seconds()
						for b.Loop() {
							if qt == 0 {
								MatMulNT(c, a, wf, m, sh.k, sh.n, false)
							} else {
								MatMulQ(c, a, w, m, false)
							}
						}
						reportFlops(b, float64(m*sh.n*sh.k)*2, cputime.Seconds()-cpu0)
					})
				}
			}
		}
	}
}

// BenchmarkDequantize measures DequantizeRows (the training path and the float path of MatMulQ).
func BenchmarkDequantize(b *testing.B) {
	r := rand.New(rand.NewPCG(2, 2))
	for _, qt := range qTypes {
		b.Run("type="+qt.String(), func(b *testing.B) {
			w := randQMatrix(r, qt, 256, 1536)
			dst := make([]float32, 256*1536)
			b.SetBytes(int64(4 * len(dst)))
			for range b.N {
				w.DequantizeRows(dst, 0, 256)
			}
		})
	}
}

// BenchmarkMatMulQAct compares the integer path's activation widths (SetQuantActBits) on one
// row (decode) at one thread, at SmolLM2-135M's layer shapes (in cache), at its output head's
// (49152 × 576 Q8_0, 28 MB) and over 120 layer matrices in turn (66 MB of Q4_1, as decode
// streams them from memory). Per CPU-second figures next to wall time: the machine is shared.
func BenchmarkMatMulQAct(b *testing.B) {
	defer SetThreads(Threads())
	SetThreads(1)
	defer SetQuantActBits(SetQuantActBits(16))
	r := rand.New(rand.NewPCG(3, 3))
	for _, sh := range []struct {
		qt      QType
		n, k    int
		streams int
	}{{Q4_1, 1536, 576, 1}, {Q4_1, 576, 1536, 1}, {Q8_0, 49152, 576, 1}, {Q4_1, 1536, 576, 120}} {
		ws := make([]*QMatrix, sh.streams)
		for i := range ws {
			ws[i] = randQMatrix(r, sh.qt, sh.n, sh.k)
		}
		a := randSlice(r, sh.k)
		c := make([]float32, sh.n)
		for _, bits := range []int{8, 16} {
			b.Run(fmt.Sprintf("type=%s/n=%d/k=%d/matrices=%d/act=int%d", sh.qt, sh.n, sh.k, sh.streams, bits), func(b *testing.B) {
				SetQuantActBits(bits)
				b.SetBytes(int64(ws[0].Bytes()))
				cpu0 := cputime.Seconds()
				i := 0
				for b.Loop() {
					MatMulQ(c, a, ws[i], 1, false)
					i = (i + 1) % len(ws)
				}
				cpu := cputime.Seconds() - cpu0
				reportFlops(b, float64(sh.n*sh.k)*2, cpu)
				if cpu > 0 {
					b.ReportMetric(float64(ws[0].Bytes())*float64(b.N)/cpu/1e9, "GB/cpu-s")
				}
			})
		}
	}
}

// BenchmarkMatMulQTrain measures the products of LoRA training on a quantized base at one
// thread: 1,024 rows (4 × 256 tokens) against SmolLM2's MLP shapes: the forward MatMulQ
// (dequantized panels, float32 GEMM) and MatMulQInt (int16 activations, integer kernels), and
// the input gradient MatMulQNN.
func BenchmarkMatMulQTrain(b *testing.B) {
	defer SetThreads(Threads())
	SetThreads(1)
	r := rand.New(rand.NewPCG(1, 1))
	const m = 1024
	for _, sh := range []struct{ n, k int }{{1536, 576}, {576, 1536}} {
		for _, op := range []string{"Q", "QInt", "QNN", "QNNInt"} {
			b.Run(fmt.Sprintf("op=%s/type=Q4_1/m=%d/n=%d/k=%d", op, m, sh.n, sh.k), func(b *testing.B) {
				w := randQMatrix(r, Q4_1, sh.n, sh.k)
				a := randSlice(r, m*max(sh.k, sh.n))
				c := make([]float32, m*max(sh.k, sh.n))
				cpu0 := cputime.Seconds()
				for b.Loop() {
					switch op {
					case "Q":
						MatMulQ(c, a, w, m, false)
					case "QInt":
						MatMulQInt(c, a, w, m, false)
					case "QNN":
						MatMulQNN(c, a, w, m, false)
					default:
						MatMulQNNInt(c, a, w, m, false)
					}
				}
				reportFlops(b, float64(m*sh.n*sh.k)*2, cputime.Seconds()-cpu0)
			})
		}
	}
}
