package gguf

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"

	"citizen/internal/cputime"
	"citizen/model"
	"citizen/model/kernels"
)

// TestSmolLM2Quantized compares the quantized model (Q4_1 blocks, Q8_0 embedding and head) with
// its float32 dequantization on the 102-token paragraph, every position's logits: on the
// integer path (each position's products with int8 activations, as decode computes them) and
// on the float path (prefill: dequantized tiles, the same weights as the float32 model).
func TestSmolLM2Quantized(t *testing.T) {
	path := smolPath(t)
	qm, _, err := LoadModelWith(path, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fm, _, err := LoadModelWith(path, LoadOptions{Float32: true})
	if err != nil {
		t.Fatal(err)
	}
	if !qm.Quantized() || fm.Quantized() {
		t.Fatal("LoadModelWith: wrong storage")
	}
	t.Logf("weights: quantized %.1f MB, float32 %.1f MB", float64(qm.WeightBytes())/1e6, float64(fm.WeightBytes())/1e6)
	ref, err := fm.Logits(modelBatch(paragraph), nil)
	if err != nil {
		t.Fatal(err)
	}
	V := fm.Config.VocabSize
	for _, c := range []struct {
		name      string
		floatRows int
		maxAbs    float64 // bound on max |Δlogit|
		minTop1   float64 // bound on the top-1 agreement
	}{
		{"integer", math.MaxInt, 2.5, 0.95}, // measured: 1.46, 100/102
		{"float", 1, 1e-3, 1},
	} {
		prev := kernels.SetQuantFloatRows(c.floatRows)
		got, err := qm.Logits(modelBatch(paragraph), nil)
		kernels.SetQuantFloatRows(prev)
		if err != nil {
			t.Fatal(err)
		}
		var maxAbs, sumAbs float64
		agree := 0
		for p := 0; p < len(paragraph); p++ {
			g, r := got[p*V:(p+1)*V], ref[p*V:(p+1)*V]
			for i := range g {
				d := math.Abs(float64(g[i] - r[i]))
				maxAbs = max(maxAbs, d)
				sumAbs += d
			}
			if argmax(g) == argmax(r) {
				agree++
			}
		}
		top1 := float64(agree) / float64(len(paragraph))
		t.Logf("%s path: max |Δlogit| %.4g, mean %.3g, top-1 agreement %d/%d", c.name, maxAbs, sumAbs/float64(len(got)), agree, len(paragraph))
		if maxAbs > c.maxAbs || top1 < c.minTop1 {
			t.Errorf("%s path: max |Δlogit| %.4g (bound %g), top-1 agreement %.3f (bound %g)", c.name, maxAbs, c.maxAbs, top1, c.minTop1)
		}
	}
}

// loadSmol loads SmolLM2 with float32 or quantized weights.
func loadSmol(b *testing.B, weights string) *model.Model {
	m, _, err := LoadModelWith(smolPath(b), LoadOptions{Float32: weights == "f32"})
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// oneThread runs the engine's work on one core: one kernels thread and GOMAXPROCS 1 (the
// attention of long steps would otherwise fan out).
func oneThread(b *testing.B) {
	kt, gp := kernels.Threads(), runtime.GOMAXPROCS(1)
	kernels.SetThreads(1)
	b.Cleanup(func() { kernels.SetThreads(kt); runtime.GOMAXPROCS(gp) })
}

// generateCPU runs n concurrent greedy requests of prompt for gen tokens each and returns the
// process CPU seconds they took.
func generateCPU(b *testing.B, e *model.Engine, prompt []int, n, gen int) float64 {
	start := cputime.Seconds()
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.Generate(context.Background(), model.Request{PromptIDs: prompt, MaxTokens: gen})
			if err != nil || len(res.Tokens) != gen {
				b.Errorf("generate: %v", err)
			}
		}()
	}
	wg.Wait()
	return cputime.Seconds() - start
}

// BenchmarkSmolLM2Decode measures greedy decode on the real checkpoint at one thread, with
// float32 weights and with the quantized ones: tokens/CPU-s counts the 64 generated tokens
// after the ChatML prompt (37 tokens), the prompt's cost (a one-token request) subtracted.
// seqs=16 decodes 16 concurrent requests in the engine's batch (aggregate tokens/CPU-s).
func BenchmarkSmolLM2Decode(b *testing.B) {
	for _, weights := range []string{"f32", "quant"} {
		for _, seqs := range []int{1, 16} {
			b.Run(fmt.Sprintf("weights=%s/seqs=%d", weights, seqs), func(b *testing.B) {
				m := loadSmol(b, weights)
				oneThread(b)
				e := model.NewEngine(m, model.EngineConfig{})
				defer e.Close()
				const gen = 64
				var cpu float64
				b.ResetTimer()
				for range b.N {
					full := generateCPU(b, e, chatmlParis, seqs, gen+1)
					pre := generateCPU(b, e, chatmlParis, seqs, 1)
					cpu += full - pre
				}
				b.ReportMetric(float64(b.N*seqs*gen)/cpu, "tokens/CPU-s")
			})
		}
	}
}

// BenchmarkSmolLM2Prefill measures prompt processing at one thread: the 102-token paragraph
// twice (204 tokens) fed in one step, and one sampled token.
func BenchmarkSmolLM2Prefill(b *testing.B) {
	prompt := append(append([]int{}, paragraph...), paragraph...)
	for _, weights := range []string{"f32", "quant"} {
		b.Run("weights="+weights, func(b *testing.B) {
			m := loadSmol(b, weights)
			oneThread(b)
			e := model.NewEngine(m, model.EngineConfig{})
			defer e.Close()
			var cpu float64
			b.ResetTimer()
			for range b.N {
				cpu += generateCPU(b, e, prompt, 1, 1)
			}
			b.ReportMetric(float64(b.N*len(prompt))/cpu, "tokens/CPU-s")
		})
	}
}

// BenchmarkSmolLM2RSS reports the resident memory a loaded model adds to the process (VmRSS
// after loading minus before, after a GC that returns freed memory to the OS). Run one
// sub-benchmark per process for clean figures: -bench 'SmolLM2RSS/weights=quant$'.
func BenchmarkSmolLM2RSS(b *testing.B) {
	for _, weights := range []string{"f32", "quant"} {
		b.Run("weights="+weights, func(b *testing.B) {
			var keep *model.Model
			var rss float64
			for range b.N {
				keep = nil
				debug.FreeOSMemory()
				before := procStatus()["VmRSS"]
				keep = loadSmol(b, weights)
				debug.FreeOSMemory()
				rss = procStatus()["VmRSS"] - before
			}
			b.ReportMetric(rss, "MiB-rss")
			b.ReportMetric(float64(keep.WeightBytes())/(1<<20), "MiB-weights")
			if _, err := os.Stat("/proc/self/status"); err != nil {
				b.Skip("no /proc/self/status")
			}
		})
	}
}
