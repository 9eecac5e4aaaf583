package gguf

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"citizen/internal/cputime"
	"citizen/model"
	"citizen/model/kernels"
)

// TestSmolLM2Quantized compares the quantized model (Q4_1 blocks, Q8_0 embedding and head) with
// its float32 dequantization on the 102-token paragraph, every position's logits: on the
// integer path (each position's products with int16 activations, as decode computes them, and
// with ggml's int8 ones) and on the float path (prefill: dequantized tiles, the same weights
// as the float32 model).
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
		actBits   int
		maxAbs    float64 // bound on max |Δlogit|
		meanAbs   float64 // bound on mean |Δlogit|
		minTop1   float64 // bound on the top-1 agreement
	}{
		{"integer (int16 activations, the default)", math.MaxInt, 16, 0.03, 0.003, 1}, // measured: 0.0082, 0.00073, 102/102
		{"integer (int8 activations)", math.MaxInt, 8, 2.5, 0.25, 0.95},               // measured: 1.46, 0.164, 100/102
		{"float", 1, 16, 1e-3, 1e-4, 1},                                               // measured: 4.9e-5, 5.7e-6
	} {
		prevRows, prevBits := kernels.SetQuantFloatRows(c.floatRows), kernels.SetQuantActBits(c.actBits)
		got, err := qm.Logits(modelBatch(paragraph), nil)
		kernels.SetQuantFloatRows(prevRows)
		kernels.SetQuantActBits(prevBits)
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
		if mean := sumAbs / float64(len(got)); maxAbs > c.maxAbs || mean > c.meanAbs || top1 < c.minTop1 {
			t.Errorf("%s path: max |Δlogit| %.4g (bound %g), mean %.3g (bound %g), top-1 agreement %.3f (bound %g)", c.name, maxAbs, c.maxAbs, mean, c.meanAbs, top1, c.minTop1)
		}
	}
}

// loadSmol loads SmolLM2 with float32 or quantized weights.
func loadSmol(b testing.TB, weights string) *model.Model {
	m, _, err := LoadModelWith(smolPath(b), LoadOptions{Float32: weights == "f32"})
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// quantOption sets up one way of running the quantized model for the decode benchmark:
// "quant" (the defaults: int16 activations), "quant-act8" (ggml's int8 activations),
// "quant-tiles" (every product on dequantized tiles: SetQuantFloatRows(1)),
// "quant-batchtiles" (products of 8 or more rows on dequantized tiles, as before the batched
// integer kernels: SetQuantFloatRows(8)) or
// "quant-act8-f32<kinds>" (int8 activations, the matrices of kinds float32: head, attn (q k v
// o), mlp (gate up down), joined by +). It returns the model and restores the settings at the
// end of b.
func quantOption(b testing.TB, option string) *model.Model {
	if option == "f32" {
		return loadSmol(b, "f32")
	}
	qm := loadSmol(b, "quant")
	rows, bits := kernels.SetQuantFloatRows(1), kernels.SetQuantActBits(16)
	kernels.SetQuantFloatRows(rows) // the package's setting (its default unless a test changed it)
	b.Cleanup(func() { kernels.SetQuantFloatRows(rows); kernels.SetQuantActBits(bits) })
	switch option {
	case "quant":
	case "quant-batchtiles":
		kernels.SetQuantFloatRows(8)
	case "quant-act8":
		kernels.SetQuantActBits(8)
	case "quant-tiles":
		kernels.SetQuantFloatRows(1)
	default:
		exact, ok := strings.CutPrefix(option, "quant-act8-f32")
		if !ok {
			b.Fatalf("unknown option %q", option)
		}
		kernels.SetQuantActBits(8)
		float := map[string]bool{}
		for _, e := range strings.Split(exact, "+") {
			switch e {
			case "attn":
				float["q"], float["k"], float["v"], float["o"] = true, true, true, true
			case "mlp":
				float["gate"], float["up"], float["down"] = true, true, true
			default:
				float[e] = true
			}
		}
		qm = mixedModel(b, qm, loadSmol(b, "f32"), func(l int, kind string) bool { return !float[kind] })
	}
	return qm
}

// mixedModel returns a model whose matrices for which keep(layer, kind) holds are qm's
// quantized ones and whose others are fm's float32 weights (fm is qm dequantized). kind is
// one of q k v o gate up down, or head (layer −1: the tied embedding and output head).
func mixedModel(t testing.TB, qm, fm *model.Model, keep func(l int, kind string) bool) *model.Model {
	q := *qm.Quant
	q.Layers = slices.Clone(qm.Quant.Layers)
	for l := range q.Layers {
		ql := &q.Layers[l]
		for _, p := range []struct {
			kind string
			w    **kernels.QMatrix
		}{{"q", &ql.Q}, {"k", &ql.K}, {"v", &ql.V}, {"o", &ql.O}, {"gate", &ql.Gate}, {"up", &ql.Up}, {"down", &ql.Down}} {
			if !keep(l, p.kind) {
				*p.w = nil
			}
		}
	}
	if !keep(-1, "head") {
		q.Embed, q.LMHead = nil, nil
	}
	m, err := model.NewQuantized(qm.Config, q)
	if err != nil {
		t.Fatal(err)
	}
	cp := func(dst, src []float32) { copy(dst, src[:len(dst)]) } // nil dst: quantized
	cp(m.W.Embed, fm.W.Embed)
	cp(m.W.Norm, fm.W.Norm)
	for l := range m.W.Layers {
		d, s := &m.W.Layers[l], &fm.W.Layers[l]
		cp(d.InputNorm, s.InputNorm)
		cp(d.PostNorm, s.PostNorm)
		cp(d.Q, s.Q)
		cp(d.K, s.K)
		cp(d.V, s.V)
		cp(d.O, s.O)
		cp(d.Gate, s.Gate)
		cp(d.Up, s.Up)
		cp(d.Down, s.Down)
	}
	return m
}

// TestSmolLM2QuantizedByKind attributes the integer path's logit error (against the float32
// dequantization, the 102-token paragraph) to the kinds of matrix: each run keeps one kind
// quantized on the integer path and the others float32, for int8 and int16 activations. A
// report (a few minutes): runs when CITIZEN_QUANT_SURVEY=1.
func TestSmolLM2QuantizedByKind(t *testing.T) {
	path := smolPath(t)
	if os.Getenv("CITIZEN_QUANT_SURVEY") != "1" {
		t.Skip("set CITIZEN_QUANT_SURVEY=1 for the per-kind error report")
	}
	qm, _, err := LoadModelWith(path, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fm, _, err := LoadModelWith(path, LoadOptions{Float32: true})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := fm.Logits(modelBatch(paragraph), nil)
	if err != nil {
		t.Fatal(err)
	}
	V := fm.Config.VocabSize
	rows := kernels.SetQuantFloatRows(math.MaxInt)
	defer kernels.SetQuantFloatRows(rows)
	bits := kernels.SetQuantActBits(16)
	defer kernels.SetQuantActBits(bits)
	for _, b := range []int{8, 16} {
		kernels.SetQuantActBits(b)
		for _, kind := range []string{"all", "q", "k", "v", "o", "gate", "up", "down", "head"} {
			m := mixedModel(t, qm, fm, func(l int, k string) bool { return kind == "all" || k == kind })
			got, err := m.Logits(modelBatch(paragraph), nil)
			if err != nil {
				t.Fatal(err)
			}
			var maxAbs, sumAbs float64
			agree := 0
			for p := range paragraph {
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
			t.Logf("int%d activations, %-4s quantized: max |Δlogit| %.3g, mean %.3g, top-1 %d/%d", b, kind, maxAbs, sumAbs/float64(len(got)), agree, len(paragraph))
		}
	}
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
// seqs=16 decodes 16 concurrent requests in the engine's batch (aggregate tokens/CPU-s): on
// the batched integer kernels (quant) and on dequantized tiles (quant-batchtiles). The
// quantized model runs in each of the other ways of quantOption at seqs=1.
func BenchmarkSmolLM2Decode(b *testing.B) {
	for _, weights := range []string{"f32", "quant", "quant-batchtiles", "quant-act8", "quant-tiles", "quant-act8-f32head"} {
		for _, seqs := range []int{1, 16} {
			if (seqs > 1) != (weights == "quant-batchtiles") && weights != "f32" && weights != "quant" {
				continue
			}
			b.Run(fmt.Sprintf("weights=%s/seqs=%d", weights, seqs), func(b *testing.B) {
				m := quantOption(b, weights)
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
	// 16 concurrent requests on every core: aggregate tokens per second of wall time.
	for _, weights := range []string{"quant", "quant-batchtiles"} {
		b.Run(fmt.Sprintf("weights=%s/seqs=16/threads=all", weights), func(b *testing.B) {
			m := quantOption(b, weights)
			e := model.NewEngine(m, model.EngineConfig{})
			defer e.Close()
			const gen, seqs = 64, 16
			var cpu, wall float64
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				full := generateCPU(b, e, chatmlParis, seqs, gen+1)
				t1 := time.Now()
				pre := generateCPU(b, e, chatmlParis, seqs, 1)
				wall += t1.Sub(t0).Seconds() - time.Since(t1).Seconds()
				cpu += full - pre
			}
			b.ReportMetric(float64(b.N*seqs*gen)/cpu, "tokens/CPU-s")
			b.ReportMetric(float64(b.N*seqs*gen)/wall, "tokens/s")
		})
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
