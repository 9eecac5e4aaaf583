package memory_test

import (
	"context"
	"fmt"
	"testing"

	"citizen/events"
	"citizen/events/memstore"
	"citizen/memory"
)

// BenchmarkIndexerInteraction is the memory worker's work per interaction:
// handling its interaction.recorded and, once appended, its
// interaction.evaluated, as the store delivers them, into a growing collection with the default
// 512 dimensions (a profiling aid; the hot path's figures come from
// `citizen bench gateway`).
func BenchmarkIndexerInteraction(b *testing.B) {
	ctx := context.Background()
	st := memstore.New(memstore.Config{})
	ix := memory.NewEmbedded(memory.EmbeddedConfig{})
	in, err := memory.NewIndexer(ctx, ix, memory.NewHashEmbedder(512), st, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		b.StopTimer()
		id := fmt.Sprint("i", i)
		i++
		rec, _ := events.Encode(&events.InteractionRecorded{InteractionID: id, Tenant: "acme", Model: "citizen", ModelVersion: "base",
			Messages: []events.ChatMessage{{Role: "user", Content: "What is the capital of France? " + id}},
			Choices:  []events.Choice{{Message: events.ChatMessage{Role: "assistant", Content: "Paris."}}}},
			events.Meta{Stream: events.InteractionStream(id), Tenant: "acme"})
		ev, _ := events.Encode(&events.InteractionEvaluated{InteractionID: id, Seq: 1, TaskType: "unknown", Reward: 0.5},
			events.Meta{Stream: events.InteractionStream(id), Tenant: "acme"})
		for _, e := range []events.Event{rec, ev} {
			b.StopTimer()
			res, err := st.Append(ctx, e.Stream, events.Any, e)
			if err != nil {
				b.Fatal(err)
			}
			got, _ := st.ReadAll(ctx, res.FirstPosition-1, events.Filter{}, 1) // as the store delivers it
			b.StartTimer()
			if _, err := in.Handle(ctx, got[0]); err != nil {
				b.Fatal(err)
			}
		}
	}
}
