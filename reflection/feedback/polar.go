package feedback

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// matchPhrase returns the longest phrase starting at ws[i] within the clause.
func matchPhrase(ws []wtok, i int) (phrase, int) {
	for _, p := range phrasesByFirst[ws[i].w] {
		if i+len(p.words) > len(ws) {
			continue
		}
		ok := true
		for k, pw := range p.words {
			if ws[i+k].w != pw || (k > 0 && ws[i+k].sent != ws[i].sent) {
				ok = false
				break
			}
		}
		if ok {
			return p, len(p.words)
		}
	}
	return phrase{}, 0
}

var (
	copulas     = map[string]bool{"is": true, "was": true, "are": true, "were": true, "it's": true, "that's": true, "something's": true, "seems": true, "looks": true, "'s": true, "be": true, "been": true, "felt": true, "feels": true}
	offDegree   = map[string]bool{"way": true, "slightly": true, "bit": true, "little": true, "totally": true, "completely": true, "quite": true, "bit's": true, "somewhat": true, "all": true, "still": true}
	likeSubject = map[string]bool{"i": true, "we": true, "they": true, "you": true, "really": true, "do": true, "did": true, "would": true, "i'd": true, "we'd": true, "i'll": true, "customers": true, "users": true}
)

// scan walks the words and returns polar evidence after negation and
// intensity modifiers.
func scan(ws []wtok) []contrib {
	var out []contrib
	negLeft, negF := 0, 0.0
	mult, multLeft := 1.0, 0
	apply := func(v float64, negatable bool) float64 {
		v *= mult
		mult, multLeft = 1, 0
		if negLeft > 0 && negatable {
			negLeft = 0
			if v > 0 {
				return v * negF
			}
			if negF == 0 {
				return 0
			}
			return -v * negatedNegative
		}
		return v
	}
	prevClause := -1
	for i := 0; i < len(ws); {
		if ws[i].clause != prevClause {
			negLeft, mult, multLeft = 0, 1, 0
			prevClause = ws[i].clause
		}
		w := ws[i].w
		prev, next := "", ""
		if i > 0 && ws[i-1].clause == ws[i].clause {
			prev = ws[i-1].w
		}
		if i+1 < len(ws) && ws[i+1].clause == ws[i].clause {
			next = ws[i+1].w
		}
		// star ratings in text: "4/5", "1/10", "5 stars"
		if m := reStarRating.FindStringSubmatch(w); m != nil {
			r, _ := strconv.ParseFloat(m[1], 64)
			mx, _ := strconv.ParseFloat(m[2], 64)
			if r <= mx {
				out = append(out, contrib{v: clamp(2*r/mx-1, -1, 1), at: i, pos: r/mx > 0.5})
			}
			i++
			continue
		}
		if (next == "stars" || next == "star") && len(w) == 1 && w[0] >= '0' && w[0] <= '5' {
			r := float64(w[0] - '0')
			out = append(out, contrib{v: clamp((r-3)/2, -1, 1), at: i, pos: r > 3})
			i += 2
			continue
		}
		if p, n := matchPhrase(ws, i); n > 0 {
			if p.v != 0 {
				v := apply(p.v, p.negatable || negLeft > 0 && p.v > 0)
				out = append(out, contrib{v: v, at: i, pos: p.v > 0})
			} else if negLeft > 0 {
				negLeft--
			}
			i += n
			continue
		}
		if w == "no" {
			// "no complaints" negates; a bare "no" is a negative interjection
			if next != "" && isPolarStart(ws, i+1) {
				negLeft, negF = 2, negators["no"]
			} else {
				out = append(out, contrib{v: apply(-0.6, false), at: i})
			}
			i++
			continue
		}
		if f, ok := negators[w]; ok {
			negLeft, negF = 3, f
			i++
			continue
		}
		if f, ok := intensifiers[w]; ok && w != "exactly" && w != "perfectly" || ok && next != "" && isPolarStart(ws, i+1) || w == "perfectly" && next != "" {
			mult *= f
			multLeft = 2
			i++
			continue
		}
		if f, ok := diminishers[w]; ok {
			mult *= f
			multLeft = 2
			i++
			continue
		}
		v, polar := wordValence[w]
		switch w {
		case "right", "correct":
			if answerNouns[next] || prev == "the" {
				v = 0
			}
		case "off":
			polar = copulas[prev] || offDegree[prev] || ws[i].clauseEndNext && prev != "turn" && prev != "turned" && prev != "log" && prev != "switch"
		case "like", "liked", "love":
			if w != "love" || next == "how" {
				if _, neg := negators[prev]; !(likeSubject[prev] || neg) {
					polar = false
				}
			}
		case "long", "slow", "shorter":
			// fine as is
		}
		if polar && v > 0 && (prev == "more" || prev == "less" || prev == "be" && i >= 2 && (ws[i-2].w == "should" || ws[i-2].w == "must" || ws[i-2].w == "to")) {
			v = 0 // "be more polite", "should be valid" ask for a quality
		}
		if w == "well" && i > 0 && ws[i-1].sent == ws[i].sent && (strings.HasSuffix(prev, "ed") || strings.HasSuffix(next, "ed")) {
			v, polar = 0.5, true // "used well", "well commented"
		}
		if negOnly[w] && negLeft > 0 {
			v, polar = 0.5, true
		}
		if w == "took" && i+2 < len(ws) && startsDigit(next) && timeUnits[ws[i+2].w] {
			out = append(out, contrib{v: apply(-0.5, false), at: i})
			i += 3
			continue
		}
		if polar && v != 0 {
			out = append(out, contrib{v: apply(v, true), at: i, pos: v > 0, interj: sarcasticInterjections[w]})
		} else {
			if negLeft > 0 {
				negLeft--
			}
			if multLeft > 0 {
				if multLeft--; multLeft == 0 {
					mult = 1
				}
			}
		}
		i++
	}
	return out
}

// isPolarStart reports whether a polar word or phrase starts at ws[i].
func isPolarStart(ws []wtok, i int) bool {
	if i >= len(ws) {
		return false
	}
	if p, n := matchPhrase(ws, i); n > 0 && p.v != 0 {
		return true
	}
	v, ok := wordValence[ws[i].w]
	if ok && v != 0 {
		return true
	}
	if _, ok := intensifiers[ws[i].w]; ok {
		return isPolarStart(ws, i+1)
	}
	return false
}

// hasSeq reports whether ws contains the word sequence p.
func hasSeq(ws []string, p []string) bool { return seqIndex(ws, p) >= 0 }

// seqIndex returns the index of the first occurrence of p in ws, or -1.
func seqIndex(ws []string, p []string) int {
	for i := 0; i+len(p) <= len(ws); i++ {
		ok := true
		for k := range p {
			if ws[i+k] != p[k] {
				ok = false
				break
			}
		}
		if ok {
			return i
		}
	}
	return -1
}

var sarcasmFillers = map[string]bool{"oh": true, "wow": true, "yeah": true, "well": true, "just": true, "ah": true, "sure": true, "ok": true, "okay": true}

// detectSarcasm looks for sarcasm cues said of a bad outcome.
func detectSarcasm(ws []wtok, contribs []contrib) bool {
	words := make([]string, len(ws))
	for i, w := range ws {
		words[i] = w.w
	}
	for _, p := range strongSarcasm {
		if hasSeq(words, p) {
			return true
		}
	}
	// "as if ..." opening a clause; "thanks (a lot) for <something bad>"
	for i, w := range ws {
		clauseStart := i == 0 || ws[i-1].clause != w.clause
		if clauseStart && w.w == "as" && i+1 < len(ws) && ws[i+1].w == "if" && ws[i+1].clause == w.clause {
			return true
		}
		if w.w == "thanks" || w.w == "thank" {
			j := i + 1
			for j < len(ws) && ws[j].sent == w.sent && (ws[j].w == "a" || ws[j].w == "lot" || ws[j].w == "so" || ws[j].w == "much" || ws[j].w == "you") {
				j++
			}
			if j < len(ws) && ws[j].sent == w.sent && ws[j].w == "for" {
				for _, c := range contribs {
					if c.at > j && ws[c.at].sent == w.sent && c.v < 0 {
						return true
					}
				}
			}
		}
	}
	// a sentence that is only "not" after something positive: "so helpful. Not."
	for i, w := range ws {
		if w.w == "not" && (i == 0 || ws[i-1].sent != w.sent) && (i+1 == len(ws) || ws[i+1].sent != w.sent) && i > 0 {
			return true
		}
	}
	nNeg := 0
	negAt := map[int]int{}
	before := make([]float64, len(ws)+1) // before[i]: sum of evidence at words < i
	for _, c := range contribs {
		if c.v < 0 {
			nNeg++
			negAt[c.at]++
		}
		if c.at < len(ws) {
			before[c.at+1] += c.v
		}
	}
	for i := 1; i <= len(ws); i++ {
		before[i] += before[i-1]
	}
	negative := func(except int) bool { return nNeg-negAt[except] > 0 }
	repeat := false
	for _, w := range words {
		if repeatCue[w] {
			repeat = true
		}
	}
	for i, w := range ws {
		sentStart := i == 0 || ws[i-1].sent != w.sent
		if !sentStart {
			continue
		}
		j, filler := i, false
		for j < len(ws) && ws[j].sent == w.sent && sarcasmFillers[ws[j].w] {
			j++
			filler = true
		}
		if j >= len(ws) || ws[j].sent != w.sent {
			continue
		}
		x := ws[j].w
		next := ""
		if j+1 < len(ws) && ws[j+1].sent == w.sent {
			next = ws[j+1].w
		}
		if howCue[x] && next == "how" && negative(-1) {
			return true
		}
		if !sarcasticInterjections[x] {
			continue
		}
		if ws[j].clauseEndNext || filler {
			if negative(j) || (filler && (ws[i].w == "oh" || ws[i].w == "wow") && repeat) {
				return true
			}
		}
	}
	// ", thanks." or "Great." closing a complaint
	for i, w := range ws {
		if !sarcasticInterjections[w.w] || !w.clauseEndNext {
			continue
		}
		clauseStart := i == 0 || ws[i-1].clause != w.clause
		lastOfSentence := i+1 == len(ws) || ws[i+1].sent != w.sent
		if clauseStart && lastOfSentence && i > 0 {
			// evidence before it must be negative
			if before[i] < 0 {
				return true
			}
		}
	}
	return false
}

// contrastPositions returns the word indices from which the contrasting
// clause starts.
func contrastPositions(ws []wtok) []int {
	var out []int
	for i, w := range ws {
		if !contrastMarkers[w.w] {
			continue
		}
		sentStart := i == 0 || ws[i-1].sent != w.sent
		switch {
		case (w.w == "though" || w.w == "however") && w.clauseEndNext && !sentStart:
			// "wrong number though": the clause ending in the marker is the contrast
			k := i
			for k > 0 && ws[k-1].clause == w.clause {
				k--
			}
			out = append(out, k)
		case (w.w == "although" || w.w == "though") && sentStart:
			// "Although X, Y": Y is the contrast
			k := i
			for k < len(ws) && ws[k].clause == w.clause {
				k++
			}
			out = append(out, k)
		case w.w == "otherwise" || w.w == "except":
			out = append(out, i)
		default:
			out = append(out, i)
		}
	}
	return out
}

// aspect keywords.
var aspectWords = map[string]string{
	"long": AspectLength, "lengthy": AspectLength, "verbose": AspectLength, "wordy": AspectLength,
	"concise": AspectLength, "brief": AspectLength, "shorter": AspectLength, "short": AspectLength, "tldr": AspectLength,
	"fluff": AspectLength, "rambling": AspectLength, "paragraphs": AspectLength, "essay": AspectLength,
	"succinct": AspectLength, "length": AspectLength, "greeting": AspectLength, "long-winded": AspectLength,
	"tone": AspectTone, "rude": AspectTone, "formal": AspectTone, "casual": AspectTone, "polite": AspectTone,
	"impolite": AspectTone, "condescending": AspectTone, "robotic": AspectTone, "friendly": AspectTone, "warm": AspectTone,
	"professional": AspectTone, "robot": AspectTone, "stiff": AspectTone, "emojis": AspectTone, "emoji": AspectTone, "style": AspectTone, "sarcastic": AspectTone,
	"aggressive": AspectTone, "harsh": AspectTone, "respectful": AspectTone, "patronizing": AspectTone, "patronising": AspectTone,
	"json": AspectFormat, "yaml": AspectFormat, "csv": AspectFormat, "xml": AspectFormat, "format": AspectFormat,
	"formatting": AspectFormat, "formatted": AspectFormat, "bullet": AspectFormat, "bullets": AspectFormat,
	"markdown": AspectFormat, "table": AspectFormat, "columns": AspectFormat, "fences": AspectFormat, "parser": AspectFormat,
	"schema": AspectFormat, "indentation": AspectFormat, "numbered": AspectFormat,
	"slow": AspectSpeed, "fast": AspectSpeed, "quick": AspectSpeed, "quickly": AspectSpeed, "ages": AspectSpeed,
	"forever": AspectSpeed, "timeout": AspectSpeed, "seconds": AspectSpeed, "instantly": AspectSpeed, "instant": AspectSpeed,
	"latency": AspectSpeed, "responds": AspectSpeed, "turnaround": AspectSpeed, "lightning": AspectSpeed, "speed": AspectSpeed,
	"delay": AspectSpeed, "timed": AspectSpeed, "minutes": AspectSpeed, "respond": AspectSpeed,
	"tool": AspectToolUse, "tools": AspectToolUse, "tool's": AspectToolUse, "api": AspectToolUse,
	"wrong": AspectCorrectness, "incorrect": AspectCorrectness, "correct": AspectCorrectness, "accurate": AspectCorrectness,
	"inaccurate": AspectCorrectness, "false": AspectCorrectness, "mistake": AspectCorrectness, "mistakes": AspectCorrectness,
	"hallucinated": AspectCorrectness, "hallucinating": AspectCorrectness, "invented": AspectCorrectness, "invent": AspectCorrectness,
	"misleading": AspectCorrectness, "outdated": AspectCorrectness, "deprecated": AspectCorrectness, "contradicts": AspectCorrectness,
	"confused": AspectCorrectness, "compile": AspectCorrectness, "compiles": AspectCorrectness, "crashed": AspectCorrectness,
	"error": AspectCorrectness, "math": AspectCorrectness, "accuracy": AspectCorrectness, "wrongly": AspectCorrectness,
	"incomplete": AspectCompleteness, "complete": AspectCompleteness, "missing": AspectCompleteness, "missed": AspectCompleteness,
	"misses": AspectCompleteness, "forgot": AspectCompleteness, "lacks": AspectCompleteness, "lacking": AspectCompleteness,
	"detail": AspectCompleteness, "details": AspectCompleteness, "vague": AspectCompleteness, "halfway": AspectCompleteness,
	"stops": AspectCompleteness, "covers": AspectCompleteness, "thorough": AspectCompleteness, "partial": AspectCompleteness,
}

var aspectPhrases = []struct {
	p []string
	a string
}{
	{s("to the point"), AspectLength}, {s("too much text"), AspectLength}, {s("one line"), AspectLength},
	{s("timed out"), AspectSpeed}, {s("took ages"), AspectSpeed}, {s("time out"), AspectSpeed}, {s("took about"), AspectSpeed},
	{s("left out"), AspectCompleteness}, {s("edge cases"), AspectCompleteness}, {s("second part"), AspectCompleteness},
	{s("made up"), AspectCorrectness}, {s("add up"), AspectCorrectness}, {s("spot on"), AspectCorrectness},
	{s("on the money"), AspectCorrectness}, {s("way off"), AspectCorrectness}, {s("by a mile"), AspectCorrectness},
	{s("function call"), AspectToolUse},
}

// detectAspects fills set from keywords, phrases and polar context.
func detectAspects(ws []wtok, contribs []contrib, set map[string]bool) {
	words := make([]string, len(ws))
	for i, w := range ws {
		words[i] = w.w
	}
	for _, w := range words {
		if a, ok := aspectWords[w]; ok {
			set[a] = true
		}
	}
	for _, ap := range aspectPhrases {
		if hasSeq(words, ap.p) {
			set[ap.a] = true
		}
	}
	for _, c := range contribs {
		switch words[c.at] {
		case "right", "off", "wrnog":
			set[AspectCorrectness] = true
		}
	}
	// "the list is missing item 3" is completeness, "the spot on tone" is tone
	if set[AspectCorrectness] && hasSeq(words, s("spot on")) && set[AspectTone] {
		delete(set, AspectCorrectness)
	}
}

var timeUnits = map[string]bool{"seconds": true, "secs": true, "minutes": true, "mins": true, "minute": true, "hours": true, "hour": true, "s": true}

func startsDigit(w string) bool { return w != "" && w[0] >= '0' && w[0] <= '9' }

// reScareQuotes finds a quoted single word ("thanks for the 'help'").
var reScareQuotes = regexp.MustCompile(`['"]\s*([\p{L}]+)\s*['"]`)

// scareQuoted reports a positive word in scare quotes.
func scareQuoted(text string) bool {
	for _, m := range reScareQuotes.FindAllStringSubmatch(normalizeText(text), -1) {
		if wordValence[m[1]] > 0 || m[1] == "help" || m[1] == "answer" || m[1] == "solution" || m[1] == "fix" {
			return true
		}
	}
	return false
}

// rePromptSubject finds the subject of a simple question ("What is the
// boiling point?" -> "the boiling point").
var rePromptSubject = regexp.MustCompile(`(?i)^\s*(?:what|when|where|who|how long|how much|how many days)\s*(?:'s|is|was)\s+((?:the|our|your|my)\s+[^?.!,;:\n]{2,60}?)\s*\??\s*$`)

// promptSubject returns the capitalised subject of a simple question, or "".
func promptSubject(prompt string) string {
	m := rePromptSubject.FindStringSubmatch(prompt)
	if m == nil {
		return ""
	}
	s := strings.TrimSpace(m[1])
	r, size := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[size:]
}
