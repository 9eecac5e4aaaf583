package memory_test

import (
	"context"
	"fmt"
	"testing"

	"citizen/memory"
)

// An Upsert of a point with its vector unchanged and a new payload (the
// indexer's second upsert of an interaction, once it is evaluated)
// answers filtered searches and counts by the new payload only, once per
// point, on the exact and the graph path.
func TestUpsertSameVectorNewPayload(t *testing.T) {
	ctx := context.Background()
	const n, dim = 800, 16
	vecs := clustered(n+1, dim, 8, 4)
	for _, cfg := range []memory.EmbeddedConfig{{}, {ExactLimit: 200, EfSearch: 64}} {
		ix := memory.NewEmbedded(cfg)
		if err := ix.EnsureCollection(ctx, "c", memory.InteractionSchema(dim)); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			p := memory.Point{ID: memory.PointID(fmt.Sprint(i)), Vector: vecs[i], Payload: memory.Payload{"tenant": "t", "type": "unknown", "label_source": "none"}}
			if err := ix.Upsert(ctx, "c", []memory.Point{p}); err != nil {
				t.Fatal(err)
			}
			if i%4 == 0 { // evaluated: typed, same vector
				p.Payload = memory.Payload{"tenant": "t", "type": "math", "label_source": "inferred", "reward": 0.5}
				if err := ix.Upsert(ctx, "c", []memory.Point{p}); err != nil {
					t.Fatal(err)
				}
			}
		}
		count := func(f memory.Filter) int {
			c, err := ix.Count(ctx, "c", f)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		if got := count(memory.Filter{}); got != n {
			t.Fatalf("%+v: %d points, want %d", cfg, got, n)
		}
		if got := count(memory.Filter{Must: []memory.Condition{memory.Eq("type", "math")}}); got != n/4 {
			t.Fatalf("%+v: %d typed math, want %d", cfg, got, n/4)
		}
		if got := count(memory.Filter{Must: []memory.Condition{memory.Eq("type", "unknown")}}); got != n-n/4 {
			t.Fatalf("%+v: %d unknown, want %d", cfg, got, n-n/4)
		}
		both := memory.Filter{Must: []memory.Condition{memory.Eq("type", "math", "unknown")}}
		if got := count(both); got != n {
			t.Fatalf("%+v: %d of either type, want %d", cfg, got, n)
		}
		hits, err := ix.Search(ctx, "c", vecs[n], n, both)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, h := range hits {
			if seen[h.ID] {
				t.Fatalf("%+v: %s returned twice", cfg, h.ID)
			}
			seen[h.ID] = true
		}
		hits, err = ix.Search(ctx, "c", vecs[0], 1, memory.Filter{Must: []memory.Condition{memory.Eq("type", "math")}})
		if err != nil || len(hits) != 1 || hits[0].ID != memory.PointID("0") || hits[0].Payload["reward"] != 0.5 {
			t.Fatalf("%+v: nearest typed point: %v %v", cfg, hits, err)
		}
	}
}

// BenchmarkReupsert is the indexer's pair of upserts per interaction
// (recorded, then evaluated with the same vector and a new payload) into
// a growing collection of 512-dimensional points, the default memory.dim
// (a profiling aid; the hot path's figures come from `citizen bench
// gateway`).
func BenchmarkReupsert(b *testing.B) {
	const dim = 512
	ctx := context.Background()
	vecs := clustered(4096, dim, 16, 7)
	ix := memory.NewEmbedded(memory.EmbeddedConfig{})
	if err := ix.EnsureCollection(ctx, "c", memory.InteractionSchema(dim)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p := memory.Point{ID: memory.PointID(fmt.Sprint(i)), Vector: vecs[i%len(vecs)],
			Payload: memory.Payload{"tenant": "t", "type": "unknown", "label_source": "none", "_prompt": "q", "_answer": "a"}}
		if err := ix.Upsert(ctx, "c", []memory.Point{p}); err != nil {
			b.Fatal(err)
		}
		p.Payload = memory.Payload{"tenant": "t", "type": "math", "label_source": "inferred", "reward": 0.5, "_prompt": "q", "_answer": "a"}
		if err := ix.Upsert(ctx, "c", []memory.Point{p}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
