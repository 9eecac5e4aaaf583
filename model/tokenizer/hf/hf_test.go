package hf

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
)

func mustLoad(t testing.TB, name string) *Tokenizer {
	t.Helper()
	tok, err := Load(fixturePath(name))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// edited returns the gpt2 fixture with edit applied to its decoded JSON.
func edited(t *testing.T, edit func(map[string]any)) []byte {
	t.Helper()
	data, err := os.ReadFile(fixturePath("gpt2"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func model(m map[string]any) map[string]any { return m["model"].(map[string]any) }

func TestParseRefuses(t *testing.T) {
	cases := []struct {
		name string
		edit func(map[string]any)
		want error
	}{
		{"version", func(m map[string]any) { m["version"] = "2.0" }, ErrFormat},
		{"lowercase", func(m map[string]any) { m["normalizer"] = map[string]any{"type": "Lowercase"} }, ErrUnsupported},
		{"nfkc", func(m map[string]any) { m["normalizer"] = map[string]any{"type": "NFKC"} }, ErrUnsupported},
		{"unknown regex", func(m map[string]any) {
			m["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
				map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `\p{L}+|\s+`}, "behavior": "Isolated", "invert": false},
				map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}}}
		}, ErrUnsupported},
		{"no byte level", func(m map[string]any) {
			m["pre_tokenizer"] = map[string]any{"type": "Digits", "individual_digits": true}
		}, ErrUnsupported},
		{"byte level not last", func(m map[string]any) {
			m["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
				map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
				map[string]any{"type": "Digits", "individual_digits": true}}}
		}, ErrUnsupported},
		{"metaspace", func(m map[string]any) { m["pre_tokenizer"] = map[string]any{"type": "Metaspace"} }, ErrUnsupported},
		{"decoder", func(m map[string]any) { m["decoder"] = map[string]any{"type": "WordPiece"} }, ErrUnsupported},
		{"no decoder", func(m map[string]any) { m["decoder"] = nil }, ErrUnsupported},
		{"truncation", func(m map[string]any) { m["truncation"] = map[string]any{"max_length": 8} }, ErrUnsupported},
		{"fixed padding", func(m map[string]any) { m["padding"] = map[string]any{"strategy": map[string]any{"Fixed": 8}} }, ErrUnsupported},
		{"dropout", func(m map[string]any) { model(m)["dropout"] = 0.1 }, ErrUnsupported},
		{"byte fallback", func(m map[string]any) { model(m)["byte_fallback"] = true }, ErrUnsupported},
		{"prefix", func(m map[string]any) { model(m)["continuing_subword_prefix"] = "##" }, ErrUnsupported},
		{"suffix", func(m map[string]any) { model(m)["end_of_word_suffix"] = "</w>" }, ErrUnsupported},
		{"wordpiece", func(m map[string]any) { model(m)["type"] = "WordPiece" }, ErrUnsupported},
		{"unk missing", func(m map[string]any) { model(m)["unk_token"] = "<nope>" }, ErrFormat},
		{"merge missing", func(m map[string]any) { model(m)["merges"] = []any{"Ġ zzzq"} }, ErrFormat},
		{"merge three parts", func(m map[string]any) { model(m)["merges"] = []any{"a b c"} }, ErrFormat},
		{"added id", func(m map[string]any) {
			m["added_tokens"] = []any{map[string]any{"id": 7, "content": "<new>", "special": true}}
		}, ErrFormat},
		{"post processor", func(m map[string]any) { m["post_processor"] = map[string]any{"type": "Weird"} }, ErrUnsupported},
		{"template B", func(m map[string]any) {
			m["post_processor"] = map[string]any{"type": "TemplateProcessing",
				"single": []any{map[string]any{"Sequence": map[string]any{"id": "B", "type_id": 0}}}}
		}, ErrFormat},
	}
	for _, c := range cases {
		_, err := Parse(edited(t, c.edit))
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	for _, bad := range []string{"", "{", "[]", `{"version":"1.0"}`, `{"version":"1.0","model":{"vocab":{},"merges":[]}}`} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}

func TestAcceptsOptionalForms(t *testing.T) {
	// A new added token takes the next id; a pair-form merges list loads.
	data := edited(t, func(m map[string]any) {
		m["added_tokens"] = append(m["added_tokens"].([]any), map[string]any{"id": 1200, "content": "<new>",
			"special": false, "normalized": false, "single_word": false, "lstrip": false, "rstrip": false})
		m["padding"] = map[string]any{"strategy": "BatchLongest"}
		var pairs []any
		for _, s := range model(m)["merges"].([]any) {
			a, b, _ := strings.Cut(s.(string), " ")
			pairs = append(pairs, []any{a, b})
		}
		model(m)["merges"] = pairs
	})
	tok, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	ref := mustLoad(t, "gpt2")
	if got := tok.Encode("x<new>y"); !slices.Equal(got, slices.Concat(ref.Encode("x"), []int{1200}, ref.Encode("y"))) {
		t.Errorf("x<new>y: %v", got)
	}
	if tok.IsSpecial(1200) || !tok.IsSpecial(0) || tok.VocabSize() != 1201 {
		t.Errorf("special flags or size %d", tok.VocabSize())
	}
}

func TestLossyDecode(t *testing.T) {
	// Unicode's substitution of maximal subparts, as Rust's from_utf8_lossy.
	cases := map[string]string{
		"a\xe2\x82b":       "a\ufffdb",
		"\xf0\x9f\x98":     "\ufffd",
		"\xc0\x80":         "\ufffd\ufffd",
		"\xed\xa0\x80":     "\ufffd\ufffd\ufffd",
		"\xf4\x90\x80\x80": "\ufffd\ufffd\ufffd\ufffd",
		"\xe0\x80":         "\ufffd\ufffd",
		"\xe0\xa0":         "\ufffd",
		"\xff€\x80":        "\ufffd€\ufffd",
		"ok 😀":             "ok 😀",
	}
	for in, want := range cases {
		var b strings.Builder
		appendLossy(&b, []byte(in))
		if b.String() != want {
			t.Errorf("%q: got %q, want %q", in, b.String(), want)
		}
	}
}

func TestMergeHeapMatchesScan(t *testing.T) {
	for _, name := range []string{"gpt2", "llama3", "smollm2"} {
		tok := mustLoad(t, name)
		r := rand.New(rand.NewPCG(1, 2))
		for i := 0; i < 300; i++ {
			var b strings.Builder
			for n := r.IntN(400); n > 0; n-- {
				b.WriteString(pick(r, []string{"a", "b", "e", "th", "in", "é", "ab", "the", " ", "1", "aa"}))
			}
			syms := tok.model.symbols(b.String())
			want := tok.model.mergeScan(slices.Clone(syms))
			if got := tok.model.mergeHeap(slices.Clone(syms)); len(syms) > 1 && !slices.Equal(got, want) {
				t.Fatalf("%s %q: heap %v, scan %v", name, b.String(), got, want)
			}
		}
	}
}

func TestAddedTokenOptions(t *testing.T) {
	tok := mustLoad(t, "gpt2-prefix")
	id := func(s string) int {
		i, ok := tok.TokenToID(s)
		if !ok {
			t.Fatalf("no token %q", s)
		}
		return i
	}
	mask, cat, end := id("<mask>"), id("cat"), id("[END]")
	cases := []struct {
		text string
		want []int // ids that must appear
		not  []int // ids that must not
	}{
		{"a cat b", []int{cat}, nil},
		{"bobcat", nil, []int{cat}},
		{"cats", nil, []int{cat}},
		{"a   <mask>", []int{mask}, nil},
		{"x [END]   y", []int{end}, nil},
	}
	for _, c := range cases {
		got := tok.Encode(c.text)
		for _, w := range c.want {
			if !slices.Contains(got, w) {
				t.Errorf("%q: %v lacks %d", c.text, got, w)
			}
		}
		for _, w := range c.not {
			if slices.Contains(got, w) {
				t.Errorf("%q: %v has %d", c.text, got, w)
			}
		}
	}
	// lstrip swallows the spaces before <mask>: nothing between "a" and it.
	if got, a := tok.Encode("a   <mask>"), tok.Encode("a"); !slices.Equal(got, append(a, mask)) {
		t.Errorf("lstrip: %v, want %v + %d", got, a, mask)
	}
	// rstrip swallows the spaces after [END].
	if got, y := tok.Encode("[END]   y"), tok.Encode("y"); !slices.Equal(got, append([]int{end}, y...)) {
		t.Errorf("rstrip: %v", got)
	}
	// Special tokens in text: recognised by Encode, not by EncodeOrdinary.
	if got := tok.EncodeOrdinary("<mask>"); slices.Contains(got, mask) {
		t.Errorf("EncodeOrdinary matched a special token: %v", got)
	}
	if got := tok.EncodeWithSpecial("hi"); got[0] != 0 || got[len(got)-1] != 2 {
		t.Errorf("Roberta template: %v", got)
	}
	if got := tok.DecodeSkipSpecial(tok.EncodeWithSpecial("hi<mask>")); got != " hi" {
		t.Errorf("DecodeSkipSpecial: %q", got)
	}
}

func TestRoundTrip(t *testing.T) {
	texts := parityCorpus(3000)
	// Tokenizers with every byte, no normalizer and no prefix space.
	for _, name := range []string{"gpt2", "llama3", "tiny"} {
		tok := mustLoad(t, name)
		for _, s := range texts {
			if got := tok.Decode(tok.EncodeOrdinary(s)); got != s {
				t.Errorf("%s: %q decodes to %q", name, clip(s), clip(got))
			}
			if got := tok.Decode(tok.Encode(s)); got != s {
				t.Errorf("%s: %q decodes to %q", name, clip(s), clip(got))
			}
		}
	}
}

func TestInvalidUTF8(t *testing.T) {
	tok := mustLoad(t, "llama3")
	for _, s := range []string{"\xff", "a\xc3", "\xe2\x82 x", "\xed\xa0\x80z", "ok\x80\x80\x80 yes 'S"} {
		var raw []byte
		for _, id := range tok.Encode(s) {
			raw = append(raw, tok.TokenBytes(id)...)
		}
		if !bytes.Equal(raw, []byte(s)) {
			t.Errorf("%q: token bytes %q", s, raw)
		}
	}
}

func TestConcurrentEncode(t *testing.T) {
	tok := mustLoad(t, "smollm2")
	texts := parityCorpus(600)
	want := make([][]int, len(texts))
	for i, s := range texts {
		want[i] = tok.Encode(s)
	}
	fresh := mustLoad(t, "smollm2")
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for k := range texts {
				i := (k*7 + g*31) % len(texts)
				if got := fresh.Encode(texts[i]); !slices.Equal(got, want[i]) {
					t.Errorf("goroutine %d text %d differs", g, i)
					return
				}
			}
		}(g)
	}
	wg.Wait()
}

// fixtureConfig expresses a fixture as BPEConfig, as a GGUF file would.
func fixtureConfig(t *testing.T, tok *Tokenizer, pre string) BPEConfig {
	c := BPEConfig{Pre: pre, BOS: -1, EOS: -1}
	for id := 0; id < tok.VocabSize(); id++ {
		s, ok := tok.IDToToken(id)
		if !ok {
			t.Fatalf("id %d has no token", id)
		}
		c.Tokens = append(c.Tokens, s)
		typ := int32(TokenNormal)
		if tok.IsSpecial(id) {
			typ = TokenControl
		}
		c.TokenTypes = append(c.TokenTypes, typ)
	}
	var f struct {
		Model struct {
			Merges []string `json:"merges"`
		} `json:"model"`
	}
	data, _ := os.ReadFile(fixturePath("gpt2"))
	if pre != "gpt2" {
		t.Fatal("only the gpt2 fixture stores merges as strings")
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	c.Merges = f.Model.Merges
	return c
}

func TestByteLevelBPEMatchesJSON(t *testing.T) {
	ref := mustLoad(t, "gpt2")
	c := fixtureConfig(t, ref, "gpt2")
	c.BOS, c.EOS, c.AddBOS = 0, 0, true
	tok, err := NewByteLevelBPE(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range parityCorpus(2000) {
		if got, want := tok.Encode(s), ref.Encode(s); !slices.Equal(got, want) {
			t.Fatalf("%q: %v, want %v", clip(s), got, want)
		}
		if got := tok.EncodeWithSpecial(s); got[0] != 0 || !slices.Equal(got[1:], ref.Encode(s)) {
			t.Fatalf("%q with BOS: %v", clip(s), got)
		}
	}
	if tok.BOS() != 0 || tok.Fingerprint() == ref.Fingerprint() || len(tok.Fingerprint()) != 64 {
		t.Errorf("bos %d fingerprint %s", tok.BOS(), tok.Fingerprint())
	}
	for _, bad := range []BPEConfig{
		{},
		{Tokens: []string{"a", "a"}, Pre: "gpt2", BOS: -1, EOS: -1},
		{Tokens: []string{"a"}, Pre: "bloom", BOS: -1, EOS: -1},
		{Tokens: []string{"a"}, Pre: "gpt2", BOS: 5, EOS: -1},
		{Tokens: []string{"a"}, Pre: "gpt2", BOS: -1, EOS: -1, AddBOS: true},
		{Tokens: []string{"a"}, TokenTypes: []int32{1, 1}, Pre: "gpt2", BOS: -1, EOS: -1},
		{Tokens: []string{"a", "b"}, Merges: []string{"a b"}, Pre: "gpt2", BOS: -1, EOS: -1},
	} {
		if _, err := NewByteLevelBPE(bad); err == nil {
			t.Errorf("NewByteLevelBPE(%+v) succeeded", bad)
		}
	}
}

func TestPreValues(t *testing.T) {
	ref := mustLoad(t, "gpt2")
	for _, pre := range []string{"gpt2", "default", "smollm", "llama-bpe", "qwen2"} {
		c := fixtureConfig(t, ref, "gpt2")
		c.Pre = pre
		tok, err := NewByteLevelBPE(c)
		if err != nil {
			t.Fatalf("%s: %v", pre, err)
		}
		got := tok.preTokenize("Hello 2024 world's\n\n  x")
		if len(got) < 5 {
			t.Errorf("%s: %q", pre, got)
		}
	}
}

func TestFingerprintAndTokens(t *testing.T) {
	a, b := mustLoad(t, "gpt2"), mustLoad(t, "gpt2")
	if a.Fingerprint() != b.Fingerprint() || a.Fingerprint() == mustLoad(t, "llama3").Fingerprint() {
		t.Error("fingerprint not stable or not distinct")
	}
	id, ok := a.TokenToID("Ġthe")
	if !ok {
		t.Fatal("no Ġthe")
	}
	if s, _ := a.IDToToken(id); s != "Ġthe" || string(a.TokenBytes(id)) != " the" {
		t.Errorf("id %d: %q %q", id, s, a.TokenBytes(id))
	}
	if _, ok := a.IDToToken(-1); ok || a.TokenBytes(1<<20) != nil {
		t.Error("out-of-range id")
	}
	if got := a.SpecialIDs(); !slices.Equal(got, []int{0}) {
		t.Errorf("special ids %v", got)
	}
	if got := a.AddedTokens(); len(got) != 1 || got[0].Content != "<|endoftext|>" {
		t.Errorf("added %v", got)
	}
}
