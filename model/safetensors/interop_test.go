package safetensors

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
)

// TestPythonInterop checks files against the reference implementation
// (Python's safetensors.numpy) both ways. It runs only with
// CITIZEN_PY_INTEROP=1 and needs python3 with safetensors and numpy.
func TestPythonInterop(t *testing.T) {
	if os.Getenv("CITIZEN_PY_INTEROP") != "1" {
		t.Skip("set CITIZEN_PY_INTEROP=1 to run (needs python3 -m pip install safetensors numpy)")
	}
	dir := t.TempDir()
	goFile := filepath.Join(dir, "go.safetensors")
	pyFile := filepath.Join(dir, "py.safetensors")
	tensors := []Tensor{
		F32("model.embed_tokens.weight", []int{2, 3}, []float32{1, -2, 3.5, 0, 1e-30, -7}),
		F16("half", []int{3}, []float32{0.5, -1, 65504}),
		{Name: "ids", DType: DTypeI64, Shape: []int{2}, Data: []byte{5, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}},
		{Name: "scalar", DType: DTypeU8, Shape: []int{}, Data: []byte{42}},
	}
	if err := WriteFile(goFile, tensors, map[string]string{"format": "np"}); err != nil {
		t.Fatal(err)
	}
	script := `
import json, sys, numpy as np
from safetensors.numpy import load_file, save_file
from safetensors import safe_open
src, dst = sys.argv[1], sys.argv[2]
d = load_file(src)
with safe_open(src, framework="np") as f:
    md = f.metadata()
out = {k: {"dtype": str(v.dtype), "shape": list(v.shape), "values": v.reshape(-1).tolist()} for k, v in d.items()}
save_file({"b": np.arange(6, dtype=np.float32).reshape(2, 3) / 4, "a": np.array([1, -1], dtype=np.float16),
           "c": np.array([7], dtype=np.int32)}, dst, metadata={"who": "python"})
print(json.dumps({"tensors": out, "metadata": md}))
`
	cmd := exec.Command("python3", "-c", script, goFile, pyFile)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	var got struct {
		Tensors map[string]struct {
			DType  string    `json:"dtype"`
			Shape  []int     `json:"shape"`
			Values []float64 `json:"values"`
		} `json:"tensors"`
		Metadata map[string]string `json:"metadata"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := map[string]struct {
		dtype  string
		shape  []int
		values []float64
	}{
		"model.embed_tokens.weight": {"float32", []int{2, 3}, []float64{1, -2, 3.5, 0, float64(float32(1e-30)), -7}},
		"half":                      {"float16", []int{3}, []float64{0.5, -1, 65504}},
		"ids":                       {"int64", []int{2}, []float64{5, -1}},
		"scalar":                    {"uint8", []int{}, []float64{42}},
	}
	if len(got.Tensors) != len(want) || got.Metadata["format"] != "np" {
		t.Fatalf("python read %+v", got)
	}
	for name, w := range want {
		g := got.Tensors[name]
		if g.DType != w.dtype || !reflect.DeepEqual(g.Shape, w.shape) || !reflect.DeepEqual(g.Values, w.values) {
			t.Errorf("%s: python read %+v, want %+v", name, g, w)
		}
	}

	f, err := Open(pyFile)
	if err != nil {
		t.Fatalf("reading Python's file: %v", err)
	}
	defer f.Close()
	if f.Metadata["who"] != "python" {
		t.Errorf("metadata %v", f.Metadata)
	}
	b, shape, err := f.Float32("b")
	if err != nil || !reflect.DeepEqual(shape, []int{2, 3}) || !reflect.DeepEqual(b, []float32{0, 0.25, 0.5, 0.75, 1, 1.25}) {
		t.Errorf("b = %v %v %v", b, shape, err)
	}
	a, _, err := f.Float32("a")
	if err != nil || !reflect.DeepEqual(a, []float32{1, -1}) {
		t.Errorf("a = %v %v", a, err)
	}
	if info, ok := f.Info("c"); !ok || info.DType != DTypeI32 {
		t.Errorf("c = %+v", info)
	}
}
