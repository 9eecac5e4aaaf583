package reflection

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"citizen/events"
	"citizen/internal/cputime"
)

// benchRecorded builds realistic interaction.recorded events: an
// arithmetic answer with a reference, 48 completion tokens with top-5
// logprobs, and every fourth an order lookup with a tool call and a tool
// result in the history.
func benchRecorded(b *testing.B, n int) []events.Event {
	tool := events.Tool{Name: "get_order_status", Parameters: json.RawMessage(`{"type":"object","required":["order_id"],"properties":{"order_id":{"type":"string"}}}`)}
	out := make([]events.Event, n)
	for i := range out {
		lps := make([]events.TokenLogprob, 48)
		for k := range lps {
			lps[k] = events.TokenLogprob{Token: k, Logprob: -0.05 * float32(k%7), Top: []events.TopLogprob{
				{Token: k, Logprob: -0.05 * float32(k%7)}, {Token: k + 1, Logprob: -2}, {Token: k + 2, Logprob: -3}, {Token: k + 3, Logprob: -4}, {Token: k + 4, Logprob: -5}}}
		}
		r := &events.InteractionRecorded{InteractionID: fmt.Sprintf("i%d", i), Tenant: "acme", ModelVersion: "v1", Model: "citizen",
			Metadata: map[string]string{"type": "arithmetic", "expected": fmt.Sprint(i * 7)},
			Messages: []events.ChatMessage{{Role: "user", Content: fmt.Sprintf("What is %d * 7?", i)}},
			Choices: []events.Choice{{Message: events.ChatMessage{Role: "assistant", Content: fmt.Sprintf("%d * 7 = %d", i, i*7)},
				FinishReason: "stop", Logprobs: lps}}}
		if i%4 == 0 {
			r.Metadata = map[string]string{"type": "order_status", "expected": "shipped"}
			r.Tools = []events.Tool{tool}
			r.Messages = append(r.Messages,
				events.ChatMessage{Role: "assistant", ToolCalls: []events.ToolCall{{ID: "c1", Name: "get_order_status", Arguments: `{"order_id":"K1"}`}}},
				events.ChatMessage{Role: "tool", ToolCallID: "c1", Content: `{"status":"shipped"}`})
			r.Choices[0].Message.Content = "Your order has shipped."
		}
		ev, err := events.Encode(r, events.Meta{Stream: events.InteractionStream(r.InteractionID), Tenant: "acme"})
		if err != nil {
			b.Fatal(err)
		}
		out[i] = ev
	}
	return out
}

// reportRates reports events per CPU-second ("events/s": the per-core
// figure, robust to other processes sharing the machine) and per wall
// second.
func reportRates(b *testing.B, cpu0 float64) {
	if cpu := cputime.Seconds() - cpu0; cpu > 0 {
		b.ReportMetric(float64(b.N)/cpu, "events/s")
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "wall-events/s")
}

// BenchmarkEvaluate measures evaluations on one goroutine with the
// shipped deterministic rubrics. "handle" is the whole handler (decode the
// interaction.recorded event, grade, self-evaluate, attribute faults,
// combine the reward, encode interaction.evaluated); "grade" is Evaluate
// on decoded recordings. Run with -cpu 1:
//
//	go test ./reflection -run XXX -bench BenchmarkEvaluate -cpu 1 -benchtime 3s
func BenchmarkEvaluate(b *testing.B) {
	e, err := NewEvaluator(EvaluatorConfig{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	evs := benchRecorded(b, 1024)
	ctx := context.Background()
	b.Run("handle", func(b *testing.B) {
		b.ReportAllocs()
		cpu0 := cputime.Seconds()
		for i := 0; b.Loop(); i++ {
			out, err := e.Handle(ctx, evs[i%len(evs)])
			if err != nil || len(out) != 1 {
				b.Fatal(out, err)
			}
		}
		reportRates(b, cpu0)
	})
	recs := make([]*events.InteractionRecorded, len(evs))
	for i := range evs {
		p, err := events.Decode(&evs[i])
		if err != nil {
			b.Fatal(err)
		}
		recs[i] = p.(*events.InteractionRecorded)
	}
	r, cfg := DefaultRubrics(), DefaultConfig()
	b.Run("grade", func(b *testing.B) {
		b.ReportAllocs()
		cpu0 := cputime.Seconds()
		for i := 0; b.Loop(); i++ {
			if out := Evaluate(r, cfg, recs[i%len(recs)], Feedback{}); out.RewardTerms == nil {
				b.Fatal("no reward")
			}
		}
		reportRates(b, cpu0)
	})
}

// benchPrompts are user messages of the kinds unlabelled traffic holds:
// some match a shipped rubric's patterns, most match none.
var benchPrompts = []string{
	"What is the capital of France? Answer in one word, then say why in a short sentence.",
	"Summarise this paragraph for a newsletter: the team shipped the new dashboard, fixed the login bug and started on the mobile app.",
	"Write a haiku about autumn leaves falling on a quiet pond.",
	"What is 17 * 23?",
	"Can you classify this ticket: my invoice shows the wrong address.",
	"Translate 'good morning, how are you today?' into German and Spanish.",
	"Please give me three ideas for a birthday party for a seven year old who likes dinosaurs.",
	"Explain the difference between a process and a thread in two sentences.",
}

// BenchmarkInfer measures type inference from the rubrics' prompt
// patterns on the shipped rubrics (per prompt, cycling through
// benchPrompts).
func BenchmarkInfer(b *testing.B) {
	r := DefaultRubrics()
	b.ReportAllocs()
	cpu0 := cputime.Seconds()
	for i := 0; b.Loop(); i++ {
		r.Infer(benchPrompts[i%len(benchPrompts)])
	}
	reportRates(b, cpu0)
}

// BenchmarkEvaluateUnlabelled is BenchmarkEvaluate's "handle" on
// interactions no client labelled, without logprobs or a reference: the
// type comes from the rubrics' patterns, mostly none.
func BenchmarkEvaluateUnlabelled(b *testing.B) {
	e, err := NewEvaluator(EvaluatorConfig{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	evs := make([]events.Event, len(benchPrompts))
	for i, p := range benchPrompts {
		r := &events.InteractionRecorded{InteractionID: fmt.Sprintf("u%d", i), Tenant: "acme", ModelVersion: "v1", Model: "citizen",
			Messages: []events.ChatMessage{{Role: "system", Content: "You are a helpful assistant. Answer briefly."}, {Role: "user", Content: p}},
			Choices:  []events.Choice{{Message: events.ChatMessage{Role: "assistant", Content: "Paris. It is the seat of the government."}, FinishReason: "stop"}}}
		if evs[i], err = events.Encode(r, events.Meta{Stream: events.InteractionStream(r.InteractionID), Tenant: "acme"}); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	b.ReportAllocs()
	cpu0 := cputime.Seconds()
	for i := 0; b.Loop(); i++ {
		if out, err := e.Handle(ctx, evs[i%len(evs)]); err != nil || len(out) != 1 {
			b.Fatal(out, err)
		}
	}
	reportRates(b, cpu0)
}
