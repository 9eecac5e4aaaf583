package model

import (
	"fmt"
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
	m.forward(&a, b, lora, false)
	return m.loss(&a, b), nil
}

// Logits runs a forward pass over b (Targets are ignored) and returns the raw logits of every
// position, [len(b.Tokens), vocab_size] row-major. Safe for concurrent use with other readers.
func (m *Model) Logits(b *Batch, lora *Adapter) ([]float32, error) {
	if err := m.check(b, lora, false); err != nil {
		return nil, err
	}
	var a acts
	m.forward(&a, b, lora, true)
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
// adapter (when lora != nil) into fresh buffers. Used by tests and the Trainer.
func (m *Model) gradients(b *Batch, lora *Adapter, base bool) (LossResult, []float32, []float32, error) {
	if err := m.check(b, lora, true); err != nil {
		return LossResult{}, nil, nil, err
	}
	var a acts
	m.forward(&a, b, lora, false)
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

var _ = fmt.Sprintf
