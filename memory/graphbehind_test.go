package memory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// A collection that crosses ExactLimit beyond syncGraphPoints gets its
// graph built behind: upserts and searches go on meanwhile (answered
// exactly), and the graph, once in use, holds every live slot, the ones
// upserted during the build included.
func TestGraphBuiltBehind(t *testing.T) {
	ctx := context.Background()
	const dim, n = 8, syncGraphPoints + 500
	e := NewEmbedded(EmbeddedConfig{ExactLimit: syncGraphPoints, Seed: 1})
	if err := e.EnsureCollection(ctx, "c", InteractionSchema(dim)); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	vec := func() []float32 {
		v := make([]float32, dim)
		for i := range v {
			v[i] = r.Float32() - 0.5
		}
		return v
	}
	var last []float32
	for i := range n {
		last = vec()
		if err := e.Upsert(ctx, "c", []Point{{ID: PointID(fmt.Sprint(i)), Vector: last, Payload: Payload{"tenant": "t"}}}); err != nil {
			t.Fatal(err)
		}
		if i%500 == 0 { // searches during the build are answered
			if _, err := e.Search(ctx, "c", last, 3, Filter{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	c, _ := e.col("c")
	deadline := time.Now().Add(30 * time.Second)
	for {
		c.mu.RLock()
		g := c.graph
		c.mu.RUnlock()
		if g != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the graph was never put in use")
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.mu.RLock()
	nodes, slots := len(c.graph.nodes), len(c.ids)
	missing := -1
	for slot := range c.ids {
		if c.graph.nodes[slot] == nil {
			missing = slot
			break
		}
	}
	c.mu.RUnlock()
	if nodes != slots || missing >= 0 {
		t.Fatalf("graph has %d nodes for %d slots; slot %d missing", nodes, slots, missing)
	}
	hits, err := e.Search(ctx, "c", last, 1, Filter{})
	if err != nil || len(hits) != 1 || hits[0].ID != PointID(fmt.Sprint(n-1)) {
		t.Fatalf("the last point is not its own nearest: %+v %v", hits, err)
	}
}
