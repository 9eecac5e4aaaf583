package memory_test

import (
	"context"
	"fmt"
	"testing"

	"citizen/memory"
)

// BenchmarkCrossExactLimit times the upsert that takes a collection of
// 8,000 points of 512 dimensions past ExactLimit, and a search right after
// it: what the indexer and reflection's typing wait for at that moment (a
// profiling aid; the hot path's figures come from `citizen bench
// gateway`).
func BenchmarkCrossExactLimit(b *testing.B) {
	const n, dim = 8000, 512
	ctx := context.Background()
	vecs := clustered(n+1, dim, 16, 11)
	pts := make([]memory.Point, n)
	for i := range pts {
		pts[i] = memory.Point{ID: memory.PointID(fmt.Sprint(i)), Vector: vecs[i], Payload: memory.Payload{"tenant": "t"}}
	}
	for b.Loop() {
		b.StopTimer()
		ix := memory.NewEmbedded(memory.EmbeddedConfig{ExactLimit: n})
		ix.EnsureCollection(ctx, "c", memory.InteractionSchema(dim))
		if err := ix.Upsert(ctx, "c", pts); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := ix.Upsert(ctx, "c", []memory.Point{{ID: memory.PointID("x"), Vector: vecs[n], Payload: memory.Payload{"tenant": "t"}}}); err != nil {
			b.Fatal(err)
		}
		if _, err := ix.Search(ctx, "c", vecs[n], 5, memory.Filter{}); err != nil {
			b.Fatal(err)
		}
	}
}
