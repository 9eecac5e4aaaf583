package model

import (
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/reference (then run testdata/reference/gen.py)")

// TestReferenceLogits compares our logits with an independent float64 NumPy implementation of
// Hugging Face's LlamaForCausalLM (testdata/reference/gen.py) on a committed checkpoint with
// grouped-query attention, an untied head and a PEFT adapter. Tolerance: 1e-4 absolute on logits
// of magnitude ~1 (float32 accumulation).
func TestReferenceLogits(t *testing.T) {
	dir := filepath.Join("testdata", "reference")
	seqs := [][]int{{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {31, 0, 17, 17, 17, 5}}
	if *update {
		c := llama(32, 16, 40, 2, 4, 2, 32)
		c.HeadDim = 4
		c.TieWordEmbeddings = false
		c.RopeTheta = 100 // large angles at short range exercise RoPE
		c.InitializerRange = 0.3
		m, err := NewRandom(c, 77)
		if err != nil {
			t.Fatal(err)
		}
		for l := range m.W.Layers {
			for i := range m.W.Layers[l].InputNorm {
				m.W.Layers[l].InputNorm[i] = 1 + 0.1*float32(i%5)
			}
		}
		if _, err := m.Save(dir); err != nil {
			t.Fatal(err)
		}
		a := randomAdapter(t, c, "adapter", 78, 0.2)
		if _, err := a.SavePEFT(filepath.Join(dir, "adapter"), "reference"); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(seqs)
		if err := os.WriteFile(filepath.Join(dir, "tokens.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("now run: python3 model/testdata/reference/gen.py")
		return
	}
	m, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, err := LoadPEFT(filepath.Join(dir, "adapter"), m.Config)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want struct{ Base, Lora [][]float64 }
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	for i, s := range seqs {
		for _, v := range []struct {
			name string
			ad   *Adapter
			want []float64
		}{{"base", nil, want.Base[i]}, {"lora", a, want.Lora[i]}} {
			got, err := m.Logits(&Batch{Tokens: s}, v.ad)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(v.want) {
				t.Fatalf("%s seq %d: %d logits, reference %d", v.name, i, len(got), len(v.want))
			}
			var worst float64
			for j := range got {
				worst = math.Max(worst, math.Abs(float64(got[j])-v.want[j]))
			}
			if worst > 1e-4 {
				t.Errorf("%s seq %d: logits differ from the NumPy reference by %g", v.name, i, worst)
			}
			t.Logf("%s seq %d: max |Δlogit| = %.2g", v.name, i, worst)
		}
	}
	// the same sequences packed into one batch give the same logits, also with small attention
	// row blocks
	defer func(old int) { attBlock = old }(attBlock)
	attBlock = 5
	packed, _ := m.Logits(&Batch{Tokens: append(append([]int{}, seqs[0]...), seqs[1]...), SeqLens: []int{len(seqs[0]), len(seqs[1])}}, a)
	all := append(append([]float64{}, want.Lora[0]...), want.Lora[1]...)
	for j := range packed {
		if math.Abs(float64(packed[j])-all[j]) > 1e-4 {
			t.Fatalf("packed batch logit %d: %v vs %v", j, packed[j], all[j])
		}
	}
}
