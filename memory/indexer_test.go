package memory_test

import (
	"context"
	"testing"

	"citizen/events"
	"citizen/events/memstore"
	"citizen/memory"
)

func record(t *testing.T, st events.Store, id, typ, prompt, answer string) {
	t.Helper()
	ev, err := events.Encode(&events.InteractionRecorded{InteractionID: id, Tenant: "acme", TaskType: typ, Model: "citizen", ModelVersion: "base",
		Messages: []events.ChatMessage{{Role: "user", Content: prompt}}, Choices: []events.Choice{{Message: events.ChatMessage{Role: "assistant", Content: answer}}}},
		events.Meta{Stream: events.InteractionStream(id), Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(context.Background(), ev.Stream, events.NoStream, ev); err != nil {
		t.Fatal(err)
	}
}

func evaluate(t *testing.T, st events.Store, id string, reward float64) events.Event {
	t.Helper()
	ev, err := events.Encode(&events.InteractionEvaluated{InteractionID: id, Seq: 1, TaskType: "policy", Reward: reward}, events.Meta{Stream: events.InteractionStream(id), Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(context.Background(), ev.Stream, events.Any, ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// TestIndexerLiveEqualsRebuild: handling events one by one and rebuilding
// from the store give the same points; handling is idempotent.
func TestIndexerLiveEqualsRebuild(t *testing.T) {
	ctx := context.Background()
	st := memstore.New(memstore.Config{})
	record(t, st, "a", "policy", "How long is the refund window?", "30 days")
	record(t, st, "b", "", "Convert 3 km to miles", "1.86 miles")
	ev := evaluate(t, st, "a", -0.9)

	live := memory.NewEmbedded(memory.EmbeddedConfig{})
	fl := memory.NewFailureLog(0, 0)
	in, err := memory.NewIndexer(ctx, live, memory.NewHashEmbedder(64), st, fl)
	if err != nil {
		t.Fatal(err)
	}
	all, _ := st.ReadAll(ctx, 0, events.Filter{}, 100)
	for _, e := range all {
		if _, err := in.Handle(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := in.Handle(ctx, ev); err != nil { // a redelivery changes nothing
		t.Fatal(err)
	}
	rebuilt := memory.NewEmbedded(memory.EmbeddedConfig{})
	in2, _ := memory.NewIndexer(ctx, rebuilt, memory.NewHashEmbedder(64), st, nil)
	n, pos, err := in2.Rebuild(ctx, st)
	if err != nil || n != 2 || pos != 3 {
		t.Fatalf("rebuild: %d %d %v", n, pos, err)
	}
	q, _ := memory.NewHashEmbedder(64).Embed(ctx, []string{"How long is the refund window?\n30 days"})
	for _, ix := range []*memory.Embedded{live, rebuilt} {
		c, _ := ix.Count(ctx, memory.InteractionsCollection, memory.Filter{})
		hits, _ := ix.Search(ctx, memory.InteractionsCollection, q[0], 1, memory.Filter{Must: []memory.Condition{memory.Range("reward", -1, 0)}})
		if c != 2 || len(hits) != 1 || hits[0].Payload["_interaction"] != "a" || hits[0].Payload["type"] != "policy" {
			t.Fatalf("count %d hits %+v", c, hits)
		}
		un, _ := ix.Count(ctx, memory.InteractionsCollection, memory.Filter{Must: []memory.Condition{memory.Eq("label_source", "none")}})
		if un != 1 {
			t.Fatalf("unlabelled interactions: %d", un)
		}
	}
	if modes := fl.Mine(memory.MineOptions{MinSize: 1}); len(modes) != 1 || modes[0].Size != 1 {
		t.Fatalf("failure log: %+v", modes)
	}
}
