package hf

import (
	"strings"

	"golang.org/x/text/unicode/norm"
)

// Split behaviours (Hugging Face's SplitDelimiterBehavior).
const (
	behIsolated = iota
	behRemoved
	behMergedWithPrevious
	behMergedWithNext
	behContiguous
)

var behaviors = map[string]int{
	"Isolated": behIsolated, "Removed": behRemoved, "MergedWithPrevious": behMergedWithPrevious,
	"MergedWithNext": behMergedWithNext, "Contiguous": behContiguous,
}

// A step is one pre-tokenizer ahead of the final ByteLevel: it appends the
// non-empty pieces of s to out.
type step interface {
	split(s string, out []string) []string
}

type span struct {
	a, b  int
	match bool
}

// splitStep is the Split pre-tokenizer with a known regex or a literal.
type splitStep struct {
	match    matcher // nil for a literal
	literal  string
	behavior int
	invert   bool
}

func (st *splitStep) split(s string, out []string) []string {
	if s == "" {
		return out
	}
	if st.match != nil && st.behavior == behIsolated && !st.invert {
		for i := 0; i < len(s); {
			j := st.match(s, i)
			out = append(out, s[i:j])
			i = j
		}
		return out
	}
	var spans []span
	if st.match != nil {
		for i := 0; i < len(s); {
			j := st.match(s, i)
			spans = append(spans, span{i, j, true})
			i = j
		}
	} else {
		prev := 0
		for i := 0; i <= len(s)-len(st.literal); {
			k := strings.Index(s[i:], st.literal)
			if k < 0 {
				break
			}
			a := i + k
			if a > prev {
				spans = append(spans, span{prev, a, false})
			}
			spans = append(spans, span{a, a + len(st.literal), true})
			prev = a + len(st.literal)
			i = prev
		}
		if prev < len(s) {
			spans = append(spans, span{prev, len(s), false})
		}
	}
	if st.invert {
		for i := range spans {
			spans[i].match = !spans[i].match
		}
	}
	return applyBehavior(s, spans, st.behavior, out)
}

// applyBehavior turns spans covering s into pieces as Hugging Face's
// NormalizedString::split does.
func applyBehavior(s string, spans []span, behavior int, out []string) []string {
	var keep []span
	switch behavior {
	case behIsolated:
		keep = spans
	case behRemoved:
		for _, sp := range spans {
			if !sp.match {
				keep = append(keep, sp)
			}
		}
	case behContiguous:
		prev := false
		for _, sp := range spans {
			if len(keep) > 0 && sp.match == prev {
				keep[len(keep)-1].b = sp.b
			} else {
				keep = append(keep, sp)
			}
			prev = sp.match
		}
	case behMergedWithPrevious:
		prev := false
		for _, sp := range spans {
			if sp.match && !prev && len(keep) > 0 {
				keep[len(keep)-1].b = sp.b
			} else {
				keep = append(keep, sp)
			}
			prev = sp.match
		}
	case behMergedWithNext:
		prev := false
		for i := len(spans) - 1; i >= 0; i-- {
			sp := spans[i]
			if sp.match && !prev && len(keep) > 0 {
				keep[len(keep)-1].a = sp.a
			} else {
				keep = append(keep, sp)
			}
			prev = sp.match
		}
		for i, j := 0, len(keep)-1; i < j; i, j = i+1, j-1 {
			keep[i], keep[j] = keep[j], keep[i]
		}
	}
	for _, sp := range keep {
		if sp.b > sp.a {
			out = append(out, s[sp.a:sp.b])
		}
	}
	return out
}

// digitsStep is the Digits pre-tokenizer: numeric characters (Rust's
// char::is_numeric) alone, or in runs.
type digitsStep struct{ individual bool }

func (st digitsStep) split(s string, out []string) []string {
	start := 0 // start of the pending piece
	inRun := false
	for i := 0; i < len(s); {
		c, w := classAt(s, i)
		num := c&cNumeric != 0
		switch {
		case num && st.individual:
			if i > start {
				out = append(out, s[start:i])
			}
			out = append(out, s[i:i+w])
			start = i + w
		case num != inRun && i > start:
			out = append(out, s[start:i])
			start = i
		}
		inRun = num && !st.individual
		i += w
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// A normalizer is one of the Unicode normal forms.
type normalizer []norm.Form

func (n normalizer) apply(s string) string {
	for _, f := range n {
		s = f.String(s)
	}
	return s
}
