package model

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// tinyConfig has grouped-query attention (4 query heads share 2 KV heads) and untied embeddings so
// every op and both head variants are exercised.
func tinyConfig() Config {
	c := llama(13, 8, 12, 2, 4, 2, 16)
	c.HeadDim = 4
	c.TieWordEmbeddings = false
	return c
}

func randSlice(r *rand.Rand, n int, std float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * std)
	}
	return v
}

// Finite differences run in float32 arithmetic, so the tolerances account for rounding: with
// central differences at step h the rounding error of the loss (≈1e-7·|L|) divided by h dominates.
const (
	fdStep   = 1e-2
	fdAbsTol = 2e-3
	fdRelTol = 2e-2
)

func closeGrad(analytic, numeric float64) bool {
	return math.Abs(analytic-numeric) <= fdAbsTol+fdRelTol*math.Max(math.Abs(analytic), math.Abs(numeric))
}

// checkOp verifies backward of y = f(x) against central differences of L = Σ r⊙y for random r.
// f computes y from x; back computes dx from dy (dx is zeroed before).
func checkOp(t *testing.T, name string, x []float32, ny int, f func(x, y []float32), back func(dx, dy []float32)) {
	t.Helper()
	r := rand.New(rand.NewPCG(7, 7))
	proj := randSlice(r, ny, 1)
	lossOf := func() float64 {
		y := make([]float32, ny)
		f(x, y)
		var s float64
		for i := range y {
			s += float64(proj[i]) * float64(y[i])
		}
		return s
	}
	dx := make([]float32, len(x))
	back(dx, proj)
	bad := 0
	for i := range x {
		old := x[i]
		x[i] = old + fdStep
		lp := lossOf()
		x[i] = old - fdStep
		lm := lossOf()
		x[i] = old
		num := (lp - lm) / (2 * fdStep)
		if !closeGrad(float64(dx[i]), num) {
			if bad < 5 {
				t.Errorf("%s: d/dx[%d] analytic %.6g numeric %.6g", name, i, dx[i], num)
			}
			bad++
		}
	}
}

func TestOpGradients(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const T, C = 5, 8
	t.Run("rmsnorm/x", func(t *testing.T) {
		w := randSlice(r, C, 1)
		x := randSlice(r, T*C, 1)
		rstd := make([]float32, T)
		checkOp(t, "rmsnorm", x, T*C, func(x, y []float32) { rmsnormForward(y, rstd, x, w, T, C, 1e-5) },
			func(dx, dy []float32) {
				y := make([]float32, T*C)
				rmsnormForward(y, rstd, x, w, T, C, 1e-5)
				rmsnormBackward(dx, nil, dy, x, w, rstd, T, C)
			})
	})
	t.Run("rmsnorm/w", func(t *testing.T) {
		w := randSlice(r, C, 1)
		x := randSlice(r, T*C, 1)
		rstd := make([]float32, T)
		checkOp(t, "rmsnorm.w", w, T*C, func(w, y []float32) { rmsnormForward(y, rstd, x, w, T, C, 1e-5) },
			func(dw, dy []float32) {
				y := make([]float32, T*C)
				rmsnormForward(y, rstd, x, w, T, C, 1e-5)
				rmsnormBackward(make([]float32, T*C), dw, dy, x, w, rstd, T, C)
			})
	})
	t.Run("rope", func(t *testing.T) {
		c := tinyConfig()
		rt := newRopeTable(c)
		nh, hd := 2, c.HeadDim
		pos := []int{0, 3, 1, 7, 15}
		x := randSlice(r, T*nh*hd, 1)
		checkOp(t, "rope", x, T*nh*hd, func(x, y []float32) { rowsToHeads(y, x, T, nh, hd, pos, rt) },
			func(dx, dy []float32) { headsToRows(dx, dy, T, nh, hd, pos, rt) })
	})
	t.Run("swiglu", func(t *testing.T) {
		n := 20
		g, u := randSlice(r, n, 2), randSlice(r, n, 1)
		x := append(append([]float32(nil), g...), u...)
		checkOp(t, "swiglu", x, n, func(x, y []float32) { swigluForward(y, x[:n], x[n:], n) },
			func(dx, dy []float32) { swigluBackward(dx[:n], dx[n:], dy, x[:n], x[n:], n) })
	})
	for _, blk := range []int{64, 2, 3} {
		t.Run(fmt.Sprintf("attention/block=%d", blk), func(t *testing.T) {
			defer func(old int) { attBlock = old }(attBlock)
			attBlock = blk
			testAttentionGrad(t, r)
		})
	}
	t.Run("linear+lora", func(t *testing.T) {
		in, out, rank := 6, 5, 3
		var s float32 = 1.5
		// x = [input, W, A, B]
		nx, nw, na, nb := T*in, out*in, rank*in, out*rank
		x := randSlice(r, nx+nw+na+nb, 1)
		parts := func(x []float32) ([]float32, []float32, []float32, []float32) {
			return x[:nx], x[nx : nx+nw], x[nx+nw : nx+nw+na], x[nx+nw+na:]
		}
		u := make([]float32, T*rank)
		fwd := func(x, y []float32) {
			xi, w, a, b := parts(x)
			linearForward(y, xi, w, T, in, out)
			loraForward(y, u, xi, a, b, T, in, out, rank, s)
		}
		checkOp(t, "linear+lora", x, T*out, fwd, func(dx, dy []float32) {
			xi, w, a, b := parts(x)
			fwd(x, make([]float32, T*out))
			dxi, dw, da, db := parts(dx)
			linearBackward(dxi, dw, dy, xi, w, T, in, out, true)
			loraBackward(dxi, da, db, make([]float32, (T+in)*rank), dy, xi, u, a, b, T, in, out, rank, s)
		})
	})
}

// testBatch packs three sequences with a loss mask, per-token and per-sequence weights (one
// negative, as advantage weights can be) and a KL term.
func testBatch(c Config, r *rand.Rand) *Batch {
	seqs := [][]int{{1, 2, 3, 4, 5}, {6, 7}, {8, 9, 10, 11, 12, 0}}
	mask := [][]bool{{false, false, true, true, true}, nil, {false, true, true, false, true, true}}
	b := NextTokenBatch(seqs, mask, []float32{1, -0.5, 2})
	b.Weights = make([]float32, len(b.Tokens))
	b.RefLogprobs = make([]float32, len(b.Tokens))
	for i := range b.Weights {
		b.Weights[i] = 0.5 + r.Float32()
		b.RefLogprobs[i] = -2 - r.Float32()
	}
	b.KLCoef = 0.3
	return b
}

func TestModelGradients(t *testing.T) {
	c := tinyConfig()
	c.InitializerRange = 0.5 // large weights give gradients well above the rounding noise
	m, err := NewRandom(c, 3)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(4, 4))
	for i, lw := range m.W.Layers { // non-trivial norm weights
		for j := range lw.InputNorm {
			m.W.Layers[i].InputNorm[j] = 0.5 + r.Float32()
			m.W.Layers[i].PostNorm[j] = 0.5 + r.Float32()
		}
	}
	b := testBatch(c, r)
	lora, err := NewAdapter("t", c, LoRAConfig{Rank: 2, Alpha: 4, TargetModules: LoRAModules}, 5)
	if err != nil {
		t.Fatal(err)
	}
	for i := range lora.Params { // B ≠ 0 so gradients of A are non-zero
		lora.Params[i] = float32(r.NormFloat64() * 0.3)
	}
	for _, withLoRA := range []bool{false, true} {
		var ad *Adapter
		if withLoRA {
			ad = lora
		}
		res, g, lg, err := m.gradients(b, ad, true)
		if err != nil {
			t.Fatal(err)
		}
		if res.KL <= 0 || math.IsNaN(res.Loss) {
			t.Fatalf("loss %v kl %v", res.Loss, res.KL)
		}
		lossAt := func() float64 {
			res, err := m.Evaluate(b, ad)
			if err != nil {
				t.Fatal(err)
			}
			return res.Loss
		}
		check := func(name string, params, grads []float32, idx []int) {
			bad := 0
			for _, i := range idx {
				old := params[i]
				params[i] = old + fdStep
				lp := lossAt()
				params[i] = old - fdStep
				lm := lossAt()
				params[i] = old
				num := (lp - lm) / (2 * fdStep)
				if !closeGrad(float64(grads[i]), num) {
					if bad < 3 {
						t.Errorf("lora=%v %s[%d]: analytic %.6g numeric %.6g", withLoRA, name, i, grads[i], num)
					}
					bad++
				}
			}
		}
		for _, ts := range c.tensors() {
			var idx []int
			for k := 0; k < 6; k++ {
				idx = append(idx, ts.offset+r.IntN(ts.size()))
			}
			check(ts.name, m.Params, g, idx)
		}
		if withLoRA {
			// With the base frozen (no base gradients, so none below the first layer) the
			// adapter's gradients are the same.
			_, _, lf, err := m.gradients(b, ad, false)
			if err != nil {
				t.Fatal(err)
			}
			for i := range lg {
				if d := math.Abs(float64(lf[i] - lg[i])); d > 1e-6*math.Abs(float64(lg[i]))+1e-9 {
					t.Fatalf("lora[%d]: %g with the base frozen, %g with base gradients", i, lf[i], lg[i])
				}
			}
			var idx []int
			for k := 0; k < 60; k++ {
				idx = append(idx, r.IntN(len(lora.Params)))
			}
			check("lora", lora.Params, lg, idx)
		}
	}
}

func TestTiedEmbeddingGradient(t *testing.T) {
	c := tinyConfig()
	c.TieWordEmbeddings = true
	c.InitializerRange = 0.5
	m, _ := NewRandom(c, 9)
	r := rand.New(rand.NewPCG(1, 1))
	b := testBatch(c, r)
	_, g, _, err := m.gradients(b, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 20; k++ {
		i := r.IntN(len(m.W.Embed))
		old := m.Params[i]
		m.Params[i] = old + fdStep
		lp, _ := m.Evaluate(b, nil)
		m.Params[i] = old - fdStep
		lm, _ := m.Evaluate(b, nil)
		m.Params[i] = old
		num := (lp.Loss - lm.Loss) / (2 * fdStep)
		if !closeGrad(float64(g[i]), num) {
			t.Errorf("tied embed[%d]: analytic %.6g numeric %.6g", i, g[i], num)
		}
	}
}

func testAttentionGrad(t *testing.T, r *rand.Rand) {
	H, KV, hd := 4, 2, 4
	seqLens := []int{3, 1, 7}
	T := 11
	spans, attSize := makeSpans(seqLens, H)
	nq, nkv := H*T*hd, KV*T*hd
	x := randSlice(r, nq+2*nkv, 1)
	att := make([]float32, attSize)
	fwd := func(x, y []float32) {
		attentionForward(y, att, x[:nq], x[nq:nq+nkv], x[nq+nkv:], spans, T, H, KV, hd)
	}
	checkOp(t, "attention", x, nq, fwd, func(dx, dy []float32) {
		fwd(x, make([]float32, nq))
		attentionBackward(dx[:nq], dx[nq:nq+nkv], dx[nq+nkv:], dy, att, x[:nq], x[nq:nq+nkv], x[nq+nkv:], spans, T, H, KV, hd)
	})
}

// A NaN reference logprob leaves its position out of the KL term: a batch
// whose second sequence has NaN references has the loss and gradients of
// the same batch with that sequence's KL term removed by hand (its
// references set to the model's own logprobs, where k3 and its gradient
// are zero).
func TestKLSkipsNaNReferences(t *testing.T) {
	c := tinyConfig()
	m, err := NewRandom(c, 3)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(4, 4))
	nan := testBatch(c, r)
	own := *nan
	own.RefLogprobs = append([]float32(nil), nan.RefLogprobs...)
	ev, err := m.Evaluate(nan, nil)
	if err != nil {
		t.Fatal(err)
	}
	start, end := nan.SeqLens[0], nan.SeqLens[0]+nan.SeqLens[1]
	for t := start; t < end; t++ {
		nan.RefLogprobs[t] = float32(math.NaN())
		own.RefLogprobs[t] = ev.Logprobs[t]
	}
	rn, gn, _, err := m.gradients(nan, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	ro, go_, _, err := m.gradients(&own, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if math.IsNaN(rn.Loss) || math.Abs(rn.Loss-ro.Loss) > 1e-6 {
		t.Fatalf("loss with NaN references %v, with the model's own %v", rn.Loss, ro.Loss)
	}
	for i := range gn {
		if d := math.Abs(float64(gn[i] - go_[i])); math.IsNaN(float64(gn[i])) || d > 1e-5 {
			t.Fatalf("gradient %d: %v with NaN references, %v with the model's own", i, gn[i], go_[i])
		}
	}
}

// The importance ratio is computed in the loss's own forward pass and held
// constant: a batch with behaviour logprobs has the loss and gradients of
// the same batch whose weights were multiplied by the truncated ratio by
// hand, from the model's logprobs measured beforehand. NaN behaviour
// logprobs leave the weight alone.
func TestBehaviourRatioInThePass(t *testing.T) {
	c := tinyConfig()
	m, err := NewRandom(c, 3)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(6, 6))
	b := testBatch(c, r)
	b.RatioCap = 1.5
	ev, err := m.Evaluate(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	hand := *b
	hand.Weights = append([]float32(nil), b.Weights...)
	b.BehaviourLogprobs = make([]float32, len(b.Tokens))
	capped := 0
	for i := range b.BehaviourLogprobs {
		switch {
		case i%4 == 3:
			b.BehaviourLogprobs[i] = float32(math.NaN())
		default:
			b.BehaviourLogprobs[i] = ev.Logprobs[i] + float32(r.NormFloat64())
			rho := math.Exp(float64(ev.Logprobs[i] - b.BehaviourLogprobs[i]))
			if rho > 1.5 {
				rho, capped = 1.5, capped+1
			}
			hand.Weights[i] *= float32(rho)
		}
	}
	if capped == 0 {
		t.Fatal("no ratio reached the cap: the test does not exercise it")
	}
	rb, gb, _, err := m.gradients(b, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	rh, gh, _, err := m.gradients(&hand, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(rb.Loss-rh.Loss) > 1e-5*math.Max(1, math.Abs(rh.Loss)) {
		t.Fatalf("loss with behaviour logprobs %v, weighted by hand %v", rb.Loss, rh.Loss)
	}
	for i := range gb {
		if d := math.Abs(float64(gb[i] - gh[i])); math.IsNaN(float64(gb[i])) || d > 1e-5 {
			t.Fatalf("gradient %d: %v with behaviour logprobs, %v weighted by hand", i, gb[i], gh[i])
		}
	}
	// A malformed length is refused.
	b.BehaviourLogprobs = b.BehaviourLogprobs[:3]
	if _, err := m.Evaluate(b, nil); !errors.Is(err, ErrBatch) {
		t.Fatalf("short behaviour logprobs: %v", err)
	}
}

// AddBehaviour aligns per-token behaviour logprobs with the positions that
// predict them, NaN elsewhere and in sequences without any.
func TestAddBehaviourAlignment(t *testing.T) {
	b := &Batch{}
	b.AddSequence([]int{1, 2, 3}, []bool{false, false, true}, nil, nil, 1)
	b.AddSequence([]int{4, 5, 6, 7}, []bool{false, true, false, true}, nil, nil, 1)
	b.AddBehaviour([]float32{9, -1, 9, -3})
	b.AddSequence([]int{8, 9}, nil, nil, nil, 1)
	want := []float64{math.NaN(), math.NaN(), math.NaN(), -1, math.NaN(), -3, math.NaN(), math.NaN(), math.NaN()}
	if len(b.BehaviourLogprobs) != len(want) {
		t.Fatalf("%d behaviour logprobs for %d tokens", len(b.BehaviourLogprobs), len(want))
	}
	for i, w := range want {
		g := float64(b.BehaviourLogprobs[i])
		if math.IsNaN(w) != math.IsNaN(g) || !math.IsNaN(w) && g != w {
			t.Fatalf("position %d: %v, want %v (all %v)", i, g, w, b.BehaviourLogprobs)
		}
	}
}
