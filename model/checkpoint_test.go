package model

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"citizen/model/safetensors"
)

func bitsEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

func TestCheckpointRoundTrip(t *testing.T) {
	for _, tied := range []bool{true, false} {
		c := tinyConfig()
		c.TieWordEmbeddings = tied
		m, _ := NewRandom(c, 21)
		dir := t.TempDir()
		arts, err := m.Save(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(arts) != 2 || filepath.Base(arts[0].Path) != WeightsFile || filepath.Base(arts[1].Path) != ConfigFile {
			t.Fatalf("artifacts %+v", arts)
		}
		for _, a := range arts {
			if sum, _ := safetensors.FileSHA256(a.Path); sum != a.SHA256 || len(sum) != 64 {
				t.Errorf("%s: sha256 %s, file has %s", a.Path, a.SHA256, sum)
			}
		}
		got, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !bitsEqual(got.Params, m.Params) {
			t.Error("parameters changed in the round trip")
		}
		if !slices.Equal(got.Config.Architectures, []string{"LlamaForCausalLM"}) || got.Config.HiddenSize != c.HiddenSize || got.Config.TieWordEmbeddings != tied {
			t.Errorf("config %+v", got.Config)
		}
		// Hugging Face names and shapes
		f, err := safetensors.Open(filepath.Join(dir, WeightsFile))
		if err != nil {
			t.Fatal(err)
		}
		want := map[string][]int{
			"model.embed_tokens.weight":                      {13, 8},
			"model.layers.1.input_layernorm.weight":          {8},
			"model.layers.0.self_attn.q_proj.weight":         {16, 8},
			"model.layers.0.self_attn.k_proj.weight":         {8, 8},
			"model.layers.0.self_attn.o_proj.weight":         {8, 16},
			"model.layers.1.post_attention_layernorm.weight": {8},
			"model.layers.1.mlp.gate_proj.weight":            {12, 8},
			"model.layers.1.mlp.down_proj.weight":            {8, 12},
			"model.norm.weight":                              {8},
		}
		if !tied {
			want["lm_head.weight"] = []int{13, 8}
		}
		for name, shape := range want {
			info, ok := f.Info(name)
			if !ok || !slices.Equal(info.Shape, shape) || info.DType != "F32" {
				t.Errorf("%s: %+v (want %v)", name, info, shape)
			}
		}
		if _, ok := f.Info("lm_head.weight"); ok == tied {
			t.Errorf("tied=%v but lm_head present=%v", tied, ok)
		}
		if n := len(f.Names()); n != 2+9*2+map[bool]int{true: 0, false: 1}[tied] {
			t.Errorf("%d tensors", n)
		}
		f.Close()
		var raw map[string]any
		b, _ := os.ReadFile(filepath.Join(dir, ConfigFile))
		json.Unmarshal(b, &raw)
		for _, k := range []string{"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "max_position_embeddings", "rms_norm_eps", "rope_theta", "tie_word_embeddings", "model_type", "hidden_act"} {
			if _, ok := raw[k]; !ok {
				t.Errorf("config.json lacks %s", k)
			}
		}
	}
}

func copyDir(t *testing.T, src string) string {
	dst := t.TempDir()
	ents, _ := os.ReadDir(src)
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(src, e.Name()))
		os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644)
	}
	return dst
}

func TestCheckpointCorruptRefused(t *testing.T) {
	m, _ := NewRandom(tinyConfig(), 1)
	good := t.TempDir()
	if _, err := m.Save(good); err != nil {
		t.Fatal(err)
	}
	wfile := filepath.Join(good, WeightsFile)
	data, _ := os.ReadFile(wfile)
	cfgRaw, _ := os.ReadFile(filepath.Join(good, ConfigFile))
	editConfig := func(f func(map[string]any)) []byte {
		var raw map[string]any
		json.Unmarshal(cfgRaw, &raw)
		f(raw)
		b, _ := json.Marshal(raw)
		return b
	}
	other, _ := NewRandom(llama(13, 8, 12, 3, 4, 2, 16), 1) // one more layer
	otherDir := t.TempDir()
	other.Save(otherDir)
	otherData, _ := os.ReadFile(filepath.Join(otherDir, WeightsFile))

	cases := []struct {
		name    string
		file    string
		content []byte
		want    error
	}{
		{"truncated weights", WeightsFile, data[:len(data)-10], safetensors.ErrOffsets},
		{"truncated header", WeightsFile, data[:20], nil},
		{"empty weights", WeightsFile, nil, safetensors.ErrTruncated},
		{"garbage header", WeightsFile, append([]byte{8, 0, 0, 0, 0, 0, 0, 0, '{', 'x', 'x', 'x', 'x', 'x', 'x', 'x'}, data[16:]...), nil},
		{"hidden size mismatch", ConfigFile, editConfig(func(r map[string]any) { r["intermediate_size"] = 16 }), ErrCheckpoint},
		{"fewer layers in config", ConfigFile, editConfig(func(r map[string]any) { r["num_hidden_layers"] = 1 }), ErrCheckpoint},
		{"weights of another model", WeightsFile, otherData, ErrCheckpoint},
		{"untied config, tied weights", ConfigFile, editConfig(func(r map[string]any) { r["tie_word_embeddings"] = true }), ErrCheckpoint},
		{"invalid config", ConfigFile, editConfig(func(r map[string]any) { r["num_key_value_heads"] = 3 }), ErrConfig},
		{"config not json", ConfigFile, []byte("{"), ErrConfig},
		{"rope scaling", ConfigFile, editConfig(func(r map[string]any) { r["rope_scaling"] = map[string]any{"type": "linear", "factor": 2.0} }), ErrConfig},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, good)
			os.WriteFile(filepath.Join(dir, tc.file), tc.content, 0o644)
			_, err := Load(dir)
			if err == nil {
				t.Fatal("accepted")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			t.Log(err)
		})
	}
	if _, err := Load(t.TempDir()); err == nil {
		t.Error("empty folder accepted")
	}
}

func TestPEFTRoundTripAndLayout(t *testing.T) {
	c := tinyConfig()
	a := randomAdapter(t, c, "x", 3, 0.1)
	a.Config.TargetModules = LoRAModules
	dir := filepath.Join(t.TempDir(), "my-adapter")
	arts, err := a.SavePEFT(dir, "citizen-base")
	if err != nil {
		t.Fatal(err)
	}
	if len(arts) != 2 || filepath.Base(arts[0].Path) != AdapterWeightsFile || filepath.Base(arts[1].Path) != AdapterConfigFile {
		t.Fatalf("artifacts %+v", arts)
	}
	var cfg map[string]any
	b, _ := os.ReadFile(filepath.Join(dir, AdapterConfigFile))
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg["peft_type"] != "LORA" || cfg["task_type"] != "CAUSAL_LM" || cfg["r"] != 4.0 || cfg["lora_alpha"] != 8.0 ||
		cfg["bias"] != "none" || cfg["fan_in_fan_out"] != false || cfg["base_model_name_or_path"] != "citizen-base" || len(cfg["target_modules"].([]any)) != 7 {
		t.Errorf("adapter_config.json %s", b)
	}
	f, err := safetensors.Open(filepath.Join(dir, AdapterWeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]int{
		"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": {4, 8},
		"base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight": {16, 4},
		"base_model.model.model.layers.1.self_attn.k_proj.lora_B.weight": {8, 4},
		"base_model.model.model.layers.1.self_attn.o_proj.lora_A.weight": {4, 16},
		"base_model.model.model.layers.1.mlp.down_proj.lora_A.weight":    {4, 12},
		"base_model.model.model.layers.1.mlp.down_proj.lora_B.weight":    {8, 4},
		"base_model.model.model.layers.0.mlp.up_proj.lora_B.weight":      {12, 4},
	}
	for name, shape := range want {
		if info, ok := f.Info(name); !ok || !slices.Equal(info.Shape, shape) {
			t.Errorf("%s: %+v, want %v", name, info, shape)
		}
	}
	if n := len(f.Names()); n != 2*7*2 {
		t.Errorf("%d tensors", n)
	}
	f.Close()

	got, err := LoadPEFT(dir, c)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "my-adapter" || got.Config.Rank != 4 || got.Scale() != 2 || !bitsEqual(got.Params, a.Params) {
		t.Errorf("round trip: %s %+v", got.Name, got.Config)
	}

	// refusals
	if _, err := LoadPEFT(dir, engineTestModel(t).Config); !errors.Is(err, ErrCheckpoint) {
		t.Errorf("adapter for another base: %v", err)
	}
	bad := func(name string, edit func(dir string)) {
		d := copyDir(t, dir)
		edit(d)
		if _, err := LoadPEFT(d, c); err == nil {
			t.Errorf("%s accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	wdata, _ := os.ReadFile(filepath.Join(dir, AdapterWeightsFile))
	bad("truncated", func(d string) { os.WriteFile(filepath.Join(d, AdapterWeightsFile), wdata[:len(wdata)/2], 0o644) })
	bad("dora", func(d string) {
		os.WriteFile(filepath.Join(d, AdapterConfigFile), []byte(strings.Replace(string(b), `"use_dora": false`, `"use_dora": true`, 1)), 0o644)
	})
	bad("rank mismatch", func(d string) {
		os.WriteFile(filepath.Join(d, AdapterConfigFile), []byte(strings.Replace(string(b), `"r": 4`, `"r": 2`, 1)), 0o644)
	})
	bad("fewer targets than tensors", func(d string) {
		var raw map[string]any
		json.Unmarshal(b, &raw)
		raw["target_modules"] = []string{"q_proj"}
		nb, _ := json.Marshal(raw)
		os.WriteFile(filepath.Join(d, AdapterConfigFile), nb, 0o644)
	})
	bad("regex targets", func(d string) {
		var raw map[string]any
		json.Unmarshal(b, &raw)
		raw["target_modules"] = ".*proj"
		nb, _ := json.Marshal(raw)
		os.WriteFile(filepath.Join(d, AdapterConfigFile), nb, 0o644)
	})
	// "all-linear" means every module this package knows
	d := copyDir(t, dir)
	var raw map[string]any
	json.Unmarshal(b, &raw)
	raw["target_modules"] = "all-linear"
	nb, _ := json.Marshal(raw)
	os.WriteFile(filepath.Join(d, AdapterConfigFile), nb, 0o644)
	if got, err := LoadPEFT(d, c); err != nil || len(got.Config.TargetModules) != 7 {
		t.Errorf("all-linear: %v", err)
	}
	bad("not json", func(d string) { os.WriteFile(filepath.Join(d, AdapterConfigFile), []byte("[]"), 0o644) })
}

func TestCheckpointBF16(t *testing.T) {
	m, _ := NewRandom(tinyConfig(), 4)
	dir := t.TempDir()
	arts, err := m.SaveAs(dir, safetensors.DTypeBF16)
	if err != nil {
		t.Fatal(err)
	}
	f32 := t.TempDir()
	arts32, _ := m.Save(f32)
	if arts[0].Size*2 > arts32[0].Size+4096 {
		t.Errorf("bf16 file %d bytes, f32 %d", arts[0].Size, arts32[0].Size)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Config.TorchDtype != "bfloat16" {
		t.Errorf("torch_dtype %q", got.Config.TorchDtype)
	}
	for i, v := range m.Params {
		if d := math.Abs(float64(got.Params[i] - v)); d > math.Abs(float64(v))/128 {
			t.Fatalf("param %d: %v -> %v", i, v, got.Params[i])
		}
	}
	if _, err := m.SaveAs(t.TempDir(), "I64"); err == nil {
		t.Error("saved as I64")
	}
}
