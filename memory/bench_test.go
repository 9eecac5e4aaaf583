package memory_test

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"testing"
	"time"

	"citizen/memory"
	"citizen/model/kernels"
	"citizen/workplace"
)

// workplaceVectors embeds n workplace prompts with the default embedder.
func workplaceVectors(b *testing.B, n int) [][]float32 {
	convs := workplace.Corpus(7, n, workplace.CorpusOptions{})
	texts := make([]string, n)
	for i, c := range convs {
		texts[i] = firstUser(c)
	}
	emb := memory.NewHashEmbedder(256)
	emb.Fit(texts[:min(n, 20000)])
	vecs, err := emb.Embed(context.Background(), texts)
	if err != nil {
		b.Fatal(err)
	}
	return vecs
}

// BenchmarkHNSW100k builds an HNSW index of 100,000 workplace prompt
// vectors and measures recall@10 against exact search, build time, query
// latency and heap. Recall counts a returned hit as correct when its
// similarity is at least the exact 10th-best similarity (template prompts
// have many exact ties, which makes id-based recall arbitrary).
// go test ./memory -run '^$' -bench HNSW100k -benchtime 1x
func BenchmarkHNSW100k(b *testing.B) {
	const n, queries = 100000, 500
	vecs := workplaceVectors(b, n+queries)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		start := time.Now()
		approx := memory.NewEmbedded(memory.EmbeddedConfig{ExactLimit: 1, Seed: 1})
		approx.EnsureCollection(ctx, "c", memory.Schema{Dim: 256})
		pts := make([]memory.Point, n)
		for j := range pts {
			pts[j] = memory.Point{ID: memory.PointID(fmt.Sprint(j)), Vector: vecs[j]}
		}
		const chunk = 1000
		for j := 0; j < n; j += chunk {
			if err := approx.Upsert(ctx, "c", pts[j:j+chunk]); err != nil {
				b.Fatal(err)
			}
		}
		build := time.Since(start)
		runtime.GC()
		runtime.ReadMemStats(&after)
		exact := memory.NewEmbedded(memory.EmbeddedConfig{ExactLimit: n + 1})
		exact.EnsureCollection(ctx, "c", memory.Schema{Dim: 256})
		exact.Upsert(ctx, "c", pts)
		var lat, exactLat []time.Duration
		good, total := 0, 0
		for q := n; q < n+queries; q++ {
			t0 := time.Now()
			want, _ := exact.Search(ctx, "c", vecs[q], 10, memory.Filter{})
			exactLat = append(exactLat, time.Since(t0))
			t0 = time.Now()
			got, _ := approx.Search(ctx, "c", vecs[q], 10, memory.Filter{})
			lat = append(lat, time.Since(t0))
			tenth := want[len(want)-1].Score
			for _, h := range got {
				if h.Score >= tenth-1e-6 {
					good++
				}
			}
			total += len(want)
		}
		pct := func(d []time.Duration, p float64) float64 {
			sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
			return float64(d[int(p*float64(len(d)-1))].Microseconds()) / 1000
		}
		b.ReportMetric(float64(good)/float64(total), "recall@10")
		b.ReportMetric(build.Seconds(), "build-s")
		b.ReportMetric(pct(lat, 0.5), "ms-p50")
		b.ReportMetric(pct(lat, 0.99), "ms-p99")
		b.ReportMetric(pct(exactLat, 0.5), "exact-ms-p50")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "heap-MB")
	}
}

// BenchmarkExactScan measures the exact scan over 100,000 × 256 vectors
// in bytes of vectors read per second (compare with memory bandwidth).
func BenchmarkExactScan(b *testing.B) {
	const n, dim = 100000, 256
	vecs := clustered(n+1, dim, 50, 5)
	ctx := context.Background()
	ix := memory.NewEmbedded(memory.EmbeddedConfig{ExactLimit: n + 1})
	ix.EnsureCollection(ctx, "c", memory.Schema{Dim: dim})
	pts := make([]memory.Point, n)
	for j := range pts {
		pts[j] = memory.Point{ID: memory.PointID(fmt.Sprint(j)), Vector: vecs[j]}
	}
	ix.Upsert(ctx, "c", pts)
	b.SetBytes(n * dim * 4)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := ix.Search(ctx, "c", vecs[n], 10, memory.Filter{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMemoryBandwidth reads a 256 MiB buffer with the same SIMD dot
// product the scan uses: the machine's read bandwidth, to set beside
// BenchmarkExactScan's MB/s (run them in one command).
func BenchmarkMemoryBandwidth(b *testing.B) {
	buf := make([]float32, 64<<20)
	for i := range buf {
		buf[i] = 1
	}
	b.SetBytes(int64(len(buf)) * 4)
	b.ResetTimer()
	var sink float32
	for i := 0; i < b.N; i++ {
		sink += kernels.Dot(buf, buf)
	}
	if sink == 0 {
		b.Fatal("no work done")
	}
}
