package memory_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"citizen/memory"
	"citizen/memory/memorytest"
)

func TestEmbeddedConformance(t *testing.T) {
	t.Run("exact", func(t *testing.T) {
		memorytest.Run(t, func(t *testing.T) memory.Index { return memory.NewEmbedded(memory.EmbeddedConfig{}) })
	})
	// A tiny exact limit forces the HNSW path; the suite's datasets are
	// small enough that a wide search is exact.
	t.Run("hnsw", func(t *testing.T) {
		memorytest.Run(t, func(t *testing.T) memory.Index {
			return memory.NewEmbedded(memory.EmbeddedConfig{ExactLimit: 5, EfSearch: 800})
		})
	})
}

// clustered makes n vectors around c centres, as embedded text clusters.
func clustered(n, dim, c int, seed uint64) [][]float32 {
	r := rand.New(rand.NewPCG(seed, 3))
	centres := make([][]float32, c)
	for i := range centres {
		centres[i] = make([]float32, dim)
		for j := range centres[i] {
			centres[i][j] = float32(r.NormFloat64())
		}
	}
	out := make([][]float32, n)
	for i := range out {
		ce := centres[r.IntN(c)]
		out[i] = make([]float32, dim)
		for j := range out[i] {
			out[i][j] = ce[j] + 0.7*float32(r.NormFloat64())
		}
	}
	return out
}

// recallAt10 measures the HNSW index against exact search.
func recallAt10(t testing.TB, n, dim, queries int) float64 {
	ctx := context.Background()
	vecs := clustered(n+queries, dim, 50, 11)
	exact := memory.NewEmbedded(memory.EmbeddedConfig{ExactLimit: n + 1})
	approx := memory.NewEmbedded(memory.EmbeddedConfig{ExactLimit: 1})
	schema := memory.Schema{Dim: dim}
	for _, ix := range []*memory.Embedded{exact, approx} {
		if err := ix.EnsureCollection(ctx, "c", schema); err != nil {
			t.Fatal(err)
		}
		pts := make([]memory.Point, n)
		for i := range pts {
			pts[i] = memory.Point{ID: memory.PointID(fmt.Sprint(i)), Vector: vecs[i]}
		}
		if err := ix.Upsert(ctx, "c", pts); err != nil {
			t.Fatal(err)
		}
	}
	found, total := 0, 0
	for q := n; q < n+queries; q++ {
		want, _ := exact.Search(ctx, "c", vecs[q], 10, memory.Filter{})
		got, _ := approx.Search(ctx, "c", vecs[q], 10, memory.Filter{})
		in := map[string]bool{}
		for _, h := range got {
			in[h.ID] = true
		}
		for _, h := range want {
			total++
			if in[h.ID] {
				found++
			}
		}
	}
	return float64(found) / float64(total)
}

func TestHNSWRecall(t *testing.T) {
	r := recallAt10(t, 5000, 64, 100)
	t.Logf("recall@10 on 5,000 clustered vectors: %.3f", r)
	if r < 0.95 {
		t.Fatalf("recall@10 %.3f < 0.95", r)
	}
}
