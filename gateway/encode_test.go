package gateway

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
)

func stdJSON(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func randText(r *rand.Rand) string {
	pieces := []string{"a", "Z", " ", "\"", "\\", "\n", "\r", "\t", "\b", "\f", "\x00", "\x1f", "\x7f", "<", ">", "&", "é", "世", "🙂", "\u2028", "\u2029", "\xff", "\xc3", "\xe2\x82", "/"}
	n := r.IntN(12)
	var b []byte
	for i := 0; i < n; i++ {
		b = append(b, pieces[r.IntN(len(pieces))]...)
	}
	return string(b)
}

func randFloat(r *rand.Rand) float32 {
	switch r.IntN(5) {
	case 0:
		return 0
	case 1:
		return -float32(r.Float64() * 1e-7)
	case 2:
		return -float32(r.Float64() * 30)
	case 3:
		return float32(math.Pow(10, float64(r.IntN(40)-20)))
	}
	return -float32(r.IntN(100)) / 8
}

func randToken(r *rand.Rand) Token {
	t := Token{ID: r.IntN(1000), Text: randText(r), Logprob: randFloat(r)}
	for k := r.IntN(3); k > 0; k-- {
		t.Top = append(t.Top, TopToken{ID: r.IntN(1000), Text: randText(r), Logprob: randFloat(r)})
	}
	return t
}

// The hand-written encoders produce exactly what encoding/json produces
// for the response structs.
func TestEncodersMatchEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 3000; i++ {
		var choices []ChoiceResult
		for c := 0; c < 1+r.IntN(3); c++ {
			ch := ChoiceResult{Index: c, Content: randText(r), FinishReason: []string{"stop", "length", "tool_calls"}[r.IntN(3)]}
			if r.IntN(3) == 0 {
				ch.ToolCalls = []ToolCall{{ID: randText(r), Name: randText(r), Arguments: randText(r)}}
				if r.IntN(2) == 0 {
					ch.Content = ""
				}
			}
			for k := r.IntN(4); k > 0; k-- {
				ch.Tokens = append(ch.Tokens, randToken(r))
			}
			choices = append(choices, ch)
		}
		u := Usage{PromptTokens: r.IntN(1000), CompletionTokens: r.IntN(1000), TotalTokens: r.IntN(2000)}
		logprobs := r.IntN(2) == 0
		id, model, fp := randText(r), randText(r), ""
		if r.IntN(2) == 0 {
			fp = randText(r)
		}
		created := r.Int64N(1 << 40)

		want := &completionOut{ID: id, Object: "chat.completion", Created: created, Model: model, SystemFingerprint: fp, ServiceTier: "default", Usage: &u}
		for _, ch := range choices {
			want.Choices = append(want.Choices, choiceJSON(ch, logprobs))
		}
		got := appendCompletion(nil, id, created, model, fp, choices, u, logprobs)
		if w := stdJSON(t, want); !bytes.Equal(got, w) {
			t.Fatalf("completion:\n got %s\nwant %s", got, w)
		}

		// Chunks.
		head := chunkHead{id: id, model: model, fingerprint: fp, created: created, usageNull: r.IntN(2) == 0}
		base := chunkOut{ID: id, Object: "chat.completion.chunk", Created: created, Model: model, SystemFingerprint: fp}
		if head.usageNull {
			base.Usage = json.RawMessage("null")
		}
		tok := randToken(r)
		text := randText(r)
		var tcd *ToolCallDelta
		if r.IntN(2) == 0 {
			tcd = &ToolCallDelta{Index: r.IntN(3), Arguments: randText(r)}
			if r.IntN(2) == 0 {
				tcd.ID, tcd.Name = randText(r), randText(r)
			}
		}
		role := r.IntN(2) == 0
		finish := []string{"", "stop"}[r.IntN(2)]
		cc := chunkChoice{Index: 1}
		if role {
			cc.Delta.Role = "assistant"
		}
		var content *string
		var tokp *Token
		if tcd == nil {
			content = &text
			cc.Delta.Content = &text
			if r.IntN(2) == 0 {
				tokp = &tok
				cc.Logprobs = &logprobsOut{Content: []tokenOut{tokenJSON(tok)}}
			}
		} else {
			idx := tcd.Index
			tc := toolCallOut{Index: &idx, ID: tcd.ID, Function: fnOut{Name: tcd.Name, Arguments: tcd.Arguments}}
			if tcd.ID != "" {
				tc.Type = "function"
			}
			cc.Delta.ToolCalls = []toolCallOut{tc}
		}
		if finish != "" {
			cc.FinishReason = &finish
		}
		ch := base
		ch.Choices = []chunkChoice{cc}
		gotc := head.appendDeltaChunk(nil, 1, role, content, tcd, tokp, finish)
		wantc := append(append([]byte("data: "), stdJSON(t, ch)...), "\n\n"...)
		if !bytes.Equal(gotc, wantc) {
			t.Fatalf("chunk:\n got %s\nwant %s", gotc, wantc)
		}
		uc := base
		uc.Choices = []chunkChoice{}
		uc.Usage, _ = json.Marshal(u)
		gotu := head.appendUsageChunk(nil, u)
		wantu := append(append([]byte("data: "), stdJSON(t, uc)...), "\n\n"...)
		if !bytes.Equal(gotu, wantu) {
			t.Fatalf("usage chunk:\n got %s\nwant %s", gotu, wantu)
		}
	}
}

func BenchmarkEncodeCompletion(b *testing.B) {
	var toks []Token
	for i, r := range "The capital of France is Paris, as everyone knows." {
		toks = append(toks, stubToken(i, int(r), 2))
	}
	choices := []ChoiceResult{{Content: "The capital of France is Paris, as everyone knows.", FinishReason: "stop", Tokens: toks}}
	u := Usage{PromptTokens: 100, CompletionTokens: len(toks), TotalTokens: 100 + len(toks)}
	b.Run("impl=hand", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for i := 0; i < b.N; i++ {
			buf = appendCompletion(buf[:0], "chatcmpl-x", 1, "citizen@v1", "fp", choices, u, true)
		}
		b.SetBytes(int64(len(buf)))
	})
	b.Run("impl=encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			out := &completionOut{ID: "chatcmpl-x", Object: "chat.completion", Created: 1, Model: "citizen@v1", SystemFingerprint: "fp", ServiceTier: "default", Usage: &u}
			out.Choices = append(out.Choices, choiceJSON(choices[0], true))
			var bb bytes.Buffer
			enc := json.NewEncoder(&bb)
			enc.SetEscapeHTML(false)
			enc.Encode(out)
			b.SetBytes(int64(bb.Len()))
		}
	})
}
