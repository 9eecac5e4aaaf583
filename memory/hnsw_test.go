package memory

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"citizen/model/kernels"
)

// refPrune is the selection heuristic run over every neighbour, as a
// list one longer than its bound is pruned: sort, keep the diverse ones
// up to m, fill with the nearest discarded.
func refPrune(h *hnsw, node int32, slots []int32, m int) []int32 {
	cs := make([]cand, len(slots))
	for i, s := range slots {
		cs[i] = cand{1 - kernels.Dot(h.vec(node), h.vec(s)), s}
	}
	sortSlice(cs)
	var out, discarded []int32
	for _, c := range cs {
		if len(out) >= m {
			break
		}
		good := true
		for _, s := range out {
			if 1-kernels.Dot(h.vec(c.slot), h.vec(s)) < c.d {
				good = false
				break
			}
		}
		if good {
			out = append(out, c.slot)
		} else {
			discarded = append(discarded, c.slot)
		}
	}
	for _, s := range discarded {
		if len(out) >= m {
			break
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// TestAddLinkPrunesAsTheHeuristic: a list grown by addLink holds, after
// every addition, the neighbours the heuristic over the whole list keeps,
// with repeated vectors (ties) among them.
func TestAddLinkPrunesAsTheHeuristic(t *testing.T) {
	const n, dim, mmax = 400, 8, 6
	r := rand.New(rand.NewPCG(5, 9))
	vecs := make([][]float32, n)
	for i := range vecs {
		if i > 0 && r.IntN(4) == 0 {
			vecs[i] = vecs[r.IntN(i)] // a repeat
			continue
		}
		v := make([]float32, dim)
		var ss float32
		for j := range v {
			v[j] = float32(r.NormFloat64())
			ss += v[j] * v[j]
		}
		for j := range v {
			v[j] /= float32(math.Sqrt(float64(ss)))
		}
		vecs[i] = v
	}
	h := newHNSW(4, 10, 1, func(s int32) []float32 { return vecs[s] })
	for trial := 0; trial < 20; trial++ {
		node := int32(r.IntN(n))
		var ls []link
		var want []int32
		for _, s := range r.Perm(n)[:40] {
			if int32(s) == node {
				continue
			}
			ls = h.addLink(ls, link{slot: int32(s), d: 1 - kernels.Dot(vecs[node], vecs[s])}, mmax)
			want = append(want, int32(s))
			if len(want) > mmax {
				want = refPrune(h, node, want, mmax)
			}
			got := make([]int32, len(ls))
			for i, l := range ls {
				got[i] = l.slot
			}
			if !slices.IsSortedFunc(ls, func(a, b link) int {
				if linkBefore(a, b) {
					return -1
				}
				return 1
			}) {
				t.Fatalf("trial %d: list not nearest first: %v", trial, ls)
			}
			slices.Sort(got)
			w := slices.Sorted(slices.Values(want))
			if !slices.Equal(got, w) {
				t.Fatalf("trial %d: addLink keeps %v, the heuristic %v", trial, got, w)
			}
		}
	}
}
