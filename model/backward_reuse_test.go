package model

import (
	"math"
	"testing"
)

// TestBackwardScratchReuse: the backward scratch is reused between calls;
// gradients must not depend on what an earlier call left in it. With a
// learning rate too small to move the weights, every step must see the
// same gradient norm. (Regression: stale accumulators made the norm grow
// ~8x per step and training diverge.)
func TestBackwardScratchReuse(t *testing.T) {
	c := Tiny3M()
	c.VocabSize, c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers = 64, 32, 48, 2
	c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim, c.MaxPositionEmbeddings = 4, 2, 8, 64
	m, err := NewRandom(c, 9)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := NewTrainer(m, nil, TrainConfig{LR: 1e-20, MinLR: 1e-20})
	if err != nil {
		t.Fatal(err)
	}
	b := NextTokenBatch([][]int{{1, 5, 9, 2, 7, 3}, {4, 4, 8, 1}}, nil, nil)
	var first float64
	for i := 0; i < 4; i++ {
		st, err := tr.Step(b)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = st.GradNorm
			continue
		}
		if math.Abs(st.GradNorm-first) > 1e-6*first {
			t.Fatalf("step %d: gradient norm %g, first step %g", i, st.GradNorm, first)
		}
	}
}
