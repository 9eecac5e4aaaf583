// Package grammar owns grammar-constrained decoding for JSON: it compiles a JSON Schema (the
// subset OpenAI's strict mode uses), plain JSON, or a set of tool definitions into a byte-level
// pushdown automaton, and computes, token by token, which tokens of a vocabulary may come next so
// that every finished output is valid.
//
// The automaton is a set of rules, each a DFA over bytes whose edges are byte classes or calls of
// other rules (recursion: nested JSON values, recursive $ref). A State is a small set of
// configurations (a DFA state and a persistent stack of return states); it is cheap to copy and
// never shares mutable data, so an engine may fork it.
//
// Masks are computed by walking a byte trie of the vocabulary (built once by NewVocab) with the
// automaton, pruning a subtree at the first rejected byte; no token string is ever matched on its
// own. A mask is split into levels that depend only on automaton states, each computed once per
// grammar and vocabulary and cached in the Grammar: level 0, per DFA state, the tokens accepted
// without ending the current rule's value, and the trie nodes where that value can end; level k,
// per state and the return states of the k frames below, the tokens that end those values at
// those nodes and go on in the caller. A warm mask is the union of a few cached bitsets.
//
// Output form, for every grammar: object properties appear in the schema's order; whitespace is
// bounded (Options.MaxWhitespace bytes in each place JSON allows it, none before the top-level
// value or after it); integers have at most 18 digits and numbers at most 18 integer digits, 18
// fraction digits and a 2-digit exponent, so every number fits int64 or float64; strings are
// valid UTF-8 with JSON escapes (no \u escape of a surrogate: characters beyond the BMP appear
// as UTF-8). Each output is a subset of what the schema allows, never more.
package grammar

import (
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Errors.
var (
	// ErrUnsupported is wrapped by Compile errors about a schema keyword or form this package
	// does not enforce; the message names the keyword and its location.
	ErrUnsupported = errors.New("grammar: unsupported schema")
	// ErrSchema is wrapped by Compile errors about a schema that is not valid JSON Schema, or
	// that no finite JSON value satisfies.
	ErrSchema = errors.New("grammar: invalid schema")
	// ErrToken is wrapped by Advance errors about a token the grammar does not allow here.
	ErrToken = errors.New("grammar: token not allowed")

	errTooLarge = fmt.Errorf("%w: the grammar exceeds %d automaton states", ErrUnsupported, maxStates)
)

// maxStates bounds a grammar's DFA states (each costs ncls × 4 bytes of tables).
const maxStates = 1 << 15

// Options tunes the output form of a grammar. The zero value is the default.
type Options struct {
	// MaxWhitespace is the most bytes of whitespace (space, tab, newline, carriage return) in
	// each place JSON allows whitespace inside a value: 0 means the default, 1 (so `{"a": 1}`
	// and compact JSON are both possible); a negative value allows none (compact JSON only). A
	// bound keeps a model from looping on whitespace; pretty-printing needs a larger one.
	MaxWhitespace int
}

func (o Options) ws() int {
	switch {
	case o.MaxWhitespace < 0:
		return 0
	case o.MaxWhitespace == 0:
		return 1
	}
	return o.MaxWhitespace
}

// Grammar is a compiled grammar. It is immutable apart from its mask caches and safe for
// concurrent use; each generation uses its own State.
type Grammar struct {
	ncls      int
	cls       [256]uint8
	rep       []byte
	next      []int32 // state*ncls + class → state, -1: none
	final     []bool
	calls     [][]call
	minLen    []int32 // fewest bytes that complete the state's rule
	ruleStart []int32
	ruleFirst []byteSet // bytes a rule's value can start with
	ruleNames []string
	root      int32

	mu     sync.Mutex
	caches map[*Vocab]*maskCache
}

// States returns the number of automaton states (a measure of the grammar's size).
func (g *Grammar) States() int { return len(g.final) }

const inf = int32(1 << 30)

// builder collects rules while a schema is compiled.
type builder struct {
	opts   Options
	rules  []rule
	anyID  int // the rule of any JSON value, -1 until used
	wsExpr expr
}

type rule struct {
	name string
	body expr
}

func newBuilder(opts Options) *builder {
	b := &builder{opts: opts, anyID: -1}
	if n := opts.ws(); n > 0 {
		var w byteSet
		for _, c := range []byte(" \t\n\r") {
			w.add(c)
		}
		b.wsExpr = exRep{exBytes{w}, 0, n}
	} else {
		b.wsExpr = exSeq{}
	}
	return b
}

// newRule reserves a rule and returns its id; its body is set later with b.rules[id].body.
func (b *builder) newRule(name string) int {
	b.rules = append(b.rules, rule{name: name})
	return len(b.rules) - 1
}

// finish compiles the rules into a Grammar whose start is rule root.
func (b *builder) finish(root int) (*Grammar, error) {
	bodies := make([]expr, len(b.rules))
	for i, r := range b.rules {
		if r.body == nil {
			return nil, fmt.Errorf("grammar: internal: rule %s has no body", r.name)
		}
		bodies[i] = r.body
	}
	tb := &tables{limit: maxStates}
	tb.cls, tb.rep = classes(bodies)
	tb.ncls = len(tb.rep)
	starts := make([]int32, len(bodies))
	for i, body := range bodies {
		n := &nfa{}
		s, t, err := n.build(body, 8*maxStates)
		if err != nil {
			return nil, err
		}
		if starts[i], err = tb.determinize(n, s, t); err != nil {
			return nil, err
		}
	}
	g := &Grammar{
		ncls: tb.ncls, cls: tb.cls, rep: tb.rep, next: tb.next, final: tb.final, calls: tb.calls,
		ruleStart: starts, root: starts[root],
	}
	for _, r := range b.rules {
		g.ruleNames = append(g.ruleNames, r.name)
	}
	g.computeMinLen()
	if g.minLen[g.root] >= inf {
		return nil, fmt.Errorf("%w: no finite JSON value satisfies it", ErrSchema)
	}
	g.trim()
	if err := g.computeFirst(); err != nil {
		return nil, err
	}
	return g, nil
}

// computeMinLen sets minLen to the fewest bytes from each state to the end of its rule (inf where
// the rule cannot end: a dead state, or a call of a rule with no finite value).
func (g *Grammar) computeMinLen() {
	n := len(g.final)
	g.minLen = make([]int32, n)
	// rev[t]: states with a byte edge to t; retOf[t] and callers[r]: the calls returning to t
	// and the calls of rule r, as (state, call) pairs.
	type callRef struct {
		s int32
		k call
	}
	rev := make([][]int32, n)
	retOf := make([][]callRef, n)
	callers := make([][]callRef, len(g.ruleStart))
	for s := 0; s < n; s++ {
		for c := 0; c < g.ncls; c++ {
			if t := g.next[s*g.ncls+c]; t >= 0 {
				if l := rev[t]; len(l) == 0 || l[len(l)-1] != int32(s) {
					rev[t] = append(rev[t], int32(s))
				}
			}
		}
		for _, k := range g.calls[s] {
			retOf[k.ret] = append(retOf[k.ret], callRef{int32(s), k})
			callers[k.rule] = append(callers[k.rule], callRef{int32(s), k})
		}
	}
	isStart := make([][]int32, n)
	for r, s := range g.ruleStart {
		isStart[s] = append(isStart[s], int32(r))
	}
	var queue []int32
	inQueue := make([]bool, n)
	for s := range g.minLen {
		g.minLen[s] = inf
		if g.final[s] {
			g.minLen[s] = 0
			queue = append(queue, int32(s))
			inQueue[s] = true
		}
	}
	lower := func(s, v int32) {
		if v < g.minLen[s] {
			g.minLen[s] = v
			if !inQueue[s] {
				inQueue[s] = true
				queue = append(queue, s)
			}
		}
	}
	viaCall := func(cr callRef) {
		if a, r := g.minLen[g.ruleStart[cr.k.rule]], g.minLen[cr.k.ret]; a < inf && r < inf {
			lower(cr.s, a+r)
		}
	}
	for len(queue) > 0 {
		t := queue[0]
		queue = queue[1:]
		inQueue[t] = false
		for _, s := range rev[t] {
			lower(s, 1+g.minLen[t])
		}
		for _, cr := range retOf[t] {
			viaCall(cr)
		}
		for _, r := range isStart[t] {
			for _, cr := range callers[r] {
				viaCall(cr)
			}
		}
	}
}

// trim removes edges into states from which no value can be completed, so every reachable
// configuration can still complete (no dead ends).
func (g *Grammar) trim() {
	for s := range g.final {
		for c := 0; c < g.ncls; c++ {
			if t := g.next[s*g.ncls+c]; t >= 0 && g.minLen[t] >= inf {
				g.next[s*g.ncls+c] = -1
			}
		}
		g.calls[s] = slices.DeleteFunc(g.calls[s], func(k call) bool {
			return g.minLen[g.ruleStart[k.rule]] >= inf || g.minLen[k.ret] >= inf
		})
		if len(g.calls[s]) == 0 {
			g.calls[s] = nil
		}
	}
}

// computeFirst sets the bytes each rule's value can start with, and rejects rules that could
// call themselves before consuming a byte (left recursion) or that match the empty string.
func (g *Grammar) computeFirst() error {
	g.ruleFirst = make([]byteSet, len(g.ruleStart))
	state := make([]uint8, len(g.ruleStart)) // 0 new, 1 in progress, 2 done
	var visit func(r int32) error
	visit = func(r int32) error {
		switch state[r] {
		case 1:
			return fmt.Errorf("%w: %s refers to itself before any input (left recursion)", ErrSchema, g.ruleNames[r])
		case 2:
			return nil
		}
		state[r] = 1
		s := g.ruleStart[r]
		if g.final[s] {
			return fmt.Errorf("grammar: internal: rule %s matches the empty string", g.ruleNames[r])
		}
		var f byteSet
		for b := 0; b < 256; b++ {
			if g.next[int(s)*g.ncls+int(g.cls[b])] >= 0 {
				f.add(byte(b))
			}
		}
		for _, k := range g.calls[s] {
			if err := visit(k.rule); err != nil {
				return err
			}
			f.or(g.ruleFirst[k.rule])
		}
		g.ruleFirst[r] = f
		state[r] = 2
		return nil
	}
	for r := range g.ruleStart {
		if g.minLen[g.ruleStart[r]] >= inf {
			state[r] = 2
			continue
		}
		if err := visit(int32(r)); err != nil {
			return err
		}
	}
	return nil
}
