package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"citizen/model/safetensors"
)

// ErrCheckpoint is wrapped by every error about a checkpoint or adapter folder that does not
// match what it should hold (missing or unexpected tensors, wrong shapes, bad config).
var ErrCheckpoint = errors.New("model: invalid checkpoint")

// File names inside checkpoint and adapter folders.
const (
	WeightsFile        = "model.safetensors"
	ConfigFile         = "config.json"
	AdapterWeightsFile = "adapter_model.safetensors"
	AdapterConfigFile  = "adapter_config.json"
)

// Artifact is one file written by Save or SavePEFT.
type Artifact struct {
	Path   string // full path
	SHA256 string // lowercase hex
	Size   int64
}

func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("model: write %s: %w", path, err)
	}
	return nil
}

// artifacts sets the files' mode (temporary files are created 0600) and hashes them.
func artifacts(mode os.FileMode, paths ...string) ([]Artifact, error) {
	var out []Artifact
	for _, p := range paths {
		if err := os.Chmod(p, mode); err != nil {
			return nil, fmt.Errorf("model: %w", err)
		}
		sum, err := safetensors.FileSHA256(p)
		if err != nil {
			return nil, err
		}
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("model: %w", err)
		}
		out = append(out, Artifact{Path: p, SHA256: sum, Size: st.Size()})
	}
	return out, nil
}

// Save writes dir/model.safetensors (F32 tensors with Hugging Face names; lm_head.weight only
// when embeddings are untied) and dir/config.json, creating dir if needed; each file is written
// atomically. It returns the files with their sha256. The tokenizer file is the tokenizer
// package's business. m must not be written concurrently.
func (m *Model) Save(dir string) ([]Artifact, error) { return m.SaveAs(dir, safetensors.DTypeF32) }

// SaveAs is Save with the tensors stored as dtype: F32 (exact), BF16 or F16 (half the size,
// rounded to nearest even; what Load reads back is then the rounded model). config.json records
// torch_dtype accordingly.
func (m *Model) SaveAs(dir string, dtype safetensors.DType) ([]Artifact, error) {
	conv, torch := safetensors.F32, "float32"
	switch dtype {
	case safetensors.DTypeF32:
	case safetensors.DTypeBF16:
		conv, torch = safetensors.BF16, "bfloat16"
	case safetensors.DTypeF16:
		conv, torch = safetensors.F16, "float16"
	default:
		return nil, fmt.Errorf("%w: cannot save as dtype %q (F32, BF16 or F16)", ErrConfig, dtype)
	}
	if m.Quant != nil {
		return nil, fmt.Errorf("%w: save a Dequantize copy", ErrQuantized)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	var ts []safetensors.Tensor
	for _, t := range m.Config.tensors() {
		ts = append(ts, conv(t.name, t.shape, m.Params[t.offset:t.offset+t.size()]))
	}
	wpath, cpath := filepath.Join(dir, WeightsFile), filepath.Join(dir, ConfigFile)
	if err := safetensors.WriteFile(wpath, ts, map[string]string{"format": "pt"}); err != nil {
		return nil, err
	}
	cfg := m.Config
	if len(cfg.Architectures) == 0 {
		cfg.Architectures = []string{"LlamaForCausalLM"}
	}
	cfg.ModelType, cfg.HiddenAct, cfg.TorchDtype = "llama", "silu", torch
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if err := writeFileAtomic(cpath, append(b, '\n')); err != nil {
		return nil, err
	}
	return artifacts(0o644, wpath, cpath)
}

// Load reads a checkpoint folder written by Save or by Hugging Face transformers (F32, F16,
// BF16 or F64 tensors). Every expected tensor must be present with its exact shape; unexpected
// tensors are refused (a tied checkpoint may carry lm_head.weight only if it equals the
// embedding).
func Load(dir string) (*Model, error) {
	c, err := LoadConfig(filepath.Join(dir, ConfigFile))
	if err != nil {
		return nil, err
	}
	m, err := New(c)
	if err != nil {
		return nil, err
	}
	f, err := safetensors.Open(filepath.Join(dir, WeightsFile))
	if err != nil {
		return nil, fmt.Errorf("model: load %s: %w", dir, err)
	}
	defer f.Close()
	want := map[string]bool{}
	for _, t := range c.tensors() {
		want[t.name] = true
		if err := readTensor(f, t.name, t.shape, m.Params[t.offset:t.offset+t.size()]); err != nil {
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
	}
	for _, name := range f.Names() {
		if want[name] {
			continue
		}
		if name == "lm_head.weight" && c.TieWordEmbeddings {
			// Some exporters store the tied head too; accept it only if it is the embedding.
			head := make([]float32, len(m.W.Embed))
			if err := readTensor(f, name, []int{c.VocabSize, c.HiddenSize}, head); err != nil {
				return nil, fmt.Errorf("%s: %w", dir, err)
			}
			if !slices.Equal(head, m.W.Embed) {
				return nil, fmt.Errorf("%w: %s: tie_word_embeddings is true but lm_head.weight differs from the embedding", ErrCheckpoint, dir)
			}
			continue
		}
		return nil, fmt.Errorf("%w: %s: unexpected tensor %q for this config", ErrCheckpoint, dir, name)
	}
	return m, nil
}

func readTensor(f *safetensors.File, name string, shape []int, dst []float32) error {
	info, ok := f.Info(name)
	if !ok {
		return fmt.Errorf("%w: missing tensor %q", ErrCheckpoint, name)
	}
	if !slices.Equal(info.Shape, shape) {
		return fmt.Errorf("%w: tensor %q has shape %v, config needs %v", ErrCheckpoint, name, info.Shape, shape)
	}
	v, _, err := f.Float32(name)
	if err != nil {
		return fmt.Errorf("model: tensor %q: %w", name, err)
	}
	copy(dst, v)
	return nil
}

// peftConfig is PEFT's adapter_config.json (the fields this package writes and checks).
type peftConfig struct {
	PeftType            string         `json:"peft_type"`
	TaskType            string         `json:"task_type"`
	R                   int            `json:"r"`
	LoraAlpha           float64        `json:"lora_alpha"`
	LoraDropout         float64        `json:"lora_dropout"`
	TargetModules       any            `json:"target_modules"` // list of names, or "all-linear"
	Bias                string         `json:"bias"`
	FanInFanOut         bool           `json:"fan_in_fan_out"`
	BaseModelNameOrPath string         `json:"base_model_name_or_path"`
	InferenceMode       bool           `json:"inference_mode"`
	UseRSLoRA           bool           `json:"use_rslora"`
	UseDoRA             bool           `json:"use_dora"`
	ModulesToSave       []string       `json:"modules_to_save"`
	RankPattern         map[string]any `json:"rank_pattern,omitempty"`
	AlphaPattern        map[string]any `json:"alpha_pattern,omitempty"`
	LayersToTransform   any            `json:"layers_to_transform,omitempty"`
}

func peftName(layer, mod int, ab string) string {
	return "base_model.model." + modulePath(layer, mod) + ".lora_" + ab + ".weight"
}

// SavePEFT writes the adapter as a PEFT LoRA folder: adapter_config.json and
// adapter_model.safetensors with tensors base_model.model.<module>.lora_A.weight [r, in] and
// lora_B.weight [out, r]. baseModel is recorded as base_model_name_or_path. The adapter must not be
// written concurrently. The folder is created 0700 and the files are 0600:
// adapters live in the data directory beside customers' data.
func (a *Adapter) SavePEFT(dir, baseModel string) ([]Artifact, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	var ts []safetensors.Tensor
	r := a.Config.Rank
	for l := range a.layers {
		for mod, p := range a.layers[l] {
			if p.A == nil {
				continue
			}
			ts = append(ts, safetensors.F32(peftName(l, mod, "A"), []int{r, p.in}, p.A))
			ts = append(ts, safetensors.F32(peftName(l, mod, "B"), []int{p.out, r}, p.B))
		}
	}
	wpath, cpath := filepath.Join(dir, AdapterWeightsFile), filepath.Join(dir, AdapterConfigFile)
	if err := safetensors.WriteFile(wpath, ts, map[string]string{"format": "pt"}); err != nil {
		return nil, err
	}
	targets := slices.Clone(a.Config.TargetModules)
	sort.Strings(targets)
	pc := peftConfig{
		PeftType: "LORA", TaskType: "CAUSAL_LM", R: r, LoraAlpha: a.Config.Alpha, LoraDropout: a.Config.Dropout,
		TargetModules: targets, Bias: "none", BaseModelNameOrPath: baseModel, InferenceMode: true,
	}
	b, err := json.MarshalIndent(pc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if err := writeFileAtomic(cpath, append(b, '\n')); err != nil {
		return nil, err
	}
	return artifacts(0o600, wpath, cpath)
}

// LoadPEFT reads a PEFT LoRA folder for a model of config base. The adapter's Name is the
// folder's base name. Variants this package cannot apply exactly (DoRA, rsLoRA, per-module rank or
// alpha patterns, biases, fan_in_fan_out, modules_to_save) and any missing, unexpected or
// mis-shaped tensor are refused with ErrCheckpoint.
func LoadPEFT(dir string, base Config) (*Adapter, error) {
	raw, err := os.ReadFile(filepath.Join(dir, AdapterConfigFile))
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	var pc peftConfig
	if err := json.Unmarshal(raw, &pc); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCheckpoint, AdapterConfigFile, err)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: "+format, append([]any{ErrCheckpoint, dir}, args...)...)
	}
	switch {
	case pc.PeftType != "LORA":
		return nil, bad("peft_type %q, want LORA", pc.PeftType)
	case pc.UseDoRA || pc.UseRSLoRA:
		return nil, bad("DoRA/rsLoRA adapters are not supported")
	case pc.Bias != "" && pc.Bias != "none":
		return nil, bad("bias %q is not supported", pc.Bias)
	case pc.FanInFanOut:
		return nil, bad("fan_in_fan_out adapters are not supported")
	case len(pc.ModulesToSave) > 0 || len(pc.RankPattern) > 0 || len(pc.AlphaPattern) > 0 || pc.LayersToTransform != nil:
		return nil, bad("modules_to_save, rank_pattern, alpha_pattern and layers_to_transform are not supported")
	}
	var targets []string
	switch tm := pc.TargetModules.(type) {
	case string:
		if tm != "all-linear" {
			return nil, bad("target_modules %q: only a list of module names or \"all-linear\" is supported", tm)
		}
		targets = LoRAModules
	case []any:
		for _, v := range tm {
			name, ok := v.(string)
			if !ok {
				return nil, bad("target_modules entry %v is not a string", v)
			}
			targets = append(targets, name)
		}
	default:
		return nil, bad("target_modules missing or malformed")
	}
	lc := LoRAConfig{Rank: pc.R, Alpha: pc.LoraAlpha, Dropout: pc.LoraDropout, TargetModules: targets}
	if err := lc.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	a, err := newZeroAdapter(filepath.Base(dir), base, lc)
	if err != nil {
		return nil, err
	}
	f, err := safetensors.Open(filepath.Join(dir, AdapterWeightsFile))
	if err != nil {
		return nil, fmt.Errorf("model: load adapter %s: %w", dir, err)
	}
	defer f.Close()
	want := map[string]bool{}
	for l := range a.layers {
		for mod, p := range a.layers[l] {
			if p.A == nil {
				continue
			}
			na, nb := peftName(l, mod, "A"), peftName(l, mod, "B")
			want[na], want[nb] = true, true
			if err := readTensor(f, na, []int{lc.Rank, p.in}, p.A); err != nil {
				return nil, fmt.Errorf("%s: %w", dir, err)
			}
			if err := readTensor(f, nb, []int{p.out, lc.Rank}, p.B); err != nil {
				return nil, fmt.Errorf("%s: %w", dir, err)
			}
		}
	}
	for _, name := range f.Names() {
		if !want[name] {
			return nil, bad("unexpected tensor %q (adapter made for another model?)", name)
		}
	}
	return a, nil
}
