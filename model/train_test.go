package model

import (
	"math"
	"testing"
)

func TestLRSchedule(t *testing.T) {
	tc := TrainConfig{LR: 1, MinLR: 0.1, WarmupSteps: 4, TotalSteps: 14}
	cases := []struct {
		step int
		want float64
	}{{0, 0.25}, {3, 1}, {4, 1}, {9, 0.55}, {14, 0.1}, {100, 0.1}}
	for _, c := range cases {
		if got := tc.LRAt(c.step); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("LRAt(%d) = %v, want %v", c.step, got, c.want)
		}
	}
}

func TestOverfitFixedBatch(t *testing.T) {
	c := llama(32, 32, 64, 2, 4, 2, 32)
	m, err := NewRandom(c, 1)
	if err != nil {
		t.Fatal(err)
	}
	seqs := [][]int{{1, 5, 9, 13, 17, 21, 25, 29, 3, 7}, {2, 4, 8, 16, 31, 30, 28, 24}, {11, 12, 13, 11, 12, 14}}
	b := NextTokenBatch(seqs, nil, nil)
	tr, err := NewTrainer(m, nil, TrainConfig{LR: 1e-2, WarmupSteps: 10, TotalSteps: 300, WeightDecay: 0.01, GradClip: 1})
	if err != nil {
		t.Fatal(err)
	}
	var first, last StepStats
	for i := 0; i < 300; i++ {
		st, err := tr.Step(b)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = st
		}
		last = st
	}
	t.Logf("loss %.4f -> %.4f (grad norm %.3g)", first.Loss, last.Loss, last.GradNorm)
	if first.Loss < 3 || last.Loss > 0.02 {
		t.Fatalf("did not overfit: loss %.4f -> %.4f", first.Loss, last.Loss)
	}
}
