package distill

import (
	"fmt"
	"slices"
	"testing"
)

// A cycle's token budget cuts sequences per step first, then steps, and
// leaves a cycle within budget alone.
func TestHyperFitTokens(t *testing.T) {
	const smol, tiny = 134_515_008, 3_700_000
	bench := Hyper{MaxSteps: 50}
	for _, c := range []struct {
		name                  string
		h                     Hyper
		n                     int
		mean                  float64
		rehearsal             bool
		params                int
		steps, batch, rehears int
	}{
		{"tiny model: unbounded", bench, 150, 145, false, tiny, 50, 8, 8},
		{"within budget", Hyper{MaxSteps: 50, TrainTokens: 60_000}, 150, 145, false, smol, 50, 8, 8},
		{"fewer sequences per step", bench, 150, 145, false, smol, 50, 2, 8},
		{"then fewer steps", Hyper{}, 1000, 145, false, smol, 64, 2, 8},
		{"rehearsal in proportion", Hyper{MaxSteps: 50, TrainTokens: 30_000}, 150, 100, true, smol, 50, 3, 3},
		{"rehearsal cut, then steps", Hyper{MaxSteps: 50, TrainTokens: 12_000}, 150, 100, true, smol, 40, 2, 1},
		{"rehearsal dropped", Hyper{MaxSteps: 50, TrainTokens: 9_000}, 150, 100, true, smol, 45, 2, -1},
		{"no bound", Hyper{MaxSteps: 50, TrainTokens: -1}, 150, 145, false, smol, 50, 8, 8},
		{"explicit steps", Hyper{Steps: 100, TrainTokens: 10_000}, 150, 100, false, smol, 50, 2, 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := c.h.fitTokens(c.n, c.mean, c.rehearsal, c.params)
			if got := h.steps(c.n); got != c.steps || h.BatchSeqs != c.batch || h.RehearsalSeqs != c.rehears {
				t.Fatalf("steps %d, batch %d, rehearsal %d; want %d, %d, %d (%+v)", got, h.BatchSeqs, h.RehearsalSeqs, c.steps, c.batch, c.rehears, h)
			}
			budget := float64(c.h.TrainTokens)
			if budget == 0 {
				budget = DefaultTrainCompute / float64(c.params)
			}
			r := 0
			if c.rehearsal && h.RehearsalSeqs > 0 {
				r = h.RehearsalSeqs
			}
			if cost := float64(h.steps(c.n)*(h.BatchSeqs+r)) * c.mean; budget > 0 && cost > budget {
				t.Fatalf("cost %v over the budget %v", cost, budget)
			}
			// The dataset budget follows the cut steps and batch.
			if c.h.Steps == 0 && h.Budget() != (h.MaxSteps*h.BatchSeqs+int(h.Epochs)-1)/int(h.Epochs) {
				t.Fatalf("dataset budget %d for %d steps of %d", h.Budget(), h.MaxSteps, h.BatchSeqs)
			}
		})
	}
}

// The hold-out is cut to its token budget round-robin over types, each in
// hash order (the same examples cycle after cycle), keeping every type.
func TestFitHoldOut(t *testing.T) {
	var ds Dataset
	for i := 0; i < 30; i++ {
		typ := []string{"a", "b", "c"}[i%3]
		n := 10
		if typ == "c" {
			n = 50 // one c costs five of the others
		}
		ds.HoldOut = append(ds.HoldOut, Example{Interaction: fmt.Sprintf("i%02d", i), Type: typ, PromptTokens: make([]int, n/2), CompletionTokens: make([]int, n-n/2)})
	}
	all := slices.Clone(ds.HoldOut)
	cut := func(budget float64) []Example {
		d := Dataset{HoldOut: slices.Clone(all)}
		d.FitHoldOut(budget)
		return d.HoldOut
	}
	if got := cut(0); len(got) != 30 {
		t.Fatalf("no budget: %d of 30 kept", len(got))
	}
	if got := cut(1e6); len(got) != 30 {
		t.Fatalf("within budget: %d of 30 kept", len(got))
	}
	got := cut(200)
	tokens, per := 0, map[string]int{}
	for _, ex := range got {
		tokens += len(ex.PromptTokens) + len(ex.CompletionTokens)
		per[ex.Type]++
	}
	if tokens > 200 || per["a"] == 0 || per["b"] == 0 || per["c"] == 0 || per["a"] < 3 {
		t.Fatalf("budget 200: %d tokens, per type %v", tokens, per)
	}
	// Hash order: a type's kept examples are its lowest hashes, and a
	// larger budget keeps a superset.
	for _, typ := range []string{"a", "b", "c"} {
		var hs []float64
		for _, ex := range all {
			if ex.Type == typ {
				hs = append(hs, hashUnit(ex.Interaction))
			}
		}
		slices.Sort(hs)
		var kept []float64
		for _, ex := range got {
			if ex.Type == typ {
				kept = append(kept, hashUnit(ex.Interaction))
			}
		}
		slices.Sort(kept)
		if !slices.Equal(kept, hs[:len(kept)]) {
			t.Fatalf("type %s: kept %v, not its lowest hashes %v", typ, kept, hs)
		}
	}
	more := cut(400)
	for _, ex := range got {
		if !slices.ContainsFunc(more, func(m Example) bool { return m.Interaction == ex.Interaction }) {
			t.Fatalf("%s kept at 200 tokens but not at 400", ex.Interaction)
		}
	}
	// A budget under one example per type still keeps one of each.
	if got := cut(5); len(got) != 3 {
		t.Fatalf("tiny budget: %d kept, want one per type", len(got))
	}
}
