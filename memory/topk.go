package memory

import "sort"

func sortSlice(cs []cand) {
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].d != cs[j].d {
			return cs[i].d < cs[j].d
		}
		return cs[i].slot < cs[j].slot
	})
}

// topK keeps the k best (smallest distance) candidates seen.
type topK struct {
	k int
	h candHeap
}

func newTopK(k int) *topK { return &topK{k: k, h: candHeap{max: true, items: make([]cand, 0, k+1)}} }

func (t *topK) offer(d float32, slot int32) {
	if t.h.len() < t.k {
		t.h.push(cand{d, slot})
		return
	}
	if top := t.h.top(); d < top.d || d == top.d && slot < top.slot {
		t.h.pop()
		t.h.push(cand{d, slot})
	}
}

// sorted returns the kept candidates best first (ties by slot).
func (t *topK) sorted() []cand {
	out := append([]cand(nil), t.h.items...)
	sortSlice(out)
	return out
}
