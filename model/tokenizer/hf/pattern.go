package hf

import (
	"fmt"
	"strings"
)

// The split regexes this package knows, exactly as tokenizer.json files
// write them. Go's regexp has neither the lookahead \s+(?!\S) nor
// Oniguruma's semantics, so each is a hand-written matcher that follows
// Oniguruma's leftmost-first alternation and backtracking for that pattern.
const (
	// PatternGPT2 is GPT-2's split, also the ByteLevel pre-tokenizer's own.
	PatternGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	// PatternLlama3 is Llama 3's split (tiktoken cl100k style, numbers in
	// groups of up to three).
	PatternLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// PatternQwen2 is Qwen 2's split: Llama 3's with single digits.
	PatternQwen2 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// PatternCitizenWords is the split that FromCitizen writes for citizen's
// citizen-words-v1 pre-tokenizer (model/tokenizer): a letter run, one digit
// or a run of other characters, each optionally after one space; a
// white-space run, less a last ' ' that precedes a non-space. Runs are cut
// at 64 bytes (63 after a space) as citizen cuts them while all their
// characters have one UTF-8 width; Oniguruma can count neither bytes nor
// more than 20 nested calls, so a run that mixes widths and is longer than
// that is left whole.
var PatternCitizenWords = citizenWordsRegex()

// A matcher returns the end of the match that starts at s[i]. Every known
// pattern matches at every position, so a string splits into consecutive
// matches.
type matcher func(s string, i int) int

func knownPattern(p string) (matcher, error) {
	switch p {
	case PatternGPT2:
		return matchGPT2, nil
	case PatternLlama3:
		return func(s string, i int) int { return matchLlama(s, i, 3) }, nil
	case PatternQwen2:
		return func(s string, i int) int { return matchLlama(s, i, 1) }, nil
	case PatternCitizenWords:
		return matchCitizen, nil
	}
	return nil, fmt.Errorf("%w: split regex %q is not one this package implements (known: GPT-2, Llama 3, Qwen 2, citizen-words-v1)", ErrUnsupported, p)
}

// Regex character kinds.
const (
	kOther = iota
	kLetter
	kNumber
	kSpace
)

func rxKind(c uint8) uint8 {
	switch {
	case c&cLetter != 0:
		return kLetter
	case c&cNumber != 0:
		return kNumber
	case c&cSpace != 0:
		return kSpace
	}
	return kOther
}

// runOf returns the end of the run of characters of kind k from i.
func runOf(s string, i int, k uint8) int {
	for i < len(s) {
		c, w := classAt(s, i)
		if rxKind(c) != k {
			break
		}
		i += w
	}
	return i
}

// contraction matches 's 't 're 've 'm 'll 'd at s[i] == '\” and returns its
// end, or 0. With fold it matches case-insensitively as Oniguruma does (ſ
// folds to s).
func contraction(s string, i int, fold bool) int {
	if i+1 >= len(s) {
		return 0
	}
	low := func(r rune) rune {
		if fold {
			if r >= 'A' && r <= 'Z' {
				return r + 'a' - 'A'
			}
			if r == 'ſ' {
				return 's'
			}
		}
		return r
	}
	r1, w1 := runeAt(s, i+1)
	a := low(r1)
	switch a {
	case 's', 't', 'm', 'd':
		return i + 1 + w1
	case 'r', 'v', 'l':
		j := i + 1 + w1
		if j >= len(s) {
			return 0
		}
		r2, w2 := runeAt(s, j)
		b := low(r2)
		if a == 'r' && b == 'e' || a == 'v' && b == 'e' || a == 'l' && b == 'l' {
			return j + w2
		}
	}
	return 0
}

// wsTail matches \s+(?!\S)|\s+ at a white-space character: the run, less its
// last character when a non-space follows and the run has two or more.
func wsTail(s string, i int) int {
	j, last := i, i
	for j < len(s) {
		c, w := classAt(s, j)
		if c&cSpace == 0 {
			break
		}
		last = j
		j += w
	}
	if j < len(s) && last > i {
		return last
	}
	return j
}

func matchGPT2(s string, i int) int {
	if s[i] == '\'' {
		if e := contraction(s, i, false); e > 0 {
			return e
		}
	}
	c, w := classAt(s, i)
	k := rxKind(c)
	if s[i] == ' ' && i+1 < len(s) {
		c2, w2 := classAt(s, i+1)
		if k2 := rxKind(c2); k2 != kSpace {
			return runOf(s, i+1+w2, k2)
		}
	}
	if k != kSpace {
		return runOf(s, i+w, k)
	}
	return wsTail(s, i)
}

// matchLlama matches PatternLlama3 (maxDigits 3) or PatternQwen2 (1).
func matchLlama(s string, i int, maxDigits int) int {
	n := len(s)
	if s[i] == '\'' {
		if e := contraction(s, i, true); e > 0 {
			return e
		}
	}
	c, w := classAt(s, i)
	k := rxKind(c)
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if k == kLetter {
		return runOf(s, i+w, kLetter)
	}
	if k != kNumber && s[i] != '\r' && s[i] != '\n' && i+w < n {
		if c2, w2 := classAt(s, i+w); rxKind(c2) == kLetter {
			return runOf(s, i+w+w2, kLetter)
		}
	}
	// \p{N}{1,maxDigits}
	if k == kNumber {
		j := i + w
		for m := 1; m < maxDigits && j < n; m++ {
			c2, w2 := classAt(s, j)
			if rxKind(c2) != kNumber {
				break
			}
			j += w2
		}
		return j
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	j := i
	if s[i] == ' ' && i+1 < n {
		if c2, _ := classAt(s, i+1); rxKind(c2) == kOther {
			j = i + 1
		}
	}
	if j > i || k == kOther {
		j = runOf(s, j, kOther)
		for j < n && (s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return j
	}
	// \s*[\r\n]+: up to the last line break of the white-space run.
	last := -1
	for e := i; e < n; {
		c2, w2 := classAt(s, e)
		if c2&cSpace == 0 {
			break
		}
		if s[e] == '\r' || s[e] == '\n' {
			last = e
		}
		e += w2
	}
	if last >= 0 {
		return last + 1
	}
	return wsTail(s, i)
}

// citizen-words-v1 as a regex (see PatternCitizenWords). For each UTF-8
// width w a run of that width alone is cut after budget/w characters,
// unless a character of another width that still fits follows; anything
// else falls through to an uncut run.
const (
	cwLetter = `\p{L}\p{Mn}\p{Mc}`
	cwOther  = `^\p{L}\p{Mn}\p{Mc}\p{N}\s`
	cwSpace  = `\s`
)

var cwWidth = [5]string{"", `\x{0}-\x{7F}`, `\x{80}-\x{7FF}`, `\x{800}-\x{FFFF}`, `\x{10000}-\x{10FFFF}`}
var cwUpTo = [4]string{"", `\x{0}-\x{7F}`, `\x{0}-\x{7FF}`, `\x{0}-\x{FFFF}`}

// cwCapped is the regex for a run of class x of at most budget bytes.
func cwCapped(x string, budget int) string {
	var alts []string
	full := "[" + x + "]"
	for w := 1; w <= 4; w++ {
		cls := "[[" + x + "]&&[" + cwWidth[w] + "]]"
		c, r := budget/w, budget%w
		a := fmt.Sprintf("%s{%d}", cls, c)
		if r > 0 {
			a += "(?![[" + x + "]&&[" + cwUpTo[r] + "]])"
		}
		alts = append(alts, a, fmt.Sprintf("%s{1,%d}(?!%s)", cls, c-1, full))
	}
	alts = append(alts, full+"+")
	return "(?:" + strings.Join(alts, "|") + ")"
}

func citizenWordsRegex() string {
	ascii := "[" + cwSpace + "&&[" + cwWidth[1] + "]]"
	alts := []string{
		" " + cwCapped(cwLetter, 63), cwCapped(cwLetter, 64),
		` \p{N}`, `\p{N}`,
		" " + cwCapped(cwOther, 63), cwCapped(cwOther, 64),
		// A white-space run that ends in ' ' before a non-space leaves that
		// space to the next word.
		ascii + `{1,63}(?= \S)`,
		`(?=` + ascii + `*[` + cwSpace + `&&[\x{80}-\x{10FFFF}]])\s+(?= \S)`,
		cwCapped(cwSpace, 64),
	}
	return strings.Join(alts, "|")
}

func cwKind(c uint8) uint8 {
	switch {
	case c&(cLetter|cMark) != 0:
		return kLetter
	case c&cNumber != 0:
		return kNumber
	case c&cSpace != 0:
		return kSpace
	}
	return kOther
}

func cwRun(s string, i int, k uint8) int {
	for i < len(s) {
		c, w := classAt(s, i)
		if cwKind(c) != k {
			break
		}
		i += w
	}
	return i
}

// cwCappedAt matches cwCapped(class of kind k, budget) at s[i].
func cwCappedAt(s string, i int, k uint8, budget int) int {
	_, w0 := classAt(s, i)
	c, r := budget/w0, budget%w0
	j, m := i, 0
	for j < len(s) && m < c {
		cc, w := classAt(s, j)
		if cwKind(cc) != k || w != w0 {
			break
		}
		j += w
		m++
	}
	if j >= len(s) {
		return j
	}
	cc, w := classAt(s, j)
	if cwKind(cc) != k || m == c && (r == 0 || w > r) {
		return j
	}
	return cwRun(s, j, k)
}

func matchCitizen(s string, i int) int {
	n := len(s)
	c, w := classAt(s, i)
	k := cwKind(c)
	if s[i] == ' ' && i+1 < n {
		c2, w2 := classAt(s, i+1)
		switch cwKind(c2) {
		case kNumber:
			return i + 1 + w2
		case kLetter, kOther:
			return cwCappedAt(s, i+1, cwKind(c2), 63)
		}
	}
	switch k {
	case kNumber:
		return i + w
	case kLetter, kOther:
		return cwCappedAt(s, i, k, 64)
	}
	// White space.
	if w == 1 {
		j, m := i, 0
		for j < n && m < 63 {
			cc, cw := classAt(s, j)
			if cc&cSpace == 0 || cw != 1 {
				break
			}
			j++
			m++
		}
		for _, p := range [2]int{j, j - 1} {
			if p > i && p+1 < n && s[p] == ' ' {
				if cc, _ := classAt(s, p+1); cc&cSpace == 0 {
					return p
				}
			}
		}
	}
	e, wide := i, false
	for e < n {
		cc, cw := classAt(s, e)
		if cc&cSpace == 0 {
			break
		}
		wide = wide || cw > 1
		e += cw
	}
	if wide && e < n && s[e-1] == ' ' {
		return e - 1
	}
	return cwCappedAt(s, i, kSpace, 64)
}
