package distill

import (
	"context"
	"slices"
	"testing"

	"citizen/events"
	"citizen/memory"
	"citizen/model/chat"
	"citizen/model/tokenizer"
)

func TestMemoryExemplarsFeedTheTeacher(t *testing.T) {
	ctx := context.Background()
	tok, base := tinyBase(t)
	emb := memory.NewHashEmbedder(128)
	ix := memory.NewEmbedded(memory.EmbeddedConfig{})
	in, err := memory.NewIndexer(ctx, ix, emb, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := func(x float64) *float64 { return &x }
	for _, v := range []memory.InteractionView{
		{ID: "good1", Tenant: "t1", Type: "order_status", LabelSource: "given", Prompt: "where is order 5?", Answer: "Order 5 has shipped.", Reward: r(1)},
		{ID: "bad", Tenant: "t1", Type: "order_status", LabelSource: "given", Prompt: "where is order 6?", Answer: "Order is lost.", Reward: r(-1)},
		{ID: "other", Tenant: "t1", Type: "arithmetic", LabelSource: "given", Prompt: "what is 1 plus 2?", Answer: "The answer is 3.", Reward: r(1)},
		{ID: "self", Tenant: "t1", Type: "order_status", LabelSource: "given", Prompt: "where is order 7?", Answer: "Order is lost.", Reward: r(1)},
	} {
		if err := in.Index(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	find := MemoryExemplars(ix, emb, 2, 0.5)
	ex := Example{Interaction: "self", Tenant: "t1", Type: "order_status", Messages: []events.ChatMessage{{Role: "user", Content: "where is order 7?"}},
		Answer: events.ChatMessage{Role: "assistant", Content: "Order is lost."}}
	got, err := find(ctx, ex)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != (Exemplar{Prompt: "where is order 5?", Answer: "Order 5 has shipped."}) {
		t.Fatalf("exemplars %+v (want only the good one of the same type, not itself)", got)
	}

	// The teacher's context carries them; the student's does not.
	w := newWorld(t)
	w.correctedQA(tok, base, "order_status", "where is order 7?", "Order is lost.", "", "check the tracking page")
	calls := 0
	d := newDistiller(t, w, func(c *Config) {
		c.Exemplars = func(ctx context.Context, ex Example) ([]Exemplar, error) {
			calls++
			return got, nil
		}
		c.UncheckedHints = true // no grader here
	})
	catchUp(t, d, w.store)
	ds, err := BuildDataset(ctx, d.proj.Snapshot(), 0, d.proj.Position(), PipelineConfig{HoldOutFraction: -1, MinHoldOutPerType: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.corrections(ctx, d.log, ds, nil, 0); err != nil {
		t.Fatal(err)
	}
	if calls != 1 || len(ds.Train) != 2 || ds.Train[1].Kind != KindRevised {
		t.Fatalf("calls %d, train %+v", calls, ds.Train)
	}
	teacher := []tokenizer.Message{{Role: "system", Content: "Note: check the tracking page"},
		{Role: "user", Content: "where is order 5?"}, {Role: "assistant", Content: "Order 5 has shipped."},
		{Role: "user", Content: "where is order 7?"}}
	c, err := d.cfg.Chat.Complete(ctx, chat.Request{Messages: teacher, MaxTokens: d.cfg.TeacherMaxTokens})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.IDs(), ds.Train[1].CompletionTokens) || !slices.Equal(ds.Train[1].PromptTokens, ds.Train[0].PromptTokens) {
		t.Fatal("revised answer is not the teacher's answer with the exemplars, on the student's original prompt")
	}
	plain, err := d.cfg.Chat.Complete(ctx, chat.Request{Messages: []tokenizer.Message{teacher[0], teacher[3]}, MaxTokens: d.cfg.TeacherMaxTokens})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(plain.IDs(), c.IDs()) {
		t.Fatal("the exemplars do not change the teacher's answer here, so this test cannot tell whether they were used")
	}
}

// TestExemplarsOnlyForHints: a correction says what is right, and
// exemplars from before a change contradict it (the base checkpoint's
// teacher copies them), so the teacher gets exemplars only for hints; and
// a hint's revision is made only when something checks it (Revise) or
// UncheckedHints is set.
func TestExemplarsOnlyForHints(t *testing.T) {
	tok, base := tinyBase(t)
	w := newWorld(t)
	hinted := w.correctedQA(tok, base, "policy", "what is the refund window for order 7?", "The refund window is 30 days.", "", "the refund window changed")
	corrected := w.correctedQA(tok, base, "policy", "what is the refund window for order 8?", "The refund window is 30 days.", "60 days", "")
	var asked []string
	d := newDistiller(t, w, func(c *Config) {
		c.Exemplars = func(ctx context.Context, ex Example) ([]Exemplar, error) {
			asked = append(asked, ex.Interaction)
			return []Exemplar{{Prompt: "what is the refund window for order 5?", Answer: "The refund window is 30 days."}}, nil
		}
	})
	catchUp(t, d, w.store)
	build := func() *Dataset {
		ds, _ := revisedDataset(t, d)
		return ds
	}
	// Without a grader (Revise) a hint's revision is not made at all.
	ds := build()
	revised := ids(ds.Train, KindRevised)
	if len(asked) != 0 || revised[hinted] || !revised[corrected] || ds.Manifest.SelfDistill["hints_unchecked"] != 1 {
		t.Fatalf("exemplars asked for %v; revised %v; self-distillation %v", asked, revised, ds.Manifest.SelfDistill)
	}
	d.cfg.UncheckedHints = true
	build()
	if !slices.Equal(asked, []string{hinted}) {
		t.Fatalf("exemplars asked for %v, want only the hinted %s", asked, hinted)
	}
}
