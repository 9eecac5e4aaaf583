package memory_test

import (
	"context"
	"fmt"
	"testing"

	"citizen/memory"
	"citizen/workplace"
)

// firstUser returns the text a typing model sees: the first user turn.
func firstUser(c workplace.Conversation) string {
	for _, m := range c.Messages {
		if m.Role == "user" {
			return m.Content
		}
	}
	return ""
}

// TestTypingAccuracy: given 50 labelled interactions per workplace type,
// unlabelled ones are typed by k-NN vote with at least 95% accuracy.
// (The workplace is imported by this test only, as a data source.)
func TestTypingAccuracy(t *testing.T) {
	ctx := context.Background()
	convs := workplace.Corpus(42, 3000, workplace.CorpusOptions{HintRate: -1})
	emb := memory.NewHashEmbedder(512)
	var texts []string
	for _, c := range convs {
		texts = append(texts, firstUser(c))
	}
	emb.Fit(texts)
	ix := memory.NewEmbedded(memory.EmbeddedConfig{})
	if err := ix.EnsureCollection(ctx, "interactions", memory.InteractionSchema(emb.Dim())); err != nil {
		t.Fatal(err)
	}
	labelled := map[string]int{}
	var pts []memory.Point
	var held []workplace.Conversation
	for i, c := range convs {
		if labelled[c.Type] < 50 {
			labelled[c.Type]++
			v, _ := emb.Embed(ctx, []string{texts[i]})
			pts = append(pts, memory.Point{ID: memory.PointID(fmt.Sprint(i)), Vector: v[0],
				Payload: memory.Payload{"type": c.Type, "label_source": "given", "tenant": "acme"}})
		} else {
			held = append(held, c)
		}
	}
	if err := ix.Upsert(ctx, "interactions", pts); err != nil {
		t.Fatal(err)
	}
	correct, unknown := 0, 0
	perType := map[string][2]int{}
	for _, c := range held {
		v, _ := emb.Embed(ctx, []string{firstUser(c)})
		g, err := memory.InferType(ctx, ix, "interactions", "acme", v[0], 7, 0.5)
		if err != nil {
			t.Fatal(err)
		}
		pt := perType[c.Type]
		pt[1]++
		if g.Type == c.Type {
			correct++
			pt[0]++
		}
		if g.Type == memory.Unknown {
			unknown++
		}
		perType[c.Type] = pt
	}
	acc := float64(correct) / float64(len(held))
	t.Logf("typing accuracy %.4f on %d held-out interactions (%d unknown); per type %v", acc, len(held), unknown, perType)
	if acc < 0.95 {
		t.Fatalf("typing accuracy %.3f < 0.95", acc)
	}
}
