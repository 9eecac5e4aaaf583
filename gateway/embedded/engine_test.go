package embedded

import (
	"context"
	"strings"
	"testing"

	"citizen/gateway"
	"citizen/model"
	"citizen/model/chat"
	"citizen/model/tokenizer"
)

func tiny(t *testing.T) *Engine {
	t.Helper()
	tok, err := tokenizer.Train([]string{"the refund window is 30 days", "what is the refund window?", "order status shipped ä ö ü"}, 300, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := model.Tiny3M()
	cfg.VocabSize, cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 320, 32, 64, 1
	cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.HeadDim, cfg.MaxPositionEmbeddings = 2, 2, 16, 128
	m, err := model.NewRandom(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	cm := chat.New(tok, model.NewEngine(m, model.EngineConfig{}))
	t.Cleanup(cm.Close)
	return New(cm, Config{})
}

func f64(x float64) *float64 { return &x }
func i64(x int64) *int64     { return &x }

func TestStreamAgreesWithResult(t *testing.T) {
	e := tiny(t)
	req := &gateway.GenerateRequest{Messages: []gateway.Message{{Role: "user", Content: "what is the refund window?"}},
		Temperature: f64(1), Seed: i64(7), MaxTokens: 20, N: 2, Stream: true, Logprobs: true, TopLogprobs: 3}
	texts := map[int]*strings.Builder{0: {}, 1: {}}
	tokens := map[int]int{}
	res, err := e.Generate(context.Background(), req, func(d gateway.Delta) error {
		texts[d.Choice].WriteString(d.Text)
		if d.Token != nil {
			tokens[d.Choice]++
			if len(d.Token.Top) != 3 || d.Token.Logprob > 0 {
				t.Errorf("token %+v", d.Token)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Choices) != 2 || len(res.PromptTokens) == 0 || res.Usage.TotalTokens != res.Usage.PromptTokens+res.Usage.CompletionTokens {
		t.Fatalf("result %+v", res)
	}
	for c, ch := range res.Choices {
		if len(ch.ToolCalls) == 0 && texts[c].String() != ch.Content {
			t.Errorf("choice %d: streamed %q, result %q", c, texts[c].String(), ch.Content)
		}
		if tokens[c] != len(ch.Tokens) {
			t.Errorf("choice %d: streamed %d tokens, result has %d", c, tokens[c], len(ch.Tokens))
		}
	}
	// Same seed, same answer, streamed or not.
	req.Stream = false
	again, err := e.Generate(context.Background(), req, nil)
	if err != nil || again.Choices[0].Content != res.Choices[0].Content {
		t.Fatalf("not deterministic: %v %q %q", err, again.Choices[0].Content, res.Choices[0].Content)
	}
}

func TestStopStringAndVersions(t *testing.T) {
	e := tiny(t)
	req := &gateway.GenerateRequest{Messages: []gateway.Message{{Role: "user", Content: "hi"}}, Temperature: f64(1), Seed: i64(1), MaxTokens: 30, N: 1}
	full, err := e.Generate(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	content := full.Choices[0].Content
	if len(content) < 4 {
		t.Skipf("random model answered too briefly to cut: %q", content)
	}
	stop := content[2:4]
	req.Stop = []string{stop}
	cut, err := e.Generate(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := content[:strings.Index(content, stop)]; cut.Choices[0].Content != want || cut.Choices[0].FinishReason != gateway.FinishStop {
		t.Fatalf("stop %q: got %q (%s), want %q", stop, cut.Choices[0].Content, cut.Choices[0].FinishReason, want)
	}
	// A registered adapter is a version with its parent; unknown versions are refused.
	a, err := model.NewAdapter("v1", e.cm.Engine.Model().Config, model.LoRAConfig{Rank: 2, Alpha: 4, TargetModules: []string{"q_proj"}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.AddVersion("v1", BaseVersion, a); err != nil {
		t.Fatal(err)
	}
	vs, _ := e.Versions(context.Background())
	if len(vs) != 2 || vs[0].ID != BaseVersion || vs[1].ID != "v1" || vs[1].Parent != BaseVersion {
		t.Fatalf("versions %+v", vs)
	}
	req.Version, req.Stop = "v1", nil
	res, err := e.Generate(context.Background(), req, nil)
	if err != nil || res.Version != "v1" {
		t.Fatalf("%v %+v", err, res)
	}
	// B starts at zero: a fresh adapter answers exactly as the base.
	if res.Choices[0].Content != content {
		t.Fatalf("fresh adapter changed the answer: %q vs %q", res.Choices[0].Content, content)
	}
	req.Version = "v9"
	if _, err := e.Generate(context.Background(), req, nil); err == nil {
		t.Fatal("unknown version served")
	}
}

// A version whose weights could not be loaded is answered by its
// fallback's weights, reported as the version that ran, and counted.
func TestFallbackServesParent(t *testing.T) {
	e := tiny(t)
	if err := e.AddFallback("broken", "nope", "missing"); err == nil {
		t.Fatal("a fallback to a version that is not served was accepted")
	}
	if err := e.AddFallback("broken", BaseVersion, "sha256 mismatch"); err != nil {
		t.Fatal(err)
	}
	res, err := e.Generate(context.Background(), &gateway.GenerateRequest{Version: "broken", N: 1, MaxTokens: 4,
		Messages: []gateway.Message{{Role: "user", Content: "hi"}}}, nil)
	if err != nil || res.Version != BaseVersion {
		t.Fatalf("served %+v, %v", res, err)
	}
	if n := e.FallbackCount("broken", BaseVersion); n != 1 {
		t.Fatalf("fallback count %d", n)
	}
	vs, _ := e.Versions(context.Background())
	found := false
	for _, v := range vs {
		found = found || v.ID == "broken" && v.ServedBy == BaseVersion
	}
	if !found {
		t.Fatalf("versions %+v do not list the fallback", vs)
	}
	if _, err := e.Generate(context.Background(), &gateway.GenerateRequest{Version: "unknown", N: 1,
		Messages: []gateway.Message{{Role: "user", Content: "hi"}}}, nil); err == nil {
		t.Fatal("an unknown version was served")
	}
}
