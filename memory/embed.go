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
//
// It remembers the vectors of the texts it embedded last (up to
// recentTexts of them, per fit): an interaction is embedded by
// reflection (to type it) and by the memory indexer (to index it), and
// the second call is a map lookup.
type HashEmbedder struct {
	dim  int
	mu   sync.RWMutex
	idf  []float32 // nil until Fit
	docs int

	recentMu  sync.Mutex
	recent    map[string][]float32 // the current generation
	older     map[string][]float32 // the previous one, read and promoted
	recentIDF *float32             // the fit both generations were embedded under
}

// recentTexts bounds a generation of HashEmbedder's recent vectors.
const recentTexts = 4096

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
		if v, ok := h.remembered(t, idf); ok {
			out[i] = v
			continue
		}
		out[i] = h.embedOne(t, idf)
		h.remember(t, idf, out[i])
	}
	return out, nil
}

// fitID identifies a fit (nil before the first).
func fitID(idf []float32) *float32 {
	if len(idf) == 0 {
		return nil
	}
	return &idf[0]
}

// remembered returns a copy of t's vector if it was embedded recently
// under the same fit.
func (h *HashEmbedder) remembered(t string, idf []float32) ([]float32, bool) {
	h.recentMu.Lock()
	defer h.recentMu.Unlock()
	if h.recentIDF != fitID(idf) {
		return nil, false
	}
	v, ok := h.recent[t]
	if !ok {
		if v, ok = h.older[t]; ok {
			h.putLocked(t, v)
		}
	}
	if !ok {
		return nil, false
	}
	return append([]float32(nil), v...), true
}

func (h *HashEmbedder) remember(t string, idf []float32, v []float32) {
	h.recentMu.Lock()
	defer h.recentMu.Unlock()
	if id := fitID(idf); h.recentIDF != id || h.recent == nil {
		h.recent, h.older, h.recentIDF = map[string][]float32{}, nil, id
	}
	h.putLocked(t, append([]float32(nil), v...))
}

// putLocked stores v as t's vector in the current generation, starting a
// new one when it is full (the previous generation is dropped).
func (h *HashEmbedder) putLocked(t string, v []float32) {
	if len(h.recent) >= recentTexts {
		h.older, h.recent = h.recent, make(map[string][]float32, recentTexts)
	}
	h.recent[t] = v
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
