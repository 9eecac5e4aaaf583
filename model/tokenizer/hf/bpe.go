package hf

import (
	"strings"
	"sync"
)

// bpe is a byte-level BPE model. It works on raw bytes: the byte-level
// character of a byte is only a spelling, so byteID maps bytes straight to
// the ids of their one-character tokens.
type bpe struct {
	byteID       [256]int32        // -1: the byte has no token
	merges       map[uint64]uint64 // pair a<<32|b → rank<<32|merged id
	rawVocab     map[string]int32  // raw bytes of a token → id (ignore_merges)
	unk          int32             // -1: none
	fuseUnk      bool
	ignoreMerges bool

	mu    sync.RWMutex
	cache map[string][]int32
}

const (
	cacheLimit   = 1 << 17 // words kept before the cache is emptied
	cacheMaxWord = 256     // longer words are not cached (as Hugging Face)
	heapMinSyms  = 128     // words with more symbols merge with a heap
)

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// appendWord appends the ids of one pre-tokenized word (raw bytes).
func (m *bpe) appendWord(dst []int, w string) []int {
	if m.ignoreMerges {
		if id, ok := m.rawVocab[w]; ok {
			return append(dst, int(id))
		}
	}
	if len(w) == 1 && m.byteID[w[0]] >= 0 {
		return append(dst, int(m.byteID[w[0]]))
	}
	if len(w) <= cacheMaxWord {
		m.mu.RLock()
		ids, ok := m.cache[w]
		m.mu.RUnlock()
		if ok {
			for _, id := range ids {
				dst = append(dst, int(id))
			}
			return dst
		}
	}
	ids := m.word(w)
	for _, id := range ids {
		dst = append(dst, int(id))
	}
	if len(w) <= cacheMaxWord {
		m.mu.Lock()
		if len(m.cache) >= cacheLimit {
			clear(m.cache)
		}
		m.cache[strings.Clone(w)] = ids
		m.mu.Unlock()
	}
	return dst
}

// symbols returns the initial symbols of w: one per byte, unknown bytes as
// the unk token (fused when fuseUnk) or dropped when there is none.
func (m *bpe) symbols(w string) []int32 {
	syms := make([]int32, 0, len(w))
	pending := false
	for i := 0; i < len(w); i++ {
		id := m.byteID[w[i]]
		if id >= 0 {
			if pending {
				syms = append(syms, m.unk)
				pending = false
			}
			syms = append(syms, id)
			continue
		}
		if m.unk < 0 {
			continue
		}
		if pending && !m.fuseUnk {
			syms = append(syms, m.unk)
		}
		pending = true
	}
	if pending {
		syms = append(syms, m.unk)
	}
	return syms
}

// word encodes one word: repeatedly the adjacent pair of lowest rank (the
// leftmost among equals) is merged, as Hugging Face's Word::merge_all does.
func (m *bpe) word(w string) []int32 {
	syms := m.symbols(w)
	if len(syms) >= heapMinSyms {
		return m.mergeHeap(syms)
	}
	return m.mergeScan(syms)
}

const noMerge = ^uint64(0)

func (m *bpe) lookup(a, b int32) uint64 {
	if v, ok := m.merges[pairKey(a, b)]; ok {
		return v
	}
	return noMerge
}

// mergeScan merges in place, keeping the merge of every adjacent pair.
func (m *bpe) mergeScan(syms []int32) []int32 {
	if len(syms) < 2 {
		return syms
	}
	pr := make([]uint64, len(syms)-1)
	for i := range pr {
		pr[i] = m.lookup(syms[i], syms[i+1])
	}
	for len(pr) > 0 {
		best, bi := noMerge, -1
		for i, v := range pr {
			if v < best {
				best, bi = v, i
			}
		}
		if bi < 0 {
			break
		}
		syms[bi] = int32(uint32(best))
		copy(syms[bi+1:], syms[bi+2:])
		syms = syms[:len(syms)-1]
		copy(pr[bi:], pr[bi+1:])
		pr = pr[:len(pr)-1]
		if bi > 0 {
			pr[bi-1] = m.lookup(syms[bi-1], syms[bi])
		}
		if bi < len(pr) {
			pr[bi] = m.lookup(syms[bi], syms[bi+1])
		}
	}
	return syms
}

// mergeHeap gives the same result as mergeScan in O(n log n).
func (m *bpe) mergeHeap(ids []int32) []int32 {
	n := len(ids)
	if n < 2 {
		return ids
	}
	prev := make([]int32, n)
	next := make([]int32, n)
	alive := make([]bool, n)
	for i := range ids {
		prev[i], next[i], alive[i] = int32(i-1), int32(i+1), true
	}
	next[n-1] = -1
	type entry struct {
		v   uint64 // rank<<32 | merged id
		pos int32
	}
	less := func(a, b entry) bool { return a.v>>32 < b.v>>32 || a.v>>32 == b.v>>32 && a.pos < b.pos }
	var h []entry
	push := func(e entry) {
		h = append(h, e)
		for i := len(h) - 1; i > 0; {
			p := (i - 1) / 2
			if !less(h[i], h[p]) {
				break
			}
			h[i], h[p] = h[p], h[i]
			i = p
		}
	}
	pop := func() entry {
		top := h[0]
		last := len(h) - 1
		h[0] = h[last]
		h = h[:last]
		for i := 0; ; {
			l, r, s := 2*i+1, 2*i+2, i
			if l < len(h) && less(h[l], h[s]) {
				s = l
			}
			if r < len(h) && less(h[r], h[s]) {
				s = r
			}
			if s == i {
				break
			}
			h[i], h[s] = h[s], h[i]
			i = s
		}
		return top
	}
	for i := 0; i+1 < n; i++ {
		if v := m.lookup(ids[i], ids[i+1]); v != noMerge {
			push(entry{v, int32(i)})
		}
	}
	for len(h) > 0 {
		e := pop()
		p := e.pos
		if !alive[p] || next[p] < 0 {
			continue
		}
		q := next[p]
		if m.lookup(ids[p], ids[q]) != e.v {
			continue // stale
		}
		ids[p] = int32(uint32(e.v))
		alive[q] = false
		next[p] = next[q]
		if next[q] >= 0 {
			prev[next[q]] = p
		}
		if pp := prev[p]; pp >= 0 {
			if v := m.lookup(ids[pp], ids[p]); v != noMerge {
				push(entry{v, pp})
			}
		}
		if nq := next[p]; nq >= 0 {
			if v := m.lookup(ids[p], ids[nq]); v != noMerge {
				push(entry{v, p})
			}
		}
	}
	out := ids[:0]
	for i := 0; i < n; i++ {
		if alive[i] {
			out = append(out, ids[i])
		}
	}
	return out
}
