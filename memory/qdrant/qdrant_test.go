package qdrant_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"citizen/memory"
	"citizen/memory/memorytest"
	"citizen/memory/qdrant"
)

// TestConformance runs the memory conformance suite against a Qdrant
// server named by QDRANT_URL (e.g. http://127.0.0.1:6334). No Qdrant can
// be installed on this project's machines, so without the variable the
// test is skipped and says so; see the README for how to run it.
func TestConformance(t *testing.T) {
	url := os.Getenv("QDRANT_URL")
	if url == "" {
		t.Skip("QDRANT_URL not set: the Qdrant conformance suite needs a Qdrant server (see README, 'External backends')")
	}
	n := 0
	memorytest.Run(t, func(t *testing.T) memory.Index {
		ix, err := qdrant.Open(url)
		if err != nil {
			t.Fatal(err)
		}
		// A fresh collection name per test keeps runs independent.
		n++
		return renamed{ix, fmt.Sprintf("citizen_test_%d_%d", time.Now().UnixNano(), n)}
	})
}

// renamed maps the suite's collection names onto a unique prefix.
type renamed struct {
	*qdrant.Index
	prefix string
}

func (r renamed) name(c string) string {
	if c == "nope" {
		return c
	}
	return r.prefix + "_" + c
}
func (r renamed) EnsureCollection(ctx context.Context, c string, s memory.Schema) error {
	return r.Index.EnsureCollection(ctx, r.name(c), s)
}
func (r renamed) Upsert(ctx context.Context, c string, p []memory.Point) error {
	return r.Index.Upsert(ctx, r.name(c), p)
}
func (r renamed) Delete(ctx context.Context, c string, ids []string) error {
	return r.Index.Delete(ctx, r.name(c), ids)
}
func (r renamed) Search(ctx context.Context, c string, v []float32, k int, f memory.Filter) ([]memory.Hit, error) {
	return r.Index.Search(ctx, r.name(c), v, k, f)
}
func (r renamed) Count(ctx context.Context, c string, f memory.Filter) (int, error) {
	return r.Index.Count(ctx, r.name(c), f)
}
