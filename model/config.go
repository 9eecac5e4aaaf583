// Package model is citizen's embedded language model: a decoder-only transformer in the Llama
// layout (RMSNorm, RoPE with split halves as Hugging Face applies it, SwiGLU, optional grouped-query
// attention, tied or untied output head), its hand-written backward pass, AdamW training with
// loss masks and per-token weights, LoRA adapters, safetensors checkpoints with Hugging Face and
// PEFT names, and a continuous-batching inference Engine with a KV cache.
//
// The package works on token ids only; text is the tokenizer's business (model/tokenizer).
// Every matrix multiplication goes through citizen/model/kernels.
//
// Layout follows llm.c: all parameters live in one contiguous []float32 (Model.Params) with named
// views (Model.W); gradients and AdamW moments mirror it.
//
// Quantized weights (NewQuantized, QuantWeights; gguf.LoadModel's default) stay as GGUF blocks.
// A product with fewer than 32 rows (decode, a batch of concurrent sequences) quantizes each
// activation row to int16 per 32-block and runs integer dot products (a batch's rows in groups
// through the batched kernels, each row's result as alone within float rounding); with 32 or
// more rows (prefill) the weights are dequantized tile by tile for the float32 GEMM. With int16 activations greedy answers are those of the float32
// weights (40 of 40 prompts in docs/benchmarks/quantized.md); ggml's int8 activations
// (kernels.SetQuantActBits(8)) decode about 5% faster but change them (27 of 40 answers the
// same, the capital-of-France question no longer answered Paris).
package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// ErrConfig is wrapped by every error about an invalid or mismatched configuration.
var ErrConfig = errors.New("model: invalid config")

// Config is the architecture, with the field names and JSON tags of Hugging Face's
// LlamaForCausalLM config.json. Values are immutable once a Model is built from it.
type Config struct {
	Architectures         []string `json:"architectures,omitempty"`
	ModelType             string   `json:"model_type"`
	VocabSize             int      `json:"vocab_size"`
	HiddenSize            int      `json:"hidden_size"`
	IntermediateSize      int      `json:"intermediate_size"`
	NumHiddenLayers       int      `json:"num_hidden_layers"`
	NumAttentionHeads     int      `json:"num_attention_heads"`
	NumKeyValueHeads      int      `json:"num_key_value_heads"`
	HeadDim               int      `json:"head_dim"`
	MaxPositionEmbeddings int      `json:"max_position_embeddings"`
	RMSNormEps            float64  `json:"rms_norm_eps"`
	RopeTheta             float64  `json:"rope_theta"`
	HiddenAct             string   `json:"hidden_act"`
	TieWordEmbeddings     bool     `json:"tie_word_embeddings"`
	AttentionBias         bool     `json:"attention_bias"`
	MLPBias               bool     `json:"mlp_bias"`
	BOSTokenID            *int     `json:"bos_token_id,omitempty"`
	EOSTokenID            *int     `json:"eos_token_id,omitempty"`
	TorchDtype            string   `json:"torch_dtype,omitempty"`
	InitializerRange      float64  `json:"initializer_range,omitempty"`
	// RopeScaling must be absent or null: scaled RoPE variants are not implemented, and silently
	// ignoring one would give wrong logits.
	RopeScaling any `json:"rope_scaling,omitempty"`
}

func llama(vocab, hidden, inter, layers, heads, kvHeads, ctx int) Config {
	return Config{
		Architectures:         []string{"LlamaForCausalLM"},
		ModelType:             "llama",
		VocabSize:             vocab,
		HiddenSize:            hidden,
		IntermediateSize:      inter,
		NumHiddenLayers:       layers,
		NumAttentionHeads:     heads,
		NumKeyValueHeads:      kvHeads,
		HeadDim:               hidden / heads,
		MaxPositionEmbeddings: ctx,
		RMSNormEps:            1e-5,
		RopeTheta:             10000,
		HiddenAct:             "silu",
		TieWordEmbeddings:     true,
		TorchDtype:            "float32",
		InitializerRange:      0.02,
	}
}

// Tiny3M is the ~3M-parameter preset: hidden 256, 4 layers, 4 heads, intermediate 688, vocab 2048,
// context 512, tied embeddings.
func Tiny3M() Config { return llama(2048, 256, 688, 4, 4, 4, 512) }

// Small20M is the ~20M-parameter preset: hidden 512, 6 layers, 8 heads, intermediate 1376,
// vocab 4096, context 1024, tied embeddings.
func Small20M() Config { return llama(4096, 512, 1376, 6, 8, 8, 1024) }

// Validate reports whether the configuration describes a model this package can run.
func (c Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, a...)...)
	}
	switch {
	case c.VocabSize <= 0:
		return bad("vocab_size %d", c.VocabSize)
	case c.HiddenSize <= 0:
		return bad("hidden_size %d", c.HiddenSize)
	case c.IntermediateSize <= 0:
		return bad("intermediate_size %d", c.IntermediateSize)
	case c.NumHiddenLayers <= 0:
		return bad("num_hidden_layers %d", c.NumHiddenLayers)
	case c.NumAttentionHeads <= 0:
		return bad("num_attention_heads %d", c.NumAttentionHeads)
	case c.NumKeyValueHeads <= 0 || c.NumAttentionHeads%c.NumKeyValueHeads != 0:
		return bad("num_key_value_heads %d must divide num_attention_heads %d", c.NumKeyValueHeads, c.NumAttentionHeads)
	case c.HeadDim <= 0 || c.HeadDim%2 != 0:
		return bad("head_dim %d must be positive and even", c.HeadDim)
	case c.MaxPositionEmbeddings <= 0:
		return bad("max_position_embeddings %d", c.MaxPositionEmbeddings)
	case c.RMSNormEps <= 0:
		return bad("rms_norm_eps %g", c.RMSNormEps)
	case c.RopeTheta <= 0:
		return bad("rope_theta %g", c.RopeTheta)
	case c.HiddenAct != "" && c.HiddenAct != "silu":
		return bad("hidden_act %q (only silu)", c.HiddenAct)
	case c.AttentionBias || c.MLPBias:
		return bad("attention_bias/mlp_bias are not supported")
	case c.RopeScaling != nil:
		return bad("rope_scaling %v is not supported", c.RopeScaling)
	case c.ModelType != "" && c.ModelType != "llama":
		return bad("model_type %q (only llama)", c.ModelType)
	}
	return nil
}

// NumParams is the number of float32 parameters (tied embeddings counted once).
func (c Config) NumParams() int {
	n := 0
	for _, t := range c.tensors() {
		n += t.size()
	}
	return n
}

// qDim and kvDim are the widths of the query and key/value projections.
func (c Config) qDim() int  { return c.NumAttentionHeads * c.HeadDim }
func (c Config) kvDim() int { return c.NumKeyValueHeads * c.HeadDim }

// LoadConfig reads a Hugging Face config.json.
func LoadConfig(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("model: read config: %w", err)
	}
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return Config{}, fmt.Errorf("%w: %s: %v", ErrConfig, path, err)
	}
	if c.HeadDim == 0 && c.NumAttentionHeads > 0 {
		c.HeadDim = c.HiddenSize / c.NumAttentionHeads
	}
	if c.NumKeyValueHeads == 0 {
		c.NumKeyValueHeads = c.NumAttentionHeads
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}
