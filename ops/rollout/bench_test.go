package rollout

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"citizen/events"
)

// BenchmarkApplyDecide measures the controller's cost per event while a
// rollout runs: decode and apply one interaction.evaluated (or
// interaction.recorded) and look at the tests, as the controller does
// after every event. events/s is per core.
func BenchmarkApplyDecide(b *testing.B) {
	for _, typ := range []string{events.TypeInteractionEvaluated, events.TypeInteractionRecorded} {
		b.Run("type="+typ, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			const n = 4096
			evs := make([]events.Event, n)
			for i := range evs {
				v := "A"
				if i%2 == 0 {
					v = "B"
				}
				id := fmt.Sprintf("i%d", i)
				var p events.Payload = &events.InteractionEvaluated{InteractionID: id, Seq: 1, TaskType: "qa", ModelVersion: v,
					Reward: rng.NormFloat64(), AnswerLength: 100 + rng.IntN(50), ToolCalls: rng.IntN(2), RubricVersion: "r", EvaluatorVersion: "e",
					Graders: []events.GraderResult{{Name: "exact", Version: "1", Score: 1, Weight: 1}}}
				if typ == events.TypeInteractionRecorded {
					toks := make([]int, 200)
					lps := make([]events.TokenLogprob, 200)
					p = &events.InteractionRecorded{InteractionID: id, Tenant: "t", Model: "citizen", ModelVersion: v, Engine: "e",
						Messages:     []events.ChatMessage{{Role: "user", Content: "What is the capital of France? Answer briefly."}},
						PromptTokens: toks, Choices: []events.Choice{{Message: events.ChatMessage{Role: "assistant", Content: "Paris."},
							FinishReason: "stop", CompletionTokens: toks, Logprobs: lps}}, LatencyMS: 100 + 50*rng.Float64()}
				}
				ev, err := events.Encode(p, events.Meta{Stream: events.InteractionStream(id), Time: time.Unix(0, 0)})
				if err != nil {
					b.Fatal(err)
				}
				evs[i] = ev
			}
			cfg := Config{Stable: "A", MinPerArm: 1 << 30, MaxPerArm: 1 << 30, MinLook: 2}
			newState := func() *State {
				st := NewState(cfg)
				w, _ := events.Encode(&events.WeightsTrained{Version: "B", Parent: "A", Accepted: true}, events.Meta{Stream: "version-B"})
				w.Position = 1
				st.Apply(&w)
				d := st.decide()
				s, _ := events.Encode(d.payload, events.Meta{Stream: d.stream, ID: d.id})
				s.Position = 2
				st.Apply(&s)
				return st
			}
			st := newState()
			pos := uint64(2)
			b.ReportAllocs()
			b.SetBytes(int64(len(evs[0].Data)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i%n == 0 && i > 0 {
					b.StopTimer()
					st = newState() // fresh interaction ids
					pos = 2
					b.StartTimer()
				}
				ev := evs[i%n]
				pos++
				ev.Position = pos
				if err := st.Apply(&ev); err != nil {
					b.Fatal(err)
				}
				if d := st.decide(); d != nil {
					b.Fatalf("unexpected decision %s", d.payload.EventType())
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
