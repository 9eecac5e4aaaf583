package model

import (
	"errors"
	"math"
	"path/filepath"
	"slices"
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

func TestAddSequenceAndSequenceLogprobs(t *testing.T) {
	m := engineTestModel(t)
	seqs := [][]int{{1, 2, 3, 4}, {5, 6, 7}}
	lps, err := m.SequenceLogprobs(seqs, nil)
	if err != nil {
		t.Fatal(err)
	}
	// each sequence alone, through Logits
	for i, s := range seqs {
		logits, _ := m.Logits(&Batch{Tokens: s}, nil)
		V := m.Config.VocabSize
		lp := make([]float32, V)
		if lps[i][0] != 0 {
			t.Errorf("lp[0] = %v", lps[i][0])
		}
		for j := 1; j < len(s); j++ {
			logSoftmaxT(lp, logits[(j-1)*V:j*V], 1)
			if math.Abs(float64(lp[s[j]]-lps[i][j])) > 1e-5 {
				t.Errorf("seq %d token %d: %v vs %v", i, j, lps[i][j], lp[s[j]])
			}
		}
	}
	// AddSequence with per-token annotations equals the hand-built position-aligned batch.
	var b Batch
	b.AddSequence(seqs[0], []bool{false, false, true, true}, []float32{9, 9, 0.5, 2}, nil, 1)
	b.AddSequence(seqs[1], nil, nil, []float32{0, -1, -2}, -1)
	want := Batch{
		Tokens: []int{1, 2, 3, 4, 5, 6, 7}, SeqLens: []int{4, 3}, SeqWeights: []float32{1, -1},
		Targets:     []int{-1, 3, 4, -1, 6, 7, -1},
		Weights:     []float32{1, 0.5, 2, 1, 1, 1, 1},
		RefLogprobs: []float32{0, 0, 0, 0, -1, -2, 0},
	}
	if !slices.Equal(b.Tokens, want.Tokens) || !slices.Equal(b.SeqLens, want.SeqLens) || !slices.Equal(b.Targets, want.Targets) ||
		!slices.Equal(b.Weights, want.Weights) || !slices.Equal(b.RefLogprobs, want.RefLogprobs) || !slices.Equal(b.SeqWeights, want.SeqWeights) {
		t.Errorf("AddSequence built %+v, want %+v", b, want)
	}
}

// Two micro-batches with Norm set to the total equal one batch holding both.
func TestGradientAccumulationMatchesOneBatch(t *testing.T) {
	c := tinyConfig()
	m, _ := NewRandom(c, 2)
	seqs := [][]int{{1, 2, 3, 4}, {5, 6, 7, 8, 9, 10}}
	whole := NextTokenBatch(seqs, nil, nil)
	_, gWhole, _, err := m.gradients(whole, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	sum := make([]float32, len(m.Params))
	for _, s := range seqs {
		b := NextTokenBatch([][]int{s}, nil, nil)
		b.Norm = 8 // 3 + 5 targets
		_, g, _, _ := m.gradients(b, nil, true)
		for i := range g {
			sum[i] += g[i]
		}
	}
	if d := maxAbsDiff(sum, gWhole); d > 1e-6 {
		t.Errorf("accumulated gradient differs by %g", d)
	}
}

func TestNonFiniteStepSkipped(t *testing.T) {
	c := tinyConfig()
	m, _ := NewRandom(c, 3)
	before := slices.Clone(m.Params)
	tr, _ := NewTrainer(m, nil, TrainConfig{LR: 1e-2})
	b := NextTokenBatch([][]int{{1, 2, 3, 4}}, nil, []float32{float32(math.Inf(1))})
	st, err := tr.Step(b)
	if !errors.Is(err, ErrNonFinite) || !st.Skipped || tr.Steps() != 0 {
		t.Fatalf("step with an infinite weight: %v %+v", err, st)
	}
	if !slices.Equal(before, m.Params) {
		t.Fatal("parameters changed")
	}
	// the trainer is still usable
	if _, err := tr.Step(NextTokenBatch([][]int{{1, 2, 3, 4}}, nil, nil)); err != nil || tr.Steps() != 1 {
		t.Fatalf("next step: %v", err)
	}
}

// Saving and restoring the optimizer state resumes training exactly.
func TestTrainerStateResume(t *testing.T) {
	c := tinyConfig()
	b := NextTokenBatch([][]int{{1, 2, 3, 4, 5}, {6, 7, 8}}, nil, nil)
	tc := TrainConfig{LR: 1e-2, WarmupSteps: 2, TotalSteps: 10, WeightDecay: 0.1}
	ref, _ := NewRandom(c, 5)
	trRef, _ := NewTrainer(ref, nil, tc)
	for i := 0; i < 6; i++ {
		trRef.Step(b)
	}

	m, _ := NewRandom(c, 5)
	tr, _ := NewTrainer(m, nil, tc)
	for i := 0; i < 3; i++ {
		tr.Step(b)
	}
	dir := t.TempDir()
	if _, err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "optimizer.safetensors")
	if err := tr.SaveState(state); err != nil {
		t.Fatal(err)
	}
	m2, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	tr2, _ := NewTrainer(m2, nil, tc)
	if err := tr2.LoadState(state); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		tr2.Step(b)
	}
	if !bitsEqual(m2.Params, ref.Params) || tr2.Steps() != 6 {
		t.Errorf("resumed training differs from uninterrupted training (steps %d)", tr2.Steps())
	}
	// state of another shape is refused
	a, _ := NewAdapter("a", c, LoRAConfig{Rank: 2, Alpha: 2, TargetModules: []string{"q_proj"}}, 1)
	trA, _ := NewTrainer(m2, a, tc)
	if err := trA.LoadState(state); !errors.Is(err, ErrCheckpoint) {
		t.Errorf("adapter trainer loaded a full-model state: %v", err)
	}
}
