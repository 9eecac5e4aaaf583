package memory

import (
	"hash/fnv"
	"math"
	"strings"
	"testing"
	"unicode"

	"citizen/workplace"
)

// refFeatures is features written plainly (hash/fnv, string n-grams).
func refFeatures(text string, emit func(uint64)) {
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	hash := func(kind byte, s string) uint64 {
		f := fnv.New64a()
		f.Write([]byte{kind})
		f.Write([]byte(s))
		return f.Sum64()
	}
	for i, w := range words {
		if isNumber(w) {
			w = "#"
		}
		emit(hash('w', w))
		if i > 0 {
			prev := words[i-1]
			if isNumber(prev) {
				prev = "#"
			}
			emit(hash('b', prev+" "+w))
		}
		rs := []rune("<" + w + ">")
		for n := 3; n <= 5; n++ {
			for j := 0; j+n <= len(rs); j++ {
				emit(hash('c', string(rs[j:j+n])))
			}
		}
	}
}

// refEmbed is embedOne over refFeatures with a map of term counts.
func refEmbed(dim int, text string, idf []float32) []float32 {
	tf := map[int]float32{}
	refFeatures(text, func(key uint64) {
		sign := float32(1)
		if key>>63 == 1 {
			sign = -1
		}
		tf[int(key%uint64(dim))] += sign
	})
	v := make([]float32, dim)
	var ss float64
	for b, c := range tf {
		w := float32(math.Copysign(1+math.Log(math.Abs(float64(c))+1e-9), float64(c)))
		if c == 0 {
			w = 0
		}
		if idf != nil {
			w *= idf[b]
		}
		v[b] = w
		ss += float64(w) * float64(w)
	}
	if ss == 0 {
		v[0] = 1
		return v
	}
	for i := range v {
		v[i] *= float32(1 / math.Sqrt(ss))
	}
	return v
}

// TestEmbedMatchesReference: the embedder's features and vectors are the
// plain implementation's (equal up to the order of the norm's sum), for
// workplace texts and for numbers, non-ASCII words, invalid UTF-8, a
// long word and empty text.
func TestEmbedMatchesReference(t *testing.T) {
	texts := []string{"", "   ", "a", "Order 12345 shipped on 2024-05-01, ref #A17", "ünïcode Straße ΑΒΓ 東京都 İstanbul",
		"bad \xff\xfe utf8 \xc3", strings.Repeat("x", 200), "can't won't it's — “quoted” words", "ǅemal ﬁnance Ⅻ ①②"}
	for _, c := range workplace.Corpus(3, 200, workplace.CorpusOptions{}) {
		for _, m := range c.Messages {
			texts = append(texts, m.Content)
		}
	}
	for _, text := range texts {
		var got, want []uint64
		features(text, func(k uint64) { got = append(got, k) })
		refFeatures(text, func(k uint64) { want = append(want, k) })
		if len(got) != len(want) {
			t.Fatalf("%q: %d features, want %d", text, len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%q: feature %d is %x, want %x", text, i, got[i], want[i])
			}
		}
	}
	for _, fit := range []bool{false, true} {
		h := NewHashEmbedder(512)
		if fit {
			h.Fit(texts[:100])
		}
		for _, text := range texts {
			got, want := h.embedOne(text, h.idf), refEmbed(512, text, h.idf)
			for i := range got {
				if d := got[i] - want[i]; d > 1e-6 || d < -1e-6 {
					t.Fatalf("fit %v, %q: component %d is %v, want %v", fit, text, i, got[i], want[i])
				}
			}
		}
	}
}
