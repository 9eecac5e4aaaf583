package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"citizen/model/kernels"
)

// LoRA target modules in their fixed internal order.
const (
	modQ = iota
	modK
	modV
	modO
	modGate
	modUp
	modDown
	numModules
)

// LoRAModules lists the module names an adapter may target, as PEFT spells them.
var LoRAModules = []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}

func modulePath(layer, mod int) string {
	group := "self_attn"
	if mod >= modGate {
		group = "mlp"
	}
	return fmt.Sprintf("model.layers.%d.%s.%s", layer, group, LoRAModules[mod])
}

// moduleDims returns (in, out) features of a module.
func (c Config) moduleDims(mod int) (in, out int) {
	C, I := c.HiddenSize, c.IntermediateSize
	switch mod {
	case modQ:
		return C, c.qDim()
	case modK, modV:
		return C, c.kvDim()
	case modO:
		return c.qDim(), C
	case modGate, modUp:
		return C, I
	default:
		return I, C
	}
}

// LoRAConfig describes the adapters: rank r, scale alpha/r, and the target modules.
type LoRAConfig struct {
	Rank          int      // r
	Alpha         float64  // lora_alpha; the update is (Alpha/Rank)·B·A
	Dropout       float64  // recorded in adapter_config.json; not applied by this package
	TargetModules []string // subset of LoRAModules
}

// Validate checks the rank and the module names.
func (lc LoRAConfig) Validate() error {
	if lc.Rank <= 0 {
		return fmt.Errorf("%w: lora rank %d", ErrConfig, lc.Rank)
	}
	if len(lc.TargetModules) == 0 {
		return fmt.Errorf("%w: lora target_modules empty", ErrConfig)
	}
	for _, m := range lc.TargetModules {
		if !slices.Contains(LoRAModules, m) {
			return fmt.Errorf("%w: lora target module %q (want one of %v)", ErrConfig, m, LoRAModules)
		}
	}
	return nil
}

func (lc LoRAConfig) targets(mod int) bool {
	return slices.Contains(lc.TargetModules, LoRAModules[mod])
}

// loraPair is one module's adapter: A [r,in], B [out,r].
type loraPair struct {
	A, B    []float32
	in, out int
}

// Adapter is a set of LoRA matrices for one base architecture, all in one flat buffer (Params).
//
// An Adapter handed to an Engine (RegisterAdapter) is copied and the copy is never written, so
// requests in flight keep a consistent adapter. An Adapter being trained (Trainer) must not be used
// concurrently by other goroutines; Clone it to publish a snapshot.
type Adapter struct {
	Name   string
	Config LoRAConfig
	Base   Config // the architecture the adapter fits
	Params []float32

	layers [][numModules]loraPair
}

// adapterSize returns the flat size and binds views when buf != nil.
func bindAdapter(base Config, lc LoRAConfig, buf []float32) (int, [][numModules]loraPair) {
	off := 0
	var layers [][numModules]loraPair
	if buf != nil {
		layers = make([][numModules]loraPair, base.NumHiddenLayers)
	}
	r := lc.Rank
	for l := 0; l < base.NumHiddenLayers; l++ {
		for mod := 0; mod < numModules; mod++ {
			if !lc.targets(mod) {
				continue
			}
			in, out := base.moduleDims(mod)
			if buf != nil {
				layers[l][mod] = loraPair{
					A:  buf[off : off+r*in : off+r*in],
					B:  buf[off+r*in : off+r*in+out*r : off+r*in+out*r],
					in: in, out: out,
				}
			}
			off += r*in + out*r
		}
	}
	return off, layers
}

// NewAdapter returns a fresh adapter: A drawn as PEFT does (Kaiming-uniform, bound 1/sqrt(in))
// from seed, B zero, so it does not change the model until trained.
func NewAdapter(name string, base Config, lc LoRAConfig, seed uint64) (*Adapter, error) {
	a, err := newZeroAdapter(name, base, lc)
	if err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(seed, 0x1c0ffee))
	for l := range a.layers {
		for _, p := range a.layers[l] {
			bound := 1 / math.Sqrt(float64(p.in))
			for i := range p.A {
				p.A[i] = float32((2*r.Float64() - 1) * bound)
			}
		}
	}
	return a, nil
}

func newZeroAdapter(name string, base Config, lc LoRAConfig) (*Adapter, error) {
	if err := base.Validate(); err != nil {
		return nil, err
	}
	if err := lc.Validate(); err != nil {
		return nil, err
	}
	lc.TargetModules = slices.Clone(lc.TargetModules)
	n, _ := bindAdapter(base, lc, nil)
	a := &Adapter{Name: name, Config: lc, Base: base, Params: make([]float32, n)}
	_, a.layers = bindAdapter(base, lc, a.Params)
	return a, nil
}

// Scale is lora_alpha / r.
func (a *Adapter) Scale() float32 { return float32(a.Config.Alpha / float64(a.Config.Rank)) }

// Clone returns a deep copy.
func (a *Adapter) Clone() *Adapter {
	c, _ := newZeroAdapter(a.Name, a.Base, a.Config)
	copy(c.Params, a.Params)
	return c
}

// compatible reports whether the adapter fits model config c.
func (a *Adapter) compatible(c Config) error {
	b := a.Base
	if b.HiddenSize != c.HiddenSize || b.IntermediateSize != c.IntermediateSize ||
		b.NumHiddenLayers != c.NumHiddenLayers || b.NumAttentionHeads != c.NumAttentionHeads ||
		b.NumKeyValueHeads != c.NumKeyValueHeads || b.HeadDim != c.HeadDim {
		return fmt.Errorf("%w: adapter %q was made for hidden=%d inter=%d layers=%d heads=%d/%d head_dim=%d, model has hidden=%d inter=%d layers=%d heads=%d/%d head_dim=%d",
			ErrConfig, a.Name, b.HiddenSize, b.IntermediateSize, b.NumHiddenLayers, b.NumAttentionHeads, b.NumKeyValueHeads, b.HeadDim,
			c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers, c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim)
	}
	return nil
}

// MergeLoRA adds (alpha/r)·B·A of every targeted module into the model's weights in place.
// UnmergeLoRA subtracts it again (exact up to float32 rounding). Neither may run while anything
// else reads the model.
func (m *Model) MergeLoRA(a *Adapter) error { return m.mergeLoRA(a, 1) }

// UnmergeLoRA undoes MergeLoRA; see MergeLoRA.
func (m *Model) UnmergeLoRA(a *Adapter) error { return m.mergeLoRA(a, -1) }

func (m *Model) mergeLoRA(a *Adapter, sign float32) error {
	if err := a.compatible(m.Config); err != nil {
		return err
	}
	if m.Quant != nil {
		return fmt.Errorf("%w: cannot merge an adapter into quantized weights", ErrQuantized)
	}
	s := sign * a.Scale()
	r := a.Config.Rank
	var sb []float32
	for l := range a.layers {
		for mod, p := range a.layers[l] {
			if p.A == nil {
				continue
			}
			// W[out,in] += (s·B[out,r])·A[r,in]
			sb = append(sb[:0], p.B...)
			kernels.Scale(s, sb)
			kernels.MatMulNN(m.W.Layers[l].module(LoRAModules[mod]), sb, p.A, p.out, r, p.in, true)
		}
	}
	return nil
}
