package hf

import (
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"citizen/model/tokenizer"
	"golang.org/x/text/unicode/norm"
)

var update = flag.Bool("update", false, "rewrite testdata/golden*.json.gz from Python's tokenizers (with CITIZEN_PY_INTEROP=1)")

const (
	corpusSize   = 12000
	nSpecial     = 2000 // texts also encoded with add_special_tokens=True
	nSmall       = 3000 // texts for the normalizer and extra pre-tokenizer checks
	goldenStride = 16   // every goldenStride-th corpus text of at most goldenMaxLen bytes is golden
	goldenMaxLen = 1000
)

var fixtures = []string{"gpt2", "gpt2-prefix", "llama3", "qwen2", "smollm2", "tiny"}

func fixturePath(name string) string {
	if name == "tiny" {
		return filepath.Join("testdata", "tiny", "tokenizer.json")
	}
	return filepath.Join("testdata", name+".json")
}

type pyResult struct {
	Plain            [][]int    `json:"plain"`
	Special          [][]int    `json:"special"`
	Ordinary         [][]int    `json:"ordinary"`
	Decode           []string   `json:"decode"`
	DecodeRandom     []string   `json:"decode_random"`
	DecodeRandomSkip []string   `json:"decode_random_skip"`
	PreTok           [][]string `json:"pretok"`
}

type golden struct {
	Texts []string                `json:"texts"`
	IDs   map[string]goldenResult `json:"ids"`
}

// goldenResult holds ids per text; an Ordinary entry is null where it
// equals Plain.
type goldenResult struct {
	Plain    [][]int `json:"plain"`
	Ordinary [][]int `json:"ordinary"`
}

func (g goldenResult) ordinary(i int) []int {
	if g.Ordinary[i] == nil {
		return g.Plain[i]
	}
	return g.Ordinary[i]
}

func randomIDLists(seed uint64, vocab int) [][]int {
	r := rand.New(rand.NewPCG(seed, 3))
	out := make([][]int, 400)
	for i := range out {
		ids := make([]int, 1+r.IntN(20))
		for j := range ids {
			ids[j] = r.IntN(vocab + 3)
		}
		out[i] = ids
	}
	return out
}

// parityCheck compares tok with Python's results and returns the number of
// texts that differ in any mode.
func parityCheck(t *testing.T, name string, tok *Tokenizer, texts []string, want pyResult, random [][]int) {
	t.Helper()
	diff := map[string]int{}
	report := func(mode string, i int, got, want any) {
		diff[mode]++
		if diff[mode] <= 3 {
			t.Errorf("%s %s: text %d %q:\n got  %v\n want %v", name, mode, i, clip(texts[i]), got, want)
		}
	}
	for i, s := range texts {
		if got := tok.Encode(s); !slices.Equal(got, want.Plain[i]) {
			report("encode", i, got, want.Plain[i])
		}
		if got := tok.EncodeOrdinary(s); !slices.Equal(got, want.Ordinary[i]) {
			report("ordinary", i, got, want.Ordinary[i])
		}
		if i < len(want.Special) {
			if got := tok.EncodeWithSpecial(s); !slices.Equal(got, want.Special[i]) {
				report("special", i, got, want.Special[i])
			}
		}
		if got := tok.Decode(want.Plain[i]); got != want.Decode[i] {
			report("decode", i, got, want.Decode[i])
		}
		if got := tok.preTokenize(s); !slices.Equal(got, want.PreTok[i]) {
			report("pre-tokenize", i, got, want.PreTok[i])
		}
	}
	for i, ids := range random {
		if got := tok.Decode(ids); got != want.DecodeRandom[i] {
			diff["decode-random"]++
			if diff["decode-random"] <= 3 {
				t.Errorf("%s decode %v: got %q want %q", name, ids, got, want.DecodeRandom[i])
			}
		}
		if got := tok.DecodeSkipSpecial(ids); got != want.DecodeRandomSkip[i] {
			diff["decode-random-skip"]++
		}
	}
	t.Logf("%s: %d texts × (Encode, EncodeOrdinary, Decode, pre-tokenizer) + %d × EncodeWithSpecial + %d random decodes: mismatches %v",
		name, len(texts), min(nSpecial, len(texts)), len(random), diff)
}

func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}

// TestPythonParity encodes the corpus with Python's tokenizers and with this
// package for every fixture (and SmolLM2 from its GGUF file when
// CITIZEN_SMOLLM2_GGUF names it) and requires identical ids and text.
func TestPythonParity(t *testing.T) {
	if os.Getenv("CITIZEN_PY_INTEROP") != "1" {
		t.Skip("set CITIZEN_PY_INTEROP=1 to run (needs python3 -m pip install tokenizers gguf)")
	}
	dir := t.TempDir()
	texts := parityCorpus(corpusSize)
	toks := map[string]*Tokenizer{}
	specs := map[string]map[string]string{}
	random := map[string][][]int{}
	for i, name := range fixtures {
		tok, err := Load(fixturePath(name))
		if err != nil {
			t.Fatal(err)
		}
		toks[name] = tok
		abs, _ := filepath.Abs(fixturePath(name))
		specs[name] = map[string]string{"path": abs}
		random[name] = randomIDLists(uint64(i), tok.VocabSize())
	}
	ggufPath := os.Getenv("CITIZEN_SMOLLM2_GGUF")
	saved := filepath.Join(dir, "smollm2-gguf.json")
	if ggufPath != "" {
		specs["smollm2-gguf"] = map[string]string{"gguf": ggufPath, "save": saved}
		random["smollm2-gguf"] = randomIDLists(99, 49152)
	}
	// Pre-tokenizer options that no fixture uses, each ahead of a plain
	// ByteLevel, compared on the first nSmall texts.
	extra := extraPreTokenizers(t, dir)
	for name, path := range extra {
		specs[name] = map[string]string{"path": path, "pretok_only": "1"}
	}
	req, err := json.Marshal(map[string]any{"texts": texts, "n_special": nSpecial, "n_small": nSmall,
		"tokenizers": specs, "random_ids": random})
	if err != nil {
		t.Fatal(err)
	}
	reqPath, resPath := filepath.Join(dir, "req.json"), filepath.Join(dir, "res.json")
	if err := os.WriteFile(reqPath, req, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("python3", filepath.Join("testdata", "interop.py"), reqPath, resPath).CombinedOutput(); err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	data, err := os.ReadFile(resPath)
	if err != nil {
		t.Fatal(err)
	}
	var res map[string]pyResult
	var norms struct {
		Normalize map[string][]string `json:"_normalize"`
	}
	if err := json.Unmarshal(data, &norms); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	delete(res, "_normalize")
	checkNormalizers(t, texts, norms.Normalize)
	for name, path := range extra {
		tok, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		bad := 0
		for i, want := range res[name].PreTok {
			if got := tok.preTokenize(texts[i]); !slices.Equal(got, want) {
				if bad++; bad <= 3 {
					t.Errorf("%s: %q:\n got  %q\n want %q", name, clip(texts[i]), got, want)
				}
			}
		}
		t.Logf("pre-tokenizer %s: %d texts, %d differ", name, len(res[name].PreTok), bad)
		delete(res, name)
	}
	citizenTok, err := tokenizer.LoadFile(citizenBase)
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for i, s := range texts {
		if !slices.Equal(citizenTok.Encode(s), res["tiny"].Ordinary[i]) {
			bad++
		}
	}
	t.Logf("tiny: Python (encode_special_tokens=True) and citizen's own tokenizer differ on %d of %d texts", bad, len(texts))
	if ggufPath != "" {
		viaJSON, err := Load(saved)
		if err != nil {
			t.Fatalf("Python's tokenizer.json built from the GGUF: %v", err)
		}
		toks["smollm2-gguf (tokenizer.json)"] = viaJSON
		res["smollm2-gguf (tokenizer.json)"] = res["smollm2-gguf"]
		random["smollm2-gguf (tokenizer.json)"] = random["smollm2-gguf"]
		viaGGUF, err := smolLM2FromGGUF(ggufPath)
		if err != nil {
			t.Fatal(err)
		}
		toks["smollm2-gguf"] = viaGGUF
	}
	names := make([]string, 0, len(toks))
	for name := range toks {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		parityCheck(t, name, toks[name], texts, res[name], random[name])
	}
	if *update {
		writeGolden(t, "golden.json.gz", texts, res, fixtures, goldenStride)
		if ggufPath != "" {
			writeGolden(t, "golden_smollm2_gguf.json.gz", texts, res, []string{"smollm2-gguf"}, 4*goldenStride)
		}
	}
}

func checkNormalizers(t *testing.T, texts []string, want map[string][]string) {
	forms := map[string]norm.Form{"NFC": norm.NFC, "NFD": norm.NFD, "NFKC": norm.NFKC, "NFKD": norm.NFKD}
	for name, f := range forms {
		bad := 0
		for i, w := range want[name] {
			if got := f.String(texts[i]); got != w {
				// NFKC and NFKD are refused by Parse for such differences;
				// they are measured, not required.
				if bad++; bad <= 3 && (name == "NFC" || name == "NFD") {
					t.Errorf("%s %q: got %q want %q", name, clip(texts[i]), got, w)
				}
			}
		}
		t.Logf("normalizer %s: %d texts, %d differ", name, len(want[name]), bad)
	}
}

// extraPreTokenizers writes tokenizer.json files (the gpt2 fixture with
// another pre-tokenizer) and returns their paths by name.
func extraPreTokenizers(t *testing.T, dir string) map[string]string {
	data, err := os.ReadFile(fixturePath("gpt2"))
	if err != nil {
		t.Fatal(err)
	}
	configs := map[string]any{
		"digits-runs": map[string]any{"type": "Digits", "individual_digits": false},
	}
	for _, beh := range []string{"Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous"} {
		for _, inv := range []bool{false, true} {
			for pname, pat := range map[string]any{"gpt2re": map[string]string{"Regex": PatternGPT2},
				"qwen2re": map[string]string{"Regex": PatternQwen2}, "space": map[string]string{"String": " "},
				"ab": map[string]string{"String": "ab"}} {
				configs[fmt.Sprintf("split-%s-%s-%v", pname, beh, inv)] = map[string]any{
					"type": "Split", "pattern": pat, "behavior": beh, "invert": inv}
			}
		}
	}
	out := map[string]string{}
	for name, c := range configs {
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		m["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{c,
			map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": false}}}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name+".json")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		out[name] = p
	}
	return out
}

func writeGolden(t *testing.T, file string, texts []string, res map[string]pyResult, names []string, stride int) {
	g := golden{IDs: map[string]goldenResult{}}
	var idx []int
	for i := 0; i < len(texts); i += stride {
		if len(texts[i]) > goldenMaxLen {
			continue
		}
		idx = append(idx, i)
		g.Texts = append(g.Texts, texts[i])
	}
	for _, name := range names {
		var r goldenResult
		for _, i := range idx {
			r.Plain = append(r.Plain, res[name].Plain[i])
			var o []int
			if !slices.Equal(res[name].Ordinary[i], res[name].Plain[i]) {
				o = res[name].Ordinary[i]
			}
			r.Ordinary = append(r.Ordinary, o)
		}
		g.IDs[name] = r
	}
	f, err := os.Create(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	zw, _ := gzip.NewWriterLevel(f, gzip.BestCompression)
	if err := json.NewEncoder(zw).Encode(g); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func readGolden(t *testing.T, file string) golden {
	f, err := os.Open(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.NewDecoder(zr).Decode(&g); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestGolden checks the fixtures against ids that Python's tokenizers gave
// (recorded by TestPythonParity -update), without Python.
func TestGolden(t *testing.T) {
	g := readGolden(t, "golden.json.gz")
	for _, name := range fixtures {
		want, ok := g.IDs[name]
		if !ok {
			t.Fatalf("golden file lacks %s; rerun TestPythonParity with -update", name)
		}
		tok, err := Load(fixturePath(name))
		if err != nil {
			t.Fatal(err)
		}
		bad := 0
		for i, s := range g.Texts {
			if got := tok.Encode(s); !slices.Equal(got, want.Plain[i]) {
				if bad++; bad <= 3 {
					t.Errorf("%s: %q:\n got  %v\n want %v", name, clip(s), got, want.Plain[i])
				}
			}
			if got := tok.EncodeOrdinary(s); !slices.Equal(got, want.ordinary(i)) {
				if bad++; bad <= 3 {
					t.Errorf("%s ordinary: %q:\n got  %v\n want %v", name, clip(s), got, want.ordinary(i))
				}
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d golden encodings differ", name, bad, 2*len(g.Texts))
		}
	}
}

func ExampleTokenizer_Encode() {
	tok, err := Load("testdata/gpt2.json")
	if err != nil {
		panic(err)
	}
	ids := tok.Encode("Hello world<|endoftext|>")
	fmt.Println(tok.Decode(ids), ids[len(ids)-1])
	// Output: Hello world<|endoftext|> 0
}
