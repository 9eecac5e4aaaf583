package tokenizer

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// synthCorpus generates a deterministic pseudo-English corpus of about n bytes
// with some numbers, punctuation, code, non-ASCII text and chat-like lines.
func synthCorpus(n int, seed uint64) []string {
	r := rand.New(rand.NewPCG(seed, 7))
	words := []string{"the", "model", "learns", "from", "every", "interaction", "and", "user",
		"feedback", "tool", "call", "weather", "in", "Paris", "is", "sunny", "today", "of", "a",
		"to", "citizen", "answer", "question", "réponse", "naïve", "日本語", "Москва", "func",
		"return", "error", "nil", "if", "for", "value", "JSON", "HTTP", "request"}
	puncts := []string{".", ",", "!", "?", ":", ";", "()", "{}", "\"", "'s", " - ", "->"}
	var docs []string
	total := 0
	for total < n {
		var b strings.Builder
		lines := 1 + r.IntN(8)
		for l := 0; l < lines; l++ {
			k := 3 + r.IntN(15)
			for i := 0; i < k; i++ {
				if i > 0 {
					b.WriteByte(' ')
				}
				// Zipf-like: favour early words.
				w := words[int(float64(len(words))*r.Float64()*r.Float64())]
				if r.IntN(10) == 0 {
					w = strings.ToUpper(w[:1]) + w[1:]
				}
				b.WriteString(w)
				if r.IntN(6) == 0 {
					b.WriteString(puncts[r.IntN(len(puncts))])
				}
				if r.IntN(12) == 0 {
					fmt.Fprintf(&b, " %d", r.IntN(5000))
				}
			}
			if r.IntN(5) == 0 {
				b.WriteString("\n    ")
			}
			b.WriteString("\n")
		}
		docs = append(docs, b.String())
		total += b.Len()
	}
	return docs
}

var (
	testTokOnce sync.Once
	testTok     *Tokenizer
)

// trained returns a tokenizer trained on a 200 KB synthetic corpus with 1024 ids.
func trained(tb testing.TB) *Tokenizer {
	testTokOnce.Do(func() {
		var err error
		testTok, err = Train(synthCorpus(200_000, 1), 1024, nil)
		if err != nil {
			panic(err)
		}
	})
	return testTok
}

func TestSplitWords(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"Hello world", []string{"Hello", " world"}},
		{"a  b", []string{"a", " ", " b"}},
		{"x\n\ny z", []string{"x", "\n\n", "y", " z"}},
		{"x \n y", []string{"x", " \n", " y"}},
		{"cost: 1234 ok!!", []string{"cost", ":", " 1", "2", "3", "4", " ok", "!!"}},
		{"x2 ٣٤", []string{"x", "2", " ٣", "٤"}},
		{"trailing  ", []string{"trailing", "  "}},
		{" ", []string{" "}},
		{"é-ü 日本", []string{"é", "-", "ü", " 日本"}},
		{"<|user|>", []string{"<|", "user", "|>"}},
		{"a\xffb", []string{"a", "\xff", "b"}},
		{strings.Repeat("x", 70), []string{strings.Repeat("x", 64), "xxxxxx"}},
	}
	for _, c := range cases {
		var got []string
		splitWords(c.in, func(w string) { got = append(got, w) })
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("splitWords(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestTrainSmallHandChecked(t *testing.T) {
	// Words: "ab", " ab" ×2, " cd". Pair counts: (a,b)=3, (' ',a)=2, (' ',c)=1,
	// (c,d)=1. Merge 1: (a,b) → 265. Then (' ',265)=2 wins → 266.
	tok, err := Train([]string{"ab ab ab cd"}, NumBytes+len(DefaultSpecials)+2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() != 267 {
		t.Fatalf("vocab size %d", tok.VocabSize())
	}
	if got, want := tok.Encode("ab ab cd"), []int{265, 266, ' ', 'c', 'd'}; !reflect.DeepEqual(got, want) {
		t.Errorf("Encode = %v, want %v", got, want)
	}
	if string(tok.TokenBytes(266)) != " ab" {
		t.Errorf("token 266 = %q", tok.TokenBytes(266))
	}
	// Ties go to the smaller pair: with vocab for 3 merges, the third is
	// (' ', c)=1 rather than (c, d)=1 since ' ' < 'c'.
	tok, _ = Train([]string{"ab ab ab cd"}, 268, nil)
	if string(tok.TokenBytes(267)) != " c" {
		t.Errorf("tie-break: token 267 = %q, want \" c\"", tok.TokenBytes(267))
	}
	// Asking for more merges than pairs exist stops early.
	tok, _ = Train([]string{"ab ab ab cd"}, 1000, nil)
	if tok.VocabSize() >= 1000 {
		t.Errorf("vocab size %d, expected early stop", tok.VocabSize())
	}
}

func TestTrainErrors(t *testing.T) {
	if _, err := Train(nil, 260, nil); !errors.Is(err, ErrVocabSize) {
		t.Errorf("small vocab: %v", err)
	}
	if _, err := Train(nil, 300, []string{"<|x|>", "<|x|>"}); !errors.Is(err, ErrSpecial) {
		t.Errorf("repeated special: %v", err)
	}
	if _, err := Train(nil, 300, []string{""}); !errors.Is(err, ErrSpecial) {
		t.Errorf("empty special: %v", err)
	}
	tok, err := Train(nil, 300, append(append([]string(nil), DefaultSpecials...), "<|extra|>"))
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := tok.SpecialID("<|extra|>"); !ok || id != 265 {
		t.Errorf("extra special id = %d %v", id, ok)
	}
	if id, _ := tok.SpecialID("<|tool_call|>"); id != TokenToolCall {
		t.Errorf("tool_call id = %d", id)
	}
}

func TestSpecialIDsFixed(t *testing.T) {
	tok := trained(t)
	want := []int{TokenBOS, TokenEOS, TokenEnd, TokenSystem, TokenUser, TokenAssistant, TokenTool, TokenToolCall, TokenPad}
	for i, s := range DefaultSpecials {
		id, ok := tok.SpecialID(s)
		if !ok || id != want[i] || !tok.IsSpecial(id) || string(tok.TokenBytes(id)) != s {
			t.Errorf("special %q: id %d ok %v", s, id, ok)
		}
	}
}

func TestTrainDeterministic(t *testing.T) {
	corpus := synthCorpus(100_000, 2)
	var outs [][]byte
	for i := 0; i < 2; i++ {
		tok, err := Train(corpus, 500, nil)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := tok.Save(&b); err != nil {
			t.Fatal(err)
		}
		outs = append(outs, b.Bytes())
		if tok.VocabSize() != 500 {
			t.Errorf("vocab size %d, want 500", tok.VocabSize())
		}
	}
	if !bytes.Equal(outs[0], outs[1]) {
		t.Fatal("two trainings on the same corpus differ")
	}
}

// TestTrainMatchesNaive checks the incremental trainer against a direct
// recount of all pairs before every merge.
func TestTrainMatchesNaive(t *testing.T) {
	corpus := synthCorpus(20_000, 3)
	corpus = append(corpus, "aaaa aaaaa aaaaaaa abababab ababab", "zzzzzzzzz\n\n\n\n  ")
	const merges = 150
	tok, err := Train(corpus, NumBytes+len(DefaultSpecials)+merges, nil)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int64{}
	for _, d := range corpus {
		splitWords(d, func(w string) { counts[w]++ })
	}
	type word struct {
		syms []int32
		n    int64
	}
	var words []word
	for w, n := range counts {
		s := make([]int32, len(w))
		for i := 0; i < len(w); i++ {
			s[i] = int32(w[i])
		}
		words = append(words, word{s, n})
	}
	for m := 0; m < merges; m++ {
		pc := map[uint64]int64{}
		for _, w := range words {
			for i := 0; i+1 < len(w.syms); i++ {
				pc[pairKey(w.syms[i], w.syms[i+1])] += w.n
			}
		}
		var best uint64
		var bestN int64
		for p, n := range pc {
			if n > bestN || n == bestN && p < best {
				best, bestN = p, n
			}
		}
		a, b := int32(best>>32), int32(uint32(best))
		if tok.merges[m] != [2]int32{a, b} {
			t.Fatalf("merge %d: incremental %v, naive (%d,%d) count %d", m, tok.merges[m], a, b, bestN)
		}
		id := int32(NumBytes + len(DefaultSpecials) + m)
		for i := range words {
			words[i].syms = mergeSyms(words[i].syms, a, b, id)
		}
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	tok := trained(t)
	cases := []string{
		"", " ", "hello", "The model learns from every interaction.\n",
		"invalid \xff\xfe utf8 \xc3", "日本語 and Москва 1234567890",
		strings.Repeat("ab", 1000), strings.Repeat(" ", 200), "\x00\x01\x02",
		"<|bos|><|user|>hi<|end|><|assistant|>", "tabs\t\tand\r\nCRLF",
	}
	for _, s := range cases {
		ids := tok.Encode(s)
		if got := tok.Decode(ids); got != s {
			t.Errorf("round trip %q -> %v -> %q", s, ids, got)
		}
		for _, id := range ids {
			if tok.IsSpecial(id) || id < 0 || id >= tok.VocabSize() {
				t.Errorf("Encode(%q) produced id %d", s, id)
			}
		}
	}
	if got := tok.Decode([]int{-1, 'a', 1 << 30, TokenEnd}); got != "a<|end|>" {
		t.Errorf("Decode with out-of-range ids = %q", got)
	}
}

func TestSpecialsNotInjectable(t *testing.T) {
	tok := trained(t)
	for _, s := range DefaultSpecials {
		text := "say " + s + " now" + s
		ids := tok.Encode(text)
		for _, id := range ids {
			if id >= NumBytes && id < NumBytes+len(DefaultSpecials) {
				t.Fatalf("Encode(%q) produced special id %d", text, id)
			}
		}
		if tok.Decode(ids) != text {
			t.Fatalf("round trip failed for %q", text)
		}
	}
}

func TestEncodeCompresses(t *testing.T) {
	tok := trained(t)
	text := strings.Join(synthCorpus(20_000, 9), "")
	ids := tok.Encode(text)
	ratio := float64(len(text)) / float64(len(ids))
	if ratio < 2.5 {
		t.Errorf("only %.2f bytes per token on in-domain text", ratio)
	}
}

func TestConcurrentEncode(t *testing.T) {
	tok := trained(t)
	texts := synthCorpus(50_000, 4)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, s := range texts {
				if tok.Decode(tok.Encode(s)) != s {
					t.Error("concurrent round trip failed")
					return
				}
			}
		}()
	}
	wg.Wait()
}
