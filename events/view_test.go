package events

import (
	"testing"
)

// recordedForBench is an interaction of 120 prompt and 64 completion
// tokens with 5 alternatives each, as the gateway records one.
func recordedForBench(tb testing.TB) Event {
	rec := &InteractionRecorded{InteractionID: "i1", Tenant: "acme", Model: "citizen", ModelVersion: "v1", Engine: "embedded",
		Messages: []ChatMessage{{Role: "system", Content: "You are a helpful assistant."}, {Role: "user", Content: "What is your refund window for items bought online?"}}}
	for i := range 120 {
		rec.PromptTokens = append(rec.PromptTokens, 1000+i)
	}
	ch := Choice{Message: ChatMessage{Role: "assistant", Content: "Refunds are accepted within 30 days of delivery."}, FinishReason: "stop"}
	for i := range 64 {
		lp := TokenLogprob{Token: 2000 + i, Logprob: -0.25}
		for k := range 5 {
			lp.Top = append(lp.Top, TopLogprob{Token: 3000 + k, Logprob: -1.5 - float32(k)})
		}
		ch.CompletionTokens = append(ch.CompletionTokens, 2000+i)
		ch.Logprobs = append(ch.Logprobs, lp)
	}
	rec.Choices = []Choice{ch}
	ev, err := Encode(rec, Meta{Stream: InteractionStream("i1"), Tenant: "acme"})
	if err != nil {
		tb.Fatal(err)
	}
	return ev
}

type recordedSubset struct {
	InteractionID string `json:"interaction_id"`
	Messages      []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
}

// DecodeView reads what Decode reads of the fields it names, and checks
// the envelope and the type as Decode does.
func TestDecodeView(t *testing.T) {
	ev := recordedForBench(t)
	var v recordedSubset
	if err := DecodeView(&ev, &v); err != nil || v.InteractionID != "i1" || len(v.Messages) != 2 || v.Messages[1].Content != "What is your refund window for items bought online?" {
		t.Fatalf("%+v, %v", v, err)
	}
	bad := ev
	bad.Type = "no.such.type"
	if err := DecodeView(&bad, &v); err == nil {
		t.Error("an unknown type decoded")
	}
	bad = ev
	bad.Schema = 9
	if err := DecodeView(&bad, &v); err == nil {
		t.Error("a future schema decoded")
	}
	bad = ev
	bad.Data = []byte(`{"interaction_id": 5}`)
	if err := DecodeView(&bad, &v); err == nil {
		t.Error("a mistyped field decoded")
	}
}

// BenchmarkDecodeRecorded compares the full typed decode of a recorded
// interaction with a view of its messages, in one run.
func BenchmarkDecodeRecorded(b *testing.B) {
	ev := recordedForBench(b)
	b.Run("Decode", func(b *testing.B) {
		b.SetBytes(int64(len(ev.Data)))
		for b.Loop() {
			if _, err := Decode(&ev); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DecodeView", func(b *testing.B) {
		b.SetBytes(int64(len(ev.Data)))
		for b.Loop() {
			var v recordedSubset
			if err := DecodeView(&ev, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
