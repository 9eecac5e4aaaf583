package feedback

import (
	"strings"
	"unicode"
)

// token is one unit of lower-cased feedback text: a word (letters, digits
// and the few symbols that live inside words such as "12.5", "1/10", "$5",
// "a+", "it's") or a single punctuation mark.
type token struct {
	w     string
	punct bool
	// start, end are byte offsets into the normalized (lower-cased) text.
	start, end int
}

// sentenceEnd and clauseEnd classify punctuation tokens.
func sentenceEnd(t token) bool {
	return t.punct && (t.w == "." || t.w == "!" || t.w == "?" || t.w == ";" || t.w == "\n")
}

func clauseEnd(t token) bool {
	return t.punct && t.w != "\"" && t.w != "(" && t.w != ")"
}

// normalizeText lower-cases text and folds typographic quotes and dashes.
func normalizeText(s string) string {
	r := strings.NewReplacer("’", "'", "‘", "'", "“", "\"", "”", "\"", "–", " - ", "—", " - ", "tl;dr", "tldr", "TL;DR", "tldr", "Tl;dr", "tldr")
	return strings.ToLower(r.Replace(s))
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// tokenize splits normalized text into tokens.
func tokenize(s string) []token {
	var toks []token
	rs := []rune(s)
	// byte offsets of each rune
	offs := make([]int, len(rs)+1)
	o := 0
	for i, r := range rs {
		offs[i] = o
		o += len(string(r))
	}
	offs[len(rs)] = o
	at := func(i int) rune {
		if i < 0 || i >= len(rs) {
			return 0
		}
		return rs[i]
	}
	start := -1
	flush := func(i int) {
		if start >= 0 {
			toks = append(toks, token{w: string(rs[start:i]), start: offs[start], end: offs[i]})
			start = -1
		}
	}
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case isWordRune(r):
			if start < 0 {
				start = i
			}
		case start >= 0 && (r == '\'' || r == '.' || r == ',' || r == '/' || r == '^' || r == '-') && isWordRune(at(i+1)) &&
			(r != '.' && r != ',' || unicode.IsDigit(at(i-1)) && unicode.IsDigit(at(i+1))):
			// inner apostrophe, decimal point, thousands separator, 1/10, 2^10, so-so
		case r == '%' && start >= 0:
			// 15%
		case r == '+' && start >= 0 && !isWordRune(at(i+1)):
			// a+
			i++
			flush(i)
			i--
		case r == '$' || r == '€' || r == '£':
			flush(i)
			start = i
		case unicode.IsSpace(r):
			flush(i)
			if r == '\n' {
				toks = append(toks, token{w: "\n", punct: true, start: offs[i], end: offs[i+1]})
			}
		case strings.ContainsRune(".!?;,:()\"-", r):
			flush(i)
			// collapse runs like "!!!" or "..." into one token
			if n := len(toks); n > 0 && toks[n-1].punct && toks[n-1].w == string(r) && toks[n-1].end == offs[i] {
				toks[n-1].end = offs[i+1]
				continue
			}
			toks = append(toks, token{w: string(r), punct: true, start: offs[i], end: offs[i+1]})
		case r == '\'' || r == '`' || r == '*' || r == '_' || r == '#' || r == '~' || r == '[' || r == ']' || r == '{' || r == '}' || r == '<' || r == '>' || r == '=' || r == '|' || r == '&' || r == '@':
			flush(i)
		default:
			// emoji and other symbols are words of their own
			flush(i)
			if unicode.IsGraphic(r) && r != unicode.ReplacementChar {
				toks = append(toks, token{w: string(r), start: offs[i], end: offs[i+1]})
			}
		}
	}
	flush(len(rs))
	return toks
}

// collapseRuns shortens runs of 3 or more equal letters to n letters
// ("sooo" -> "so" with n=1, "goood" -> "good" with n=2).
func collapseRuns(w string, n int) string {
	rs := []rune(w)
	var b strings.Builder
	for i := 0; i < len(rs); {
		j := i
		for j < len(rs) && rs[j] == rs[i] {
			j++
		}
		k := j - i
		if k >= 3 {
			k = n
		}
		for m := 0; m < k; m++ {
			b.WriteRune(rs[i])
		}
		i = j
	}
	return b.String()
}

// oneEdit reports whether a and b differ by a single deletion, insertion,
// or transposition of adjacent letters (substitutions are left out on
// purpose: they turn real words into other real words too easily).
func oneEdit(a, b string) bool {
	if a == b {
		return false
	}
	la, lb := len(a), len(b)
	switch {
	case la == lb:
		i := 0
		for i < la && a[i] == b[i] {
			i++
		}
		return i+1 < la && a[i] == b[i+1] && a[i+1] == b[i] && a[i+2:] == b[i+2:]
	case la == lb+1:
		a, b = b, a
		la, lb = lb, la
		fallthrough
	case la+1 == lb:
		i := 0
		for i < la && a[i] == b[i] {
			i++
		}
		return a[i:] == b[i+1:]
	}
	return false
}
