package grammar

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

// byteVocab is every single byte, plus a token with no bytes and EOS last.
func byteVocab(tb testing.TB) *Vocab {
	var toks [][]byte
	for b := 0; b < 256; b++ {
		toks = append(toks, []byte{byte(b)})
	}
	toks = append(toks, nil, []byte("<eos>"))
	v, err := NewVocab(toks, len(toks)-1)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// bpeTokens builds a BPE-like vocabulary of n tokens (EOS last, a special token with no bytes
// before it): all 256 bytes, pieces of JSON structure (`":"`, `"},`, ` {"`, ...), whitespace
// runs, digit groups, multi-byte and partial UTF-8, words with and without a leading space, and
// then frequent substrings of JSON-ish text, as byte-pair merging of such text would make.
func bpeTokens(n int, seed uint64) [][]byte {
	r := rand.New(rand.NewPCG(seed, 7))
	seen := map[string]bool{}
	var toks [][]byte
	add := func(s string) {
		if len(toks) < n-2 && s != "" && !seen[s] {
			seen[s] = true
			toks = append(toks, []byte(s))
		}
	}
	for b := 0; b < 256; b++ {
		add(string([]byte{byte(b)}))
	}
	for _, s := range []string{
		`{"`, `"}`, `":`, `":"`, `","`, `",`, `"},`, `"}]`, `},{`, ` {"`, `{\n`, `\n}`, `": "`, `", "`,
		`[{"`, `"]`, `"],`, `],`, `]}`, `}}`, `}]`, `[]`, `{}`, `null`, `true`, `false`, `":[`, `":{`,
		`\"`, `\\`, `\n`, `\u`, `":-`, `":0`, `":1`, `},`, `}}}`, `]]`, `[[`, `"name`, `"arguments`,
		`{"name": "`, `", "arguments": {`, `"}}`, ` "`, `":true`, `":false`, `":null`, `.0`, `e-`, `1e`,
		`<tool_call>`, `</tool_call>`, "<", "tool", "_call", ">\n", "\n<",
	} {
		add(s)
	}
	for i := 1; i <= 16; i++ {
		add(strings.Repeat(" ", i))
		add("\n" + strings.Repeat(" ", i-1))
	}
	add("\t")
	add("\n\n")
	add("\r\n")
	for i := 0; i < 1000; i++ {
		add(fmt.Sprint(i))
		add(fmt.Sprintf("%03d", i))
	}
	for _, s := range []string{"é", "ü", "ß", "中", "文", "日本", "€", "😀", "→", "ñ", "Привет", "🎉"} {
		add(s)
		add(" " + s)
		add(s[:len(s)-1]) // partial UTF-8
		add(s[1:])
	}
	syl := []string{"a", "e", "i", "o", "u", "ka", "ne", "ro", "ti", "su", "ma", "le", "th", "st",
		"er", "an", "in", "on", "re", "de", "value", "name", "id", "type", "list", "count"}
	word := func() string {
		var b strings.Builder
		for k := 1 + r.IntN(3); k > 0; k-- {
			b.WriteString(syl[r.IntN(len(syl))])
		}
		return b.String()
	}
	for i := 0; i < n/4 && len(toks) < n/2; i++ {
		w := word()
		add(w)
		add(" " + w)
		add(`"` + w)
		add(w + `"`)
		add(`"` + w + `":`)
		add(strings.ToUpper(w[:1]) + w[1:])
	}
	// Substrings of JSON-ish text.
	var text bytes.Buffer
	for text.Len() < 1<<17 {
		fmt.Fprintf(&text, `{"%s": "%s %s", "%s": %d, "%s": [%d, %.2f], "%s": {"%s": %v, "%s": null}}`+"\n",
			word(), word(), word(), word(), r.IntN(10000), word(), r.IntN(100), r.Float64()*100,
			word(), word(), r.IntN(2) == 0, word())
	}
	t := text.Bytes()
	for tries := 0; len(toks) < n-2 && tries < 50*n; tries++ {
		i := r.IntN(len(t) - 10)
		add(string(t[i : i+2+r.IntN(7)]))
	}
	for i := 0; len(toks) < n-2; i++ {
		add(fmt.Sprintf("tok%d", i))
	}
	toks = append(toks, nil, []byte("<|im_end|>"))
	return toks
}

var (
	bpeOnce  sync.Once
	bpeSmall *Vocab
)

// bpeVocab is a 6,000-token BPE-like vocabulary, shared by tests.
func bpeVocab(tb testing.TB) *Vocab {
	bpeOnce.Do(func() {
		toks := bpeTokens(6000, 1)
		v, err := NewVocab(toks, len(toks)-1)
		if err != nil {
			panic(err)
		}
		bpeSmall = v
	})
	return bpeSmall
}

func maskIDs(m []uint64, n int) []int {
	var ids []int
	for id := 0; id < n; id++ {
		if Allowed(m, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// genCheck says which invariants generate checks at every step.
type genCheck struct {
	reference bool // the cached mask equals the uncached walk
	advance   int  // tokens tried outside the mask, each must be rejected by Advance
	closing   bool // ShortestCompletion completes a clone, in MinBytesToComplete bytes
}

// generate samples one output of g over v, tokens drawn uniformly from the mask (EOS with
// extra weight so outputs end), under a budget of budget tokens enforced by MaskBudget. It fails
// t on any broken invariant and returns the output bytes and whether EOS was reached.
func generate(t testing.TB, g *Grammar, v *Vocab, r *rand.Rand, budget int, chk genCheck) ([]byte, bool) {
	t.Helper()
	s := g.Start(v)
	var out []byte
	var m, ref []uint64
	for step := 0; step < budget; step++ {
		full := s.Mask(nil)
		var fits bool
		m, fits = s.MaskBudget(m, budget-step)
		if chk.reference {
			ref = s.maskUncached(ref, -1)
			if !slices.Equal(full, ref) {
				t.Fatalf("after %q: cached mask differs from the reference walk: %v vs %v", out,
					diffIDs(full, ref, v.Size()), diffIDs(ref, full, v.Size()))
			}
		}
		if lim := budget - step - 2; chk.reference && lim >= 0 && fits {
			ref = s.maskUncached(ref, int32(lim))
			if !slices.Equal(m, ref) {
				t.Fatalf("after %q: budget mask (limit %d) differs from the reference walk: %v vs %v", out, lim,
					diffIDs(m, ref, v.Size()), diffIDs(ref, m, v.Size()))
			}
		}
		for i := range m {
			if m[i]&^full[i] != 0 {
				t.Fatalf("after %q: budget mask allows tokens the mask does not", out)
			}
		}
		ids := maskIDs(m, v.Size())
		if len(ids) == 0 {
			t.Fatalf("after %q: empty mask (fits=%v)", out, fits)
		}
		if s.MinBytesToComplete() >= int(inf) {
			t.Fatalf("after %q: no completion", out)
		}
		if chk.closing {
			c := s.Clone()
			sc := s.ShortestCompletion()
			if len(sc) != s.MinBytesToComplete() {
				t.Fatalf("after %q: shortest completion %q has %d bytes, MinBytesToComplete %d", out, sc, len(sc), s.MinBytesToComplete())
			}
			if err := c.AdvanceBytes(sc); err != nil || !c.Complete() {
				t.Fatalf("after %q: shortest completion %q: %v complete=%v", out, sc, err, c.Complete())
			}
		}
		for k := 0; k < chk.advance; k++ {
			id := r.IntN(v.Size())
			c := s.Clone()
			err := c.Advance(id)
			if (err == nil) != Allowed(full, id) {
				t.Fatalf("after %q: token %d %q: Advance err %v, mask %v", out, id, v.Token(id), err, Allowed(full, id))
			}
		}
		id := ids[r.IntN(len(ids))]
		if eos := v.EOS(); Allowed(m, eos) && r.IntN(4) == 0 {
			id = eos
		}
		if err := s.Advance(id); err != nil {
			t.Fatalf("after %q: sampled %d %q: %v", out, id, v.Token(id), err)
		}
		if s.Done() {
			return out, true
		}
		out = append(out, v.Token(id)...)
	}
	return out, false
}

func diffIDs(a, b []uint64, n int) []int {
	var d []int
	for id := 0; id < n && len(d) < 10; id++ {
		if Allowed(a, id) && !Allowed(b, id) {
			d = append(d, id)
		}
	}
	return d
}
