package model

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"citizen/internal/cputime"
	"citizen/model/kernels"
)

// Benchmarks: go test ./model -bench . -run '^$'
// Each reports tokens/s; training also reports model FLOPs utilisation (6·params·tokens/s over
// the peak of this machine, see peakGFLOPS) and the process's peak resident memory (VmHWM, which
// covers everything the process ran before: run one benchmark per process for a clean figure).

var benchConfigs = []struct {
	name string
	cfg  func() Config
}{{"3M", Tiny3M}, {"20M", Small20M}}

// peakGFLOPS is the fp32 peak of the cores Go may use: CITIZEN_PEAK_GFLOPS when set, else
// GOMAXPROCS × 64 FLOP/cycle (two 512-bit FMA pipes, 16 lanes, 2 FLOP per FMA: Zen 5 and
// AVX-512 Xeons) × the clock in /proc/cpuinfo.
func peakGFLOPS() float64 {
	if v, err := strconv.ParseFloat(os.Getenv("CITIZEN_PEAK_GFLOPS"), 64); err == nil && v > 0 {
		return v
	}
	mhz := 2300.0
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "cpu MHz" {
				if x, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					mhz = x
				}
				break
			}
		}
		f.Close()
	}
	return float64(runtime.GOMAXPROCS(0)) * 64 * mhz / 1000
}

// peakRSSMiB reads VmHWM from /proc/self/status (0 when unavailable).
func peakRSSMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			return kb / 1024
		}
	}
	return 0
}

func benchModel(b *testing.B, c Config) *Model {
	m, err := NewRandom(c, 1)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

func prompt(n, vocab, seed int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = (i*7919 + seed*104729) % vocab
	}
	return p
}

// runRounds issues rounds of `batch` concurrent requests until at least `want` tokens of the
// measured kind were produced, and returns that count.
func runRounds(b *testing.B, e *Engine, batch, promptLen, maxTokens, want int, countPrompt bool) int {
	c := e.Model().Config
	done := 0
	for round := 0; done < want; round++ {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := 0; i < batch; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := e.Generate(context.Background(), Request{PromptIDs: prompt(promptLen, c.VocabSize, round*batch+i), MaxTokens: maxTokens, Temperature: 1, Seed: uint64(i)})
				if err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				if countPrompt {
					done += res.PromptTokens
				} else {
					done += len(res.Tokens)
				}
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	return done
}

// BenchmarkDecode measures generated tokens/s with `batch` concurrent requests (8-token prompts,
// 64 generated tokens each, temperature 1). One benchmark op is one generated token.
func BenchmarkDecode(b *testing.B) {
	for _, bc := range benchConfigs {
		for _, batch := range []int{1, 16} {
			b.Run(fmt.Sprintf("model=%s/batch=%d", bc.name, batch), func(b *testing.B) {
				e := NewEngine(benchModel(b, bc.cfg()), EngineConfig{MaxBatch: batch})
				defer e.Close()
				runRounds(b, e, batch, 8, 4, 1, false) // warm-up
				b.ResetTimer()
				start, cpu0 := time.Now(), cputime.Process()
				n := runRounds(b, e, batch, 8, 64, b.N, false)
				el, cpu := time.Since(start), cputime.Process()-cpu0
				b.ReportMetric(float64(n)/el.Seconds(), "tokens/s")
				b.ReportMetric(float64(n)/cpu.Seconds(), "tokens/cpu-s")
				b.ReportMetric(0, "ns/op")
				b.ReportMetric(peakRSSMiB(), "peak-MiB")
			})
		}
	}
}

// BenchmarkPrefill measures prompt tokens/s: `batch` concurrent requests with 256-token prompts
// and one generated token. One op is one prompt token.
func BenchmarkPrefill(b *testing.B) {
	for _, bc := range benchConfigs {
		for _, batch := range []int{1, 16} {
			b.Run(fmt.Sprintf("model=%s/batch=%d", bc.name, batch), func(b *testing.B) {
				e := NewEngine(benchModel(b, bc.cfg()), EngineConfig{MaxBatch: batch})
				defer e.Close()
				b.ResetTimer()
				start, cpu0 := time.Now(), cputime.Process()
				n := runRounds(b, e, batch, 256, 1, b.N, true)
				el, cpu := time.Since(start), cputime.Process()-cpu0
				b.ReportMetric(float64(n)/el.Seconds(), "tokens/s")
				b.ReportMetric(float64(n)/cpu.Seconds(), "tokens/cpu-s")
				b.ReportMetric(0, "ns/op")
				b.ReportMetric(peakRSSMiB(), "peak-MiB")
			})
		}
	}
}

// BenchmarkTrain measures training tokens/s (forward + backward + AdamW) on packed batches of
// 4 sequences × 256 tokens, full fine-tuning and LoRA (r=16 on all seven modules), and model
// FLOPs utilisation MFU = 6·params·tokens/s / peak for full training (4·base + 6·adapter params for
// LoRA, which computes no base weight gradients); attention FLOPs are not counted, as usual.
func BenchmarkTrain(b *testing.B) {
	fmt.Printf("# kernels=%s GOMAXPROCS=%d peak=%.0f GFLOP/s\n", kernels.Implementation(), runtime.GOMAXPROCS(0), peakGFLOPS())
	for _, bc := range benchConfigs {
		for _, mode := range []string{"full", "lora"} {
			b.Run(fmt.Sprintf("model=%s/mode=%s", bc.name, mode), func(b *testing.B) {
				c := bc.cfg()
				m := benchModel(b, c)
				var ad *Adapter
				if mode == "lora" {
					var err error
					ad, err = NewAdapter("bench", c, LoRAConfig{Rank: 16, Alpha: 32, TargetModules: LoRAModules}, 1)
					if err != nil {
						b.Fatal(err)
					}
				}
				tr, err := NewTrainer(m, ad, TrainConfig{LR: 1e-4, GradClip: 1})
				if err != nil {
					b.Fatal(err)
				}
				var seqs [][]int
				for i := 0; i < 4; i++ {
					seqs = append(seqs, prompt(256, c.VocabSize, i))
				}
				batch := NextTokenBatch(seqs, nil, nil)
				if _, err := tr.Step(batch); err != nil { // warm-up
					b.Fatal(err)
				}
				b.ResetTimer()
				start, cpu0 := time.Now(), cputime.Process()
				for i := 0; i < b.N; i++ {
					if _, err := tr.Step(batch); err != nil {
						b.Fatal(err)
					}
				}
				el, cpu := time.Since(start), cputime.Process()-cpu0
				tps := float64(b.N*len(batch.Tokens)) / el.Seconds()
				// full: 2 (forward) + 2 (input grads) + 2 (weight grads) FLOPs per parameter and
				// token; LoRA skips the base weight gradients: 4 per base parameter, 6 per adapter one.
				perTok := 6 * float64(c.NumParams())
				if ad != nil {
					perTok = 4*float64(c.NumParams()) + 6*float64(len(ad.Params))
				}
				gflops := perTok * tps / 1e9
				b.ReportMetric(tps, "tokens/s")
				b.ReportMetric(gflops, "GFLOP/s")
				b.ReportMetric(100*gflops/peakGFLOPS(), "MFU%")
				// the same per CPU-second against one core's peak: what the code achieves when it
				// has the cores to itself and scales perfectly
				cpuGflops := perTok * float64(b.N*len(batch.Tokens)) / cpu.Seconds() / 1e9
				b.ReportMetric(100*cpuGflops/(peakGFLOPS()/float64(runtime.GOMAXPROCS(0))), "MFU-cpu%")
				b.ReportMetric(peakRSSMiB(), "peak-MiB")
			})
		}
	}
}
