package tokenizer

import (
	"container/heap"
	"fmt"
	"iter"
	"slices"
	"sort"
)

// Train learns a tokenizer with at most vocabSize ids from corpus. specials
// lists the special tokens: DefaultSpecials always come first with their fixed
// ids; entries of specials that are not defaults are appended after them in
// order (nil means just the defaults). The result is deterministic: the same
// corpus (as a sequence of documents), size and specials give the same
// tokenizer. Training stops early, with a smaller vocabulary, when no pair of
// adjacent tokens occurs any more. It fails with ErrVocabSize if vocabSize
// cannot hold the 256 bytes and the specials.
//
// Each merge joins the most frequent adjacent pair of tokens within words
// (ties: the pair with the smaller first id, then the smaller second id).
// Pair counts are kept up to date incrementally, so the cost is roughly
// linear in the corpus size plus the work of each merge.
func Train(corpus []string, vocabSize int, specials []string) (*Tokenizer, error) {
	return TrainSeq(slices.Values(corpus), vocabSize, specials)
}

// TrainSeq is Train over a sequence of documents; the strings it yields are
// retained until training returns.
func TrainSeq(corpus iter.Seq[string], vocabSize int, specials []string) (*Tokenizer, error) {
	all, err := fullSpecials(specials)
	if err != nil {
		return nil, err
	}
	first := NumBytes + len(all)
	if vocabSize < first {
		return nil, fmt.Errorf("%w: %d < %d bytes and specials", ErrVocabSize, vocabSize, first)
	}
	counts := make(map[string]int64)
	for doc := range corpus {
		splitWords(doc, func(w string) {
			if len(w) > 1 {
				counts[w]++
			}
		})
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	tr := trainer{
		words:  make([]trainWord, len(keys)),
		pairs:  make(map[uint64]int64),
		where:  make(map[uint64][]int32),
		deltas: make(map[uint64]int64),
	}
	for wi, k := range keys {
		syms := make([]int32, len(k))
		for i := 0; i < len(k); i++ {
			syms[i] = int32(k[i])
		}
		c := counts[k]
		tr.words[wi] = trainWord{syms: syms, count: c, stamp: -1}
		for i := 0; i+1 < len(syms); i++ {
			p := pairKey(syms[i], syms[i+1])
			if tr.pairs[p] == 0 || last(tr.where[p]) != int32(wi) {
				tr.where[p] = append(tr.where[p], int32(wi))
			}
			tr.pairs[p] += c
		}
	}
	clear(counts)
	for p, c := range tr.pairs {
		tr.heap = append(tr.heap, pairCount{p, c})
	}
	heap.Init(&tr.heap)

	merges := make([][2]int32, 0, vocabSize-first)
	for len(merges) < vocabSize-first && tr.heap.Len() > 0 {
		top := heap.Pop(&tr.heap).(pairCount)
		if cur := tr.pairs[top.pair]; cur != top.count || cur <= 0 {
			continue // stale entry; the current count (if any) has its own entry
		}
		a, b := int32(top.pair>>32), int32(uint32(top.pair))
		tr.merge(a, b, int32(first+len(merges)), int32(len(merges)))
		merges = append(merges, [2]int32{a, b})
	}
	return build(all, merges)
}

func last(s []int32) int32 {
	if len(s) == 0 {
		return -1
	}
	return s[len(s)-1]
}

type trainWord struct {
	syms  []int32
	count int64
	stamp int32 // last merge that processed this word
}

type trainer struct {
	words  []trainWord
	pairs  map[uint64]int64   // pair → occurrences (weighted by word count)
	where  map[uint64][]int32 // pair → words that may contain it (superset)
	deltas map[uint64]int64
	heap   pairHeap
}

// merge replaces (a, b) by id in every word that contains it and updates the
// pair counts, the index and the heap.
func (tr *trainer) merge(a, b, id, step int32) {
	p := pairKey(a, b)
	clear(tr.deltas)
	for _, wi := range tr.where[p] {
		w := &tr.words[wi]
		if w.stamp == step {
			continue
		}
		w.stamp = step
		found := false
		for i := 0; i+1 < len(w.syms); i++ {
			if w.syms[i] == a && w.syms[i+1] == b {
				found = true
				break
			}
		}
		if !found {
			continue
		}
		for i := 0; i+1 < len(w.syms); i++ {
			tr.deltas[pairKey(w.syms[i], w.syms[i+1])] -= w.count
		}
		w.syms = mergeSyms(w.syms, a, b, id)
		for i := 0; i+1 < len(w.syms); i++ {
			x, y := w.syms[i], w.syms[i+1]
			q := pairKey(x, y)
			tr.deltas[q] += w.count
			if (x == id || y == id) && last(tr.where[q]) != wi {
				tr.where[q] = append(tr.where[q], wi)
			}
		}
	}
	delete(tr.where, p)
	// Apply the deltas in a fixed order so that heap contents (and thus tie
	// handling) never depend on map iteration order.
	changed := make([]uint64, 0, len(tr.deltas))
	for q, d := range tr.deltas {
		if d != 0 {
			changed = append(changed, q)
		}
	}
	slices.Sort(changed)
	for _, q := range changed {
		c := tr.pairs[q] + tr.deltas[q]
		if c <= 0 {
			delete(tr.pairs, q)
			delete(tr.where, q)
			continue
		}
		tr.pairs[q] = c
		heap.Push(&tr.heap, pairCount{q, c})
	}
}

type pairCount struct {
	pair  uint64
	count int64
}

// pairHeap is a max-heap on count, ties broken by the smaller pair.
type pairHeap []pairCount

func (h pairHeap) Len() int { return len(h) }
func (h pairHeap) Less(i, j int) bool {
	if h[i].count != h[j].count {
		return h[i].count > h[j].count
	}
	return h[i].pair < h[j].pair
}
func (h pairHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pairHeap) Push(x any)   { *h = append(*h, x.(pairCount)) }
func (h *pairHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
