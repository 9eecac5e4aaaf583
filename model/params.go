package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
)

// tensorSpec names one view into the flat parameter buffer.
type tensorSpec struct {
	name   string // Hugging Face name
	shape  []int
	offset int
	matrix bool // weight decay applies (2-D weights); norms are not decayed
}

func (t tensorSpec) size() int {
	n := 1
	for _, d := range t.shape {
		n *= d
	}
	return n
}

// tensors lists the parameter tensors in buffer order, with Hugging Face names.
func (c Config) tensors() []tensorSpec {
	var ts []tensorSpec
	off := 0
	add := func(name string, matrix bool, shape ...int) {
		t := tensorSpec{name: name, shape: shape, offset: off, matrix: matrix}
		ts = append(ts, t)
		off += t.size()
	}
	C, I := c.HiddenSize, c.IntermediateSize
	add("model.embed_tokens.weight", true, c.VocabSize, C)
	for l := 0; l < c.NumHiddenLayers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		add(p+"input_layernorm.weight", false, C)
		add(p+"self_attn.q_proj.weight", true, c.qDim(), C)
		add(p+"self_attn.k_proj.weight", true, c.kvDim(), C)
		add(p+"self_attn.v_proj.weight", true, c.kvDim(), C)
		add(p+"self_attn.o_proj.weight", true, C, c.qDim())
		add(p+"post_attention_layernorm.weight", false, C)
		add(p+"mlp.gate_proj.weight", true, I, C)
		add(p+"mlp.up_proj.weight", true, I, C)
		add(p+"mlp.down_proj.weight", true, C, I)
	}
	add("model.norm.weight", false, C)
	if !c.TieWordEmbeddings {
		add("lm_head.weight", true, c.VocabSize, C)
	}
	return ts
}

// LayerWeights are the views of one decoder layer. Matrices are [out, in] row-major, as in
// Hugging Face.
type LayerWeights struct {
	InputNorm []float32 // [hidden]
	Q         []float32 // [heads*head_dim, hidden]
	K         []float32 // [kv_heads*head_dim, hidden]
	V         []float32 // [kv_heads*head_dim, hidden]
	O         []float32 // [hidden, heads*head_dim]
	PostNorm  []float32 // [hidden]
	Gate      []float32 // [intermediate, hidden]
	Up        []float32 // [intermediate, hidden]
	Down      []float32 // [hidden, intermediate]
}

// module returns the weight of a LoRA target module name (q_proj, ..., down_proj).
func (lw *LayerWeights) module(m string) []float32 {
	switch m {
	case "q_proj":
		return lw.Q
	case "k_proj":
		return lw.K
	case "v_proj":
		return lw.V
	case "o_proj":
		return lw.O
	case "gate_proj":
		return lw.Gate
	case "up_proj":
		return lw.Up
	case "down_proj":
		return lw.Down
	}
	return nil
}

// Weights are named views into one flat buffer (parameters or their gradients).
type Weights struct {
	Embed  []float32 // [vocab, hidden]
	Layers []LayerWeights
	Norm   []float32 // [hidden]
	LMHead []float32 // [vocab, hidden]; aliases Embed when embeddings are tied
}

// bindWeights makes the views of buf (len NumParams) for config c.
func bindWeights(c Config, buf []float32) Weights {
	ts := c.tensors()
	i := 0
	next := func() []float32 {
		t := ts[i]
		i++
		return buf[t.offset : t.offset+t.size() : t.offset+t.size()]
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

// Model is a set of weights for one Config. Params is the flat buffer; W views it. A model
// built by NewQuantized keeps some matrices as blocks in Quant instead: Params then holds only
// the float32 tensors, and W's views of the quantized matrices are nil.
//
// A Model is safe for concurrent reads (forward passes, an Engine) as long as nobody writes
// Params; training (Trainer with a nil adapter), MergeLoRA and UnmergeLoRA write it and must not
// overlap with readers.
type Model struct {
	Config Config
	Params []float32
	W      Weights
	Quant  *QuantWeights // nil: every matrix is float32; immutable once built

	rope *ropeTable
}

// New returns a model with zeroed parameters and norms set to one.
func New(c Config) (*Model, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	m := &Model{Config: c, Params: make([]float32, c.NumParams())}
	m.W = bindWeights(c, m.Params)
	for l := range m.W.Layers {
		fill(m.W.Layers[l].InputNorm, 1)
		fill(m.W.Layers[l].PostNorm, 1)
	}
	fill(m.W.Norm, 1)
	m.rope = newRopeTable(c)
	return m, nil
}

// NewRandom returns a model initialised as Hugging Face's LlamaPreTrainedModel does (normal with
// std initializer_range, default 0.02; norms one), from a deterministic seed. Output projections
// (o_proj, down_proj) are scaled by 1/sqrt(2·layers) as in GPT-2, which trains more stably.
func NewRandom(c Config, seed uint64) (*Model, error) {
	m, err := New(c)
	if err != nil {
		return nil, err
	}
	std := c.InitializerRange
	if std == 0 {
		std = 0.02
	}
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	for _, t := range c.tensors() {
		if !t.matrix {
			continue
		}
		s := std
		if isOutProj(t.name) {
			s = std / math.Sqrt(2*float64(c.NumHiddenLayers))
		}
		v := m.Params[t.offset : t.offset+t.size()]
		for i := range v {
			v[i] = float32(r.NormFloat64() * s)
		}
	}
	return m, nil
}

func isOutProj(name string) bool {
	return strings.HasSuffix(name, "o_proj.weight") || strings.HasSuffix(name, "down_proj.weight")
}

// Clone returns a deep copy whose parameters can be changed independently (quantized matrices,
// which are immutable, are shared).
func (m *Model) Clone() *Model {
	c := &Model{Config: m.Config, Params: append([]float32(nil), m.Params...), Quant: m.Quant, rope: m.rope}
	if m.Quant != nil {
		c.W = bindWeightsSkipping(c.Config, c.Params, m.Quant.skips(c.Config))
	} else {
		c.W = bindWeights(c.Config, c.Params)
	}
	return c
}

func fill(v []float32, x float32) {
	for i := range v {
		v[i] = x
	}
}
