package memory_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"citizen/memory"
	"citizen/model/kernels"
)

// Filtered search walks posting lists of Keyword fields; its answers
// equal a brute-force filtered scan after upserts, replacements and
// deletes, on the exact and the graph path, for filters that match many
// points, few or none.
func TestFilteredSearchMatchesBruteForce(t *testing.T) {
	ctx := context.Background()
	const n, dim = 3000, 16
	vecs := clustered(n+50, dim, 10, 9)
	for _, cfg := range []memory.EmbeddedConfig{{}, {ExactLimit: 500, EfSearch: 64}} {
		ix := memory.NewEmbedded(cfg)
		s := memory.InteractionSchema(dim)
		if err := ix.EnsureCollection(ctx, "c", s); err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(1, 2))
		live := map[string]memory.Point{}
		tenants := []string{"a", "b", "c", "rare"}
		for i := range n {
			id := memory.PointID(fmt.Sprint(r.IntN(n * 3 / 4))) // some ids replaced
			ten := tenants[r.IntN(3)]
			if i%500 == 0 {
				ten = "rare"
			}
			src := "inferred"
			if r.IntN(10) == 0 {
				src = "given"
			}
			p := memory.Point{ID: id, Vector: vecs[i], Payload: memory.Payload{"tenant": ten, "label_source": src, "reward": r.Float64()}}
			if err := ix.Upsert(ctx, "c", []memory.Point{p}); err != nil {
				t.Fatal(err)
			}
			live[id] = p
			if i%97 == 0 { // delete something
				for k := range live {
					ix.Delete(ctx, "c", []string{k})
					delete(live, k)
					break
				}
			}
		}
		filters := []memory.Filter{
			{Must: []memory.Condition{memory.Eq("label_source", "given"), memory.Eq("tenant", "a")}},
			{Must: []memory.Condition{memory.Eq("tenant", "rare")}},
			{Must: []memory.Condition{memory.Eq("tenant", "nobody")}},
			{Must: []memory.Condition{memory.Eq("tenant", "b", "rare"), memory.Range("reward", 0.5, 2)}},
			{Must: []memory.Condition{memory.Range("reward", 0.9, 2)}},
		}
		for fi, f := range filters {
			want, err := ix.Count(ctx, "c", f)
			if err != nil {
				t.Fatal(err)
			}
			var brute []memory.Point
			for _, p := range live {
				if f.Match(p.Payload) {
					brute = append(brute, p)
				}
			}
			if want != len(brute) {
				t.Fatalf("cfg %+v filter %d: Count %d, brute force %d", cfg, fi, want, len(brute))
			}
			for qi := range 5 {
				q := vecs[n+qi]
				hits, err := ix.Search(ctx, "c", q, 10, f)
				if err != nil {
					t.Fatal(err)
				}
				slices.SortFunc(brute, func(a, b memory.Point) int {
					da, db := dot(q, a.Vector), dot(q, b.Vector)
					switch {
					case da > db:
						return -1
					case da < db:
						return 1
					}
					return 0
				})
				k := min(10, len(brute))
				if len(hits) != k {
					t.Fatalf("cfg %+v filter %d: %d hits, want %d", cfg, fi, len(hits), k)
				}
				if cfg.ExactLimit == 0 || len(brute) <= 4*64 { // exact answers
					for i := range hits {
						if hits[i].ID != brute[i].ID {
							t.Fatalf("cfg %+v filter %d query %d: hit %d is %s, want %s", cfg, fi, qi, i, hits[i].ID, brute[i].ID)
						}
					}
				}
				for _, h := range hits {
					if !f.Match(h.Payload) {
						t.Fatalf("hit %s does not pass the filter", h.ID)
					}
				}
			}
		}
	}
}

// dot is the cosine of two vectors (the index normalises its own).
func dot(a, b []float32) float32 {
	na, nb := kernels.Dot(a, a), kernels.Dot(b, b)
	return kernels.Dot(a, b) / sqrt32(na*nb)
}

func sqrt32(x float32) float32 {
	z := x
	for range 30 {
		z = (z + x/z) / 2
	}
	return z
}

// BenchmarkSelectiveFilter searches 100k interactions with the typing
// filter (label_source given, one tenant) when few points or none pass,
// as for a deployment whose clients declare no task types (a profiling
// aid; the hot path's figures come from `citizen bench gateway`).
func BenchmarkSelectiveFilter(b *testing.B) {
	const n, dim = 100000, 64
	vecs := clustered(n+1, dim, 50, 5)
	ctx := context.Background()
	for _, given := range []int{0, 100} {
		b.Run(fmt.Sprintf("given=%d", given), func(b *testing.B) {
			ix := memory.NewEmbedded(memory.EmbeddedConfig{})
			ix.EnsureCollection(ctx, "c", memory.InteractionSchema(dim))
			pts := make([]memory.Point, n)
			for j := range pts {
				src := "inferred"
				if j < given {
					src = "given"
				}
				pts[j] = memory.Point{ID: memory.PointID(fmt.Sprint(j)), Vector: vecs[j], Payload: memory.Payload{"tenant": "t", "label_source": src}}
			}
			if err := ix.Upsert(ctx, "c", pts); err != nil {
				b.Fatal(err)
			}
			f := memory.Filter{Must: []memory.Condition{memory.Eq("label_source", "given"), memory.Eq("tenant", "t")}}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := ix.Search(ctx, "c", vecs[n], 7, f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
