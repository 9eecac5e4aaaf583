package model

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSampleTokenFrequencies draws 200k samples and compares frequencies with the distribution
// (tolerance: 5 standard errors), with and without top-p, and checks greedy and top logprobs.
func TestSampleTokenFrequencies(t *testing.T) {
	probs := []float64{0.5, 0.25, 0.15, 0.07, 0.03}
	z := make([]float32, len(probs))
	for i, p := range probs {
		z[i] = float32(math.Log(p)) + 3 // logits up to a constant
	}
	lp := make([]float32, len(z))
	logSoftmaxT(lp, z, 1)
	for i := range probs {
		if math.Abs(math.Exp(float64(lp[i]))-probs[i]) > 1e-6 {
			t.Fatalf("log-softmax %d: %v", i, math.Exp(float64(lp[i])))
		}
	}
	const n = 200000
	check := func(name string, topP float32, want []float64) {
		rng := rand.New(rand.NewPCG(1, 2))
		var idx []int
		counts := make([]float64, len(want))
		for i := 0; i < n; i++ {
			counts[sampleToken(lp, false, topP, rng, &idx)]++
		}
		for i, w := range want {
			got := counts[i] / n
			se := math.Sqrt(w*(1-w)/n) + 1e-9
			if math.Abs(got-w) > 5*se {
				t.Errorf("%s: token %d frequency %.4f, want %.4f", name, i, got, w)
			}
		}
	}
	check("full", 0, probs)
	// top-p 0.8 keeps {0.5, 0.25, 0.15} (cumulative 0.9 ≥ 0.8), renormalised
	check("top-p", 0.8, []float64{0.5 / 0.9, 0.25 / 0.9, 0.15 / 0.9, 0, 0})
	if g := sampleToken(lp, true, 0, rand.New(rand.NewPCG(0, 0)), nil); g != 0 {
		t.Errorf("greedy picked %d", g)
	}
	// temperature 0.5 squares and renormalises the probabilities
	logSoftmaxT(lp, z, 0.5)
	var norm float64
	for _, p := range probs {
		norm += p * p
	}
	if got := math.Exp(float64(lp[1])); math.Abs(got-probs[1]*probs[1]/norm) > 1e-6 {
		t.Errorf("temperature 0.5: p1 = %v", got)
	}
	top := topLogprobs(lp, 3)
	if len(top) != 3 || top[0].ID != 0 || top[1].ID != 1 || top[2].ID != 2 {
		t.Errorf("top logprobs %+v", top)
	}
}

func TestExpfAccuracy(t *testing.T) {
	worst := 0.0
	for x := float32(-87); x < 88; x += 0.0007 {
		want := math.Exp(float64(x))
		worst = math.Max(worst, math.Abs(float64(expf(x))-want)/want)
	}
	if worst > 2e-7 {
		t.Errorf("expf relative error %g > 2e-7", worst)
	}
	if expf(float32(math.Inf(-1))) != 0 || expf(-200) != 0 || !math.IsInf(float64(expf(100)), 1) {
		t.Error("expf limits")
	}
}
