package memory_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"citizen/memory"
	"citizen/workplace"
)

// interactionTexts are n workplace interactions as the indexer embeds
// them: the last user turn and the answer.
func interactionTexts(n int) []string {
	convs := workplace.Corpus(13, n, workplace.CorpusOptions{})
	texts := make([]string, len(convs))
	for i, c := range convs {
		var prompt, answer string
		for _, m := range c.Messages {
			switch m.Role {
			case "user":
				prompt = m.Content
			case "assistant":
				answer = m.Content
			}
		}
		texts[i] = prompt + "\n" + answer
	}
	return texts
}

// interactionVectors embeds n interactionTexts with the default,
// unfitted, 512 dimensions of `citizen serve`.
func interactionVectors(b *testing.B, n int) [][]float32 {
	vecs, err := memory.NewHashEmbedder(512).Embed(context.Background(), interactionTexts(n))
	if err != nil {
		b.Fatal(err)
	}
	return vecs
}

// BenchmarkHashEmbed embeds 1,000 distinct workplace interactions at 512
// dimensions (a fresh embedder each time, so none is remembered); the
// figure is per text.
//
//	go test ./memory -run '^$' -bench HashEmbed -benchmem
func BenchmarkHashEmbed(b *testing.B) {
	texts := interactionTexts(1000)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		h := memory.NewHashEmbedder(512)
		for _, t := range texts {
			if _, err := h.Embed(ctx, []string{t}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(texts)), "ns/text")
}

// BenchmarkGraphBuild upserts 20,000 points of 512 dimensions (the
// default ExactLimit: the graph an interactions collection builds when it
// crosses it) one at a time into a collection that keeps a graph from the
// start, and reports the CPU per insert and recall@10 of 300 held-out
// queries against exact search (a returned hit is correct when its
// similarity is at least the exact 10th best: workplace texts have exact
// ties). set=workplace is workplace interactions; set=repeated is one
// interaction repeated, as `citizen bench gateway` records (a profiling
// aid).
//
//	go test ./memory -run '^$' -bench GraphBuild -benchtime 1x
func BenchmarkGraphBuild(b *testing.B) {
	const n, queries = 20000, 300
	sets := map[string][][]float32{}
	for _, set := range []string{"workplace", "repeated"} {
		b.Run("set="+set, func(b *testing.B) {
			vecs := sets[set]
			if vecs == nil {
				if set == "workplace" {
					vecs = interactionVectors(b, n+queries)
				} else {
					one := interactionVectors(b, 1)[0]
					vecs = make([][]float32, n+queries)
					for i := range vecs {
						vecs[i] = one
					}
				}
				sets[set] = vecs
			}
			ctx := context.Background()
			pts := make([]memory.Point, n)
			for j := range pts {
				pts[j] = memory.Point{ID: memory.PointID(fmt.Sprint(j)), Vector: vecs[j]}
			}
			exact := memory.NewEmbedded(memory.EmbeddedConfig{ExactLimit: n + 1})
			exact.EnsureCollection(ctx, "c", memory.Schema{Dim: 512})
			exact.Upsert(ctx, "c", pts)
			for b.Loop() {
				ix := memory.NewEmbedded(memory.EmbeddedConfig{ExactLimit: 1, Seed: 1})
				ix.EnsureCollection(ctx, "c", memory.Schema{Dim: 512})
				cpu0, wall0 := cpuTime(), time.Now()
				for j := range pts {
					if err := ix.Upsert(ctx, "c", pts[j:j+1]); err != nil {
						b.Fatal(err)
					}
				}
				cpu, wall := cpuTime()-cpu0, time.Since(wall0)
				b.StopTimer()
				good, total := 0, 0
				var searchCPU time.Duration
				for q := n; q < n+queries; q++ {
					want, _ := exact.Search(ctx, "c", vecs[q], 10, memory.Filter{})
					c0 := cpuTime()
					got, _ := ix.Search(ctx, "c", vecs[q], 10, memory.Filter{})
					searchCPU += cpuTime() - c0
					tenth := want[len(want)-1].Score
					for _, h := range got {
						if h.Score >= tenth-1e-6 {
							good++
						}
					}
					total += len(want)
				}
				b.StartTimer()
				b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/insert")
				b.ReportMetric(float64(wall.Microseconds())/n, "wall-µs/insert")
				b.ReportMetric(float64(good)/float64(total), "recall@10")
				b.ReportMetric(float64(searchCPU.Microseconds())/queries, "cpu-µs/search")
			}
		})
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
