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

// A correction ("60 days" for "The refund window is 30 days.") marks the
// other answers of its type that state the corrected span: they are not
// positive examples, anchors or hold-out answers (the self-evaluation,
// which cannot know the policy changed, graded them good). Answers of
// other types, and "130 days", are not marked. A later correction that
// states the span as right again (a change back) clears it.
func TestPipelineLeavesOutAnswersACorrectionContradicts(t *testing.T) {
	w := newWorld(t)
	rec := w.graded
	var old []string
	for range 4 { // before the window: anchor material
		old = append(old, rec("policy", "The refund window is 30 days.", 1))
	}
	other := rec("order_status", "It arrives within 30 days.", 1)
	longer := rec("policy", "Returns of furniture take 130 days.", 1)
	from, _ := w.store.LastPosition(context.Background())
	var inWindow []string
	for range 4 {
		inWindow = append(inWindow, rec("policy", "No, the refund window is 30 days.", 1))
	}
	corrected := rec("policy", "The refund window is 30 days.", 1)
	w.feedback(corrected, "60 days", "")
	w.evaluate(corrected, "policy", 2, -1, true)
	snapshot := func() []*Interaction {
		var all []*Interaction
		for _, it := range replay(t, w.store, Retention{}).Snapshot() {
			all = append(all, &it)
		}
		return all
	}
	// One customer's correction marks the answers, but a changed fact
	// takes two that agree.
	if c, facts, _ := contradicted(snapshot(), 0.5); !slices.Equal(c[inWindow[0]], []replacement{{"30 days", "60 days"}}) || len(facts) != 0 {
		t.Fatalf("after one correction: marked %v, facts %q; want marked (30 days by 60 days), no fact", c[inWindow[0]], facts)
	}
	corrected2 := rec("policy", "The refund window is 30 days.", 1)
	w.feedback(corrected2, "60 days", "")
	w.evaluate(corrected2, "policy", 2, -1, true)
	to, _ := w.store.LastPosition(context.Background())
	cfg := PipelineConfig{HoldOutFraction: 0.3, MinHoldOutPerType: 1, AnchorsPerType: 8}
	ds, err := BuildDataset(context.Background(), replay(t, w.store, Retention{}).Snapshot(), from, to, cfg)
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]string{}
	for _, ex := range append(append([]Example(nil), ds.Train...), ds.HoldOut...) {
		used[ex.Interaction] = ex.Kind
	}
	for _, id := range append(append([]string(nil), old...), inWindow...) {
		if k, ok := used[id]; ok {
			t.Errorf("%s (states the corrected 30 days, graded good) is used as %s", id, k)
		}
	}
	if used[corrected] == "" || used[other] == "" || used[longer] == "" {
		t.Errorf("corrected %q, other type %q, 130 days %q: want all used", used[corrected], used[other], used[longer])
	}
	if ds.Manifest.Stats.Contradicted == 0 || !slices.Equal(ds.Manifest.Contradicted, []string{"policy: 30 days"}) {
		t.Errorf("stats %+v, facts %q: no contradicted answer counted, or not the fact", ds.Manifest.Stats, ds.Manifest.Contradicted)
	}
	// The answers stating the changed fact without feedback of their own
	// are the correction check's stale questions, in store order; the
	// other type's "30 days" and the 130 days are not.
	var stale []string
	for _, q := range ds.Stale {
		stale = append(stale, q.Interaction)
		if !slices.Equal(q.Stale, []string{"30 days"}) || !slices.Equal(q.Replacements, []string{"60 days"}) || q.Kind != KindStale || len(q.Messages) == 0 {
			t.Errorf("stale question %s: %q replaced by %q, kind %s, %d messages", q.Interaction, q.Stale, q.Replacements, q.Kind, len(q.Messages))
		}
	}
	if want := append(append([]string(nil), old...), inWindow...); !slices.Equal(stale, want) {
		t.Errorf("stale questions %q, want %q", stale, want)
	}
	// A corrected span that few answers of its type state is no fact:
	// "50" is right for other arithmetic questions.
	for i := range 24 {
		rec("arithmetic", fmt.Sprintf("The answer is %d.", 100+i), 1)
	}
	fifty := rec("arithmetic", "The answer is 50.", 1)
	wrongFifty := rec("arithmetic", "The answer is 50.", 1)
	w.feedback(wrongFifty, "35", "")
	all := snapshot()
	if c, facts, _ := contradicted(all, 0.5); c[fifty] != nil || c[old[0]] == nil || !slices.Equal(facts, []string{"policy: 30 days"}) {
		t.Fatalf("an arithmetic answer stating 50 (2 of 26) marked %v; a policy answer stating 30 days marked %v; facts %q", c[fifty], c[old[0]], facts)
	}
	// Four arithmetic answers stating the same number, graded c.reward,
	// two of them corrected to the same other number: marked, but no
	// changed fact when the graders already fail them (11: a wrong
	// answer the model repeats), nor when two of the type's five
	// corrections replaced an answer graded good (35: right for some
	// questions).
	for _, c := range []struct {
		number, correction string
		reward             float64
	}{{"11", "12", 0}, {"35", "36", 1}} {
		var ids []string
		for range 4 {
			ids = append(ids, rec("arithmetic", "The answer is "+c.number+".", c.reward))
		}
		w.feedback(ids[0], c.correction, "")
		w.feedback(ids[1], c.correction, "")
		marked, facts, replaced := contradicted(snapshot(), 0.5)
		if marked[ids[2]] == nil || !slices.Equal(facts, []string{"policy: 30 days"}) {
			t.Fatalf("answers stating %s (reward %v), two corrected to %s: marked %v, facts %q; want marked, only the policy's fact",
				c.number, c.reward, c.correction, marked[ids[2]], facts)
		}
		// What most of the type's corrections replaced, graded good or
		// not: 11 (two of the three arithmetic corrections), not 35 (two
		// of five).
		want := map[string][]string{"11": {"arithmetic: 11", "policy: 30 days"}, "35": {"policy: 30 days"}}[c.number]
		if !slices.Equal(replaced, want) {
			t.Fatalf("after the corrections of %s: replaced %q, want %q", c.number, replaced, want)
		}
	}
	// The policy changes back: a correction states 30 days as right.
	for range 2 {
		back := rec("policy", "The refund window is 60 days.", 1)
		w.feedback(back, "30 days", "")
	}
	again := rec("policy", "The refund window is 60 days.", 1)
	c, facts, _ := contradicted(snapshot(), 0.5)
	if c[old[0]] != nil || c[inWindow[0]] != nil || !slices.Equal(c[again], []replacement{{"60 days", "30 days"}}) || !slices.Equal(facts, []string{"policy: 60 days"}) {
		t.Fatalf("after the change back: 30 days marked %v/%v, 60 days marked %v; want false, false, true; facts %q", c[old[0]], c[inWindow[0]], c[again], facts)
	}
}

// The corrections that replace a changed fact are held out as a stratum
// of their own: once two corrected answers agree that "30 days" changed,
// one of them is held out even where the hold-out fraction alone would
// hold out none, so the correction check has a question to ask; the
// other trains, and the type's other interactions follow the fraction.
func TestHoldOutKeepsACorrectionThatReplacesAFact(t *testing.T) {
	w := newWorld(t)
	rec := func(answer string, reward float64) string { return w.graded("policy", answer, reward) }
	for i := range 20 {
		rec(fmt.Sprintf("Support is open %d hours.", i), 1)
	}
	var fixes []string
	for range 3 {
		id := rec("The refund window is 30 days.", 1)
		w.feedback(id, "60 days", "")
		w.evaluate(id, "policy", 2, -1, true)
		fixes = append(fixes, id)
	}
	to, _ := w.store.LastPosition(context.Background())
	ds, err := BuildDataset(context.Background(), replay(t, w.store, Retention{}).Snapshot(), 0, to,
		PipelineConfig{HoldOutFraction: 1e-9, MinHoldOutPerType: -1})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ds.Manifest.Replaced, []string{"policy: 30 days"}) {
		t.Fatalf("replaced %q: the premise, two corrections replacing 30 days, does not hold", ds.Manifest.Replaced)
	}
	held, trained := ids(ds.HoldOut, ""), ids(ds.Train, "")
	var heldFixes []string
	for _, id := range fixes {
		if held[id] {
			heldFixes = append(heldFixes, id)
		} else if !trained[id] {
			t.Errorf("correction %s neither trains nor is held out", id)
		}
	}
	if len(heldFixes) != 1 || len(ds.HoldOut) != 1 {
		t.Fatalf("held out %d examples, %d of them corrections; want the one correction", len(ds.HoldOut), len(heldFixes))
	}
	for _, id := range fixes {
		if hashUnit(id) < hashUnit(heldFixes[0]) {
			t.Errorf("held out %s, not the lowest-hash correction %s (the hold-out is chosen by hash)", heldFixes[0], id)
		}
	}
}
