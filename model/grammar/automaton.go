package grammar

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// byteSet is a set of byte values.
type byteSet [4]uint64

func (s *byteSet) add(b byte) { s[b>>6] |= 1 << (b & 63) }

func (s *byteSet) addRange(lo, hi byte) {
	for c := int(lo); c <= int(hi); c++ {
		s.add(byte(c))
	}
}

func (s *byteSet) has(b byte) bool { return s[b>>6]>>(b&63)&1 != 0 }

func (s *byteSet) or(o byteSet) {
	for i := range s {
		s[i] |= o[i]
	}
}

func (s *byteSet) empty() bool { return s[0]|s[1]|s[2]|s[3] == 0 }

// expr is a node of the grammar's syntax tree; each rule's body is one expr, compiled to an NFA
// and then to a DFA whose edges are byte classes and calls of other rules.
type expr interface{ isExpr() }

type (
	exBytes struct{ set byteSet } // one byte of the set
	exSeq   []expr                // concatenation; empty: the empty string
	exAlt   []expr                // union; empty: no string at all
	exRep   struct {              // e repeated min to max times (max < 0: unbounded)
		e        expr
		min, max int
	}
	exCall struct{ rule int } // the language of another rule (never empty-string)
	// exObject is open, then members in order, any optional one left out, sep between the ones
	// present, then close. Linear in the members, where nested alternatives would be exponential.
	exObject struct {
		open, sep, close expr
		members          []member
	}
	// exArray is open, then at least min and at most len(items) of items in order (items[j] is
	// the j-th element), then, when tail is set, any number of tail elements; sep between
	// elements; then close.
	exArray struct {
		open, sep, close expr
		items            []expr
		min              int
		tail             expr
	}
)

type member struct {
	e        expr // key, colon and value
	optional bool
}

func (exBytes) isExpr()  {}
func (exSeq) isExpr()    {}
func (exAlt) isExpr()    {}
func (exRep) isExpr()    {}
func (exCall) isExpr()   {}
func (exObject) isExpr() {}
func (exArray) isExpr()  {}

// lit is the literal string s.
func lit(s string) expr {
	e := make(exSeq, len(s))
	for i := 0; i < len(s); i++ {
		var b byteSet
		b.add(s[i])
		e[i] = exBytes{b}
	}
	return e
}

func rng(lo, hi byte) expr {
	var b byteSet
	b.addRange(lo, hi)
	return exBytes{b}
}

// walkExpr calls fn on every node of e.
func walkExpr(e expr, fn func(expr)) {
	if e == nil {
		return
	}
	fn(e)
	switch e := e.(type) {
	case exSeq:
		for _, x := range e {
			walkExpr(x, fn)
		}
	case exAlt:
		for _, x := range e {
			walkExpr(x, fn)
		}
	case exRep:
		walkExpr(e.e, fn)
	case exObject:
		walkExpr(e.open, fn)
		walkExpr(e.sep, fn)
		walkExpr(e.close, fn)
		for _, m := range e.members {
			walkExpr(m.e, fn)
		}
	case exArray:
		walkExpr(e.open, fn)
		walkExpr(e.sep, fn)
		walkExpr(e.close, fn)
		for _, x := range e.items {
			walkExpr(x, fn)
		}
		walkExpr(e.tail, fn)
	}
}

// nfa is a Thompson NFA: each state has epsilon edges, at most one byte-set edge and at most
// one call edge.
type nfa struct{ st []nstate }

type nstate struct {
	eps    []int32
	set    byteSet
	to     int32 // target of the byte-set edge, -1 for none
	call   int32 // rule called, -1 for none
	callTo int32
}

func (n *nfa) add() int32 {
	n.st = append(n.st, nstate{to: -1, call: -1})
	return int32(len(n.st) - 1)
}

func (n *nfa) eps(a, b int32) { n.st[a].eps = append(n.st[a].eps, b) }

// build adds e's states and returns its start and end. It fails when the NFA outgrows limit.
func (n *nfa) build(e expr, limit int) (int32, int32, error) {
	if len(n.st) > limit {
		return 0, 0, errTooLarge
	}
	switch e := e.(type) {
	case nil:
		s := n.add()
		return s, s, nil
	case exBytes:
		s, t := n.add(), n.add()
		n.st[s].set, n.st[s].to = e.set, t
		return s, t, nil
	case exSeq:
		s := n.add()
		cur := s
		for _, x := range e {
			a, b, err := n.build(x, limit)
			if err != nil {
				return 0, 0, err
			}
			n.eps(cur, a)
			cur = b
		}
		return s, cur, nil
	case exAlt:
		s, t := n.add(), n.add()
		for _, x := range e {
			a, b, err := n.build(x, limit)
			if err != nil {
				return 0, 0, err
			}
			n.eps(s, a)
			n.eps(b, t)
		}
		return s, t, nil
	case exCall:
		s, t := n.add(), n.add()
		n.st[s].call, n.st[s].callTo = int32(e.rule), t
		return s, t, nil
	case exRep:
		s := n.add()
		cur := s
		for i := 0; i < e.min; i++ {
			a, b, err := n.build(e.e, limit)
			if err != nil {
				return 0, 0, err
			}
			n.eps(cur, a)
			cur = b
		}
		if e.max < 0 {
			a, b, err := n.build(e.e, limit)
			if err != nil {
				return 0, 0, err
			}
			l := n.add()
			n.eps(cur, l)
			n.eps(l, a)
			n.eps(b, l)
			return s, l, nil
		}
		end := n.add()
		for i := e.min; i < e.max; i++ {
			n.eps(cur, end)
			a, b, err := n.build(e.e, limit)
			if err != nil {
				return 0, 0, err
			}
			n.eps(cur, a)
			cur = b
		}
		n.eps(cur, end)
		return s, end, nil
	case exObject:
		return n.buildObject(e, limit)
	case exArray:
		return n.buildArray(e, limit)
	}
	return 0, 0, fmt.Errorf("grammar: internal: unknown expression %T", e)
}

// link builds e from a to b.
func (n *nfa) link(a, b int32, e expr, limit int) error {
	s, t, err := n.build(e, limit)
	if err != nil {
		return err
	}
	n.eps(a, s)
	n.eps(t, b)
	return nil
}

func (n *nfa) buildObject(e exObject, limit int) (int32, int32, error) {
	k := len(e.members)
	// first[i]: before member i with no member yet; later[i]: before member i after one.
	first, later := make([]int32, k+1), make([]int32, k+1)
	for i := range first {
		first[i], later[i] = n.add(), n.add()
	}
	s, c, t := n.add(), n.add(), n.add()
	if err := n.link(s, first[0], e.open, limit); err != nil {
		return 0, 0, err
	}
	for i, m := range e.members {
		mid := n.add()
		n.eps(first[i], mid)
		if err := n.link(later[i], mid, e.sep, limit); err != nil {
			return 0, 0, err
		}
		if err := n.link(mid, later[i+1], m.e, limit); err != nil {
			return 0, 0, err
		}
		if m.optional {
			n.eps(first[i], first[i+1])
			n.eps(later[i], later[i+1])
		}
	}
	n.eps(first[k], c)
	n.eps(later[k], c)
	if err := n.link(c, t, e.close, limit); err != nil {
		return 0, 0, err
	}
	return s, t, nil
}

func (n *nfa) buildArray(e exArray, limit int) (int32, int32, error) {
	L := len(e.items)
	hub := make([]int32, L+1)
	for i := range hub {
		hub[i] = n.add()
	}
	s, c, t := n.add(), n.add(), n.add()
	if err := n.link(s, hub[0], e.open, limit); err != nil {
		return 0, 0, err
	}
	for j, it := range e.items {
		x := exSeq{it}
		if j > 0 {
			x = exSeq{e.sep, it}
		}
		if err := n.link(hub[j], hub[j+1], x, limit); err != nil {
			return 0, 0, err
		}
		if j >= e.min {
			n.eps(hub[j], c)
		}
	}
	if L >= e.min {
		n.eps(hub[L], c)
	}
	if e.tail != nil {
		if L == 0 {
			x := n.add()
			if err := n.link(hub[0], x, e.tail, limit); err != nil {
				return 0, 0, err
			}
			if err := n.link(x, x, exSeq{e.sep, e.tail}, limit); err != nil {
				return 0, 0, err
			}
			n.eps(x, c)
		} else if err := n.link(hub[L], hub[L], exSeq{e.sep, e.tail}, limit); err != nil {
			return 0, 0, err
		}
	}
	if err := n.link(c, t, e.close, limit); err != nil {
		return 0, 0, err
	}
	return s, t, nil
}

// tables is the grammar under construction: DFA states of every rule in one numbering.
type tables struct {
	ncls  int
	cls   [256]uint8
	rep   []byte // a byte of each class, printable ASCII where the class has one
	next  []int32
	final []bool
	calls [][]call
	limit int
}

type call struct{ rule, ret int32 }

func (tb *tables) newState() int32 {
	for i := 0; i < tb.ncls; i++ {
		tb.next = append(tb.next, -1)
	}
	tb.final = append(tb.final, false)
	tb.calls = append(tb.calls, nil)
	return int32(len(tb.final) - 1)
}

// classes partitions the 256 byte values by their membership in every set of bodies.
func classes(bodies []expr) ([256]uint8, []byte) {
	seen := map[byteSet]bool{}
	var sets []byteSet
	for _, body := range bodies {
		walkExpr(body, func(e expr) {
			if b, ok := e.(exBytes); ok && !seen[b.set] {
				seen[b.set] = true
				sets = append(sets, b.set)
			}
		})
	}
	var cls [256]uint8
	ids := map[string]uint8{}
	var rep []byte
	sig := make([]byte, (len(sets)+7)/8)
	for c := 0; c < 256; c++ {
		clear(sig)
		for i := range sets {
			if sets[i].has(byte(c)) {
				sig[i/8] |= 1 << (i % 8)
			}
		}
		id, ok := ids[string(sig)]
		if !ok {
			id = uint8(len(rep))
			ids[string(sig)] = id
			rep = append(rep, byte(c))
		} else if (rep[id] < 0x20 || rep[id] > 0x7e) && c >= 0x20 && c <= 0x7e {
			rep[id] = byte(c)
		}
		cls[c] = id
	}
	return cls, rep
}

// determinize adds the DFA of one rule (NFA n from start to end) to tb and returns its start.
func (tb *tables) determinize(n *nfa, start, end int32) (int32, error) {
	mark := make([]uint32, len(n.st))
	gen := uint32(0)
	var stack []int32
	closure := func(seeds []int32) []int32 {
		gen++
		var out []int32
		stack = append(stack[:0], seeds...)
		for _, s := range seeds {
			mark[s] = gen
		}
		for len(stack) > 0 {
			s := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			out = append(out, s)
			for _, t := range n.st[s].eps {
				if mark[t] != gen {
					mark[t] = gen
					stack = append(stack, t)
				}
			}
		}
		slices.Sort(out)
		return out
	}
	key := func(set []int32) string {
		b := make([]byte, 4*len(set))
		for i, s := range set {
			binary.LittleEndian.PutUint32(b[4*i:], uint32(s))
		}
		return string(b)
	}
	ids := map[string]int32{}
	var sets [][]int32
	get := func(set []int32) (int32, error) {
		k := key(set)
		if id, ok := ids[k]; ok {
			return id, nil
		}
		if len(tb.final) >= tb.limit {
			return 0, errTooLarge
		}
		id := tb.newState()
		ids[k] = id
		sets = append(sets, set)
		tb.final[id] = slices.Contains(set, end)
		return id, nil
	}
	first, err := get(closure([]int32{start}))
	if err != nil {
		return 0, err
	}
	// bySeeds memoises the target of each set of byte-edge targets: many classes, and many
	// states, share one (every letter inside a string), and the closure is the costly part.
	bySeeds := map[string]int32{}
	target := func(seeds []int32) (int32, error) {
		k := key(seeds)
		if t, ok := bySeeds[k]; ok {
			return t, nil
		}
		t, err := get(closure(seeds))
		if err != nil {
			return 0, err
		}
		bySeeds[k] = t
		return t, nil
	}
	base := first
	var seeds, edges []int32
	for i := 0; i < len(sets); i++ {
		set := sets[i]
		id := base + int32(i)
		edges = edges[:0]
		for _, s := range set {
			if n.st[s].to >= 0 {
				edges = append(edges, s)
			}
		}
		for c := 0; c < tb.ncls && len(edges) > 0; c++ {
			b := tb.rep[c]
			seeds = seeds[:0]
			for _, s := range edges {
				if st := &n.st[s]; st.set.has(b) {
					seeds = append(seeds, st.to)
				}
			}
			if len(seeds) == 0 {
				continue
			}
			t, err := target(seeds)
			if err != nil {
				return 0, err
			}
			tb.next[int(id)*tb.ncls+c] = t
		}
		var rules []int32
		for _, s := range set {
			if r := n.st[s].call; r >= 0 && !slices.Contains(rules, r) {
				rules = append(rules, r)
			}
		}
		slices.Sort(rules)
		for _, r := range rules {
			seeds = seeds[:0]
			for _, s := range set {
				if n.st[s].call == r {
					seeds = append(seeds, n.st[s].callTo)
				}
			}
			t, err := get(closure(seeds))
			if err != nil {
				return 0, err
			}
			tb.calls[id] = append(tb.calls[id], call{rule: r, ret: t})
		}
	}
	return first, nil
}
