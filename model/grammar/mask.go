package grammar

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
)

// entry is one level of the mask of a DFA state. Level 0 holds the tokens the state accepts
// without ending its rule (or ending only rules it called itself), and the trie nodes after
// which its rule's value can end (pops). Level k > 0, for the return states r1..rk of the
// frames below, holds the tokens that end the rules of the levels before at one of the previous
// level's pops and then go on from rk without ending rk's rule, and the nodes where that rule can
// end in turn. A mask is the union of the levels down the stack while pops remain; every level
// depends only on states, so each is computed once per vocabulary.
type entry struct {
	dense    []uint64 // accepted tokens as a bitset, or nil when sparse is used
	sparse   []int32
	pops     []int32
	maxLocal int32 // the largest MinBytesToComplete after an accepted token, above the level's bottom

	// How the level was made (to walk it again), and, made on first use by MaskBudget, each
	// accepted token's MinBytesToComplete above the bottom (capped at 255): by token id when
	// dense, by index into sparse otherwise.
	starts  []int32
	from    config
	phiOnce sync.Once
	phi     []uint8
}

// maskCache holds the entries of one grammar over one vocabulary, filled lazily.
type maskCache struct {
	entries []atomic.Pointer[entry] // level 0, by state
	deeper  sync.Map                // levels > 0, by the key of state and return states
	n, size atomic.Int64            // entries stored and their approximate bytes
}

func (c *maskCache) stored(e *entry, keyLen int) {
	c.n.Add(1)
	c.size.Add(int64(64 + 8*len(e.dense) + 4*len(e.sparse) + 4*len(e.pops) + keyLen))
}

// CacheStats returns how many mask entries g holds for v and their approximate size in bytes.
// Entries are made on first use and kept for the Grammar's life (JSON's grammar is shared, so
// its cache grows with the distinct states and nesting contexts that requests reach); an
// engine that compiles a grammar per request schema should keep compiled grammars in a bounded
// cache of its own.
func (g *Grammar) CacheStats(v *Vocab) (entries int, bytes int64) {
	c := g.cache(v)
	return int(c.n.Load()), c.size.Load()
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
		if c := prev[0]; len(prev) == 1 && g.calls[c.s] == nil && (!g.final[c.s] || c.f == nil || c.f.ret < 0) {
			// One configuration that can only take a byte edge: the common case, inlined.
			if t := g.next[int(c.s)*g.ncls+int(g.cls[b])]; t >= 0 {
				cur = append(cur, config{t, c.f})
			}
		} else {
			for _, c := range prev {
				cur = g.step(c, b, cur, &w.arena)
			}
			cur = dedup(cur)
		}
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

// computeEntry builds the entry of one level: from configuration c (its frame the bottom
// sentinel) at each trie node of starts, the tokens below it accepted above the bottom and the
// nodes where the bottom can be reached.
func (g *Grammar) computeEntry(v *Vocab, starts []int32, c config) *entry {
	w := walkers.Get().(*walker)
	defer walkers.Put(w)
	e := &entry{starts: starts, from: c}
	start := []config{c}
	ids := w.ids[:0]
	for _, p := range starts {
		if v.nodeEnd[p] > p+1 && g.canPopBottom(c) {
			e.pops = append(e.pops, p)
		}
		w.walk(g, v, p, start, func(i int32, cs []config) bool {
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
	}
	slices.Sort(e.pops)
	e.pops = slices.Compact(e.pops)
	words := v.Words()
	if len(ids) > 2*words {
		e.dense = make([]uint64, words)
		for _, id := range ids {
			e.dense[id>>6] |= 1 << (id & 63)
		}
	} else {
		slices.Sort(ids)
		e.sparse = slices.Compact(slices.Clone(ids))
	}
	w.ids = ids[:0]
	return e
}

// tokenPhi returns e.phi, walking e's level again on first use.
func (g *Grammar) tokenPhi(v *Vocab, e *entry) []uint8 {
	e.phiOnce.Do(func() {
		w := walkers.Get().(*walker)
		defer walkers.Put(w)
		n := len(e.sparse)
		if e.dense != nil {
			n = len(v.tokens)
		}
		phi := make([]uint8, n)
		for i := range phi {
			phi[i] = 255
		}
		start := []config{e.from}
		for _, p := range e.starts {
			w.walk(g, v, p, start, func(i int32, cs []config) bool {
				t0, t1 := v.tokStart[i], v.tokStart[i+1]
				if t1 == t0 {
					return true
				}
				local := inf
				for _, c := range cs {
					local = min(local, g.phi(c))
				}
				x := uint8(min(local, 255))
				for _, id := range v.tokIDs[t0:t1] {
					k := int(id)
					if e.dense == nil {
						k, _ = slices.BinarySearch(e.sparse, id)
					}
					phi[k] = min(phi[k], x)
				}
				return true
			})
		}
		e.phi = phi
	})
	return e.phi
}

// orEntryWithin adds the tokens of e after which MinBytesToComplete above e's bottom is at
// most lim.
func (s *State) orEntryWithin(allowed []uint64, e *entry, lim int32) {
	if lim < 0 {
		return
	}
	phi := s.g.tokenPhi(s.v, e)
	if e.dense != nil {
		for w, x := range e.dense {
			for x != 0 {
				b := bits.TrailingZeros64(x)
				x &= x - 1
				if id := w*64 + b; int32(phi[id]) <= lim && phi[id] < 255 {
					allowed[w] |= 1 << b
				}
			}
		}
		return
	}
	for k, id := range e.sparse {
		if int32(phi[k]) <= lim && phi[k] < 255 {
			set(allowed, id)
		}
	}
}

var rootStart = []int32{0}

func (s *State) entry(st int32) *entry {
	p := &s.c.entries[st]
	if e := p.Load(); e != nil {
		return e
	}
	e := s.g.computeEntry(s.v, rootStart, config{st, bottom})
	if p.CompareAndSwap(nil, e) {
		s.c.stored(e, 0)
		return e
	}
	return p.Load()
}

// deeperEntry returns the level after prev (whose key is s.key) for return state ret.
func (s *State) deeperEntry(prev *entry, ret int32) *entry {
	s.key = binary.LittleEndian.AppendUint32(s.key, uint32(ret))
	if e, ok := s.c.deeper.Load(string(s.key)); ok {
		return e.(*entry)
	}
	e := s.g.computeEntry(s.v, prev.pops, config{ret, bottom})
	if old, loaded := s.c.deeper.LoadOrStore(string(s.key), e); loaded {
		return old.(*entry)
	}
	s.c.stored(e, len(s.key))
	return e
}

// maskConfig adds the tokens configuration c allows to allowed, level by level; with limit ≥ 0
// only those after which MinBytesToComplete ≤ limit.
func (s *State) maskConfig(c config, allowed []uint64, limit int32) {
	e, f := s.entry(c.s), c.f
	s.key = binary.LittleEndian.AppendUint32(s.key[:0], uint32(c.s))
	for {
		if limit >= 0 && e.maxLocal+f.phiv() > limit {
			s.orEntryWithin(allowed, e, limit-f.phiv())
		} else {
			orEntry(allowed, e)
		}
		if len(e.pops) == 0 || f == nil {
			return
		}
		e, f = s.deeperEntry(e, f.ret), f.parent
	}
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
	for _, c := range s.cfgs {
		s.maskConfig(c, allowed, -1)
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
	w.walk(s.g, s.v, 0, s.cfgs, s.marker(allowed, limit))
	if s.v.eos >= 0 && s.Complete() {
		set(allowed, int32(s.v.eos))
	}
	return allowed
}

// MaskBudget is Mask for an engine that may sample at most remaining more tokens, this one and
// EOS included: it keeps only the tokens after which the value can still be completed and ended
// within the budget, counting one token per byte of ShortestCompletion (so it assumes the
// vocabulary has single-byte tokens for those bytes, as byte-level BPE vocabularies do), and EOS
// when Complete. If the value cannot be completed within remaining tokens at all, it sets the
// allowed tokens that spell a prefix of ShortestCompletion (the fastest close) and returns false;
// the output will then be cut by the budget. Near the end of the budget it reads per-token
// lengths that each cached level computes on first use.
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
		for _, c := range s.cfgs {
			s.maskConfig(c, allowed, limit)
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
	for w := 0; w*64 < len(logits); w++ {
		chunk := logits[w*64 : min(w*64+64, len(logits))]
		var x uint64
		if w < len(mask) {
			x = mask[w]
		}
		switch x {
		case 0:
			for i := range chunk {
				chunk[i] = ninf
			}
		case ^uint64(0):
		default:
			for i := range chunk {
				if x>>uint(i)&1 == 0 {
					chunk[i] = ninf
				}
			}
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
