package distill

import "testing"

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
