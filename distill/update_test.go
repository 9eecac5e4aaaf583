package distill

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"citizen/events"
)

// staleQ is a stale question asking user, whose recorded answer states
// stale (replaced by repl); prompt tokens rendered by tok.
func staleQ(t *testing.T, id, user, answer string, stale, repl []string) StaleQuestion {
	t.Helper()
	tok, _ := tinyBase(t)
	msgs, prompt, comp := renderedQA(t, tok, user, answer)
	return StaleQuestion{Example: Example{Interaction: id, Type: "policy", Kind: KindStale, Messages: msgs,
		Answer: events.ChatMessage{Role: "assistant", Content: answer}, PromptTokens: prompt, CompletionTokens: comp,
		BehaviourLogprobs: make([]float32, len(comp))}, Stale: stale, Replacements: repl}
}

// A stale answer is learnt with the changed fact replaced, and only from
// the replacement on: the words before it ("No, the refund window is")
// are context, so the update does not teach a verdict no correction
// gave. Exact duplicates count once (the newest); an answer the
// replacement does not fit is left out.
func TestStaleUpdatesLearnTheReplacementOnly(t *testing.T) {
	tok, _ := tinyBase(t)
	one := []string{"30 days"}
	qs := []StaleQuestion{
		staleQ(t, "a", "I bought a lamp 45 days ago. Can I still return it?", "No, the refund window is 30 days.", one, []string{"60 days"}),
		staleQ(t, "dup", "I bought a lamp 45 days ago. Can I still return it?", "No, the refund window is 30 days.", one, []string{"60 days"}),
		// Two spans read like "60 days": which one is stale is not known.
		staleQ(t, "two", "How long?", "30 days, I repeat: 30 days.", one, []string{"60 days"}),
		// Both of the type's changed statements, replaced once.
		staleQ(t, "both", "What is your refund window?", "The refund window is 30 days.",
			[]string{"the refund window is 30 days", "30 days"}, []string{"the refund window is 60 days", "60 days"}),
	}
	got := staleUpdates(tok, qs, 0, 0, 6, 48, nil)
	var ids []string
	for _, ex := range got {
		ids = append(ids, ex.Interaction)
	}
	if !slices.Equal(ids, []string{"dup", "both"}) {
		t.Fatalf("updates of %v; want dup and both (a is dup's older duplicate, two has two spans)", ids)
	}
	for i, want := range []string{"No, the refund window is 60 days.", "The refund window is 60 days."} {
		ex := got[i]
		ids, _ := answerTokens(tok, ex.Messages, want)
		recorded, _ := answerTokens(tok, ex.Messages, qs[map[int]int{0: 0, 1: 3}[i]].Answer.Content)
		if ex.Kind != KindUpdated || ex.Answer.Content != want || !slices.Equal(ex.CompletionTokens, ids) || ex.Weight != 6 ||
			ex.BehaviourLogprobs != nil || ex.Advantage != 0 {
			t.Fatalf("update %+v; want %q as KindUpdated at weight 6 without behaviour logprobs", ex, want)
		}
		kept, learnt := tok.Decode(ids[:ex.LossFrom]), tok.Decode(ids[ex.LossFrom:])
		if ex.LossFrom == 0 || !slices.Equal(ids[:ex.LossFrom], recorded[:ex.LossFrom]) || strings.Contains(kept, "60") || !strings.HasPrefix(strings.TrimSpace(learnt), "6") {
			t.Fatalf("update %q keeps %q as context and learns %q; want the recorded words up to the replacement kept", want, kept, learnt)
		}
	}
	if got := staleUpdates(tok, qs[:1], len(qs[0].PromptTokens)+3, 0, 6, 48, nil); len(got) != 0 {
		t.Fatalf("an update longer than MaxSeqLen was kept: %+v", got)
	}
}

// lampQuestions are n stale questions "I bought lamp i 45 days ago. Can
// I still return it?" answered "No, the refund window is 30 days." (the
// 30 days replaced by 60), interactions "0" to n-1 in store order.
func lampQuestions(t *testing.T, n int) []StaleQuestion {
	var qs []StaleQuestion
	for i := range n {
		qs = append(qs, staleQ(t, fmt.Sprint(i), fmt.Sprintf("I bought lamp %d 45 days ago. Can I still return it?", i),
			"No, the refund window is 30 days.", []string{"30 days"}, []string{"60 days"}))
	}
	return qs
}

// A cycle keeps the newest limit updates, and they share the total
// weight: each weighs total/n, at most each.
func TestStaleUpdatesShareTheirWeight(t *testing.T) {
	tok, _ := tinyBase(t)
	qs := lampQuestions(t, 10)
	for _, c := range []struct {
		limit  int
		total  float64
		first  string
		n      int
		weight float64
	}{
		{0, 48, "0", 10, 4.8},
		{8, 48, "2", 8, 6},     // 48/8 = 6: at most each
		{4, 48, "6", 4, 6},     // 12 each, capped at 6
		{5, 10, "5", 5, 2},     // 10/5
		{20, 1000, "0", 10, 6}, // no bound to speak of
	} {
		got := staleUpdates(tok, qs, 0, c.limit, 6, c.total, nil)
		if len(got) != c.n || got[0].Interaction != c.first || got[len(got)-1].Interaction != "9" {
			t.Fatalf("limit %d: %d updates from %s; want %d, the newest, from %s", c.limit, len(got), got[0].Interaction, c.n, c.first)
		}
		for _, ex := range got {
			if ex.Weight != c.weight {
				t.Fatalf("limit %d, total %v: weight %v, want %v", c.limit, c.total, ex.Weight, c.weight)
			}
		}
	}
}

// The correction check asks the newest half of the stale questions, at
// most maxCorrectionChecks; the cycle learns only the older ones, and as
// questions arrive none moves back from the training data into the
// check, so no version learnt a question that a later cycle's check asks.
func TestStaleSplitAsksTheNewest(t *testing.T) {
	var qs []StaleQuestion
	for i := range 3*maxCorrectionChecks + 1 {
		qs = append(qs, StaleQuestion{Example: Example{Interaction: fmt.Sprint(i)}})
	}
	for _, c := range []struct{ n, learn int }{
		{0, 0}, {1, 0}, {2, 1}, {31, 15}, {32, 16}, {40, 20}, {64, 32}, {72, 40}, {3*maxCorrectionChecks + 1, 2*maxCorrectionChecks + 1},
	} {
		learn, ask := staleSplit(qs[:c.n])
		if len(learn) != c.learn || len(learn)+len(ask) != c.n || (len(ask) > 0 && ask[0].Interaction != fmt.Sprint(c.learn)) {
			t.Fatalf("%d stale questions: learn %d, ask %d; want the %d oldest learnt, the rest asked", c.n, len(learn), len(ask), c.learn)
		}
	}
	prev := 0
	for n := range len(qs) + 1 {
		learn, ask := staleSplit(qs[:n])
		if len(learn) < prev || len(ask) > maxCorrectionChecks {
			t.Fatalf("%d stale questions: learn %d after %d, ask %d: a question moved back into the check, or the check is over %d", n, len(learn), prev, len(ask), maxCorrectionChecks)
		}
		prev = len(learn)
	}
}

// Example.LossFrom leading completion tokens are context only: no target
// (so neither loss nor KL term) at their positions; the rest keep their
// weights.
func TestLossFromLeavesTheContextOut(t *testing.T) {
	ex := Example{Kind: KindUpdated, PromptTokens: []int{1, 2, 3}, CompletionTokens: []int{4, 5, 6, 7}, Weight: 6, LossFrom: 2}
	o := Objective{SelfDistill: true}
	o.defaults()
	b, err := o.batch([]*Example{&ex}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Position j predicts token j+1: the completion starts at 3, so
	// positions 2..5 predict it; 2 and 3 (tokens 4 and 5) are context.
	if want := []int{-1, -1, -1, -1, 6, 7, -1}; !slices.Equal(b.Targets, want) {
		t.Fatalf("targets %v, want %v", b.Targets, want)
	}
	if b.Weights[4] != 6 || b.Weights[5] != 6 {
		t.Fatalf("weights %v: the learnt tokens lost their weight", b.Weights)
	}
	ex.LossFrom = 0
	if b, err = o.batch([]*Example{&ex}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if want := []int{-1, -1, 4, 5, 6, 7, -1}; !slices.Equal(b.Targets, want) {
		t.Fatalf("LossFrom 0: targets %v, want %v", b.Targets, want)
	}
	if !o.uses(KindUpdated) || !(Objective{SelfDistill: true, KLCoef: 0.5}).klExempt(&ex) {
		t.Fatal("updates are not learnt, or get the KL term that would pull the replaced fact back")
	}
	if o.UpdateWeight = -1; o.uses(KindUpdated) {
		t.Fatal("UpdateWeight -1 still learns updates")
	}
}

// The updates come after the revisions and before the recorded answers
// that drew feedback, at most a quarter of the budget.
func TestFitBudgetPlacesUpdatesAfterRevisions(t *testing.T) {
	var ds Dataset
	for i := range 6 {
		ds.Train = append(ds.Train, Example{Interaction: fmt.Sprint("u", i), Type: "policy", Kind: KindUpdated,
			Sources: []Source{{Position: uint64(10 + i)}}})
	}
	ds.Train = append(ds.Train, Example{Interaction: "p1", Type: "policy", Kind: KindPolicy, Correction: "60 days"},
		Example{Interaction: "p1", Type: "policy", Kind: KindRevised, Correction: "60 days"},
		Example{Interaction: "a", Type: "arithmetic", Kind: KindPolicy})
	ds.FitBudget(8)
	var got []string
	for _, ex := range ds.Train {
		got = append(got, ex.Kind+":"+ex.Interaction)
	}
	want := []string{"revised:p1", "updated:u5", "updated:u4", "policy:p1", "policy:a", "updated:u3", "updated:u2", "updated:u1"}
	if !slices.Equal(got, want) {
		t.Fatalf("kept %v, want %v (updates newest first, a quarter of the budget, then leftovers)", got, want)
	}
}

// A cycle learns the stale answers the correction check does not ask,
// updated; the check asks the newest half.
func TestCycleLearnsStaleAnswersUpdated(t *testing.T) {
	tok, base := tinyBase(t)
	w := newWorld(t)
	var stale []string
	for i := range 12 {
		id := w.recordQA(tok, base, "policy", fmt.Sprintf("I bought lamp %d %d days ago. Can I still return it?", i, 20+i), "No, the refund window is 30 days.")
		w.evaluate(id, "policy", 1, 1, true)
		stale = append(stale, id)
	}
	for i := range 2 {
		w.correctedQA(tok, base, "policy", fmt.Sprintf("What is the refund window for order %d?", i), "The refund window is 30 days.", "60 days", "")
	}
	for i := range 8 {
		id := w.recordQA(tok, base, "arithmetic", fmt.Sprintf("what is %d plus 1?", i), fmt.Sprintf("The answer is %d.", i+1))
		w.evaluate(id, "arithmetic", 1, 1, true)
	}
	{
		d := newDistiller(t, w, func(c *Config) {
			c.CorrectionTemplate = "{correction}"
		})
		catchUp(t, d, w.store)
		wt, err := d.RunCycle(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ds, err := ReadDataset(filepath.Join(d.cfg.DataDir, "datasets", wt.Version))
		if err != nil {
			t.Fatal(err)
		}
		var updated []string
		for _, ex := range ds.Train {
			if ex.Kind == KindUpdated {
				updated = append(updated, ex.Interaction)
				if ex.Answer.Content != "No, the refund window is 60 days." || ex.LossFrom == 0 || ex.Weight != d.cfg.Objective.UpdateWeight {
					t.Fatalf("update %q, LossFrom %d, weight %v", ex.Answer.Content, ex.LossFrom, ex.Weight)
				}
			}
		}
		if !slices.Equal(updated, stale[:6]) || ds.Manifest.KindCounts[KindUpdated] != 6 || d.cfg.Objective.UpdateWeight != 6 || wt.Hyper["update_weight"] != 6 {
			t.Fatalf("updates %v (manifest %v, weight %v); want the 6 oldest stale answers at weight 6", updated, ds.Manifest.KindCounts, d.cfg.Objective.UpdateWeight)
		}
		if c := wt.Corrections; c == nil || c.Stale != 6 {
			t.Fatalf("correction check %+v; want the newest 6 stale questions asked", c)
		}
	}
}

// revise sees only the updates a cycle keeps (the newest limit) and its
// answer replaces the update; what it vetted is learnt whole, the rest
// from the replacement on.
func TestStaleUpdatesRevised(t *testing.T) {
	tok, _ := tinyBase(t)
	qs := lampQuestions(t, 3)
	var asked []string
	revise := func(q *StaleQuestion, updated string) (string, bool) {
		asked = append(asked, q.Interaction+": "+updated)
		if q.Interaction == "1" {
			return updated, false // not vetted: learnt from the replacement on
		}
		return "Yes, the refund window is 60 days.", true
	}
	got := staleUpdates(tok, qs, 0, 2, 6, 48, revise)
	if len(got) != 2 || got[0].Interaction != "1" || got[1].Interaction != "2" ||
		!slices.Equal(asked, []string{"2: No, the refund window is 60 days.", "1: No, the refund window is 60 days."}) {
		t.Fatalf("updates %d (from %s); revise asked %q; want the newest two, each asked once", len(got), got[0].Interaction, asked)
	}
	want, _ := answerTokens(tok, got[1].Messages, "Yes, the refund window is 60 days.")
	if ex := got[1]; ex.Answer.Content != "Yes, the refund window is 60 days." || !slices.Equal(ex.CompletionTokens, want) || ex.LossFrom != 0 {
		t.Fatalf("vetted update %q learnt from token %d, want all of it", ex.Answer.Content, ex.LossFrom)
	}
	if ex := got[0]; ex.Answer.Content != "No, the refund window is 60 days." || ex.LossFrom == 0 {
		t.Fatalf("update %q learnt from token %d, want from the replacement on", ex.Answer.Content, ex.LossFrom)
	}
}
