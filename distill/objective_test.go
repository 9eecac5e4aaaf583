package distill

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"citizen/events"
	"citizen/model"
)

func TestPolicyWeightsTruncatedImportance(t *testing.T) {
	o := Objective{PolicyGradient: true, ImportanceCap: 2}
	ex := &Example{Kind: KindPolicy, Advantage: -0.5, Weight: 1, PromptTokens: []int{1, 2}, CompletionTokens: []int{3, 4, 5},
		BehaviourLogprobs: []float32{-1, -1, -3}}
	for j, w := range o.tokenWeights(ex) {
		if w != -0.5 {
			t.Fatalf("weight %d = %v, want the advantage -0.5", j, w)
		}
	}
	// Revised and anchor examples are supervised with positive weight.
	rev := &Example{Kind: KindRevised, Weight: 1, CompletionTokens: []int{1}}
	if w := (Objective{SelfDistill: true, SelfDistillWeight: 0.7}).tokenWeights(rev); math.Abs(float64(w[0])-0.7) > 1e-6 {
		t.Fatalf("revised weight %v", w)
	}
	// The batch puts the weights on the completion positions only, and
	// the behaviour logprobs (for the ratio the loss computes, truncated
	// at the cap) on the positions that predict them.
	o.KLCoef = 0.1
	b, err := o.batch([]*Example{ex}, [][]float32{{0, -1, -1, -1, -1}})
	if err != nil {
		t.Fatal(err)
	}
	if b.Targets[0] != -1 || b.Targets[1] != 3 || b.Targets[4] != -1 || b.Weights[1] != -0.5 || b.KLCoef != 0.1 || b.RefLogprobs[1] != -1 {
		t.Fatalf("batch %+v", b)
	}
	beh := b.BehaviourLogprobs
	if b.RatioCap != 2 || len(beh) != 5 || beh[1] != -1 || beh[2] != -1 || beh[3] != -3 || !math.IsNaN(float64(beh[0])) || !math.IsNaN(float64(beh[4])) {
		t.Fatalf("behaviour logprobs %v, cap %v", beh, b.RatioCap)
	}
	// Without recorded behaviour logprobs there is no ratio.
	ex.BehaviourLogprobs = nil
	if b, err := o.batch([]*Example{ex}, [][]float32{{0, -1, -1, -1, -1}}); err != nil || b.BehaviourLogprobs != nil {
		t.Fatalf("no behaviour logprobs: %v %v", b.BehaviourLogprobs, err)
	}
	if _, err := o.batch([]*Example{ex}, nil); err == nil {
		t.Fatal("KL without reference logprobs accepted")
	}
}

func TestGateDecide(t *testing.T) {
	g := GateConfig{MaxRegression: 0.1, KLBudget: 0.2}
	parent := map[string]float64{"a": -1, "b": -2}
	if ok, why := g.Decide(map[string]float64{"a": -0.5, "b": -2.05}, parent, 0.1); !ok {
		t.Fatalf("rejected: %s", why)
	}
	if ok, _ := g.Decide(map[string]float64{"a": -0.5, "b": -2.2}, parent, 0.1); ok {
		t.Fatal("regression of b accepted")
	}
	if ok, _ := g.Decide(map[string]float64{"a": -0.5, "b": -2}, parent, 0.3); ok {
		t.Fatal("KL over budget accepted")
	}
	if ok, _ := g.Decide(map[string]float64{}, map[string]float64{}, 0); ok {
		t.Fatal("accepted without any offline evidence")
	}
	// Not-a-number scores or KL compare false with every tolerance; they
	// must reject, not pass.
	nan := math.NaN()
	for _, c := range []struct {
		cand, parent map[string]float64
		kl           float64
	}{
		{map[string]float64{"a": nan, "b": -2}, parent, 0.1},
		{map[string]float64{"a": -1, "b": -2}, map[string]float64{"a": nan, "b": -2}, 0.1},
		{map[string]float64{"a": math.Inf(-1), "b": -2}, parent, 0.1},
		{map[string]float64{"a": -1, "b": -2}, parent, nan},
	} {
		if ok, why := g.Decide(c.cand, c.parent, c.kl); ok || !strings.Contains(why, "not a finite number") {
			t.Fatalf("cand %v parent %v kl %v: accepted=%v %q", c.cand, c.parent, c.kl, ok, why)
		}
	}
}

func TestGateToleranceScalesWithHoldOutSize(t *testing.T) {
	g := GateConfig{MaxRegression: 0.05, RefExamples: 32}
	parent := map[string]float64{"arithmetic": -0.4, "policy": -1, "regression/ll/policy": -1}
	cand := map[string]float64{"arithmetic": -0.5, "policy": -1, "regression/ll/policy": -1}
	// 0.1 below the parent: too much for 32 examples (tolerance 0.05) ...
	if ok, why := g.DecideCounts(cand, parent, map[string]int{"arithmetic": 32}, 0.1); ok || !strings.Contains(why, "arithmetic regressed") {
		t.Fatalf("32 examples: accepted=%v %q", ok, why)
	}
	// ... within it for 2 (0.05·sqrt(16) = 0.2).
	if ok, why := g.DecideCounts(cand, parent, map[string]int{"arithmetic": 2}, 0.1); !ok {
		t.Fatalf("2 examples: rejected: %s", why)
	}
	// A key without a count keeps MaxRegression, as Decide does.
	if ok, _ := g.Decide(cand, parent, 0.1); ok {
		t.Fatal("Decide accepted a 0.1 regression")
	}
	cand["regression/ll/policy"] = -1.1
	if ok, why := g.DecideCounts(cand, parent, map[string]int{"arithmetic": 2, "regression/policy": 4}, 0.1); !ok {
		t.Fatalf("regression/ll/policy on 4 examples (tolerance %.3f): rejected: %s", g.Tolerance(4), why)
	}
	if g.Tolerance(0) != 0.05 || g.Tolerance(100) != 0.05 {
		t.Fatalf("tolerance of unknown or large sizes: %v %v", g.Tolerance(0), g.Tolerance(100))
	}
}

func TestFitBudgetKeepsCorrectionsFirstAndBalancesTheRest(t *testing.T) {
	var ds Dataset
	for i := 0; i < 30; i++ {
		ds.Train = append(ds.Train, Example{Interaction: fmt.Sprint("a", i), Type: "arithmetic", Kind: KindPolicy})
	}
	for i := 0; i < 10; i++ {
		ds.Train = append(ds.Train, Example{Interaction: fmt.Sprint("c", i), Type: "classify", Kind: KindAnchor})
	}
	ds.Train = append(ds.Train, Example{Interaction: "p1", Type: "policy", Kind: KindPolicy, Correction: "60 days"},
		Example{Interaction: "p1", Type: "policy", Kind: KindRevised, Correction: "60 days"},
		Example{Interaction: "p2", Type: "policy", Kind: KindPolicy, Hint: "the refund window is now 60 days"})
	ds.FitBudget(9)
	if len(ds.Train) != 9 || ds.Manifest.Stats.OverBudget != 34 {
		t.Fatalf("kept %d, over budget %d; want 9 and 34", len(ds.Train), ds.Manifest.Stats.OverBudget)
	}
	if ds.Train[0].Kind != KindRevised || ds.Train[1].Correction == "" || ds.Train[2].Hint == "" {
		t.Fatalf("corrections not first: %+v", ds.Train[:3])
	}
	per := map[string]int{}
	for _, ex := range ds.Train[3:] {
		per[ex.Type]++
	}
	if per["arithmetic"] != 3 || per["classify"] != 3 {
		t.Fatalf("the rest is not balanced over types: %v", per)
	}
	ds.FitBudget(0)
	if len(ds.Train) != 9 {
		t.Fatal("budget 0 dropped examples")
	}
	if b := (Hyper{MaxSteps: 50, BatchSeqs: 8, Epochs: 4}).Budget(); b != 100 {
		t.Fatalf("budget of 50 steps x 8 / 4 epochs = %d, want 100", b)
	}
}

// trainTiny trains a fresh adapter on exs with o (20 steps) and returns
// the mean logprob of answer to user under it.
func trainTiny(t *testing.T, exs []Example, o Objective, user, answer string) float64 {
	t.Helper()
	tok, base := tinyBase(t)
	out := t.TempDir()
	_, err := EmbeddedTrainer{}.Train(context.Background(), &TrainJob{Version: "v", OutputDir: out, Dataset: &Dataset{Train: exs},
		Base: base, BaseName: "tiny", LoRA: DefaultLoRA(), Objective: o, Hyper: Hyper{Steps: 20, BatchSeqs: 4, Seed: 1}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := model.LoadPEFT(out, base.Config)
	if err != nil {
		t.Fatal(err)
	}
	return targetLogprob(t, tok, base, a, user, answer)
}

// TestKLLeavesCorrectedExamplesOut: the KL term to the parent applies to
// anchors and plain recorded answers, not to the revisions of corrected
// answers (what a correction teaches is meant to move away from the
// parent), unless KLOnCorrected.
func TestKLLeavesCorrectedExamplesOut(t *testing.T) {
	tok, _ := tinyBase(t)
	qa := func(kind, user, answer, correction string) Example {
		msgs, prompt, comp := renderedQA(t, tok, user, answer)
		return Example{Type: "policy", Kind: kind, Messages: msgs, PromptTokens: prompt, CompletionTokens: comp, Weight: 1, Correction: correction}
	}
	var revised, anchors []Example
	for i := 0; i < 8; i++ {
		revised = append(revised, qa(KindRevised, fmt.Sprintf("what is the refund window for order %d?", 100+i), "The refund window is 60 days.", "60 days"))
		anchors = append(anchors, qa(KindAnchor, fmt.Sprintf("what is the refund window for order %d?", 200+i), "The refund window is 60 days.", ""))
	}
	user, answer := "what is the refund window for order 999?", "The refund window is 60 days."
	sd := Objective{SelfDistill: true, SelfDistillWeight: 1}
	withKL := sd
	withKL.KLCoef = 2
	onCorrected := withKL
	onCorrected.KLOnCorrected = true
	noKL, exempt, kept := trainTiny(t, revised, sd, user, answer), trainTiny(t, revised, withKL, user, answer), trainTiny(t, revised, onCorrected, user, answer)
	t.Logf("revised examples: target logprob without KL %.4f, KL (corrected left out) %.4f, KL on corrected %.4f", noKL, exempt, kept)
	if math.Abs(noKL-exempt) > 1e-3 {
		t.Fatalf("the KL term changed training on corrected examples: %.4f vs %.4f without it", exempt, noKL)
	}
	if kept > noKL-0.01 {
		t.Fatalf("KLOnCorrected did not hold the corrected answer back: %.4f vs %.4f", kept, noKL)
	}
	// Anchors keep the KL term.
	aNoKL, aKL := trainTiny(t, anchors, sd, user, answer), trainTiny(t, anchors, withKL, user, answer)
	t.Logf("anchors: target logprob without KL %.4f, with %.4f", aNoKL, aKL)
	if aKL > aNoKL-0.01 {
		t.Fatalf("the KL term did not act on anchors: %.4f vs %.4f without it", aKL, aNoKL)
	}
}

// The gate scales a key's tolerance by the examples scored for it: an
// example the evaluators skip (too long for the context, no good or
// corrected answer) does not count.
func TestEvalCountsOnlyScoredExamples(t *testing.T) {
	hold := []Example{
		{Type: "t", PromptTokens: []int{1, 2}, CompletionTokens: []int{3}, Reward: 1},
		{Type: "t", PromptTokens: make([]int, 8), CompletionTokens: []int{3}, Reward: 1}, // 9 positions > 8
		{Type: "t", PromptTokens: []int{1, 2}, CompletionTokens: []int{3}, Reward: -1},   // not a good answer
		{Type: "u", PromptTokens: []int{1}, TargetTokens: []int{4, 5}, Reward: -1},       // corrected
	}
	reg := []Example{{Type: "t", PromptTokens: []int{1}, CompletionTokens: []int{2}, Reward: 1}}
	got := evalCounts(hold, reg, 0.5, 8)
	if want := map[string]int{"t": 1, "u": 1, "regression/t": 1}; !maps.Equal(got, want) {
		t.Fatalf("evalCounts = %v, want %v", got, want)
	}
}

// consolidate: a good answer given with lessons in its context becomes a
// target for the prompt without them (the client's messages rendered);
// a bad one, or one without lessons, does not.
func TestConsolidateLearnsTheAnswerWithoutTheLessons(t *testing.T) {
	tok, _ := tinyBase(t)
	client := []events.ChatMessage{{Role: "user", Content: "What is your refund window?"}}
	withLessons, _, err := tok.RenderChat(toTok(events.WithLessons(client, []events.AppliedLesson{{ID: "l1", Statement: "60 days."}})), true)
	if err != nil {
		t.Fatal(err)
	}
	answer := []int{5, 6, 7}
	ds := &Dataset{Train: []Example{
		{Interaction: "a", Kind: KindPolicy, Messages: client, PromptTokens: withLessons, CompletionTokens: answer, Reward: 0.9, Lessons: []string{"l1"}, BehaviourLogprobs: []float32{-1, -1, -1}},
		{Interaction: "b", Kind: KindPolicy, Messages: client, PromptTokens: withLessons, CompletionTokens: answer, Reward: -0.5, Lessons: []string{"l1"}},
		{Interaction: "c", Kind: KindPolicy, Messages: client, PromptTokens: withLessons, CompletionTokens: answer, Reward: 0.9},
	}}
	consolidate(slog.New(slog.DiscardHandler), ds, tok, 0.5, 0, 2)
	if len(ds.Train) != 4 {
		t.Fatalf("%d examples, want one consolidation added", len(ds.Train))
	}
	c := ds.Train[3]
	want, _, _ := tok.RenderChat(toTok(client), true)
	if c.Interaction != "a" || c.Kind != KindRevised || !slices.Equal(c.PromptTokens, want) || !slices.Equal(c.CompletionTokens, answer) || c.BehaviourLogprobs != nil || c.Weight != 0.5 {
		t.Fatalf("consolidation %+v", c)
	}
	if slices.Equal(want, withLessons) {
		t.Fatal("the test's prompts do not differ")
	}
	if !slices.Equal(ds.Manifest.Lessons, []string{"l1"}) || ds.Manifest.SelfDistill["consolidated"] != 1 {
		t.Fatalf("manifest %+v", ds.Manifest)
	}
}
