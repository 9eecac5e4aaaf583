package gguf

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"citizen/internal/cputime"
	"citizen/model"
	"citizen/model/kernels"
)

// smolTrainBatch is the LoRA benchmark's step: 4 sequences × 256 tokens of the paragraph
// (each sequence starting further into it, repeated to length), every position a target.
func smolTrainBatch() *model.Batch {
	var seqs [][]int
	for s := range 4 {
		seq := make([]int, 256)
		for i := range seq {
			seq[i] = paragraph[(i+17*s)%len(paragraph)]
		}
		seqs = append(seqs, seq)
	}
	return model.NextTokenBatch(seqs, nil, nil)
}

// BenchmarkSmolLM2Train measures LoRA training on the real checkpoint: rank 16 (alpha 32) on
// all seven linear modules, base frozen, one Trainer.Step (forward, backward, AdamW) per
// iteration on 4 × 256 tokens. weights=quant is the served model (Q4_1 blocks, Q8_0 tied
// embedding and head), weights=f32 its float32 dequantization. threads=1 runs on one core
// (kernels.SetThreads(1), GOMAXPROCS 1), threads=all on every core. It reports trained tokens
// per CPU-second (process CPU time), per second of wall time, and the process's peak resident
// memory (VmHWM: it covers everything the process ran before, so run one sub-benchmark per
// process for its own figure, e.g. -bench 'SmolLM2Train/weights=quant/threads=all').
// Skipped without CITIZEN_SMOLLM2_GGUF.
func BenchmarkSmolLM2Train(b *testing.B) {
	for _, weights := range []string{"quant", "f32"} {
		for _, threads := range []string{"1", "all"} {
			b.Run(fmt.Sprintf("weights=%s/threads=%s", weights, threads), func(b *testing.B) {
				m := loadSmol(b, weights)
				if threads == "1" {
					oneThread(b)
				}
				ad, err := model.NewAdapter("bench", m.Config, model.LoRAConfig{Rank: 16, Alpha: 32, TargetModules: model.LoRAModules}, 1)
				if err != nil {
					b.Fatal(err)
				}
				tr, err := model.NewTrainer(m, ad, model.TrainConfig{LR: 1e-4, GradClip: 1})
				if err != nil {
					b.Fatal(err)
				}
				batch := smolTrainBatch()
				if _, err := tr.Step(batch); err != nil { // warm-up: scratch buffers
					b.Fatal(err)
				}
				b.ResetTimer()
				start, cpu0 := time.Now(), cputime.Seconds()
				for range b.N {
					if _, err := tr.Step(batch); err != nil {
						b.Fatal(err)
					}
				}
				wall, cpu := time.Since(start).Seconds(), cputime.Seconds()-cpu0
				n := float64(b.N * len(batch.Tokens))
				b.ReportMetric(n/cpu, "tokens/CPU-s")
				b.ReportMetric(n/wall, "tokens/s")
				b.ReportMetric(procStatus()["VmHWM"], "peak-MiB")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
	fmt.Printf("# kernels=%s GOMAXPROCS=%d\n", kernels.Implementation(), runtime.GOMAXPROCS(0))
}
