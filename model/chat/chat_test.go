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
