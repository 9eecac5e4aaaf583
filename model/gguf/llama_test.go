package gguf

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"citizen/model"
)

// llamaCppPermute is the row order llama.cpp's convert_hf_to_gguf.py stores for q_proj and
// k_proj: w.reshape(n_head, 2, head_dim/2, in).swapaxes(1, 2), written out as loops.
func llamaCppPermute(w []float32, nHead, cols int) []float32 {
	hd := len(w) / cols / nHead
	out := make([]float32, len(w))
	for h := 0; h < nHead; h++ {
		for i := 0; i < 2; i++ {
			for j := 0; j < hd/2; j++ {
				src := h*hd + i*hd/2 + j // [h][i][j] in Hugging Face's order
				dst := h*hd + j*2 + i    // [h][j][i] after the swap
				copy(out[dst*cols:(dst+1)*cols], w[src*cols:(src+1)*cols])
			}
		}
	}
	return out
}

func TestUnpermuteKnownAnswer(t *testing.T) {
	// One head of six rows: Hugging Face rotates rows (0,3), (1,4), (2,5); llama.cpp stores
	// the pairs adjacent.
	hf := []float32{0, 1, 2, 3, 4, 5}
	stored := []float32{0, 3, 1, 4, 2, 5}
	if got := llamaCppPermute(hf, 1, 1); !slices.Equal(got, stored) {
		t.Fatalf("llama.cpp order %v, want %v", got, stored)
	}
	got, err := Unpermute(stored, 1, 1)
	if err != nil || !slices.Equal(got, hf) {
		t.Fatalf("Unpermute = %v, %v; want %v", got, err, hf)
	}
	// Several heads, several columns.
	w := make([]float32, 3*8*5)
	for i := range w {
		w[i] = float32(i)
	}
	back, err := Unpermute(llamaCppPermute(w, 3, 5), 3, 5)
	if err != nil || !slices.Equal(back, w) {
		t.Fatalf("Unpermute does not invert the converter's permutation: %v", err)
	}
	if _, err := Unpermute(make([]float32, 15), 1, 5); err == nil {
		t.Fatal("odd head_dim accepted")
	}
}

// tinyConfig is a GQA model small enough for tests whose widths are multiples of 32, so that
// every matrix can be stored in 32-weight blocks.
func tinyConfig() model.Config {
	c := model.Tiny3M()
	c.VocabSize, c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers = 96, 64, 96, 2
	c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim, c.MaxPositionEmbeddings = 4, 2, 16, 64
	c.RopeTheta, c.RMSNormEps = 100000, 1e-5
	c.InitializerRange = 0.2
	bos, eos := 1, 2
	c.BOSTokenID, c.EOSTokenID = &bos, &eos
	return c
}

// llamaKV is the metadata llama.cpp's converter writes for c.
func llamaKV(c model.Config) []KV {
	tokens := make([]string, c.VocabSize)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("t%d", i)
	}
	return []KV{
		{"general.architecture", MustValue("llama")},
		{"llama.block_count", MustValue(uint32(c.NumHiddenLayers))},
		{"llama.context_length", MustValue(uint32(c.MaxPositionEmbeddings))},
		{"llama.embedding_length", MustValue(uint32(c.HiddenSize))},
		{"llama.feed_forward_length", MustValue(uint32(c.IntermediateSize))},
		{"llama.attention.head_count", MustValue(uint32(c.NumAttentionHeads))},
		{"llama.attention.head_count_kv", MustValue(uint32(c.NumKeyValueHeads))},
		{"llama.rope.freq_base", MustValue(float32(c.RopeTheta))},
		{"llama.attention.layer_norm_rms_epsilon", MustValue(float32(c.RMSNormEps))},
		{"llama.rope.dimension_count", MustValue(uint32(c.HeadDim))},
		{"tokenizer.ggml.model", MustValue("gpt2")},
		{"tokenizer.ggml.tokens", MustValue(tokens)},
		{"tokenizer.ggml.bos_token_id", MustValue(uint32(*c.BOSTokenID))},
		{"tokenizer.ggml.eos_token_id", MustValue(uint32(*c.EOSTokenID))},
	}
}

// llamaTensors converts m as llama.cpp's converter does: GGUF names, q/k rows permuted, 2-D
// weights stored as typ (norms stay F32).
func llamaTensors(m *model.Model, typ Type) []Tensor {
	c := m.Config
	var ts []Tensor
	add := func(name string, w []float32, rows int) {
		cols := len(w) / rows
		dims := []uint64{uint64(cols), uint64(rows)}
		tt := typ
		if rows == 1 {
			dims, tt = dims[:1], F32
		}
		ts = append(ts, Tensor{Info: TensorInfo{Name: name, Dims: dims, Type: tt}, Data: quantize(tt, w)})
	}
	C := c.HiddenSize
	add("token_embd.weight", m.W.Embed, c.VocabSize)
	for l, lw := range m.W.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		add(p+"attn_norm.weight", lw.InputNorm, 1)
		add(p+"attn_q.weight", llamaCppPermute(lw.Q, c.NumAttentionHeads, C), c.NumAttentionHeads*c.HeadDim)
		add(p+"attn_k.weight", llamaCppPermute(lw.K, c.NumKeyValueHeads, C), c.NumKeyValueHeads*c.HeadDim)
		add(p+"attn_v.weight", lw.V, c.NumKeyValueHeads*c.HeadDim)
		add(p+"attn_output.weight", lw.O, C)
		add(p+"ffn_norm.weight", lw.PostNorm, 1)
		add(p+"ffn_gate.weight", lw.Gate, c.IntermediateSize)
		add(p+"ffn_up.weight", lw.Up, c.IntermediateSize)
		add(p+"ffn_down.weight", lw.Down, C)
	}
	add("output_norm.weight", m.W.Norm, 1)
	if !c.TieWordEmbeddings {
		add("output.weight", m.W.LMHead, c.VocabSize)
	}
	return ts
}

func randomModel(t *testing.T, tied bool) *model.Model {
	t.Helper()
	c := tinyConfig()
	c.TieWordEmbeddings = tied
	m, err := model.NewRandom(c, 7)
	if err != nil {
		t.Fatal(err)
	}
	for i := range m.W.Norm { // norms other than one, so a swapped norm shows
		m.W.Norm[i] = 1 + float32(i%7)/10
		m.W.Layers[0].InputNorm[i] = 1 - float32(i%5)/10
		m.W.Layers[1].PostNorm[i] = 0.5 + float32(i%3)/10
	}
	return m
}

func writeGGUF(t *testing.T, kvs []KV, ts []Tensor) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := WriteFile(path, kvs, ts); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadModelF32(t *testing.T) {
	for _, tied := range []bool{true, false} {
		t.Run(fmt.Sprintf("tied=%v", tied), func(t *testing.T) {
			want := randomModel(t, tied)
			got, f, err := LoadModel(writeGGUF(t, llamaKV(want.Config), llamaTensors(want, F32)))
			if err != nil {
				t.Fatal(err)
			}
			c, wc := got.Config, want.Config
			wc.InitializerRange = 0
			if !reflect.DeepEqual(c, wc) {
				t.Fatalf("config\n%+v\nwant\n%+v", c, wc)
			}
			if !slices.Equal(got.Params, want.Params) {
				t.Fatal("parameters differ from the model that was converted")
			}
			if _, err := f.Float32("token_embd.weight"); !errors.Is(err, ErrClosed) {
				t.Fatalf("LoadModel's File should be closed: %v", err)
			}
			tk, err := f.Tokenizer()
			if err != nil || len(tk.Tokens) != c.VocabSize || *tk.BOSID != 1 {
				t.Fatalf("tokenizer after LoadModel: %+v, %v", tk, err)
			}
		})
	}
}

// TestLoadModelQ8_0 loads a Q8_0 conversion: the parameters must be the block-wise rounding of
// the original (q/k rows in the original order), and the logits close to the original's.
func TestLoadModelQ8_0(t *testing.T) {
	want := randomModel(t, true)
	got, _, err := LoadModelWith(writeGGUF(t, llamaKV(want.Config), llamaTensors(want, Q8_0)), LoadOptions{Float32: true})
	if err != nil {
		t.Fatal(err)
	}
	rounded := want.Clone()
	roundTrip := func(w []float32) {
		if len(w) == want.Config.HiddenSize {
			return // norms stay F32
		}
		if err := Dequantize(w, quantize(Q8_0, w), Q8_0); err != nil {
			t.Fatal(err)
		}
	}
	roundTrip(rounded.W.Embed)
	for _, lw := range rounded.W.Layers {
		for _, w := range [][]float32{lw.Q, lw.K, lw.V, lw.O, lw.Gate, lw.Up, lw.Down} {
			roundTrip(w)
		}
	}
	if !slices.Equal(got.Params, rounded.Params) {
		t.Fatal("parameters are not the Q8_0 rounding of the original")
	}
	b := &model.Batch{Tokens: []int{1, 5, 9, 33, 70, 2, 11, 95}}
	lg, err := got.Logits(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	lw, _ := want.Logits(b, nil)
	var d, scale float64
	for i := range lg {
		d = max(d, math.Abs(float64(lg[i]-lw[i])))
		scale = max(scale, math.Abs(float64(lw[i])))
	}
	t.Logf("max |logit difference| to the fp32 original: %.3g (max |logit| %.3g)", d, scale)
	if d > 0.05*scale {
		t.Fatalf("Q8_0 logits differ by %g, more than 5%% of %g", d, scale)
	}
}

func TestLoadModelRejects(t *testing.T) {
	m := randomModel(t, true)
	base := llamaKV(m.Config)
	tensors := llamaTensors(m, F32)
	setKV := func(key string, v any) []KV {
		out := slices.Clone(base)
		for i := range out {
			if out[i].Key == key {
				if v == nil {
					return slices.Delete(out, i, i+1)
				}
				out[i].Value = MustValue(v)
				return out
			}
		}
		return append(out, KV{key, MustValue(v)})
	}
	without := func(name string) []Tensor {
		return slices.DeleteFunc(slices.Clone(tensors), func(t Tensor) bool { return t.Info.Name == name })
	}
	extra := append(slices.Clone(tensors), Tensor{Info: TensorInfo{Name: "rope_freqs.weight", Dims: []uint64{8}, Type: F32}, Data: make([]byte, 32)})
	reshaped := slices.Clone(tensors)
	for i, tn := range reshaped {
		if tn.Info.Name == "blk.1.ffn_up.weight" {
			tn.Info.Dims = []uint64{tn.Info.Dims[1], tn.Info.Dims[0]} // transposed
			reshaped[i] = tn
		}
	}
	cases := []struct {
		name string
		kvs  []KV
		ts   []Tensor
		want error
	}{
		{"architecture", setKV("general.architecture", "gpt2"), tensors, ErrUnsupported},
		{"no block count", setKV("llama.block_count", nil), tensors, ErrNotFound},
		{"block count is a string", setKV("llama.block_count", "2"), tensors, ErrType},
		{"no rms epsilon", setKV("llama.attention.layer_norm_rms_epsilon", nil), tensors, ErrNotFound},
		{"rope scaling", setKV("llama.rope.scaling.type", "linear"), tensors, ErrUnsupported},
		{"rope scaling factor", setKV("llama.rope.scaling.factor", float32(4)), tensors, ErrUnsupported},
		{"partial rotary", setKV("llama.rope.dimension_count", uint32(8)), tensors, ErrUnsupported},
		{"experts", setKV("llama.expert_count", uint32(8)), tensors, ErrUnsupported},
		{"vocab size", setKV("llama.vocab_size", uint32(97)), tensors, ErrFormat},
		{"no tokens", setKV("tokenizer.ggml.tokens", nil), tensors, ErrNotFound},
		{"heads", setKV("llama.attention.head_count_kv", uint32(3)), tensors, model.ErrConfig},
		{"missing tensor", base, without("blk.0.attn_k.weight"), ErrNotFound},
		{"unexpected tensor", base, extra, ErrUnsupported},
		{"transposed tensor", base, reshaped, ErrFormat},
		{"untied but tied config", base, append(slices.Clone(tensors), llamaTensors(randomModel(t, false), F32)[len(tensors)]), ErrFormat},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "untied but tied config" {
				// output.weight present makes the config untied; a wrong-shaped one is refused.
				last := &c.ts[len(c.ts)-1]
				last.Info.Dims = []uint64{last.Info.Dims[0], 95}
				last.Data = last.Data[:64*95*4]
			}
			_, _, err := LoadModel(writeGGUF(t, c.kvs, c.ts))
			if !errors.Is(err, c.want) {
				t.Fatalf("LoadModel: %v, want %v", err, c.want)
			}
		})
	}
}

// TestLoadQuantized: the quantized model holds exactly the float model's weights for the types
// the kernels multiply directly, Q8_0 roundings of them for the other block types, and float32
// for float tensors; its logits follow the float model's.
func TestLoadQuantized(t *testing.T) {
	for _, typ := range []Type{Q8_0, Q4_0, Q4_1, Q5_0, F16} {
		for _, tied := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/tied=%v", typ, tied), func(t *testing.T) {
				src := randomModel(t, tied)
				path := writeGGUF(t, llamaKV(src.Config), llamaTensors(src, typ))
				fm, _, err := LoadModelWith(path, LoadOptions{Float32: true})
				if err != nil {
					t.Fatal(err)
				}
				qm, _, err := LoadModelWith(path, LoadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if (typ == F16) == qm.Quantized() {
					t.Fatalf("Quantized() = %v for %s", qm.Quantized(), typ)
				}
				dq := qm.Dequantize()
				switch typ {
				case Q5_0:
					for i, v := range fm.Params {
						if d := math.Abs(float64(v - dq.Params[i])); d > 0.01 {
							t.Fatalf("param %d: %g requantized to %g", i, v, dq.Params[i])
						}
					}
				default:
					if !slices.Equal(dq.Params, fm.Params) {
						t.Fatal("dequantized weights differ from NewModel's")
					}
				}
				if typ != F16 && qm.WeightBytes() >= fm.WeightBytes()/3 {
					t.Errorf("quantized weights hold %d bytes, float %d", qm.WeightBytes(), fm.WeightBytes())
				}
				for _, T := range []int{1, 3, 12} { // the integer path (T < 8) and the float path
					b := &model.Batch{Tokens: []int{1, 5, 9, 33, 70, 2, 11, 95, 7, 8, 64, 3}[:T]}
					lq, err := qm.Logits(b, nil)
					if err != nil {
						t.Fatal(err)
					}
					lf, _ := dq.Logits(b, nil)
					var d, scale float64
					for i := range lq {
						d = max(d, math.Abs(float64(lq[i]-lf[i])))
						scale = max(scale, math.Abs(float64(lf[i])))
					}
					if d > 0.03*scale+1e-4 {
						t.Fatalf("T=%d: logits differ by %g (max |logit| %g)", T, d, scale)
					}
				}
			})
		}
	}
}
