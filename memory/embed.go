package memory

import (
	"context"
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
	// v holds the signed term counts per bucket, then the weights.
	v := make([]float32, h.dim)
	dim := uint64(h.dim)
	features(text, func(key uint64) {
		if key>>63 == 1 {
			v[key%dim]--
		} else {
			v[key%dim]++
		}
	})
	var ss float64
	for b, c := range v {
		if c == 0 {
			continue
		}
		w := float32(math.Copysign(1+math.Log(math.Abs(float64(c))+1e-9), float64(c)))
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

// FNV-1a, 64 bits (hash/fnv's New64a, without its allocations).
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnvByte(h uint64, b byte) uint64 { return (h ^ uint64(b)) * fnvPrime }

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * fnvPrime
	}
	return h
}

func notWordRune(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }

// features calls emit with the hash of every feature of text: each word
// ('w' and the word; a number is "#"), each pair of adjacent words ('b',
// the first, a space, the second) and each character 3-, 4- and 5-gram
// of the word between "<" and ">" ('c' and the n-gram), hashed by FNV-1a.
func features(text string, emit func(uint64)) {
	words := strings.FieldsFunc(strings.ToLower(text), notWordRune)
	var startsBuf [64]int
	for i, w := range words {
		if isNumber(w) {
			w = "#"
		}
		emit(fnvString(fnvByte(fnvOffset, 'w'), w))
		if i > 0 {
			prev := words[i-1]
			if isNumber(prev) {
				prev = "#"
			}
			emit(fnvString(fnvByte(fnvString(fnvByte(fnvOffset, 'b'), prev), ' '), w))
		}
		// The n-grams of "<" + w + ">": starts[r] is where its rune r
		// starts, in w's bytes shifted by one for the "<".
		starts := append(startsBuf[:0], 0)
		for k := range w {
			starts = append(starts, 1+k)
		}
		starts = append(starts, 1+len(w), 2+len(w))
		runes := len(starts) - 1
		for n := 3; n <= 5; n++ {
			for j := 0; j+n <= runes; j++ {
				h := fnvByte(fnvOffset, 'c')
				for pos := starts[j]; pos < starts[j+n]; pos++ {
					switch {
					case pos == 0:
						h = fnvByte(h, '<')
					case pos == len(w)+1:
						h = fnvByte(h, '>')
					default:
						h = fnvByte(h, w[pos-1])
					}
				}
				emit(h)
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
