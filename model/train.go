package model

import (
	"errors"
	"fmt"
	"math"

	"citizen/model/safetensors"
)

// ErrNonFinite is returned by Step when the loss or the gradient is NaN or infinite; the update
// is skipped and the parameters are left unchanged.
var ErrNonFinite = errors.New("model: non-finite loss or gradient")

// TrainConfig holds AdamW and schedule settings. Zero fields get the defaults noted.
type TrainConfig struct {
	LR          float64 // peak learning rate (default 3e-4)
	MinLR       float64 // floor of the cosine decay (default LR/10)
	WarmupSteps int     // linear warm-up from 0 to LR
	TotalSteps  int     // cosine decay ends here; 0 means constant LR after warm-up
	Beta1       float64 // default 0.9
	Beta2       float64 // default 0.95
	Eps         float64 // default 1e-8
	WeightDecay float64 // decoupled; applied to matrices only (not norms), default 0
	GradClip    float64 // clip the global gradient norm to this; 0 disables
}

func (tc *TrainConfig) defaults() {
	if tc.LR == 0 {
		tc.LR = 3e-4
	}
	if tc.MinLR == 0 {
		tc.MinLR = tc.LR / 10
	}
	if tc.Beta1 == 0 {
		tc.Beta1 = 0.9
	}
	if tc.Beta2 == 0 {
		tc.Beta2 = 0.95
	}
	if tc.Eps == 0 {
		tc.Eps = 1e-8
	}
}

// LRAt is the learning rate at step (0-based): linear warm-up over WarmupSteps, then cosine decay
// from LR to MinLR at TotalSteps (constant LR when TotalSteps is 0), MinLR afterwards.
func (tc TrainConfig) LRAt(step int) float64 {
	tc.defaults()
	if step < tc.WarmupSteps {
		return tc.LR * float64(step+1) / float64(tc.WarmupSteps)
	}
	if tc.TotalSteps <= 0 {
		return tc.LR
	}
	if step >= tc.TotalSteps {
		return tc.MinLR
	}
	span := tc.TotalSteps - tc.WarmupSteps
	if span <= 0 {
		return tc.MinLR
	}
	p := float64(step-tc.WarmupSteps) / float64(span)
	return tc.MinLR + 0.5*(tc.LR-tc.MinLR)*(1+math.Cos(math.Pi*p))
}

// StepStats describes one optimizer step.
type StepStats struct {
	Step     int     // steps taken, after this one
	Loss     float64 // objective, summed over the accumulated micro-batches
	NLL      float64 // mean NLL of the last micro-batch
	GradNorm float64 // global gradient norm before clipping
	LR       float64
	Tokens   int  // target positions in the accumulated micro-batches
	Skipped  bool // the gradient was not finite: no update was applied (see ErrNonFinite)
}

// Trainer trains either the whole model (adapter nil) or only a LoRA adapter (base frozen; its
// gradients are not even computed, but gradients still flow through the base to the inputs).
// Gradients, and AdamW's first and second moments, are flat buffers mirroring the trained
// parameters. A Trainer is not safe for concurrent use, and nothing else may read the trained
// parameters while Step or Update runs. With an adapter the base model is only read, so it may be
// shared with an Engine that is serving (register a Clone of the adapter to publish it).
type Trainer struct {
	Model   *Model
	Adapter *Adapter
	Config  TrainConfig

	params, grad, m1, m2 []float32
	decay                []bool // per parameter block: weight decay applies
	blocks               []int  // block boundaries aligned with decay
	gw                   *Weights
	lg                   [][numModules]loraPair
	step                 int
	pending              StepStats
	a                    acts
}

// NewTrainer prepares training of m, or of adapter when it is not nil.
func NewTrainer(m *Model, adapter *Adapter, tc TrainConfig) (*Trainer, error) {
	tc.defaults()
	t := &Trainer{Model: m, Adapter: adapter, Config: tc}
	if adapter != nil {
		if err := adapter.compatible(m.Config); err != nil {
			return nil, err
		}
		t.params = adapter.Params
		t.grad = make([]float32, len(t.params))
		_, t.lg = bindAdapter(adapter.Base, adapter.Config, t.grad)
		t.blocks = []int{0, len(t.params)}
		t.decay = []bool{true}
	} else {
		if m.Quant != nil {
			return nil, fmt.Errorf("%w: full-parameter training needs float32 weights (Dequantize)", ErrQuantized)
		}
		t.params = m.Params
		t.grad = make([]float32, len(t.params))
		w := bindWeights(m.Config, t.grad)
		t.gw = &w
		t.blocks = []int{0}
		for _, ts := range m.Config.tensors() {
			t.blocks = append(t.blocks, ts.offset+ts.size())
			t.decay = append(t.decay, ts.matrix)
		}
	}
	t.m1 = make([]float32, len(t.params))
	t.m2 = make([]float32, len(t.params))
	return t, nil
}

// Steps returns the number of optimizer steps taken.
func (t *Trainer) Steps() int { return t.step }

// Accumulate runs forward and backward over b and adds its gradients to the pending ones
// (gradient accumulation). Call Update to apply them. Each micro-batch's loss is normalised by its
// own Batch.Norm (default: its own target count), so to get the mean over all micro-batches set
// Norm to the total number of target positions in every micro-batch.
func (t *Trainer) Accumulate(b *Batch) (LossResult, error) {
	if err := t.Model.check(b, t.Adapter, true); err != nil {
		return LossResult{}, err
	}
	t.Model.forward(&t.a, b, t.Adapter, false, true)
	res := t.Model.loss(&t.a, b)
	t.Model.backward(&t.a, b, t.Adapter, t.gw, t.lg)
	t.pending.Loss += res.Loss
	t.pending.NLL = res.NLL
	t.pending.Tokens += res.Tokens
	return res, nil
}

// Update clips the accumulated gradient to GradClip, applies one AdamW step at the scheduled
// learning rate and zeroes the gradient. A non-finite gradient is dropped without an update
// (StepStats.Skipped; the step count does not advance).
func (t *Trainer) Update() StepStats {
	var ss float64
	for _, g := range t.grad {
		ss += float64(g) * float64(g)
	}
	norm := math.Sqrt(ss)
	if math.IsNaN(norm) || math.IsInf(norm, 0) || math.IsNaN(t.pending.Loss) || math.IsInf(t.pending.Loss, 0) {
		clear(t.grad)
		st := t.pending
		st.Step, st.GradNorm, st.Skipped = t.step, norm, true
		t.pending = StepStats{}
		return st
	}
	clip := float32(1)
	if t.Config.GradClip > 0 && norm > t.Config.GradClip {
		clip = float32(t.Config.GradClip / norm)
	}
	lr := t.Config.LRAt(t.step)
	t.step++
	b1, b2 := t.Config.Beta1, t.Config.Beta2
	bc1 := 1 - math.Pow(b1, float64(t.step))
	bc2 := 1 - math.Pow(b2, float64(t.step))
	for bi := range t.decay {
		lo, hi := t.blocks[bi], t.blocks[bi+1]
		wd := float32(0)
		if t.decay[bi] {
			wd = float32(lr * t.Config.WeightDecay)
		}
		adamw(t.params[lo:hi], t.grad[lo:hi], t.m1[lo:hi], t.m2[lo:hi], clip, float32(lr), float32(b1), float32(b2), float32(bc1), float32(bc2), float32(t.Config.Eps), wd)
	}
	clear(t.grad)
	st := t.pending
	st.Step, st.GradNorm, st.LR = t.step, norm, lr
	t.pending = StepStats{}
	return st
}

// adamw updates p in place: m = β1·m + (1−β1)·g; v = β2·v + (1−β2)·g²;
// p −= lr·(m̂/(√v̂+ε)) + wd·p with m̂ = m/bc1, v̂ = v/bc2 and g scaled by clip. It is written as
// p −= (lr/bc1)·m / (√v·(1/√bc2) + ε) + wd·p: one square root and one division per element.
func adamw(p, g, m, v []float32, clip, lr, b1, b2, bc1, bc2, eps, wd float32) {
	step := lr / bc1
	rbc2 := float32(1 / math.Sqrt(float64(bc2)))
	c1, c2 := 1-b1, 1-b2
	keep := 1 - wd
	parallelRows(len(p), 16, func(lo, hi int) {
		p, g, m, v := p[lo:hi], g[lo:hi], m[lo:hi], v[lo:hi]
		for i := range p {
			gi := g[i] * clip
			mi := b1*m[i] + c1*gi
			vi := b2*v[i] + c2*gi*gi
			m[i], v[i] = mi, vi
			p[i] = p[i]*keep - step*mi/(float32(math.Sqrt(float64(vi)))*rbc2+eps)
		}
	})
}

// Step is Accumulate(b) followed by Update; it returns ErrNonFinite when Update skipped.
func (t *Trainer) Step(b *Batch) (StepStats, error) {
	if _, err := t.Accumulate(b); err != nil {
		return StepStats{}, err
	}
	st := t.Update()
	if st.Skipped {
		return st, fmt.Errorf("%w: loss %v, gradient norm %v (step %d skipped)", ErrNonFinite, st.Loss, st.GradNorm, st.Step)
	}
	return st, nil
}

// SaveState writes the optimizer state to path (safetensors): the flat AdamW moments "exp_avg"
// and "exp_avg_sq" (same order as the trained parameters) and the step count in the metadata, so
// training can resume with LoadState. The parameters themselves are saved with Model.Save or
// Adapter.SavePEFT.
func (t *Trainer) SaveState(path string) error {
	meta := map[string]string{"step": fmt.Sprint(t.step), "params": fmt.Sprint(len(t.params))}
	err := safetensors.WriteFile(path, []safetensors.Tensor{
		safetensors.F32("exp_avg", []int{len(t.m1)}, t.m1),
		safetensors.F32("exp_avg_sq", []int{len(t.m2)}, t.m2),
	}, meta)
	if err != nil {
		return fmt.Errorf("model: save trainer state: %w", err)
	}
	return nil
}

// LoadState restores what SaveState wrote; the trainer must train the same parameters.
func (t *Trainer) LoadState(path string) error {
	f, err := safetensors.Open(path)
	if err != nil {
		return fmt.Errorf("model: load trainer state: %w", err)
	}
	defer f.Close()
	var step int
	if _, err := fmt.Sscan(f.Metadata["step"], &step); err != nil || step < 0 {
		return fmt.Errorf("%w: trainer state %s: bad step %q", ErrCheckpoint, path, f.Metadata["step"])
	}
	m1, m2 := make([]float32, len(t.m1)), make([]float32, len(t.m2))
	if err := readTensor(f, "exp_avg", []int{len(t.m1)}, m1); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := readTensor(f, "exp_avg_sq", []int{len(t.m2)}, m2); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	copy(t.m1, m1)
	copy(t.m2, m2)
	t.step = step
	return nil
}
