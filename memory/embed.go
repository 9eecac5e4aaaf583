package memory

import (
	"context"
	"hash/fnv"
	"math"
	"strings"
	"sync"
	"unicode"
)

// Embedder turns texts into vectors of a fixed dimension. Implementations
// are safe for concurrent use.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	Dim() int
	// Name identifies the embedder and its settings; vectors from
	// different names are not comparable.
	Name() string
}

// HashEmbedder embeds text as hashed word uni/bigrams and character
// 3-5-grams ("feature hashing" with a sign bit), with sublinear term
// frequency and, once fitted, inverse document frequency per bucket. It
// needs nothing downloaded and is deterministic.
type HashEmbedder struct {
	dim  int
	mu   sync.RWMutex
	idf  []float32 // nil until Fit
	docs int
}

// NewHashEmbedder returns an embedder of the given dimension (default 512).
func NewHashEmbedder(dim int) *HashEmbedder {
	if dim <= 0 {
		dim = 512
	}
	return &HashEmbedder{dim: dim}
}

func (h *HashEmbedder) Dim() int     { return h.dim }
func (h *HashEmbedder) Name() string { return "hash-ngram-v1" }

// Fit learns document frequencies from a corpus; later Embed calls weight
// buckets by log((1+N)/(1+df))+1. Fit replaces any earlier fit.
func (h *HashEmbedder) Fit(docs []string) {
	df := make([]int, h.dim)
	seen := make([]bool, h.dim)
	for _, d := range docs {
		clear(seen)
		features(d, func(key uint64) {
			b := int(key % uint64(h.dim))
			if !seen[b] {
				seen[b] = true
				df[b]++
			}
		})
	}
	idf := make([]float32, h.dim)
	for i, n := range df {
		idf[i] = float32(math.Log(float64(1+len(docs))/float64(1+n)) + 1)
	}
	h.mu.Lock()
	h.idf, h.docs = idf, len(docs)
	h.mu.Unlock()
}

// Embed implements Embedder. An empty text embeds to a fixed unit vector
// (the zero vector is not a valid point).
func (h *HashEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	h.mu.RLock()
	idf := h.idf
	h.mu.RUnlock()
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out[i] = h.embedOne(t, idf)
	}
	return out, nil
}

func (h *HashEmbedder) embedOne(text string, idf []float32) []float32 {
	tf := map[int]float32{}
	features(text, func(key uint64) {
		b := int(key % uint64(h.dim))
		sign := float32(1)
		if key>>63 == 1 {
			sign = -1
		}
		tf[b] += sign
	})
	v := make([]float32, h.dim)
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
	inv := float32(1 / math.Sqrt(ss))
	for i := range v {
		v[i] *= inv
	}
	return v
}

// features calls emit with the hash of every feature of text.
func features(text string, emit func(uint64)) {
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
		padded := "<" + w + ">"
		rs := []rune(padded)
		for n := 3; n <= 5; n++ {
			for j := 0; j+n <= len(rs); j++ {
				emit(hash('c', string(rs[j:j+n])))
			}
		}
	}
}

func isNumber(w string) bool {
	for _, r := range w {
		if !unicode.IsDigit(r) {
			return false
		}
	}
	return w != ""
}
