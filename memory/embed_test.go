package memory

import (
	"context"
	"fmt"
	"reflect"
	"testing"
)

// The recent-text cache answers what embedding would: equal vectors,
// copies the caller may change, none carried over a new fit.
func TestHashEmbedderRemembers(t *testing.T) {
	ctx := context.Background()
	h := NewHashEmbedder(64)
	texts := []string{"What is the refund window?\nThirty days.", "", "ünïcode text"}
	first, err := h.Embed(ctx, texts)
	if err != nil {
		t.Fatal(err)
	}
	fresh := NewHashEmbedder(64)
	for i := range 2 {
		again, err := h.Embed(ctx, texts)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := fresh.Embed(ctx, texts)
		if !reflect.DeepEqual(again, first) || !reflect.DeepEqual(again, want) {
			t.Fatalf("round %d: remembered vectors differ from embedding", i)
		}
		again[0][0] += 1 // a caller's change stays the caller's
	}
	h.Fit([]string{"refund window days", "support hours"})
	fresh.Fit([]string{"refund window days", "support hours"})
	after, _ := h.Embed(ctx, texts)
	want, _ := fresh.Embed(ctx, texts)
	if !reflect.DeepEqual(after, want) || reflect.DeepEqual(after[0], first[0]) {
		t.Fatal("a vector from before the fit was served after it")
	}
	for i := range 2*recentTexts + 10 { // generations roll over without losing correctness
		if _, err := h.Embed(ctx, []string{fmt.Sprint("text ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if len(h.recent)+len(h.older) > 2*recentTexts {
		t.Fatalf("cache holds %d vectors", len(h.recent)+len(h.older))
	}
}
