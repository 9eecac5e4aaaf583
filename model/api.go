package model

import (
	"fmt"
	"math"
	"slices"
)

// Evaluate runs a forward pass over b (with adapter lora, or nil) and returns the objective of
// Batch, the mean NLL and the per-position log-probabilities of b.Targets under the model's own
// distribution (temperature 1). No gradients are kept. Safe for concurrent use with other readers
// of m and lora.
func (m *Model) Evaluate(b *Batch, lora *Adapter) (LossResult, error) {
	if err := m.check(b, lora, true); err != nil {
		return LossResult{}, err
	}
	var a acts
	m.forward(&a, b, lora, false, false)
	return m.loss(&a, b), nil
}

// Logits runs a forward pass over b (Targets are ignored) and returns the raw logits of every
// position, [len(b.Tokens), vocab_size] row-major. Safe for concurrent use with other readers.
func (m *Model) Logits(b *Batch, lora *Adapter) ([]float32, error) { return m.logitRows(b, lora, true) }

// TargetLogits is Logits at the positions with a target only (Targets[t] ≥ 0), [rows,
// vocab_size] row-major in position order: what a margin over a given answer needs, without the
// output head's cost at the prompt's positions. Safe for concurrent use with other readers.
func (m *Model) TargetLogits(b *Batch, lora *Adapter) ([]float32, error) {
	return m.logitRows(b, lora, false)
}

func (m *Model) logitRows(b *Batch, lora *Adapter, all bool) ([]float32, error) {
	if err := m.check(b, lora, !all); err != nil {
		return nil, err
	}
	var a acts
	m.forward(&a, b, lora, all, false)
	return slices.Clone(a.logits), nil
}

func (m *Model) check(b *Batch, lora *Adapter, targets bool) error {
	if err := b.validate(m.Config, targets); err != nil {
		return err
	}
	if lora != nil {
		if err := lora.compatible(m.Config); err != nil {
			return err
		}
	}
	return nil
}

// gradients computes the loss and the gradients of every base parameter (when base) and of the
// adapter (when lora != nil) into fresh buffers, with the Trainer's forward pass (quantized
// products on the integer path). Used by tests.
func (m *Model) gradients(b *Batch, lora *Adapter, base bool) (LossResult, []float32, []float32, error) {
	if err := m.check(b, lora, true); err != nil {
		return LossResult{}, nil, nil, err
	}
	if base && m.Quant != nil {
		return LossResult{}, nil, nil, fmt.Errorf("%w: no gradients of quantized weights", ErrQuantized)
	}
	var a acts
	m.forward(&a, b, lora, false, true)
	res := m.loss(&a, b)
	var gbuf, lbuf []float32
	var g *Weights
	var lg [][numModules]loraPair
	if base {
		gbuf = make([]float32, len(m.Params))
		w := bindWeights(m.Config, gbuf)
		g = &w
	}
	if lora != nil {
		lbuf = make([]float32, len(lora.Params))
		_, lg = bindAdapter(lora.Base, lora.Config, lbuf)
	}
	m.backward(&a, b, lora, g, lg)
	return res, gbuf, lbuf, nil
}

// SequenceLogprobs returns, for each sequence, lp[j] = log p(ids[j] | ids[<j]) under the model
// (with adapter lora, or nil) at temperature 1, lp[0] = 0: the per-token log-probabilities a
// reference or behaviour policy assigns, aligned with the tokens (as AddSequence expects). The
// sequences run as one packed batch. Safe for concurrent use with other readers.
func (m *Model) SequenceLogprobs(seqs [][]int, lora *Adapter) ([][]float32, error) {
	b := &Batch{}
	for _, s := range seqs {
		if len(s) == 0 {
			return nil, fmt.Errorf("%w: empty sequence", ErrBatch)
		}
		b.AddSequence(s, nil, nil, nil, 1)
	}
	res, err := m.Evaluate(b, lora)
	if err != nil {
		return nil, err
	}
	out := make([][]float32, len(seqs))
	off := 0
	for i, s := range seqs {
		lp := make([]float32, len(s))
		copy(lp[1:], res.Logprobs[off:off+len(s)-1])
		out[i] = lp
		off += len(s)
	}
	return out, nil
}

// KL returns the exact mean over positions of KL(p‖q) = Σ_v p(v)·(log p(v) − log q(v)), where p
// is this model (with lora) and q is ref (with refLora, nil for none), both at temperature 1, over
// the positions of b that have a target (every position when b.Targets is nil). The models must
// share the vocabulary. It is the "KL to parent" an offline gate reports. Safe for concurrent use
// with other readers.
func (m *Model) KL(b *Batch, lora *Adapter, ref *Model, refLora *Adapter) (float64, error) {
	if ref.Config.VocabSize != m.Config.VocabSize {
		return 0, fmt.Errorf("%w: vocabularies differ (%d vs %d)", ErrConfig, m.Config.VocabSize, ref.Config.VocabSize)
	}
	p, err := m.Logits(b, lora)
	if err != nil {
		return 0, err
	}
	q, err := ref.Logits(b, refLora)
	if err != nil {
		return 0, err
	}
	V := m.Config.VocabSize
	lp, lq := make([]float32, V), make([]float32, V)
	var sum float64
	n := 0
	for t := range b.Tokens {
		if b.Targets != nil && b.Targets[t] < 0 {
			continue
		}
		logSoftmaxT(lp, p[t*V:(t+1)*V], 1)
		logSoftmaxT(lq, q[t*V:(t+1)*V], 1)
		var kl float64
		for v := range lp {
			kl += math.Exp(float64(lp[v])) * float64(lp[v]-lq[v])
		}
		sum += kl
		n++
	}
	if n == 0 {
		return 0, nil
	}
	return sum / float64(n), nil
}
