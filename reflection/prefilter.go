package reflection

import (
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode"
	"unicode/utf8"
)

// prefilter is a necessary condition for a regular expression to match:
// the text holds at least one of its literals (case-folded literals are
// looked for in the case-folded text). A pattern such as
// `(?i)\b(?:invoice|receipt)\b.*\d` can only match a text that contains
// "invoice" or "receipt" in some case; checking that with strings.Contains
// costs a small fraction of running the regexp over the text, and most
// prompts match no rubric's patterns. A nil prefilter knows no condition:
// the regexp has to run.
type prefilter struct {
	raw, folded []string
}

// newPrefilter derives the literals one of which every match of re
// contains, or nil when there is no such set (an optional or empty
// pattern, a character class).
func newPrefilter(re *regexp.Regexp) *prefilter {
	tree, err := syntax.Parse(re.String(), syntax.Perl)
	if err != nil {
		return nil
	}
	lits, ok := required(tree.Simplify())
	if !ok {
		return nil
	}
	p := &prefilter{}
	for _, l := range lits {
		if l.fold {
			p.folded = append(p.folded, l.s)
		} else {
			p.raw = append(p.raw, l.s)
		}
	}
	return p
}

type literal struct {
	s    string
	fold bool // s is case-folded (foldString) and must be found in the folded text
}

// required returns literals one of which every match of n contains; ok
// is false when no such set is known.
func required(n *syntax.Regexp) ([]literal, bool) {
	switch n.Op {
	case syntax.OpLiteral:
		if len(n.Rune) == 0 {
			return nil, false
		}
		s := string(n.Rune)
		if strings.ContainsRune(s, utf8.RuneError) {
			// matches an invalid byte of the text, which holds no U+FFFD
			return nil, false
		}
		if n.Flags&syntax.FoldCase != 0 {
			return []literal{{foldString(s), true}}, true
		}
		return []literal{{s, false}}, true
	case syntax.OpCapture, syntax.OpPlus:
		return required(n.Sub[0])
	case syntax.OpRepeat:
		if n.Min >= 1 {
			return required(n.Sub[0])
		}
	case syntax.OpConcat:
		// every part must match: any part's set will do; take the one
		// whose shortest literal is longest (the most selective)
		var best []literal
		bestLen := 0
		for _, sub := range n.Sub {
			lits, ok := required(sub)
			if !ok {
				continue
			}
			short := len(lits[0].s)
			for _, l := range lits[1:] {
				short = min(short, len(l.s))
			}
			if short > bestLen {
				best, bestLen = lits, short
			}
		}
		return best, best != nil
	case syntax.OpAlternate:
		// one branch must match: each needs a set, and the union is one
		var all []literal
		for _, sub := range n.Sub {
			lits, ok := required(sub)
			if !ok {
				return nil, false
			}
			all = append(all, lits...)
		}
		return all, len(all) > 0
	}
	return nil, false
}

// text is a text the prefilters of several patterns are checked on: its
// folding is computed once, when the first prefilter needs it.
type text struct {
	s, folded string
	done      bool
}

func (t *text) fold() string {
	if !t.done {
		t.folded, t.done = foldString(t.s), true
	}
	return t.folded
}

// may reports whether the regexp can match t.
func (p *prefilter) may(t *text) bool {
	if p == nil {
		return true
	}
	for _, l := range p.raw {
		if strings.Contains(t.s, l) {
			return true
		}
	}
	for _, l := range p.folded {
		if strings.Contains(t.fold(), l) {
			return true
		}
	}
	return false
}

// foldString maps every rune to the smallest rune of its simple
// case-folding orbit, the equivalence (?i) matches by: two strings are
// equal under (?i) exactly when their foldings are equal ("K", "k" and
// the Kelvin sign all become "K").
func foldString(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		// ASCII letters fold to their upper case: 'K' (0x4B) and 'S'
		// (0x53) are the smallest of their orbits ({K, k, U+212A},
		// {S, s, U+017F}) as every other letter's upper case is.
		b := []byte(s)
		for i, c := range b {
			if 'a' <= c && c <= 'z' {
				b[i] = c - 'a' + 'A'
			}
		}
		return string(b)
	}
	return strings.Map(foldRune, s)
}

func foldRune(r rune) rune {
	m := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		m = min(m, f)
	}
	return m
}
