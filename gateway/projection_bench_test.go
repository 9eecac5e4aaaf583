package gateway

import (
	"encoding/json"
	"testing"

	"citizen/events"
)

// BenchmarkProjectionApplyRecorded applies interaction.recorded events the
// projection has not seen (as its subscription gets an own append before
// Append returned): 24 prompt and 16 completion tokens with logprobs, as
// `citizen bench gateway` records them (a profiling aid; the hot path's
// figures come from that command).
func BenchmarkProjectionApplyRecorded(b *testing.B) {
	rec := &events.InteractionRecorded{InteractionID: "x", Tenant: "bench", Model: "citizen", ModelVersion: "base", Engine: "upstream",
		Metadata: map[string]string{"k": "v"}, Params: json.RawMessage(`{"model":"citizen","max_tokens":16}`),
		Messages: []events.ChatMessage{{Role: "system", Content: "You are a helpful assistant."}, {Role: "user", Content: "What is the capital of France?"}}}
	for i := range 24 {
		rec.PromptTokens = append(rec.PromptTokens, 100+i)
	}
	ch := events.Choice{Message: events.ChatMessage{Role: "assistant", Content: "Paris."}, FinishReason: "stop"}
	for i := range 16 {
		ch.CompletionTokens = append(ch.CompletionTokens, 1000+i)
		ch.Logprobs = append(ch.Logprobs, events.TokenLogprob{Token: 1000 + i, Logprob: -0.125})
	}
	rec.Choices = []events.Choice{ch}
	p := newProjection()
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		rec.InteractionID = events.NewID().String()
		ev, err := events.Encode(rec, events.Meta{Stream: events.InteractionStream(rec.InteractionID), CorrelationID: rec.InteractionID, Tenant: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		p.apply(&ev)
	}
	if n := len(p.byTenant["bench"]); n != b.N {
		b.Fatalf("%d entries, want %d", n, b.N)
	}
}
