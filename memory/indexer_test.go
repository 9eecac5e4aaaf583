package memory_test

import (
	"context"
	"errors"
	"os"
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
	n, pos, err := in2.Rebuild(ctx, st, 0)
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

// TestSnapshotThenCatchUp: a snapshot taken at some position, loaded into
// a fresh index and caught up from that position, equals a full rebuild;
// a corrupt snapshot is refused and leaves the index untouched.
func TestSnapshotThenCatchUp(t *testing.T) {
	ctx := context.Background()
	st := memstore.New(memstore.Config{})
	record(t, st, "a", "policy", "How long is the refund window?", "30 days")
	record(t, st, "b", "arithmetic", "Add 2 and 3.", "5")
	ix := memory.NewEmbedded(memory.EmbeddedConfig{})
	in, _ := memory.NewIndexer(ctx, ix, memory.NewHashEmbedder(64), st, nil)
	_, pos, err := in.Rebuild(ctx, st, 0)
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/memory/snapshot"
	if err := ix.SaveSnapshot(path, pos); err != nil {
		t.Fatal(err)
	}
	// Later events: a new interaction and a grade for an old one.
	record(t, st, "c", "policy", "Do you ship abroad?", "yes")
	evaluate(t, st, "a", -1)

	loaded := memory.NewEmbedded(memory.EmbeddedConfig{})
	got, err := loaded.LoadSnapshot(path)
	if err != nil || got != pos {
		t.Fatalf("load: %d %v", got, err)
	}
	in2, _ := memory.NewIndexer(ctx, loaded, memory.NewHashEmbedder(64), st, nil)
	n, _, err := in2.Rebuild(ctx, st, got)
	if err != nil || n != 2 {
		t.Fatalf("catch-up indexed %d (%v), want the 2 streams touched since the snapshot", n, err)
	}
	full := memory.NewEmbedded(memory.EmbeddedConfig{})
	in3, _ := memory.NewIndexer(ctx, full, memory.NewHashEmbedder(64), st, nil)
	in3.Rebuild(ctx, st, 0)
	for _, f := range []memory.Filter{{}, {Must: []memory.Condition{memory.Range("reward", -1, 0)}}, {Must: []memory.Condition{memory.Eq("type", "policy")}}} {
		a, _ := loaded.Count(ctx, memory.InteractionsCollection, f)
		b, _ := full.Count(ctx, memory.InteractionsCollection, f)
		if a != b {
			t.Fatalf("filter %+v: snapshot+catch-up %d, full rebuild %d", f, a, b)
		}
	}
	// Corruption is detected and changes nothing.
	b, _ := os.ReadFile(path)
	b[len(b)/2] ^= 0xff
	os.WriteFile(path, b, 0o644)
	if _, err := loaded.LoadSnapshot(path); !errors.Is(err, memory.ErrSnapshot) {
		t.Fatalf("corrupt snapshot: %v", err)
	}
	if c, _ := loaded.Count(ctx, memory.InteractionsCollection, memory.Filter{}); c != 3 {
		t.Fatalf("a refused snapshot changed the index: %d points", c)
	}
}

// TestIndexerIncrementalFold: events handled out of order, redelivered,
// or after later events of their stream give the same point as a full
// fold (the indexer caches each stream's fold and reads only what is new).
func TestIndexerIncrementalFold(t *testing.T) {
	ctx := context.Background()
	st := memstore.New(memstore.Config{})
	record(t, st, "a", "policy", "How long is the refund window?", "30 days")
	evaluate(t, st, "a", 0.4)
	ix := memory.NewEmbedded(memory.EmbeddedConfig{})
	in, _ := memory.NewIndexer(ctx, ix, memory.NewHashEmbedder(64), st, nil)
	all, _ := st.ReadAll(ctx, 0, events.Filter{}, 100)
	// evaluation first, then the recording, then the evaluation again
	for _, ev := range []events.Event{all[1], all[0], all[1]} {
		if _, err := in.Handle(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	evaluate(t, st, "a", -0.7) // a second evaluation arrives
	all, _ = st.ReadAll(ctx, 0, events.Filter{}, 100)
	if _, err := in.Handle(ctx, all[len(all)-1]); err != nil {
		t.Fatal(err)
	}
	q, _ := memory.NewHashEmbedder(64).Embed(ctx, []string{"How long is the refund window?\n30 days"})
	hits, _ := ix.Search(ctx, memory.InteractionsCollection, q[0], 1, memory.Filter{})
	if len(hits) != 1 || hits[0].Payload["reward"] != -0.7 || hits[0].Score < 0.999 {
		t.Fatalf("point after incremental folds: %+v", hits)
	}
}

// A deleted interaction (interaction.deleted, DELETE of a stored
// completion) leaves the index at once, an evaluation arriving after the
// deletion does not bring it back, and a rebuild (from a snapshot taken
// before the deletion too) leaves it out.
func TestDeletedInteractionLeavesTheIndex(t *testing.T) {
	ctx := context.Background()
	st := memstore.New(memstore.Config{})
	record(t, st, "a", "policy", "When is support open?", "9 to 5")
	record(t, st, "b", "policy", "Do you ship abroad?", "Yes")
	ix := memory.NewEmbedded(memory.EmbeddedConfig{})
	in, err := memory.NewIndexer(ctx, ix, memory.NewHashEmbedder(64), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	handleAll := func(after uint64) uint64 {
		all, _ := st.ReadAll(ctx, after, events.Filter{}, 100)
		for _, e := range all {
			if _, err := in.Handle(ctx, e); err != nil {
				t.Fatal(err)
			}
			after = e.Position
		}
		return after
	}
	count := func(ix *memory.Embedded) int {
		n, err := ix.Count(ctx, memory.InteractionsCollection, memory.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	pos := handleAll(0)
	if n := count(ix); n != 2 {
		t.Fatalf("%d points before the deletion", n)
	}
	snap := t.TempDir() + "/snapshot"
	if err := ix.SaveSnapshot(snap, pos); err != nil {
		t.Fatal(err)
	}
	del, _ := events.Encode(&events.InteractionDeleted{InteractionID: "a", Source: "api"}, events.Meta{Stream: events.InteractionStream("a"), Tenant: "acme"})
	if _, err := st.Append(ctx, del.Stream, events.Any, del); err != nil {
		t.Fatal(err)
	}
	pos = handleAll(pos)
	evaluate(t, st, "a", 0.5)
	handleAll(pos)
	if n := count(ix); n != 1 {
		t.Fatalf("%d points after the deletion and a later evaluation, want 1", n)
	}
	fromSnap := memory.NewEmbedded(memory.EmbeddedConfig{})
	at, err := fromSnap.LoadSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	in2, _ := memory.NewIndexer(ctx, fromSnap, memory.NewHashEmbedder(64), st, nil)
	if _, _, err := in2.Rebuild(ctx, st, at); err != nil {
		t.Fatal(err)
	}
	if n := count(fromSnap); n != 1 {
		t.Fatalf("rebuilt from a snapshot taken before the deletion: %d points, want 1", n)
	}
}
