package grammar

import (
	"fmt"
	"slices"
)

// frame is one return address of a configuration's stack; frames are immutable and shared.
type frame struct {
	ret    int32  // state to continue at when the called rule ends; -1 marks the bottom sentinel
	phi    int32  // fewest bytes to complete this frame and all below it
	parent *frame // nil: the top-level rule
}

// bottom stands for "the caller's context" while a state's context-free mask is computed.
var bottom = &frame{ret: -1}

func (f *frame) phiv() int32 {
	if f == nil {
		return 0
	}
	return f.phi
}

// config is a DFA state with the stack of return states under it.
type config struct {
	s int32
	f *frame
}

// arena hands out frames for one mask walk (nil: allocate on the heap); pos is the next free
// frame, chunk pos/arenaChunk.
type arena struct {
	chunks [][]frame
	pos    int
}

const arenaChunk = 256

func (a *arena) push(ret, phi int32, parent *frame) *frame {
	if a == nil {
		return &frame{ret: ret, phi: phi, parent: parent}
	}
	i, j := a.pos/arenaChunk, a.pos%arenaChunk
	if i == len(a.chunks) {
		a.chunks = append(a.chunks, make([]frame, arenaChunk))
	}
	f := &a.chunks[i][j]
	*f = frame{ret: ret, phi: phi, parent: parent}
	a.pos++
	return f
}

// step appends to out the configurations c reaches by consuming byte b: a byte edge of its
// state, a call of a rule that can start with b, or, where its rule can end here, the same from
// the return state (not below the bottom sentinel).
func (g *Grammar) step(c config, b byte, out []config, a *arena) []config {
	s, f := c.s, c.f
	cl := int(g.cls[b])
	for {
		if t := g.next[int(s)*g.ncls+cl]; t >= 0 {
			out = append(out, config{t, f})
		}
		for _, k := range g.calls[s] {
			if g.ruleFirst[k.rule].has(b) {
				nf := a.push(k.ret, g.minLen[k.ret]+f.phiv(), f)
				out = g.step(config{g.ruleStart[k.rule], nf}, b, out, a)
			}
		}
		if !g.final[s] || f == nil || f.ret < 0 {
			return out
		}
		s, f = f.ret, f.parent
	}
}

// dedup removes repeated configurations, keeping the first of each.
func dedup(cs []config) []config {
	if len(cs) < 2 {
		return cs
	}
	out := cs[:1]
	for _, c := range cs[1:] {
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// canComplete reports whether c can end the top-level value without more input.
func (g *Grammar) canComplete(c config) bool {
	s, f := c.s, c.f
	for {
		if !g.final[s] {
			return false
		}
		if f == nil {
			return true
		}
		if f.ret < 0 {
			return false
		}
		s, f = f.ret, f.parent
	}
}

// canPopBottom reports whether c can end every rule above the bottom sentinel.
func (g *Grammar) canPopBottom(c config) bool {
	s, f := c.s, c.f
	for {
		if !g.final[s] {
			return false
		}
		if f == bottom {
			return true
		}
		if f == nil {
			return false
		}
		s, f = f.ret, f.parent
	}
}

func (g *Grammar) phi(c config) int32 { return g.minLen[c.s] + c.f.phiv() }

// maxConfigs bounds a State's configurations (alternatives still open after a token, as with an
// anyOf whose branches share a prefix). Beyond it the later ones are dropped: that narrows the
// language but every configuration kept accepted the token and can still complete.
const maxConfigs = 64

// State is the position of one generation in a grammar. Its methods are not safe for
// concurrent use; Clone gives an independent copy cheaply (the stacks are shared and immutable).
type State struct {
	g    *Grammar
	v    *Vocab
	c    *maskCache
	cfgs []config
	done bool
	buf  []config
	key  []byte // scratch: the key of a deeper mask level
}

// Start returns the state before the first byte of a value of g, for masks over v.
func (g *Grammar) Start(v *Vocab) *State {
	return &State{g: g, v: v, c: g.cache(v), cfgs: []config{{g.root, nil}}}
}

// Clone returns an independent copy of s.
func (s *State) Clone() *State {
	return &State{g: s.g, v: s.v, c: s.c, cfgs: slices.Clone(s.cfgs), done: s.done}
}

// Grammar returns the grammar s belongs to.
func (s *State) Grammar() *Grammar { return s.g }

// Advance consumes token id. It fails, leaving s unchanged, when the token is not allowed here
// (exactly the tokens Mask leaves out), when it is out of range, or after EOS. EOS is allowed
// only when Complete; after it the state is Done.
func (s *State) Advance(id int) error {
	if s.done {
		return fmt.Errorf("%w: token %d after end of generation", ErrToken, id)
	}
	if id < 0 || id >= len(s.v.tokens) {
		return fmt.Errorf("%w: token %d outside the vocabulary", ErrToken, id)
	}
	if id == s.v.eos {
		if !s.Complete() {
			return fmt.Errorf("%w: end of generation before the value is complete", ErrToken)
		}
		s.done = true
		return nil
	}
	t := s.v.tokens[id]
	if len(t) == 0 {
		return fmt.Errorf("%w: token %d has no bytes", ErrToken, id)
	}
	if i, ok := s.advance(t); !ok {
		return fmt.Errorf("%w: token %d %q (byte %d rejected)", ErrToken, id, t, i)
	}
	return nil
}

// AdvanceBytes consumes text (for example a prefix the engine forces); it fails, leaving s
// unchanged, where a byte is not allowed.
func (s *State) AdvanceBytes(text []byte) error {
	if s.done {
		return fmt.Errorf("%w: bytes after end of generation", ErrToken)
	}
	if len(text) == 0 {
		return nil
	}
	if i, ok := s.advance(text); !ok {
		return fmt.Errorf("%w: byte %d (%q) of %q", ErrToken, i, text[i], text)
	}
	return nil
}

// advance consumes t, or returns the index of the first byte rejected and false.
func (s *State) advance(t []byte) (int, bool) {
	cur := slices.Clone(s.cfgs)
	nxt := s.buf[:0]
	for i, b := range t {
		nxt = nxt[:0]
		for _, c := range cur {
			nxt = s.g.step(c, b, nxt, nil)
		}
		nxt = dedup(nxt)
		if len(nxt) == 0 {
			return i, false
		}
		cur, nxt = nxt, cur
	}
	if len(cur) > maxConfigs {
		cur = cur[:maxConfigs]
	}
	s.cfgs = slices.Clone(cur)
	s.buf = nxt[:0]
	return 0, true
}

// Complete reports whether the output so far is a whole value (EOS is allowed).
func (s *State) Complete() bool {
	if s.done {
		return true
	}
	for _, c := range s.cfgs {
		if s.g.canComplete(c) {
			return true
		}
	}
	return false
}

// Done reports whether EOS has been consumed.
func (s *State) Done() bool { return s.done }

// MinBytesToComplete returns the fewest bytes that complete the value (0 when Complete). Every
// reachable state has a completion, so it is always finite. With single-byte tokens for the
// bytes of ShortestCompletion, it bounds the tokens needed to close the value.
func (s *State) MinBytesToComplete() int {
	if s.done {
		return 0
	}
	best := inf
	for _, c := range s.cfgs {
		best = min(best, s.g.phi(c))
	}
	return int(best)
}

// ShortestCompletion returns bytes of length MinBytesToComplete that complete the value: what
// an engine forces, tokenized, when its budget is about to run out.
func (s *State) ShortestCompletion() []byte {
	if s.done || len(s.cfgs) == 0 {
		return nil
	}
	g := s.g
	c := s.cfgs[0]
	for _, x := range s.cfgs[1:] {
		if g.phi(x) < g.phi(c) {
			c = x
		}
	}
	var out []byte
	st, f := c.s, c.f
	for {
		if g.minLen[st] == 0 {
			if f == nil {
				return out
			}
			st, f = f.ret, f.parent
			continue
		}
		moved := false
		for cl := 0; cl < g.ncls; cl++ {
			if t := g.next[int(st)*g.ncls+cl]; t >= 0 && 1+g.minLen[t] == g.minLen[st] {
				out = append(out, g.rep[cl])
				st, moved = t, true
				break
			}
		}
		if moved {
			continue
		}
		for _, k := range g.calls[st] {
			if g.minLen[g.ruleStart[k.rule]]+g.minLen[k.ret] == g.minLen[st] {
				f = &frame{ret: k.ret, phi: g.minLen[k.ret] + f.phiv(), parent: f}
				st, moved = g.ruleStart[k.rule], true
				break
			}
		}
		if !moved {
			return out // unreachable: minLen is consistent with the edges
		}
	}
}
