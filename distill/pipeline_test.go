package distill

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"citizen/memory"
)

func ids(exs []Example, kind string) map[string]bool {
	out := map[string]bool{}
	for _, e := range exs {
		if kind == "" || e.Kind == kind {
			out[e.Interaction] = true
		}
	}
	return out
}

func TestPipelineExcludesUntrainableBothWays(t *testing.T) {
	w := newWorld(t)
	// Trainable first, then re-evaluated as an environment fault: excluded.
	a := w.record(chatRec{typ: "order_status", user: "a", prompt: []int{1, 2}, completion: []int{3}})
	w.evaluate(a, "order_status", 1, 0.9, true)
	w.evaluate(a, "order_status", 2, -1, false)
	// Untrainable first, then re-evaluated as trainable: included.
	b := w.record(chatRec{typ: "order_status", user: "b", prompt: []int{1, 4}, completion: []int{5}})
	w.evaluate(b, "order_status", 1, -1, false)
	w.evaluate(b, "order_status", 2, 0.7, true)
	// A fault with a bad reward stays out: neither good nor bad credit.
	c := w.record(chatRec{typ: "order_status", user: "c", prompt: []int{1, 6}, completion: []int{7}})
	w.evaluate(c, "order_status", 1, -1, false)
	buf := replay(t, w.store, Retention{}).Snapshot()
	to, _ := w.store.LastPosition(context.Background())
	ds, err := BuildDataset(context.Background(), buf, 0, to, PipelineConfig{HoldOutFraction: -1, MinHoldOutPerType: -1})
	if err != nil {
		t.Fatal(err)
	}
	got := ids(ds.Train, "")
	if got[a] || got[c] || !got[b] || len(ds.HoldOut) != 0 {
		t.Fatalf("train %v holdout %d", got, len(ds.HoldOut))
	}
	if ds.Manifest.Stats.Untrainable != 2 {
		t.Fatalf("stats %+v", ds.Manifest.Stats)
	}
}

func TestPipelineDedupe(t *testing.T) {
	w := newWorld(t)
	var first string
	for i := 0; i < 3; i++ { // the same tokens three times
		id := w.record(chatRec{typ: "policy", user: "refund window?", answer: "30 days", prompt: []int{1, 2}, completion: []int{3, 4}})
		w.evaluate(id, "policy", 1, 1, true)
		if i == 0 {
			first = id
		}
	}
	// Different tokens, nearly the same text: only the embedder sees it.
	near := w.record(chatRec{typ: "policy", user: "refund window?", answer: "30 days.", prompt: []int{1, 2}, completion: []int{3, 4, 9}})
	w.evaluate(near, "policy", 1, 1, true)
	other := w.record(chatRec{typ: "policy", user: "what are the support hours on weekends", answer: "9 to 5", prompt: []int{7}, completion: []int{8}})
	w.evaluate(other, "policy", 1, 1, true)
	buf := replay(t, w.store, Retention{}).Snapshot()
	to, _ := w.store.LastPosition(context.Background())
	noHold := PipelineConfig{HoldOutFraction: -1, MinHoldOutPerType: -1}
	ds, err := BuildDataset(context.Background(), buf, 0, to, noHold)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Train) != 3 || ds.Manifest.Stats.Duplicates != 2 || ids(ds.Train, "")[first] {
		t.Fatalf("exact dedupe kept %d (stats %+v); the newest copy should stay", len(ds.Train), ds.Manifest.Stats)
	}
	cfg := noHold
	cfg.Embedder, cfg.DedupeCosine = memory.NewHashEmbedder(256), 0.9
	ds, err = BuildDataset(context.Background(), buf, 0, to, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(ds.Train, ""); len(got) != 2 || !got[other] || !got[near] {
		t.Fatalf("near dedupe kept %v", got)
	}
}

func TestPipelineBalanceHoldOutAnchors(t *testing.T) {
	w := newWorld(t)
	make_ := func(typ string, n int, reward float64) {
		for i := 0; i < n; i++ {
			id := w.record(chatRec{typ: typ, user: fmt.Sprint(typ, i), prompt: []int{1, len(typ), i}, completion: []int{2, i}})
			w.evaluate(id, typ, 1, reward, true)
		}
	}
	make_("arithmetic", 20, 1)
	make_("policy", 20, 1)
	from, _ := w.store.LastPosition(context.Background())
	make_("arithmetic", 40, 0.2)
	make_("policy", 8, 0.2)
	to, _ := w.store.LastPosition(context.Background())
	buf := replay(t, w.store, Retention{}).Snapshot()
	ds, err := BuildDataset(context.Background(), buf, from, to, PipelineConfig{Balance: 1, AnchorsPerType: 5})
	if err != nil {
		t.Fatal(err)
	}
	pol := map[string]int{}
	anchors := map[string]int{}
	for _, e := range ds.Train {
		switch e.Kind {
		case KindPolicy:
			pol[e.Type]++
			if e.Reward != 0.2 || e.Advantage >= 0 {
				t.Fatalf("window example %+v: reward 0.2 below the earlier baseline should have a negative advantage", e)
			}
		case KindAnchor:
			anchors[e.Type]++
			if e.Reward != 1 || e.Weight <= 0 {
				t.Fatalf("anchor %+v", e)
			}
		}
	}
	if pol["arithmetic"] != pol["policy"] || pol["policy"] == 0 || ds.Manifest.Stats.Balanced == 0 {
		t.Fatalf("balance: %v stats %+v", pol, ds.Manifest.Stats)
	}
	if anchors["arithmetic"] != 5 || anchors["policy"] != 5 {
		t.Fatalf("anchors %v", anchors)
	}
	train, hold := ids(ds.Train, ""), ids(ds.HoldOut, "")
	if len(hold) == 0 || ds.Manifest.HoldOutPerType["policy"] == 0 || ds.Manifest.HoldOutPerType["arithmetic"] == 0 {
		t.Fatalf("hold-out per type %v", ds.Manifest.HoldOutPerType)
	}
	for id := range hold {
		if train[id] {
			t.Fatalf("%s is both held out and trained on", id)
		}
	}
	// The same interaction is held out in the next, larger cycle too.
	make_("policy", 10, 0.5)
	to2, _ := w.store.LastPosition(context.Background())
	ds2, err := BuildDataset(context.Background(), replay(t, w.store, Retention{}).Snapshot(), to, to2, PipelineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for id := range ids(ds2.Train, "") {
		if hold[id] {
			t.Fatalf("%s was held out, then trained on", id)
		}
	}
}

func TestManifestRoundTripAndPositions(t *testing.T) {
	w := newWorld(t)
	populate(w, 30)
	to, _ := w.store.LastPosition(context.Background())
	ds, err := BuildDataset(context.Background(), replay(t, w.store, Retention{}).Snapshot(), 0, to, PipelineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := ds.Write(dir); err != nil {
		t.Fatal(err)
	}
	back, err := ReadDataset(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Train, ds.Train) || !reflect.DeepEqual(back.HoldOut, ds.HoldOut) || len(back.Manifest.Sources) != len(ds.Train)+len(ds.HoldOut) {
		t.Fatal("dataset does not round-trip")
	}
	if err := VerifyManifest(context.Background(), w.store, &back.Manifest); err != nil {
		t.Fatal(err)
	}
	bad := back.Manifest
	bad.Sources = append([]ManifestEntry(nil), bad.Sources...)
	bad.Sources[0].Sources = append([]Source{{Position: to + 5, EventID: bad.Sources[0].Sources[0].EventID, Type: bad.Sources[0].Sources[0].Type}}, bad.Sources[0].Sources[1:]...)
	if err := VerifyManifest(context.Background(), w.store, &bad); !errors.Is(err, ErrMissingPosition) {
		t.Fatalf("missing position: %v", err)
	}
	bad.Sources[0].Sources[0].Position = 1 // exists, but holds another event
	bad.Sources[0].Sources[0].EventID = "00000000-0000-0000-0000-000000000001"
	if err := VerifyManifest(context.Background(), w.store, &bad); !errors.Is(err, ErrMissingPosition) {
		t.Fatalf("wrong event at position: %v", err)
	}
}

func TestHoldOutFractionIsUniform(t *testing.T) {
	for _, prefix := range []string{"b", "i", "interaction-"} {
		n := 0
		for i := 0; i < 2000; i++ {
			if hashUnit(fmt.Sprintf("%s%05d", prefix, i)) < 0.2 {
				n++
			}
		}
		if n < 340 || n > 460 { // 400 ± 3 sigma
			t.Fatalf("ids %s*: %d of 2000 held out at fraction 0.2", prefix, n)
		}
	}
}

// A promoted lesson ("60 days" for the refund questions) marks the
// answers it covers that do not state its value: they are not positive
// examples, anchors or hold-out answers (the self-evaluation, which cannot
// know the policy changed, graded them good), and they are the cycle's
// stale questions, in store order. Answers the lesson does not cover (of
// another type), answers that state its value, and answers with feedback
// of their own are not stale; a correction that states the value agrees
// with the lesson (Example.Lesson).
func TestPipelineLeavesOutAnswersALessonContradicts(t *testing.T) {
	w := newWorld(t)
	rec := w.graded
	var old []string
	for range 4 { // before the window: anchor material
		old = append(old, rec("policy", "The refund window is 30 days.", 1))
	}
	other := rec("order_status", "It arrives within 30 days.", 1)
	right := rec("policy", "The refund window is 60 days now.", 1)
	from, _ := w.store.LastPosition(context.Background())
	var inWindow []string
	for range 4 {
		inWindow = append(inWindow, rec("policy", "No, the refund window is 30 days.", 1))
	}
	corrected := rec("policy", "The refund window is 30 days.", 1)
	w.feedback(corrected, "60 days", "")
	w.evaluate(corrected, "policy", 2, -1, true)
	oneOff := rec("policy", "The refund window is 30 days.", 1)
	w.feedback(oneOff, "45 days", "")
	w.evaluate(oneOff, "policy", 2, -1, true)
	to, _ := w.store.LastPosition(context.Background())
	lesson := LessonRef{ID: "l1", Statement: "The refund window is 60 days.", Value: "60 days", TaskType: "policy"}
	cfg := PipelineConfig{HoldOutFraction: 0.3, MinHoldOutPerType: 1, AnchorsPerType: 8,
		Lesson: func(it *Interaction) (LessonRef, bool) { return lesson, it.Type() == "policy" }}
	ds, err := BuildDataset(context.Background(), replay(t, w.store, Retention{}).Snapshot(), from, to, cfg)
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]Example{}
	for _, ex := range append(append([]Example(nil), ds.Train...), ds.HoldOut...) {
		used[ex.Interaction] = ex
	}
	for _, id := range append(append([]string(nil), old...), inWindow...) {
		if ex, ok := used[id]; ok {
			t.Errorf("%s (the lesson contradicts it, graded good) is used as %s", id, ex.Kind)
		}
	}
	for _, id := range []string{corrected, oneOff, other, right} {
		if _, ok := used[id]; !ok {
			t.Errorf("%s is not used", id)
		}
	}
	if ex, ok := used[corrected]; ok && ex.Kind != KindHoldOut && ex.Lesson != "l1" {
		t.Errorf("a correction stating the lesson's value does not agree with it: %+v", ex.Lesson)
	}
	if ex, ok := used[oneOff]; ok && ex.Lesson != "" {
		t.Errorf("a correction of another value agrees with the lesson %q", ex.Lesson)
	}
	if ds.Manifest.Stats.Stale == 0 {
		t.Errorf("stats %+v: no stale answer counted", ds.Manifest.Stats)
	}
	var stale []string
	for _, q := range ds.Stale {
		stale = append(stale, q.Interaction)
		if q.Lesson != lesson || q.Kind != KindStale || len(q.Messages) == 0 {
			t.Errorf("stale question %s: lesson %+v, kind %s, %d messages", q.Interaction, q.Lesson, q.Kind, len(q.Messages))
		}
	}
	if want := append(append([]string(nil), old...), inWindow...); !slices.Equal(stale, want) {
		t.Errorf("stale questions %q, want %q", stale, want)
	}
	// Without a lesson nothing is stale: customers' corrections alone
	// do not make other answers wrong.
	cfg.Lesson = nil
	ds, err = BuildDataset(context.Background(), replay(t, w.store, Retention{}).Snapshot(), from, to, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Stale) != 0 || ds.Manifest.Stats.Stale != 0 {
		t.Errorf("without lessons: %d stale questions, stats %+v", len(ds.Stale), ds.Manifest.Stats)
	}
}
