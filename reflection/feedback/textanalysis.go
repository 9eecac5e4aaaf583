package feedback

import (
	"math"
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

var (
	reStarRating = regexp.MustCompile(`^(\d+(?:\.\d+)?)/(5|10)$`)
	reAllCaps    = regexp.MustCompile(`\b[A-Z]{4,}\b`)
)

// analyzeText applies the lexicon rules to text.
func analyzeText(text string) textAnalysis {
	ta := textAnalysis{aspects: map[string]bool{}}
	switch {
	case strings.TrimSpace(text) == "":
		ta.note = "empty"
		return ta
	case len(text) > MaxTextBytes:
		ta.note = "too-large"
		return ta
	case looksBinary(text):
		ta.note = "binary"
		return ta
	}
	toks := tokenize(normalizeText(text))
	var ws []wtok
	sent, clause := 0, 0
	for i, t := range toks {
		if t.punct {
			if sentenceEnd(t) {
				sent++
			}
			if clauseEnd(t) {
				clause++
			}
			continue
		}
		next := i+1 >= len(toks) || (toks[i+1].punct && clauseEnd(toks[i+1]))
		ws = append(ws, wtok{w: canonical(t.w), sent: sent, clause: clause, clauseEndNext: next})
		_ = i
	}
	for _, w := range ws {
		ta.words = append(ta.words, w.w)
	}
	if nonLatin(text) {
		ta.note = "unsupported-language"
		return ta
	}
	ta.foreign = notEnglish(text, ws)
	ta.emphasis = strings.Contains(text, "!!") || reAllCaps.MatchString(text)

	contribs := scan(ws)
	detectAspects(ws, contribs, ta.aspects)

	// clause diminishers: "i guess", "i suppose"
	guessed := map[int]bool{}
	for i := 0; i+1 < len(ws); i++ {
		if ws[i].w == "i" && (ws[i+1].w == "guess" || ws[i+1].w == "suppose") {
			guessed[ws[i].sent] = true
		}
	}
	for k := range contribs {
		if guessed[ws[contribs[k].at].sent] {
			contribs[k].v *= 0.6
		}
	}

	// imperatives: a request to change is mild dissatisfaction
	for lo := 0; lo < len(ws); {
		hi := lo
		for hi < len(ws) && ws[hi].sent == ws[lo].sent {
			hi++
		}
		first := lo
		sw := make([]string, 0, hi-lo)
		for _, w := range ws[lo:hi] {
			sw = append(sw, w.w)
		}
		lo = hi
		if hasSeq(sw, s("keep it up")) {
			continue
		}
		imp, at := imperativeStarts[sw[0]], first
		for _, p := range imperativeAnywhere {
			if k := seqIndex(sw, p); k >= 0 {
				if !imp {
					at = first + k
				}
				imp = true
			}
		}
		if imp && !hasSeq(sw, s("thank you")) {
			contribs = append(contribs, contrib{v: -0.4, at: at})
			if ta.imperativ == "" {
				ta.imperativ = sentenceText(text, ws[first].sent)
			}
		}
	}

	ta.sarcasm = detectSarcasm(ws, contribs) || scareQuoted(text)
	if ta.sarcasm {
		for k := range contribs {
			if contribs[k].v > 0 {
				contribs[k].v *= -0.7
			}
		}
		contribs = append(contribs, contrib{v: -0.3, at: 0})
	}

	// contrast: each marker followed by evidence discounts what precedes it
	markers := contrastPositions(ws) // ascending
	lastAt := -1
	for _, c := range contribs {
		if c.v != 0 && c.at > lastAt {
			lastAt = c.at
		}
	}
	var effective []int
	for _, m := range markers {
		if m <= lastAt {
			effective = append(effective, m)
		}
	}
	sort.Ints(effective)
	if len(effective) > 0 {
		ta.contrast = true
	}
	weights := make([]float64, len(contribs))
	for k, c := range contribs {
		// markers after c
		n := len(effective) - sort.SearchInts(effective, c.at+1)
		weights[k] = math.Pow(0.3, float64(n))
	}
	for k, c := range contribs {
		ta.score += weights[k] * c.v
		if c.v > 0 {
			ta.pos += weights[k] * c.v
		} else {
			ta.neg += weights[k] * c.v
		}
		if c.v != 0 {
			ta.evidence++
		}
	}
	return ta
}

// sentenceText returns the idx-th sentence of the original text, trimmed,
// capitalised and ending with a period (empty if not found).
func sentenceText(text string, idx int) string {
	parts := reSentence.Split(strings.ReplaceAll(text, "tl;dr", "tldr"), -1)
	n := 0
	for _, p := range parts {
		if strings.TrimSpace(p) == "" {
			continue
		}
		if n == idx {
			h := sentenceHint(p)
			if len(h) > 200 {
				return ""
			}
			return h
		}
		n++
	}
	return ""
}

// canonical maps a word to its lexicon form: typos, elongations and
// one-edit misspellings of long lexicon words.
func canonical(w string) string {
	if t, ok := typos[w]; ok {
		return t
	}
	if known(w) {
		return w
	}
	for _, n := range []int{2, 1} {
		if c := collapseRuns(w, n); c != w && known(c) {
			return c
		}
	}
	if len(w) >= 5 {
		for _, t := range fuzzyTargets {
			if (len(t) >= 7 || len(w) <= len(t)) && oneEdit(w, t) {
				return t
			}
		}
	}
	return w
}

func known(w string) bool {
	if _, ok := wordValence[w]; ok {
		return true
	}
	if _, ok := negators[w]; ok {
		return true
	}
	_, ok := phrasesByFirst[w]
	return ok || englishWords[w]
}

// looksBinary reports invalid UTF-8 or a noticeable share of control
// characters.
func looksBinary(s string) bool {
	if !utf8.ValidString(s) {
		return true
	}
	ctrl, n := 0, 0
	for _, r := range s {
		n++
		if r == 0 || (unicode.IsControl(r) && r != '\n' && r != '\r' && r != '\t') {
			ctrl++
		}
	}
	return ctrl > 0 && ctrl*100 >= n
}

// nonLatin: more than 30% of the letters are not Latin (the lexicons
// cover Latin-script languages only).
func nonLatin(text string) bool {
	letters, foreign := 0, 0
	for _, r := range text {
		if unicode.IsLetter(r) {
			letters++
			if r > unicode.MaxLatin1 && !unicode.In(r, unicode.Latin) {
				foreign++
			}
		}
	}
	return letters > 0 && foreign*10 > letters*3
}

// notEnglish: three or more words none of which is English.
func notEnglish(text string, ws []wtok) bool {
	nw := 0
	for _, w := range ws {
		hasLetter := false
		for _, r := range w.w {
			if unicode.IsLetter(r) {
				hasLetter = true
				break
			}
		}
		if !hasLetter {
			continue
		}
		nw++
		if known(w.w) || isEnglishish(w.w) {
			return false
		}
	}
	return nw >= 3
}

// isEnglishish accepts words that the lexicon does not list but that are
// common in English feedback.
func isEnglishish(w string) bool {
	switch w {
	case "answer", "response", "reply", "question", "code", "help", "thing", "one", "bot", "model", "time",
		"he", "she", "they", "them", "his", "her", "its", "from", "by", "as", "about", "there", "here", "where":
		return true
	}
	for _, suf := range []string{"'t", "'s", "'ve", "'ll", "'re", "'d", "'m"} {
		if strings.HasSuffix(w, suf) {
			return true
		}
	}
	return strings.HasSuffix(w, "ing") && len(w) > 5
}
