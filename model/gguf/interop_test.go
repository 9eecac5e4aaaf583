package gguf

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The tests in this file check the package against gguf-py, the Python package llama.cpp
// maintains, and against an independent NumPy forward pass. They run only with
// CITIZEN_PY_INTEROP=1 and need python3 with gguf (0.19) and numpy.

func needPython(t *testing.T) {
	t.Helper()
	if os.Getenv("CITIZEN_PY_INTEROP") != "1" {
		t.Skip("set CITIZEN_PY_INTEROP=1 to run (needs python3 -m pip install gguf==0.19 numpy)")
	}
}

func python(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("python3", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3 %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}

// TestPythonReference regenerates testdata/reference.gguf with gguf-py (it must come out byte
// for byte the same), then generates blocks from a fresh seed and checks Dequantize against
// gguf-py's dequantization of them, bit for bit.
func TestPythonReference(t *testing.T) {
	needPython(t)
	dir := t.TempDir()
	again := filepath.Join(dir, "again.gguf")
	python(t, filepath.Join("testdata", "gen_reference.py"), again, "1")
	a, _ := os.ReadFile(again)
	b, _ := os.ReadFile(filepath.Join("testdata", "reference.gguf"))
	if !bytes.Equal(a, b) {
		t.Errorf("gen_reference.py no longer writes testdata/reference.gguf (%d vs %d bytes); regenerate it", len(a), len(b))
	}
	for _, seed := range []string{"2", "3"} {
		path := filepath.Join(dir, "seed"+seed+".gguf")
		python(t, filepath.Join("testdata", "gen_reference.py"), path, seed)
		f, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, typ := range referenceTypes {
			got, err := f.Float32("q." + typ.String())
			if err != nil {
				t.Fatal(err)
			}
			want, _ := f.Float32("want." + typ.String())
			for i := range want {
				if !sameFloat(got[i], want[i]) {
					t.Errorf("seed %s %s weight %d: %g, gguf-py %g", seed, typ, i, got[i], want[i])
					break
				}
			}
		}
	}
}

// TestPythonReadsEncode writes a file with Encode (every value type, every dequantizable
// tensor type, an alignment of 128) and checks what gguf-py's reader makes of it.
func TestPythonReadsEncode(t *testing.T) {
	needPython(t)
	r := rand.New(rand.NewPCG(9, 9))
	kvs := []KV{{"general.architecture", MustValue("test")}, {"general.alignment", MustValue(uint32(128))}}
	for k, v := range referenceKV {
		kvs = append(kvs, KV{k, MustValue(v)})
	}
	slices.SortFunc(kvs[2:], func(a, b KV) int { return strings.Compare(a.Key, b.Key) })
	var ts []Tensor
	want := map[string][]float32{}
	for i, typ := range referenceTypes {
		x := make([]float32, 3*256)
		for j := range x {
			x[j] = float32(r.NormFloat64())
		}
		dims := []uint64{256, 3}
		if i%3 == 1 {
			dims = []uint64{256, 1, 3} // a 3-D tensor
		}
		q := quantize(typ, x)
		y := make([]float32, len(x))
		if err := Dequantize(y, q, typ); err != nil {
			t.Fatal(err)
		}
		name := "t." + typ.String()
		want[name] = y
		ts = append(ts, Tensor{Info: TensorInfo{Name: name, Dims: dims, Type: typ}, Data: q})
	}
	path := filepath.Join(t.TempDir(), "go.gguf")
	if err := WriteFile(path, kvs, ts); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := json.NewDecoder(bytes.NewReader(python(t, filepath.Join("testdata", "dump.py"), path)))
	dec.UseNumber()
	var got struct {
		Version    int   `json:"version"`
		Alignment  int   `json:"alignment"`
		DataOffset int64 `json:"data_offset"`
		Fields     map[string]struct {
			Types []string `json:"types"`
			Value any      `json:"value"`
		} `json:"fields"`
		Tensors []struct {
			Name   string        `json:"name"`
			Type   string        `json:"type"`
			Shape  []uint64      `json:"shape"`
			Offset int64         `json:"offset"`
			Values []json.Number `json:"values"`
		} `json:"tensors"`
	}
	if err := dec.Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.Version != 3 || got.Alignment != 128 || got.DataOffset != f.DataOffset || len(got.Fields) != len(kvs) {
		t.Fatalf("gguf-py read version %d alignment %d data offset %d (Go %d), %d fields", got.Version, got.Alignment, got.DataOffset, f.DataOffset, len(got.Fields))
	}
	for _, kv := range kvs {
		g, ok := got.Fields[kv.Key]
		if !ok {
			t.Errorf("gguf-py lacks %s", kv.Key)
			continue
		}
		if wt := typeNames(kv.Value); !slices.Equal(g.Types, wt) {
			t.Errorf("%s: gguf-py types %v, want %v", kv.Key, g.Types, wt)
		}
		if gs, ws := canon(g.Value), canonValue(kv.Value); gs != ws {
			t.Errorf("%s: gguf-py read %s, want %s", kv.Key, gs, ws)
		}
	}
	if len(got.Tensors) != len(ts) {
		t.Fatalf("gguf-py read %d tensors", len(got.Tensors))
	}
	for i, gt := range got.Tensors {
		ti := f.Tensors[i]
		if gt.Name != ti.Name || gt.Type != ti.Type.String() || !slices.Equal(gt.Shape, ti.Dims) || gt.Offset != f.DataOffset+int64(ti.Offset) {
			t.Errorf("tensor %d: gguf-py %s %s %v at %d; Go %s %s %v at %d", i, gt.Name, gt.Type, gt.Shape, gt.Offset, ti.Name, ti.Type, ti.Dims, f.DataOffset+int64(ti.Offset))
		}
		w := want[ti.Name]
		for j, n := range gt.Values {
			v, _ := strconv.ParseFloat(string(n), 64)
			if float32(v) != w[j] {
				t.Errorf("%s weight %d: gguf-py %g, Go %g", ti.Name, j, v, w[j])
				break
			}
		}
	}
}

// typeNames is gguf-py's ReaderField.types for v.
func typeNames(v Value) []string {
	names := []string{strings.ToUpper(v.Type.String())}
	for v.Type == TypeArray {
		names = append(names, strings.ToUpper(v.Elem.String()))
		if v.Elem != TypeArray {
			break
		}
		inner := v.Any().([]Value)
		if len(inner) == 0 {
			break
		}
		v = inner[0]
	}
	return names
}

// canon renders a JSON value (numbers as parsed float64 or integer text) for comparison.
func canon(x any) string {
	switch v := x.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return strconv.FormatInt(i, 10)
		}
		if u, err := strconv.ParseUint(string(v), 10, 64); err == nil {
			return strconv.FormatUint(u, 10)
		}
		f, _ := strconv.ParseFloat(string(v), 64)
		return strconv.FormatFloat(f, 'g', -1, 64)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = canon(e)
		}
		return "[" + strings.Join(parts, " ") + "]"
	case string:
		return strconv.Quote(v)
	}
	return fmt.Sprint(x)
}

// canonValue renders v as canon renders gguf-py's reading of it (which flattens arrays of
// arrays).
func canonValue(v Value) string {
	if v.Type != TypeArray {
		return canonScalar(v.Any())
	}
	var parts []string
	var walk func(Value)
	walk = func(a Value) {
		if inner, ok := a.Any().([]Value); ok {
			for _, e := range inner {
				walk(e)
			}
			return
		}
		rv := a.Any()
		for i := 0; i < a.Len(); i++ {
			parts = append(parts, canonScalar(index(rv, i)))
		}
	}
	walk(v)
	return "[" + strings.Join(parts, " ") + "]"
}

func index(s any, i int) any {
	switch x := s.(type) {
	case []uint8:
		return x[i]
	case []int8:
		return x[i]
	case []uint16:
		return x[i]
	case []int16:
		return x[i]
	case []uint32:
		return x[i]
	case []int32:
		return x[i]
	case []float32:
		return x[i]
	case []bool:
		return x[i]
	case []string:
		return x[i]
	case []uint64:
		return x[i]
	case []int64:
		return x[i]
	case []float64:
		return x[i]
	}
	return nil
}

func canonScalar(x any) string {
	switch v := x.(type) {
	case float32:
		return strconv.FormatFloat(float64(v), 'g', -1, 64)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case string:
		return strconv.Quote(v)
	}
	return fmt.Sprint(x)
}

// TestPythonSmolLM2Logits compares the logits of the loaded SmolLM2 on 102 tokens with an
// independent NumPy forward pass in float64 (testdata/llama_forward.py), and checks that the
// comparison can tell a model whose q/k rows were left permuted.
func TestPythonSmolLM2Logits(t *testing.T) {
	needPython(t)
	path := smolPath(t)
	m, _, err := LoadModel(path)
	if err != nil {
		t.Fatal(err)
	}
	V := m.Config.VocabSize
	start := time.Now()
	got, err := m.Logits(modelBatch(paragraph), nil)
	if err != nil {
		t.Fatal(err)
	}
	goTime := time.Since(start)
	ids, _ := json.Marshal(paragraph)
	prefix := filepath.Join(t.TempDir(), "logits")
	start = time.Now()
	python(t, filepath.Join("testdata", "llama_forward.py"), path, string(ids), prefix)
	t.Logf("Go forward %v, NumPy float64 (reading, dequantizing, two passes) %v", goTime.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	const permutedTokens = 32 // PERMUTED_TOKENS in llama_forward.py
	read := func(p string, n int) []float32 {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != 4*n*V {
			t.Fatalf("%s: %d bytes, want %d", p, len(b), 4*n*V)
		}
		v := make([]float32, len(b)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return v
	}
	ref, wrong := read(prefix+".f32", len(paragraph)), read(prefix+".permuted.f32", permutedTokens)
	stats := func(a, b []float32) (maxDiff, scale float64, top1 int) {
		for p := 0; p < len(b)/V; p++ {
			ra, rb := a[p*V:(p+1)*V], b[p*V:(p+1)*V]
			for i := range ra {
				maxDiff = max(maxDiff, math.Abs(float64(ra[i]-rb[i])))
				scale = max(scale, math.Abs(float64(rb[i])))
			}
			if argmax(ra) == argmax(rb) {
				top1++
			}
		}
		return
	}
	d, scale, agree := stats(got, ref)
	dw, _, agreeW := stats(got[:permutedTokens*V], wrong)
	t.Logf("Go vs NumPy: max |Δlogit| %.3g (max |logit| %.3g), top-1 agreement %d/%d", d, scale, agree, len(paragraph))
	t.Logf("Go vs NumPy with q/k left permuted (first %d tokens): max |Δlogit| %.3g, top-1 agreement %d/%d", permutedTokens, dw, agreeW, permutedTokens)
	if d > 2e-3*scale || agree < len(paragraph)-1 {
		t.Errorf("logits differ from the NumPy reference: max %g, top-1 %d/%d", d, agree, len(paragraph))
	}
	if dw < 100*d || agreeW > permutedTokens*9/10 {
		t.Errorf("the check cannot tell a permuted model: max %g, top-1 %d/%d", dw, agreeW, permutedTokens)
	}
}

func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}
