package grammar

import (
	"math"
	"sync"
	"sync/atomic"
)

// entry is the context-free part of the mask of one DFA state: the tokens it accepts without
// ending its rule (or only ending rules it called itself), and the trie nodes after which its
// rule's value can end, so that the rest of a token continues in the caller.
type entry struct {
	dense    []uint64 // accepted tokens as a bitset, or nil when sparse is used
	sparse   []int32
	pops     []int32
	maxLocal int32 // the largest context-free MinBytesToComplete after an accepted token
}

// maskCache holds the entries of one grammar over one vocabulary, filled lazily.
type maskCache struct {
	entries []atomic.Pointer[entry]
}

func (g *Grammar) cache(v *Vocab) *maskCache {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.caches == nil {
		g.caches = map[*Vocab]*maskCache{}
	}
	c, ok := g.caches[v]
	if !ok {
		c = &maskCache{entries: make([]atomic.Pointer[entry], len(g.final))}
		g.caches[v] = c
	}
	return c
}

// walker walks the trie with the automaton; its buffers are reused through walkers.
type walker struct {
	levels [][]config
	marks  []int
	ids    []int32
	arena  arena
}

var walkers = sync.Pool{New: func() any { return new(walker) }}

func (w *walker) level(d int) []config {
	for len(w.levels) <= d {
		w.levels = append(w.levels, nil)
	}
	return w.levels[d][:0]
}

// walk visits the subtree below trie node p (p itself excluded) from configurations start (the
// configurations at p). For each node whose configurations are not empty it calls visit with
// the node and those configurations; visit returns false to stop descending there.
func (w *walker) walk(g *Grammar, v *Vocab, p int32, start []config, visit func(int32, []config) bool) {
	base := v.nodeDepth[p]
	if len(w.levels) == 0 {
		w.levels = append(w.levels, nil)
	}
	w.levels[0] = start
	// marks[d] is the arena position before the configurations of depth d were made: the walk
	// is depth first, so a node's frames die when the walk moves to its next sibling.
	w.marks = append(w.marks[:0], w.arena.pos, w.arena.pos)
	end := v.nodeEnd[p]
	for i := p + 1; i < end; {
		d := int(v.nodeDepth[i] - base)
		prev := w.levels[d-1]
		cur := w.level(d)
		w.arena.pos = w.marks[d]
		b := v.nodeByte[i]
		for _, c := range prev {
			cur = g.step(c, b, cur, &w.arena)
		}
		cur = dedup(cur)
		w.levels[d] = cur
		if len(cur) == 0 || !visit(i, cur) {
			i = v.nodeEnd[i]
			continue
		}
		w.marks = append(w.marks[:d+1], w.arena.pos)
		i++
	}
	w.arena.pos = w.marks[0]
}

// compute builds the entry of state s.
func (g *Grammar) compute(v *Vocab, s int32) *entry {
	w := walkers.Get().(*walker)
	defer walkers.Put(w)
	e := &entry{}
	start := []config{{s, bottom}}
	if v.nodeEnd[0] > 1 && g.canPopBottom(start[0]) {
		e.pops = append(e.pops, 0)
	}
	ids := w.ids[:0]
	w.walk(g, v, 0, start, func(i int32, cs []config) bool {
		if t0, t1 := v.tokStart[i], v.tokStart[i+1]; t1 > t0 {
			ids = append(ids, v.tokIDs[t0:t1]...)
			local := inf
			for _, c := range cs {
				local = min(local, g.phi(c))
			}
			e.maxLocal = max(e.maxLocal, local)
		}
		if v.nodeEnd[i] > i+1 {
			for _, c := range cs {
				if g.canPopBottom(c) {
					e.pops = append(e.pops, i)
					break
				}
			}
		}
		return true
	})
	words := v.Words()
	if len(ids) > 2*words {
		e.dense = make([]uint64, words)
		for _, id := range ids {
			e.dense[id>>6] |= 1 << (id & 63)
		}
	} else {
		e.sparse = append([]int32(nil), ids...)
	}
	w.ids = ids[:0]
	return e
}

func (s *State) entry(st int32) *entry {
	p := &s.c.entries[st]
	if e := p.Load(); e != nil {
		return e
	}
	e := s.g.compute(s.v, st)
	p.Store(e)
	return e
}

func sizeMask(allowed []uint64, words int) []uint64 {
	if cap(allowed) < words {
		allowed = make([]uint64, words)
	}
	allowed = allowed[:words]
	clear(allowed)
	return allowed
}

func set(allowed []uint64, id int32) { allowed[id>>6] |= 1 << (id & 63) }

// markNode sets the tokens of trie node i.
func markNode(v *Vocab, allowed []uint64, i int32) {
	for _, id := range v.tokIDs[v.tokStart[i]:v.tokStart[i+1]] {
		set(allowed, id)
	}
}

// Mask writes into allowed (resized to Vocab.Words() words, reusing its array when large enough)
// the set of tokens that may come next, bit id%64 of word id/64 for token id, and returns it. A
// token is set exactly when Advance would accept it; EOS is set exactly when Complete. Every
// token it sets leads to a state that can still complete. Nothing is set after Done.
func (s *State) Mask(allowed []uint64) []uint64 {
	allowed = sizeMask(allowed, s.v.Words())
	if s.done {
		return allowed
	}
	var w *walker
	for _, c := range s.cfgs {
		e := s.entry(c.s)
		orEntry(allowed, e)
		if c.f == nil || len(e.pops) == 0 {
			continue
		}
		if w == nil {
			w = walkers.Get().(*walker)
		}
		s.walkPops(w, c, e, allowed, -1)
	}
	if w != nil {
		walkers.Put(w)
	}
	if s.v.eos >= 0 && s.Complete() {
		set(allowed, int32(s.v.eos))
	}
	return allowed
}

func orEntry(allowed []uint64, e *entry) {
	if e.dense != nil {
		for i, x := range e.dense {
			allowed[i] |= x
		}
		return
	}
	for _, id := range e.sparse {
		set(allowed, id)
	}
}

// walkPops marks the tokens that end c's rule at one of e's pop nodes and continue in c's
// caller; with limit ≥ 0 only those after which MinBytesToComplete ≤ limit.
func (s *State) walkPops(w *walker, c config, e *entry, allowed []uint64, limit int32) {
	ctx := []config{{c.f.ret, c.f.parent}}
	for _, p := range e.pops {
		w.walk(s.g, s.v, p, ctx, s.marker(allowed, limit))
	}
}

func (s *State) marker(allowed []uint64, limit int32) func(int32, []config) bool {
	return func(i int32, cs []config) bool {
		if limit >= 0 {
			ok := false
			for _, c := range cs {
				if s.g.phi(c) <= limit {
					ok = true
					break
				}
			}
			if !ok {
				return true
			}
		}
		markNode(s.v, allowed, i)
		return true
	}
}

// maskUncached computes Mask by one walk of the whole trie from the state's configurations,
// without the cache (the reference the cached path is tested against), keeping only tokens
// after which MinBytesToComplete ≤ limit when limit ≥ 0.
func (s *State) maskUncached(allowed []uint64, limit int32) []uint64 {
	allowed = sizeMask(allowed, s.v.Words())
	if s.done {
		return allowed
	}
	w := walkers.Get().(*walker)
	defer walkers.Put(w)
	s.walkFull(w, s.cfgs, allowed, limit)
	if s.v.eos >= 0 && s.Complete() {
		set(allowed, int32(s.v.eos))
	}
	return allowed
}

func (s *State) walkFull(w *walker, cfgs []config, allowed []uint64, limit int32) {
	w.walk(s.g, s.v, 0, cfgs, s.marker(allowed, limit))
}

// MaskBudget is Mask for an engine that may sample at most remaining more tokens, this one and
// EOS included: it keeps only the tokens after which the value can still be completed and ended
// within the budget, counting one token per byte of ShortestCompletion (so it assumes the
// vocabulary has single-byte tokens for those bytes, as byte-level BPE vocabularies do), and EOS
// when Complete. If the value cannot be completed within remaining tokens at all, it sets the
// allowed tokens that spell a prefix of ShortestCompletion (the fastest close) and returns false;
// the output will then be cut by the budget. Near the end of the budget it walks the whole
// trie (uncached), typically a few milliseconds for a 49k vocabulary.
func (s *State) MaskBudget(allowed []uint64, remaining int) ([]uint64, bool) {
	allowed = sizeMask(allowed, s.v.Words())
	if s.done {
		return allowed, true
	}
	complete := s.Complete()
	if complete && s.v.eos >= 0 && remaining >= 1 {
		set(allowed, int32(s.v.eos))
	}
	limit := int32(min(remaining-2, math.MaxInt32))
	if limit >= 0 {
		var w *walker
		for _, c := range s.cfgs {
			if w == nil {
				w = walkers.Get().(*walker)
			}
			e := s.entry(c.s)
			if e.maxLocal+c.f.phiv() <= limit {
				orEntry(allowed, e)
				if c.f != nil && len(e.pops) > 0 {
					s.walkPops(w, c, e, allowed, limit)
				}
				continue
			}
			s.walkFull(w, []config{c}, allowed, limit)
		}
		if w != nil {
			walkers.Put(w)
		}
	}
	for _, x := range allowed {
		if x != 0 {
			return allowed, true
		}
	}
	// Nothing fits: the fastest close.
	close := s.ShortestCompletion()
	node := int32(0)
	for _, b := range close {
		child := int32(-1)
		for i := node + 1; i < s.v.nodeEnd[node]; i = s.v.nodeEnd[i] {
			if s.v.nodeByte[i] == b {
				child = i
				break
			}
		}
		if child < 0 {
			break
		}
		markNode(s.v, allowed, child)
		node = child
	}
	return allowed, false
}

// Allowed reports whether token id is set in mask.
func Allowed(mask []uint64, id int) bool {
	return id >= 0 && id/64 < len(mask) && mask[id/64]>>(uint(id)%64)&1 != 0
}

// ApplyMask sets logits[id] to −Inf for every id not allowed by mask (ids beyond the mask, as
// padded model vocabularies have, included).
func ApplyMask(logits []float32, mask []uint64) {
	ninf := float32(math.Inf(-1))
	for i := range logits {
		if !Allowed(mask, i) {
			logits[i] = ninf
		}
	}
}

// LogitMask returns a hook with the signature of the embedded engine's Request.LogitMask: on
// each call it advances s by the tokens generated since the last call, then masks logits with
// MaskBudget (maxTokens > 0: the request's token budget, so the value is closed before it runs
// out) or Mask (maxTokens ≤ 0). If a generated token is not allowed (the engine sampled outside
// the mask) it masks every logit, which ends the request with an error. The hook owns s; it is
// not safe for concurrent use, which the engine never does within one request.
func LogitMask(s *State, maxTokens int) func(generated []int, logits []float32) {
	seen := 0
	var mask []uint64
	failed := false
	return func(generated []int, logits []float32) {
		for !failed && seen < len(generated) {
			if s.Advance(generated[seen]) != nil {
				failed = true
			}
			seen++
		}
		if failed {
			ApplyMask(logits, nil)
			return
		}
		if maxTokens > 0 {
			mask, _ = s.MaskBudget(mask, maxTokens-len(generated))
		} else {
			mask = s.Mask(mask)
		}
		ApplyMask(logits, mask)
	}
}
