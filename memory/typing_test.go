package memory_test

import (
	"context"
	"fmt"
	"testing"

	"citizen/memory"
	"citizen/model"
	"citizen/model/chat"
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
	convs := workplace.Corpus(42, 1500, workplace.CorpusOptions{HintRate: -1})
	emb := memory.NewHashEmbedder(512)
	var texts []string
	for _, c := range convs {
		texts = append(texts, firstUser(c))
	}
	emb.Fit(texts)
	acc := typingAccuracy(t, emb, convs)
	if acc < 0.95 {
		t.Fatalf("typing accuracy %.3f < 0.95", acc)
	}
}

// TestTypingModelEmbedder measures the other embedder with nothing to
// download, the base model's mean-pooled hidden states, on the same task.
// Over corpus seeds 42, 7 and 99 (1,500 conversations, 50 labelled per
// type) the hashed n-gram embedder scored 0.969/0.989/0.993 (mean 0.984)
// and the model embedder (4-epoch base) 0.954/0.976/0.942 (mean 0.957): the
// hashed one is the default (and far cheaper); this test guards the model
// embedder.
func TestTypingModelEmbedder(t *testing.T) {
	cm, err := chat.Open("../model/base", model.EngineConfig{})
	if err != nil {
		t.Fatalf("the base checkpoint is part of the repository: %v", err)
	}
	defer cm.Close()
	convs := workplace.Corpus(42, 1500, workplace.CorpusOptions{HintRate: -1})
	acc := typingAccuracy(t, &memory.ModelEmbedder{Model: cm.Engine.Model(), Tok: cm.Tok}, convs)
	if acc < 0.8 {
		t.Fatalf("model-embedder typing accuracy %.3f < 0.8", acc)
	}
}

func typingAccuracy(t *testing.T, emb memory.Embedder, convs []workplace.Conversation) float64 {
	ctx := context.Background()
	texts := make([]string, len(convs))
	for i, c := range convs {
		texts[i] = firstUser(c)
	}
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
	t.Logf("%s: typing accuracy %.4f on %d held-out interactions (%d unknown); per type %v", emb.Name(), acc, len(held), unknown, perType)
	return acc
}
