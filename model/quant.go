package model

import (
	"errors"
	"fmt"
	"slices"

	"citizen/model/kernels"
)

// ErrQuantized is returned by operations that write or export float32 weights (full-parameter
// training, MergeLoRA, Save) when the model keeps some matrices quantized; Dequantize gives a
// float32 copy they work on.
var ErrQuantized = errors.New("model: the model's weights are quantized")

// QuantLayer holds the quantized matrices of one decoder layer, [out, in] as in LayerWeights; a
// nil field means that matrix is float32, in the model's W.
type QuantLayer struct {
	Q, K, V, O, Gate, Up, Down *kernels.QMatrix
}

func (ql *QuantLayer) module(mod int) *kernels.QMatrix {
	switch mod {
	case modQ:
		return ql.Q
	case modK:
		return ql.K
	case modV:
		return ql.V
	case modO:
		return ql.O
	case modGate:
		return ql.Gate
	case modUp:
		return ql.Up
	case modDown:
		return ql.Down
	}
	return nil
}

// QuantWeights are the block-quantized matrices of a model (see NewQuantized). Norms are always
// float32. A nil matrix is float32.
type QuantWeights struct {
	Embed  *kernels.QMatrix // [vocab, hidden]
	Layers []QuantLayer     // one per layer (nil: none quantized)
	LMHead *kernels.QMatrix // [vocab, hidden]; ignored with tied embeddings (the head is Embed)
}

// skips returns, in the order of Config.tensors, whether each tensor is quantized.
func (q *QuantWeights) skips(c Config) []bool {
	var s []bool
	s = append(s, q.Embed != nil)
	for l := 0; l < c.NumHiddenLayers; l++ {
		var ql QuantLayer
		if l < len(q.Layers) {
			ql = q.Layers[l]
		}
		s = append(s, false, ql.Q != nil, ql.K != nil, ql.V != nil, ql.O != nil, false, ql.Gate != nil, ql.Up != nil, ql.Down != nil)
	}
	s = append(s, false)
	if !c.TieWordEmbeddings {
		s = append(s, q.LMHead != nil)
	}
	return s
}

// check verifies the shapes of q against c.
func (q *QuantWeights) check(c Config) error {
	if len(q.Layers) != 0 && len(q.Layers) != c.NumHiddenLayers {
		return fmt.Errorf("%w: %d quantized layers for %d layers", ErrConfig, len(q.Layers), c.NumHiddenLayers)
	}
	shape := func(name string, w *kernels.QMatrix, rows, cols int) error {
		if w != nil && (w.Rows != rows || w.Cols != cols) {
			return fmt.Errorf("%w: quantized %s is %d × %d, the config needs %d × %d", ErrConfig, name, w.Rows, w.Cols, rows, cols)
		}
		return nil
	}
	if err := shape("embedding", q.Embed, c.VocabSize, c.HiddenSize); err != nil {
		return err
	}
	if !c.TieWordEmbeddings {
		if err := shape("lm_head", q.LMHead, c.VocabSize, c.HiddenSize); err != nil {
			return err
		}
	}
	for l := range q.Layers {
		for mod := 0; mod < numModules; mod++ {
			in, out := c.moduleDims(mod)
			if err := shape(modulePath(l, mod), q.Layers[l].module(mod), out, in); err != nil {
				return err
			}
		}
	}
	return nil
}

// NewQuantized returns a model whose matrices given in q are kept quantized (shared, not
// copied: they must not change; with none, the model is a float32 one) and whose other tensors are float32 in Params and W as New
// makes them (zero, norms one), for the caller to fill. W's views of the quantized matrices are
// nil. Forward passes, the Engine, LoRA adapters (inference and training: the input gradient
// flows through the dequantized weights) work as on a float32 model; what needs float32 base
// weights returns ErrQuantized.
func NewQuantized(c Config, q QuantWeights) (*Model, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := q.check(c); err != nil {
		return nil, err
	}
	skip := q.skips(c)
	n := 0
	for i, t := range c.tensors() {
		if !skip[i] {
			n += t.size()
		}
	}
	if c.TieWordEmbeddings {
		q.LMHead = q.Embed
	}
	m := &Model{Config: c, Params: make([]float32, n), Quant: &q}
	if !slices.Contains(skip, true) {
		m.Quant = nil // nothing quantized: a float32 model
	}
	m.W = bindWeightsSkipping(c, m.Params, skip)
	for l := range m.W.Layers {
		fill(m.W.Layers[l].InputNorm, 1)
		fill(m.W.Layers[l].PostNorm, 1)
	}
	fill(m.W.Norm, 1)
	m.rope = newRopeTable(c)
	return m, nil
}

// bindWeightsSkipping makes the views of buf for the tensors not skipped (in tensors order,
// back to back); skipped tensors get nil views.
func bindWeightsSkipping(c Config, buf []float32, skip []bool) Weights {
	ts := c.tensors()
	i, off := 0, 0
	next := func() []float32 {
		t := ts[i]
		s := skip[i]
		i++
		if s {
			return nil
		}
		v := buf[off : off+t.size() : off+t.size()]
		off += t.size()
		return v
	}
	var w Weights
	w.Embed = next()
	w.Layers = make([]LayerWeights, c.NumHiddenLayers)
	for l := range w.Layers {
		lw := &w.Layers[l]
		lw.InputNorm, lw.Q, lw.K, lw.V, lw.O = next(), next(), next(), next(), next()
		lw.PostNorm, lw.Gate, lw.Up, lw.Down = next(), next(), next(), next()
	}
	w.Norm = next()
	if c.TieWordEmbeddings {
		w.LMHead = w.Embed
	} else {
		w.LMHead = next()
	}
	return w
}

// Quantized reports whether some matrices are kept quantized.
func (m *Model) Quantized() bool { return m.Quant != nil }

// WeightBytes is the memory the weights hold: float32 parameters and quantized blocks.
func (m *Model) WeightBytes() int {
	n := 4 * len(m.Params)
	if q := m.Quant; q != nil {
		seen := map[*kernels.QMatrix]bool{}
		add := func(w *kernels.QMatrix) {
			if w != nil && !seen[w] {
				seen[w] = true
				n += w.Bytes()
			}
		}
		add(q.Embed)
		add(q.LMHead)
		for l := range q.Layers {
			for mod := 0; mod < numModules; mod++ {
				add(q.Layers[l].module(mod))
			}
		}
	}
	return n
}

// Dequantize returns a float32 copy of m (the values of the quantized blocks, exactly); for a
// float32 model, a Clone.
func (m *Model) Dequantize() *Model {
	if m.Quant == nil {
		return m.Clone()
	}
	d, _ := New(m.Config) // m's config is valid
	src := m.W
	dst := d.W
	cp := func(to, from []float32, q *kernels.QMatrix) {
		if q != nil {
			q.DequantizeRows(to, 0, q.Rows)
		} else {
			copy(to, from)
		}
	}
	cp(dst.Embed, src.Embed, m.Quant.Embed)
	for l := range dst.Layers {
		var ql QuantLayer
		if l < len(m.Quant.Layers) {
			ql = m.Quant.Layers[l]
		}
		s, t := &src.Layers[l], &dst.Layers[l]
		copy(t.InputNorm, s.InputNorm)
		copy(t.PostNorm, s.PostNorm)
		for mod := 0; mod < numModules; mod++ {
			cp(t.module(LoRAModules[mod]), s.module(LoRAModules[mod]), ql.module(mod))
		}
	}
	copy(dst.Norm, src.Norm)
	if !m.Config.TieWordEmbeddings {
		cp(dst.LMHead, src.LMHead, m.Quant.LMHead)
	}
	return d
}

// matrix is the storage of one weight matrix [out, in]: float32 (f) or quantized (q).
type matrix struct {
	f []float32
	q *kernels.QMatrix
}

// mul computes y[T×out] = x[T×in]·Wᵀ, or adds it into y when acc; intQ: a quantized W's
// product on the integer path whatever T (kernels.MatMulQInt).
func (w matrix) mul(y, x []float32, T, in, out int, acc, intQ bool) {
	if w.q != nil {
		if intQ {
			kernels.MatMulQInt(y, x, w.q, T, acc)
		} else {
			kernels.MatMulQ(y, x, w.q, T, acc)
		}
		return
	}
	kernels.MatMulNT(y, x, w.f, T, in, out, acc)
}

// mulShared computes ys[i] = x[T×in]·Wᵀ for the modules mods of layer l, which take the same
// input x: the quantized ones in one kernels.MatMulQs call, so that x is quantized once for
// all of them (attention's q, k, v; the MLP's gate and up).
func (m *Model) mulShared(l int, x []float32, T int, mods []int, ys [][]float32) {
	var ps [numModules]kernels.QProduct
	n := 0
	for i, mod := range mods {
		w := m.layerMatrix(l, mod)
		if w.q != nil {
			ps[n] = kernels.QProduct{C: ys[i], W: w.q}
			n++
			continue
		}
		in, out := m.Config.moduleDims(mod)
		w.mul(ys[i], x, T, in, out, false, false)
	}
	kernels.MatMulQs(x, T, ps[:n]...)
}

// backward writes dy·W into dx, or adds it when acc (when dx is not nil), and adds dyᵀ·x into
// dw (when dw is not nil; only float32 weights have gradients). A quantized W's product takes
// the integer path (kernels.MatMulQNNInt), as the forward pass's do.
func (w matrix) backward(dx, dw, dy, x []float32, T, in, out int, acc bool) {
	if w.q != nil {
		if dx != nil {
			kernels.MatMulQNNInt(dx, dy, w.q, T, acc)
		}
		return
	}
	linearBackward(dx, dw, dy, x, w.f, T, in, out, acc)
}

// layerMatrix returns the storage of module mod of layer l.
func (m *Model) layerMatrix(l, mod int) matrix {
	if m.Quant != nil && l < len(m.Quant.Layers) {
		if q := m.Quant.Layers[l].module(mod); q != nil {
			return matrix{q: q}
		}
	}
	return matrix{f: m.W.Layers[l].module(LoRAModules[mod])}
}

// headMatrix returns the storage of the output head.
func (m *Model) headMatrix() matrix {
	if m.Quant != nil && m.Quant.LMHead != nil {
		return matrix{q: m.Quant.LMHead}
	}
	return matrix{f: m.W.LMHead}
}

// embed writes the embedding rows of tokens into out [len(tokens), hidden].
func (m *Model) embed(out []float32, tokens []int) {
	C := m.Config.HiddenSize
	if m.Quant != nil && m.Quant.Embed != nil {
		for t, id := range tokens {
			m.Quant.Embed.DequantizeRows(out[t*C:(t+1)*C], id, id+1)
		}
		return
	}
	embedForward(out, m.W.Embed, tokens, C)
}
