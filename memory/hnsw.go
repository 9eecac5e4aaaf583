package memory

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"

	"citizen/model/kernels"
)

// hnsw is a Hierarchical Navigable Small World graph (Malkov & Yashunin,
// 2016) over the slots of a collection, with the neighbour-selection
// heuristic of the paper's Algorithm 4. Distances are 1 - dot(a, b) on
// normalised vectors.
//
// A node's neighbour list keeps, per neighbour, its distance to the node
// and whether the heuristic keeps it as diverse, so a list that gains a
// neighbour is pruned with a few distances instead of the heuristic run
// again over all of them (see link). Not safe for concurrent mutation: the collection's
// lock guards it (searches may run concurrently with each other).
type hnsw struct {
	m, m0, efConstruction int
	ml                    float64
	nodes                 [][][]link // nodes[slot][level] = neighbours, nearest first
	entry                 int32
	maxLevel              int
	vec                   func(slot int32) []float32
	rng                   *rand.Rand
	visitedPool           sync.Pool
}

func newHNSW(m, efConstruction int, seed uint64, vec func(int32) []float32) *hnsw {
	return &hnsw{
		m: m, m0: 2 * m, efConstruction: efConstruction,
		ml: 1 / math.Log(float64(m)), entry: -1, vec: vec,
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
}

func (h *hnsw) dist(q []float32, slot int32) float32 { return 1 - kernels.Dot(q, h.vec(slot)) }

// link is a neighbour in a node's list: its slot, its distance d to the
// node, and diverse, the selection heuristic's verdict over the list in
// order (nearest first, ties by slot): a neighbour is diverse when it is
// at least as far from every diverse neighbour before it as from the
// node. The heuristic over a list one longer than its bound drops
// exactly one neighbour: the farthest that is not diverse, or the
// farthest when all are; with the verdicts kept, adding a neighbour
// costs the distances from it to the diverse ones (and, when it is
// diverse, from the diverse ones after it to it).
type link struct {
	slot    int32
	d       float32
	diverse bool
}

func linkBefore(a, b link) bool { return a.d < b.d || a.d == b.d && a.slot < b.slot }

// visited is a generation-stamped set reused across searches.
type visited struct {
	gen  uint32
	mark []uint32
}

func (h *hnsw) getVisited() *visited {
	v, _ := h.visitedPool.Get().(*visited)
	if v == nil {
		v = &visited{}
	}
	if len(v.mark) < len(h.nodes) {
		v.mark = make([]uint32, len(h.nodes)*5/4+16)
		v.gen = 0
	}
	v.gen++
	if v.gen == 0 {
		clear(v.mark)
		v.gen = 1
	}
	return v
}

func (v *visited) visit(i int32) bool {
	if v.mark[i] == v.gen {
		return false
	}
	v.mark[i] = v.gen
	return true
}

// cand is a node with its distance to the query.
type cand struct {
	d    float32
	slot int32
}

// candHeap is a binary heap of cands; max=true keeps the farthest on top.
type candHeap struct {
	items []cand
	max   bool
}

func (h *candHeap) less(i, j int) bool {
	if h.max {
		return h.items[i].d > h.items[j].d
	}
	return h.items[i].d < h.items[j].d
}
func (h *candHeap) len() int  { return len(h.items) }
func (h *candHeap) top() cand { return h.items[0] }
func (h *candHeap) push(c cand) {
	h.items = append(h.items, c)
	i := len(h.items) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h.items[i], h.items[p] = h.items[p], h.items[i]
		i = p
	}
}
func (h *candHeap) pop() cand {
	top := h.items[0]
	n := len(h.items) - 1
	h.items[0] = h.items[n]
	h.items = h.items[:n]
	i := 0
	for {
		l, r, s := 2*i+1, 2*i+2, i
		if l < n && h.less(l, s) {
			s = l
		}
		if r < n && h.less(r, s) {
			s = r
		}
		if s == i {
			break
		}
		h.items[i], h.items[s] = h.items[s], h.items[i]
		i = s
	}
	return top
}

// searchLayer returns up to ef nearest nodes to q on level lvl, starting
// from the entry points, unsorted.
func (h *hnsw) searchLayer(q []float32, entries []cand, ef, lvl int) []cand {
	vis := h.getVisited()
	defer h.visitedPool.Put(vis)
	cands := candHeap{}
	res := candHeap{max: true}
	for _, e := range entries {
		vis.visit(e.slot)
		cands.push(e)
		res.push(e)
	}
	for cands.len() > 0 {
		c := cands.pop()
		if res.len() >= ef && c.d > res.top().d {
			break
		}
		for _, l := range h.nodes[c.slot][lvl] {
			nb := l.slot
			if !vis.visit(nb) {
				continue
			}
			d := h.dist(q, nb)
			if res.len() < ef || d < res.top().d {
				cands.push(cand{d, nb})
				res.push(cand{d, nb})
				if res.len() > ef {
					res.pop()
				}
			}
		}
	}
	return res.items
}

// selectNeighbors keeps up to m candidates by the paper's heuristic: a
// candidate is kept if it is closer to the base than to every neighbour
// kept so far (this keeps links in diverse directions); remaining slots are
// filled with the closest discarded ones. The result is nearest first,
// with the verdicts of link (those of the candidates, since every diverse
// candidate before a kept one is kept).
func (h *hnsw) selectNeighbors(cs []cand, m int) []link {
	sortSlice(cs)
	out := make([]link, 0, m)
	var discarded []int
	for i, c := range cs {
		if len(out) >= m {
			break
		}
		if h.diverseAmong(h.vec(c.slot), c.d, out) {
			out = append(out, link{c.slot, c.d, true})
		} else {
			discarded = append(discarded, i)
		}
	}
	if len(out) < m && len(discarded) > 0 {
		for _, i := range discarded[:min(len(discarded), m-len(out))] {
			out = append(out, link{cs[i].slot, cs[i].d, false})
		}
		slices.SortFunc(out, func(a, b link) int {
			if linkBefore(a, b) {
				return -1
			}
			if linkBefore(b, a) {
				return 1
			}
			return 0
		})
	}
	return out
}

// diverseAmong reports whether a neighbour with vector v at distance d
// from the node is at least as far from every diverse link of ls.
func (h *hnsw) diverseAmong(v []float32, d float32, ls []link) bool {
	for _, l := range ls {
		if l.diverse && 1-kernels.Dot(v, h.vec(l.slot)) < d {
			return false
		}
	}
	return true
}

// addLink adds nl (its distance to the node already set) to the list ls,
// keeps the verdicts of link, and, when the list is then longer than
// mmax, drops the neighbour the heuristic drops.
func (h *hnsw) addLink(ls []link, nl link, mmax int) []link {
	p := len(ls)
	for p > 0 && linkBefore(nl, ls[p-1]) {
		p--
	}
	nv := h.vec(nl.slot)
	nl.diverse = h.diverseAmong(nv, nl.d, ls[:p])
	ls = slices.Insert(ls, p, nl)
	if nl.diverse {
		// A diverse neighbour after nl that is nearer to nl than to the
		// node is no longer diverse; once one loses it, the ones after
		// it are judged again against the diverse ones before them.
		for i := p + 1; i < len(ls); i++ {
			if !ls[i].diverse || 1-kernels.Dot(h.vec(ls[i].slot), nv) >= ls[i].d {
				continue
			}
			ls[i].diverse = false
			for j := i + 1; j < len(ls); j++ {
				ls[j].diverse = h.diverseAmong(h.vec(ls[j].slot), ls[j].d, ls[:j])
			}
			break
		}
	}
	if len(ls) <= mmax {
		return ls
	}
	drop := len(ls) - 1
	for i := drop; i >= 0; i-- {
		if !ls[i].diverse {
			drop = i
			break
		}
	}
	// Dropping a neighbour that is not diverse, or the last, changes no
	// other verdict.
	return slices.Delete(ls, drop, drop+1)
}

// insert adds slot (whose vector is already stored) to the graph.
func (h *hnsw) insert(slot int32) {
	level := int(math.Floor(-math.Log(1-h.rng.Float64()) * h.ml))
	for int(slot) >= len(h.nodes) {
		h.nodes = append(h.nodes, nil)
	}
	h.nodes[slot] = make([][]link, level+1)
	if h.entry < 0 {
		h.entry, h.maxLevel = slot, level
		return
	}
	q := h.vec(slot)
	ep := []cand{{h.dist(q, h.entry), h.entry}}
	for l := h.maxLevel; l > level; l-- {
		ep = []cand{closest(h.searchLayer(q, ep, 1, l))}
	}
	for l := min(level, h.maxLevel); l >= 0; l-- {
		w := h.searchLayer(q, ep, h.efConstruction, l)
		mmax := h.m
		if l == 0 {
			mmax = h.m0
		}
		nbrs := h.selectNeighbors(append([]cand(nil), w...), h.m)
		h.nodes[slot][l] = nbrs
		for _, nb := range nbrs {
			h.nodes[nb.slot][l] = h.addLink(h.nodes[nb.slot][l], link{slot: slot, d: nb.d}, mmax)
		}
		ep = w
	}
	if level > h.maxLevel {
		h.entry, h.maxLevel = slot, level
	}
}

func closest(cs []cand) cand {
	best := cs[0]
	for _, c := range cs[1:] {
		if c.d < best.d {
			best = c
		}
	}
	return best
}

// search returns up to ef candidates nearest to q (unsorted).
func (h *hnsw) search(q []float32, ef int) []cand {
	if h.entry < 0 {
		return nil
	}
	ep := []cand{{h.dist(q, h.entry), h.entry}}
	for l := h.maxLevel; l > 0; l-- {
		ep = []cand{closest(h.searchLayer(q, ep, 1, l))}
	}
	return h.searchLayer(q, ep, ef, 0)
}
