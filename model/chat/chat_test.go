package chat

import (
	"context"
	"slices"
	"testing"

	"citizen/model"
	"citizen/model/tokenizer"
)

func tinyChat(t *testing.T) (*model.Model, *tokenizer.Tokenizer) {
	t.Helper()
	tok, err := tokenizer.Train([]string{"the refund window is 30 days", "what is the refund window?", "order status shipped"}, 300, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := model.Tiny3M()
	cfg.VocabSize, cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 320, 32, 64, 1
	cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.HeadDim, cfg.MaxPositionEmbeddings = 2, 2, 16, 128
	m, err := model.NewRandom(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	return m, tok
}

func TestCompleteRecordsExactTokens(t *testing.T) {
	m, tok := tinyChat(t)
	cm := New(tok, model.NewEngine(m, model.EngineConfig{}))
	defer cm.Close()
	msgs := []tokenizer.Message{{Role: "user", Content: "what is the refund window?"}}
	c, err := cm.Complete(context.Background(), Request{Messages: msgs, MaxTokens: 12, Temperature: 1, Seed: 5, TopLogprobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	want, _, _ := tok.RenderChat(msgs, true)
	if !slices.Equal(c.PromptIDs, want) {
		t.Fatal("prompt ids differ from the template's rendering")
	}
	if len(c.Tokens) == 0 || len(c.Tokens) > 12 || c.Message.Role != "assistant" {
		t.Fatalf("completion: %d tokens, role %q", len(c.Tokens), c.Message.Role)
	}
	for _, tk := range c.Tokens {
		if tk.Logprob > 0 || len(tk.TopLogprobs) != 2 {
			t.Fatalf("token %+v", tk)
		}
	}
	again, _ := cm.Complete(context.Background(), Request{Messages: msgs, MaxTokens: 12, Temperature: 1, Seed: 5})
	if !slices.Equal(ids(again.Tokens), ids(c.Tokens)) {
		t.Fatal("same seed, different tokens")
	}
}

func ids(ts []model.Token) []int {
	out := make([]int, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

func TestSaveOpenRoundTrip(t *testing.T) {
	m, tok := tinyChat(t)
	dir := t.TempDir()
	arts, err := Save(dir, m, tok)
	if err != nil {
		t.Fatal(err)
	}
	if len(arts) != 3 {
		t.Fatalf("artifacts %+v", arts)
	}
	cm, err := Open(dir, model.EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close()
	if !slices.Equal(cm.Engine.Model().Params, m.Params) || cm.Tok.Name() != tok.Name() {
		t.Fatal("round trip changed the model or tokenizer")
	}
}

// Ask is Complete with the system message (when given) and the user's
// question, greedy: the same answer's text; a different system message
// changes the prompt.
func TestAskIsGreedyComplete(t *testing.T) {
	m, tok := tinyChat(t)
	cm := New(tok, model.NewEngine(m, model.EngineConfig{}))
	defer cm.Close()
	ctx := context.Background()
	for _, system := range []string{"", "order status shipped"} {
		var msgs []tokenizer.Message
		if system != "" {
			msgs = append(msgs, tokenizer.Message{Role: "system", Content: system})
		}
		msgs = append(msgs, tokenizer.Message{Role: "user", Content: "what is the refund window?"})
		c, err := cm.Complete(ctx, Request{Messages: msgs, MaxTokens: 10})
		if err != nil {
			t.Fatal(err)
		}
		got, err := cm.Ask(ctx, "", system, "what is the refund window?", 10)
		if err != nil || got != c.Message.Content {
			t.Fatalf("system %q: Ask %q (%v), Complete %q", system, got, err, c.Message.Content)
		}
	}
	if _, err := cm.Ask(ctx, "no-such-adapter", "", "hi", 4); err == nil {
		t.Fatal("an unknown adapter answered")
	}
}

// A greedy continuation of a prefix of the model's own greedy answer is
// that answer, whatever the prefix's length (the prefix counts against
// MaxTokens); a prefix as long as MaxTokens is the answer, cut there.
func TestCompletePrefixContinuesGreedily(t *testing.T) {
	m, tok := tinyChat(t)
	cm := New(tok, model.NewEngine(m, model.EngineConfig{}))
	defer cm.Close()
	ctx := context.Background()
	msgs := []tokenizer.Message{{Role: "user", Content: "what is the refund window?"}}
	full, err := cm.Complete(ctx, Request{Messages: msgs, MaxTokens: 16})
	if err != nil {
		t.Fatal(err)
	}
	want := full.IDs()
	if len(want) < 4 {
		t.Fatalf("answer of %d tokens: too short to cut", len(want))
	}
	for _, k := range []int{1, len(want) / 2, len(want) - 1} {
		c, err := cm.Complete(ctx, Request{Messages: msgs, MaxTokens: 16, Prefix: want[:k]})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(c.IDs(), want) || c.Message.Content != full.Message.Content || c.FinishReason != full.FinishReason || !slices.Equal(c.PromptIDs, full.PromptIDs) {
			t.Fatalf("prefix of %d: %v %q (%s), want %v %q (%s)", k, c.IDs(), c.Message.Content, c.FinishReason, want, full.Message.Content, full.FinishReason)
		}
	}
	// Any prefix is kept and continued from: here one the model would not
	// have chosen, continued as the engine continues the prompt and it.
	other := []int{(want[0] + 1) % m.Config.VocabSize, want[0]}
	c, err := cm.Complete(ctx, Request{Messages: msgs, MaxTokens: 16, Prefix: other})
	if err != nil {
		t.Fatal(err)
	}
	res, err := cm.Engine.Generate(ctx, model.Request{PromptIDs: append(slices.Clone(full.PromptIDs), other...), MaxTokens: 14, StopIDs: tok.StopIDs()})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.IDs(); !slices.Equal(got[:2], other) || !slices.Equal(got[2:], res.IDs()) || c.Tokens[0].Logprob != 0 {
		t.Fatalf("prefix %v: %v, want it followed by %v", other, got, res.IDs())
	}
	c, err = cm.Complete(ctx, Request{Messages: msgs, MaxTokens: 3, Prefix: want})
	if err != nil || !slices.Equal(c.IDs(), want[:3]) || c.FinishReason != model.FinishLength {
		t.Fatalf("prefix over MaxTokens: %v (%v), want %v cut at 3", c.IDs(), err, want[:3])
	}
	if _, err := cm.Complete(ctx, Request{Messages: msgs, Prefix: want[:1], LogitMask: func([]int, []float32) {}}); err == nil {
		t.Fatal("a prefix with a logit mask was accepted")
	}
}
