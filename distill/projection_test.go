package distill

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"citizen/events"
)

// populate writes a mix of interactions: several types, re-evaluations,
// untrainable ones, feedback with corrections and hints.
func populate(w *world, n int) {
	types := []string{"policy", "arithmetic", "order_status"}
	for i := 0; i < n; i++ {
		typ := types[i%len(types)]
		id := w.record(chatRec{typ: typ, user: fmt.Sprintf("q%d", i), answer: fmt.Sprintf("a%d", i),
			prompt: []int{1, 2, 3 + i%5}, completion: []int{4, 5 + i%7, 6}})
		w.evaluate(id, typ, 1, float64(i%3)/2, i%5 != 0)
		if i%4 == 0 {
			w.feedback(id, "60 days", "")
			w.evaluate(id, typ, 2, -0.5, true)
		}
		if i%6 == 0 {
			w.feedback(id, "", "check the policy")
		}
	}
}

func TestProjectionReplayEqualsLive(t *testing.T) {
	w := newWorld(t)
	live := NewProjection(Retention{MaxPerType: 7, MaxAge: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	applied := make(chan uint64, 1024)
	done := make(chan error, 1)
	go func() {
		done <- w.store.Subscribe(ctx, 0, live.Filter(), func(ctx context.Context, ev events.Event) error {
			if err := live.Apply(ev); err != nil {
				return err
			}
			applied <- ev.Position
			return nil
		})
	}()
	populate(w, 40)
	final, _ := w.store.LastPosition(ctx)
	for pos := range applied {
		if pos == final {
			break
		}
	}
	cancel()
	<-done

	got := replay(t, w.store, Retention{MaxPerType: 7, MaxAge: time.Hour})
	if !reflect.DeepEqual(got.Snapshot(), live.Snapshot()) {
		t.Fatal("replayed projection differs from the live one")
	}
	snap := got.Snapshot()
	perType := map[string]int{}
	for _, it := range snap {
		perType[it.Type()]++
	}
	for typ, n := range perType {
		if n > 7 {
			t.Fatalf("type %s keeps %d interactions, retention is 7", typ, n)
		}
	}
	if len(snap) == 0 {
		t.Fatal("empty snapshot")
	}
}

func TestProjectionJoinsLatestEvaluationAndFeedback(t *testing.T) {
	w := newWorld(t)
	id := w.record(chatRec{typ: "policy", user: "refund window?", answer: "30 days", prompt: []int{1, 2}, completion: []int{3, 4}, logprobs: []float32{-0.5, -0.25}})
	w.evaluate(id, "policy", 1, 0.8, true)
	w.feedback(id, "60 days", "")
	w.evaluate(id, "policy", 2, -0.6, true)
	w.evaluate(id, "policy", 1, 0.9, true) // a late redelivery of an older Seq does not win
	p := replay(t, w.store, Retention{})
	snap := p.Snapshot()
	if len(snap) != 1 {
		t.Fatalf("%d interactions", len(snap))
	}
	it := snap[0]
	if it.Eval == nil || it.Eval.Seq != 2 || it.Eval.Reward != -0.6 || it.Correction != "60 days" {
		t.Fatalf("join: %+v correction %q", it.Eval, it.Correction)
	}
	if !reflect.DeepEqual(it.BehaviourLogprobs, []float32{-0.5, -0.25}) {
		t.Fatalf("behaviour logprobs %v", it.BehaviourLogprobs)
	}
	if it.EvalPosition() != 4 || len(it.Sources) != 4 {
		t.Fatalf("sources %+v", it.Sources)
	}
	// Re-applying an already applied position is refused and changes nothing.
	evs, _ := w.store.ReadAll(context.Background(), 0, p.Filter(), 1)
	if err := p.Apply(evs[0]); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("re-apply: %v", err)
	}
}

func TestProjectionRetentionByAge(t *testing.T) {
	w := newWorld(t)
	old := w.record(chatRec{typ: "policy", user: "old", prompt: []int{1}, completion: []int{2}})
	w.clock = w.clock.Add(48 * time.Hour)
	fresh := w.record(chatRec{typ: "policy", user: "new", prompt: []int{1}, completion: []int{3}})
	snap := replay(t, w.store, Retention{MaxAge: 24 * time.Hour}).Snapshot()
	if len(snap) != 1 || snap[0].ID != fresh || snap[0].ID == old {
		t.Fatalf("kept %+v", snap)
	}
}

// staleWorld writes n graded interactions per type of six, a tenth of
// the policy ones stating "30 days" and corrected to "60 days" (the
// changed fact), a tenth of the arithmetic ones corrected to another
// number (one wrong span each, as in bench learn), all graded good.
func staleWorld(w *world, n int) {
	types := []string{"policy", "arithmetic", "order_status", "classify", "json_extract", "unit_conversion"}
	for i := range n {
		for _, typ := range types {
			answer := fmt.Sprintf("The answer is %d.", i)
			if typ == "policy" {
				answer = "No, the refund window is 30 days."
			}
			id := w.graded(typ, answer, 1)
			if typ == "policy" && i%10 == 0 {
				w.feedback(id, "the refund window is 60 days", "")
			}
			if typ == "arithmetic" && i%10 == 5 {
				w.feedback(id, fmt.Sprintf("The answer is %d.", i+1), "")
			}
		}
	}
}

// goodReward is PipelineConfig's default GoodReward.
func goodReward() float64 {
	var c PipelineConfig
	c.defaults()
	return c.GoodReward
}

// TestProjectionDropsDeletedInteractions: interaction.deleted takes an
// interaction out of the training buffer, live and by replay, and later
// events on its stream do not bring it back.
func TestProjectionDropsDeletedInteractions(t *testing.T) {
	w := newWorld(t)
	keep := w.record(chatRec{typ: "policy", user: "a", answer: "b", prompt: []int{1}, completion: []int{2}})
	gone := w.record(chatRec{typ: "policy", user: "c", answer: "d", prompt: []int{1}, completion: []int{3}})
	w.evaluate(gone, "policy", 1, 1, true)
	w.append(events.InteractionStream(gone), &events.InteractionDeleted{InteractionID: gone, Source: "api"})
	w.evaluate(gone, "policy", 2, 1, true)
	w.feedback(gone, "x", "")
	p := replay(t, w.store, Retention{})
	snap := p.Snapshot()
	if len(snap) != 1 || snap[0].ID != keep {
		t.Fatalf("buffer after a deletion: %+v", snap)
	}
}
