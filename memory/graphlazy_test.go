package memory

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// A collection of more than syncGraphPoints slots past ExactLimit builds
// its graph only once a search needs it: searches that posting lists
// answer (typing's labelled points of a tenant) build none, and upserts
// insert into none.
func TestGraphBuiltWhenSearched(t *testing.T) {
	ctx := context.Background()
	const dim, n = 4, syncGraphPoints + 100
	e := NewEmbedded(EmbeddedConfig{ExactLimit: syncGraphPoints, Seed: 1})
	if err := e.EnsureCollection(ctx, "c", InteractionSchema(dim)); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		v := []float32{float32(i%7) + 1, float32(i%5) + 1, float32(i%3) + 1, 1}
		p := Payload{"tenant": "t", "label_source": "none"}
		if i == 3 {
			p["label_source"] = "given"
		}
		if err := e.Upsert(ctx, "c", []Point{{ID: PointID(fmt.Sprint(i)), Vector: v, Payload: p}}); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := e.col("c")
	graph := func() (bool, bool) {
		c.mu.RLock()
		defer c.mu.RUnlock()
		return c.graph != nil, c.building
	}
	q := []float32{1, 1, 1, 1}
	hits, err := e.Search(ctx, "c", q, 5, Filter{Must: []Condition{Eq("label_source", "given"), Eq("tenant", "t")}})
	if err != nil || len(hits) != 1 || hits[0].ID != PointID("3") {
		t.Fatalf("filtered search: %v, %v", hits, err)
	}
	if g, b := graph(); g || b {
		t.Fatalf("a search answered by posting lists built a graph (built %v, building %v)", g, b)
	}
	hits, err = e.Search(ctx, "c", q, 5, Filter{})
	if err != nil || len(hits) != 5 {
		t.Fatalf("unfiltered search: %v, %v", hits, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for g, _ := graph(); !g; g, _ = graph() {
		if time.Now().After(deadline) {
			t.Fatal("an unfiltered search past ExactLimit never got a graph built")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
