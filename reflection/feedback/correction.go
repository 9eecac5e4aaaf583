package feedback

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Correction extraction: patterns that find the right answer stated in
// feedback ("no - it's 45 minutes now" -> "45 minutes"; "should be 12.5" ->
// "12.5"; "the answer is Paris" -> "Paris"). Patterns are tried in order of
// reliability; the first that yields an acceptable value wins.

// end of a captured value: sentence punctuation followed by space or end.
const valueTail = `(?:['"]([^'"\n]{1,120})['"]|(.+?)(?:[.!?;]+(?:\s|$)|\n|$))`

var (
	// the correct answer is X / right answer: X
	reLabelled = regexp.MustCompile(`(?i)\b(?:correct|right|actual|exact|true|real|expected|proper)\s+(?:answer|value|number|figure|amount|total|result|spelling|one|date|year|price|name|time|response|output)\s*(?:is|was|would be|should be|should have been|=|:)\s*` + valueTail)
	// the answer is X / answer: X
	reAnswer = regexp.MustCompile(`(?i)\banswer\s*(?:is|was|should be|should have been|would be|=|:)\s*` + valueTail)
	// should be X / should have said X / should return X
	reShould = regexp.MustCompile(`(?i)\bsh(?:ou|u)?l?d(?:'ve\s+|\s+have\s+|\s+of\s+|\s+)(?:be|been|read|say|said|answer|answered|return|returned|equal|give|given|output|print)\b\s*:?\s*` + valueTail)
	// use X instead
	reInstead = regexp.MustCompile(`(?i)\buse\s+(.{1,60}?)\s+instead\b`)
	// expected X but got Y
	reExpected = regexp.MustCompile(`(?i)\bexpected\s+(.{1,40}?)\s+(?:but|and)\s+got\b`)
	// it's X / it is X / that's X
	reItIs = regexp.MustCompile(`(?i)\b(?:it|that|this)(?:'s|s|\s+is|\s+was|\s+should\s+be)\s+` + valueTail)
	// X, not Y / X, you said Y (Y value-like)
	reNotY = regexp.MustCompile(`(?i)(\S)\s*,?\s+(?:not|you said|rather than)\s+['"]?([$€£+-]?[\p{L}\p{N}][\p{L}\p{N}.,%/:'-]*)`)
	// not X - Y
	reNotDash = regexp.MustCompile(`(?i)^\s*not\s+([\p{L}\p{N}$.,%-]+)\s*(?:-|,|:)\s*` + valueTail)
	// subject is X (at the start of a clause)
	reDeclarative = regexp.MustCompile(`(?i)^(?:(?:no|nope|nah|wrong|incorrect|sorry|actually|hmm|well|close|oops)\b[\s,!.:-]*)*(?:but\s+)?(the|our|your|its|his|her|their)?\s*((?:[\p{L}\p{N}'-]+\s+){0,5}?)(?:is|are|was|were|closes at|opens at|takes|costs|starts at|ends at|lasts|equals)\s+(?:now\s+|actually\s+|only\s+|still\s+|currently\s+)*(?:at\s+|in\s+|on\s+)?` + valueTail)
	// a quoted value
	reQuoted = regexp.MustCompile(`(?:^|[\s:(])['"]([^'"\n]{1,120})['"](?:$|[\s.,;:!?)])`)
	// words that make "it's X" / "subject is X" a correction rather than a remark
	reTrigger  = regexp.MustCompile(`(?i)\b(?:no|nope|nah|not|wrong|incorrect|actually|now|changed|should|close|hmm|think|sorry|bzzt|correct|correction|update|updated|fix|rather|instead|you said|but|since|anymore|oops)\b`)
	reNow      = regexp.MustCompile(`(?i)\bnow\b`)
	reSentence = regexp.MustCompile(`[.!?;]+(?:\s+|$)|\n`)
	// Nope, Mercury is the closest planet: the subject is the answer
	reSubjectIs = regexp.MustCompile(`^(?i:no|nope|nah|wrong|incorrect|actually)\b[\s,!.:-]+(\p{Lu}[\p{L}\p{N}.'-]*(?:\s+\p{Lu}[\p{L}\p{N}.'-]*)*)\s+(?:is|was|are|were)\s+the\b`)
	reStrongNo  = regexp.MustCompile(`(?i)^\s*(?:no|nope|nah|wrong|incorrect|not quite|actually)\b`)
)

// leading and trailing filler removed from a captured value.
var (
	leadFiller  = []string{"actually", "obviously", "clearly", "simply", "just", "now", "really", "only", "still", "currently", "definitely", "certainly", "literally", "of course"}
	trailFiller = []string{"now", "actually", "though", "then", "anymore", "instead", "obviously", "lol", "please", "thanks", "thank you", "btw", "tbh", "already", "either", "too"}
	// a value is cut before these words.
	cutWords = []string{" not ", " you said ", " you wrote ", " you gave ", " but ", " though", " since ", " please", " instead", " rather than ", " because ", " which ", " as of ", " from now", " not", " - ", " so ", " and you", " and not", " when ", " according ", " at sea", " thanks", " thank "}
	// words that mean the "value" is a judgement or a style request.
	rejectWords = map[string]bool{"more": true, "less": true, "shorter": true, "longer": true, "better": true, "worse": true,
		"clearer": true, "simpler": true, "faster": true, "slower": true, "json": true, "yaml": true, "csv": true, "xml": true,
		"markdown": true, "formatted": true, "format": true, "table": true, "bullet": true, "bullets": true, "list": true,
		"concise": true, "polite": true, "formal": true, "casual": true, "friendly": true, "professional": true, "brief": true,
		"able": true, "possible": true, "fine": true, "ok": true, "okay": true, "done": true, "fixed": true, "updated": true,
		"it": true, "that": true, "this": true, "something": true, "nothing": true, "anything": true, "buried": true,
		"there": true, "here": true, "what": true, "how": true, "why": true, "a": true, "an": true, "the": true, "one": true,
		"off": true, "slow": true, "long": true, "short": true, "spot": true, "too": true, "way": true, "so": true, "very": true,
		"used": true, "using": true, "out": true, "up": true, "not": true, "no": true, "true": false}
)

// extraction is a found correction and the sentence to use as a hint.
type extraction struct {
	value string
	hint  string
	// weak: found by a pattern that also matches plain statements ("the
	// total is 430 euros"); the caller drops it when the text is praise.
	weak bool
}

// tail returns the value captured by a valueTail starting at group i: the
// quoted alternative (quoted true) or the plain one.
func tail(m []string, i int) (string, bool) {
	if m[i] != "" {
		return m[i], true
	}
	return m[i+1], false
}

// accept cleans a captured value; quoted values are taken as they are.
func accept(m []string, i int, needValueLike bool) (string, bool) {
	v, quoted := tail(m, i)
	if quoted {
		v = strings.TrimSpace(v)
		return v, v != ""
	}
	return cleanValue(v, needValueLike)
}

// extractCorrection finds the right answer stated in text, if any.
func extractCorrection(text string) extraction {
	if text == "" {
		return extraction{}
	}
	t := strings.NewReplacer("’", "'", "‘", "'", "“", "\"", "”", "\"", "–", " - ", "—", " - ", "`", "'").Replace(text)
	hasTrigger := reTrigger.MatchString(t)

	// labelled answers and "should be"
	for _, re := range []*regexp.Regexp{reLabelled, reAnswer, reShould} {
		for _, m := range re.FindAllStringSubmatch(t, -1) {
			if v, ok := accept(m, 1, false); ok {
				return extraction{value: v, hint: "The correct answer is " + v + "."}
			}
		}
	}
	if m := reInstead.FindStringSubmatch(t); m != nil {
		if v, ok := cleanValue(m[1], false); ok && len(strings.Fields(v)) <= 4 {
			return extraction{value: v, hint: "Use " + v + "."}
		}
	}
	if m := reExpected.FindStringSubmatch(t); m != nil {
		if v, ok := cleanValue(m[1], true); ok {
			return extraction{value: v, hint: "The correct answer is " + v + "."}
		}
	}
	if m := reSubjectIs.FindStringSubmatch(t); m != nil {
		if v, ok := cleanValue(m[1], true); ok {
			return extraction{value: v, hint: declarativeHint(t, 0, v)}
		}
	}
	// "X, not Y": walk back over value-like words before the marker.
	for _, loc := range reNotY.FindAllStringSubmatchIndex(t, -1) {
		y := t[loc[4]:loc[5]]
		if !valueLike(y) {
			continue
		}
		from := loc[3] - 200
		if from < 0 {
			from = 0
		}
		if v := walkBackValue(t[from:loc[3]]); v != "" {
			return extraction{value: v, hint: declarativeHint(t, loc[0], v)}
		}
	}
	if m := reNotDash.FindStringSubmatch(t); m != nil {
		if v, ok := accept(m, 2, true); ok {
			return extraction{value: v, hint: "The correct answer is " + v + "."}
		}
	}
	if hasTrigger {
		for _, m := range reItIs.FindAllStringSubmatch(t, -1) {
			if v, ok := accept(m, 1, true); ok {
				now := ""
				if reNow.MatchString(m[0]) {
					now = "now "
				}
				return extraction{value: v, hint: "The correct answer is " + now + v + ".", weak: true}
			}
		}
	}
	strongNo := reStrongNo.MatchString(t)
	for _, cl := range clauses(t) {
		m := reDeclarative.FindStringSubmatch(cl)
		if m == nil {
			continue
		}
		subject := strings.TrimSpace(m[2])
		if subject == "" && m[1] == "" {
			continue
		}
		if fw := strings.Fields(strings.ToLower(subject)); len(fw) > 0 && (fw[0] == "i" || fw[0] == "you" || fw[0] == "it" || fw[0] == "this" || fw[0] == "that" || fw[0] == "what" || fw[0] == "which" || fw[0] == "there") {
			continue
		}
		needValue := !(strongNo && m[1] != "")
		if m[1] == "" && !hasTrigger {
			continue
		}
		if v, ok := accept(m, 3, needValue); ok && len(strings.Fields(v)) <= 6 {
			return extraction{value: v, hint: sentenceHint(cl), weak: !hasTrigger}
		}
	}
	return extraction{}
}

// clauses splits text at sentence ends, ", ", " - " and ": ".
var reClauseSplit = regexp.MustCompile(`[.!?;]+(?:\s+|$)|\n|,\s+|\s+-\s+|:\s+`)

func clauses(t string) []string {
	var out []string
	for _, c := range reClauseSplit.Split(t, -1) {
		if c = strings.TrimSpace(c); c != "" {
			out = append(out, c)
		}
	}
	return out
}

// cleanValue trims filler from a captured value and decides whether it can
// be a correction. needValueLike requires a number, a capitalised name or a
// quoted string.
func cleanValue(raw string, needValueLike bool) (string, bool) {
	v := strings.TrimSpace(raw)
	if q := reQuoted.FindStringSubmatch(" " + v + " "); q != nil {
		v = strings.TrimSpace(q[1])
		if v == "" || utf8.RuneCountInString(v) > 120 {
			return "", false
		}
		return v, true
	}
	// cut at clause boundaries and contrast words
	low := strings.ToLower(v)
	for _, sep := range []string{", ", "; ", " (", "! ", "? "} {
		if i := strings.Index(low, sep); i > 0 && !(sep == " (" && i == 0) {
			v, low = v[:i], low[:i]
		}
	}
	for _, w := range cutWords {
		if i := strings.Index(low, w); i > 0 {
			v, low = v[:i], low[:i]
		}
	}
	v = strings.TrimSpace(v)
	v = strings.TrimRight(v, " .,;:!?")
	for changed := true; changed; {
		changed = false
		low = strings.ToLower(v)
		for _, f := range leadFiller {
			if strings.HasPrefix(low, f+" ") {
				v = strings.TrimSpace(v[len(f)+1:])
				changed = true
				break
			}
		}
		low = strings.ToLower(v)
		for _, f := range trailFiller {
			if strings.HasSuffix(low, " "+f) {
				v = strings.TrimSpace(v[:len(v)-len(f)-1])
				v = strings.TrimRight(v, " .,;:!?")
				changed = true
				break
			}
		}
	}
	// "100 C at sea level": a number followed by a preposition phrase
	if len(v) > 0 && unicode.IsDigit(rune(v[0])) {
		for _, p := range []string{" at ", " in ", " on ", " for ", " from "} {
			if i := strings.Index(strings.ToLower(v), p); i > 0 {
				v = v[:i]
			}
		}
	}
	v = strings.Trim(v, " \"'")
	if v == "" || utf8.RuneCountInString(v) > 60 || len(strings.Fields(v)) > 8 {
		return "", false
	}
	words := strings.Fields(strings.ToLower(v))
	for i, w := range words {
		if i >= 4 {
			break
		}
		w = strings.Trim(w, ".,;:!?'\"")
		if rejectWords[w] {
			return "", false
		}
		if val, ok := wordValence[w]; ok && (val > 0.5 || val < -0.5) {
			return "", false
		}
		if _, ok := negators[w]; ok && !valueLike(strings.Fields(v)[i]) {
			return "", false
		}
	}
	if needValueLike && !valueLike(v) {
		return "", false
	}
	return v, true
}

// valueLike: starts with a digit, a sign or currency followed by a digit, or
// a capital letter (a name), and is not just the pronoun "I".
func valueLike(v string) bool {
	v = strings.TrimSpace(v)
	low := strings.ToLower(v)
	for _, a := range []string{"about ", "around ", "roughly ", "approximately ", "approx ", "nearly ", "almost ", "over ", "under ", "~"} {
		if strings.HasPrefix(low, a) {
			v = strings.TrimSpace(v[len(a):])
			break
		}
	}
	if v == "" {
		return false
	}
	r, size := utf8.DecodeRuneInString(v)
	switch {
	case unicode.IsDigit(r):
		return true
	case strings.ContainsRune("$€£+-(", r):
		r2, _ := utf8.DecodeRuneInString(v[size:])
		return unicode.IsDigit(r2) || unicode.IsLetter(r2)
	case unicode.IsUpper(r):
		w := strings.Fields(v)[0]
		switch strings.Trim(w, ".,!?") {
		case "I", "I'm", "It", "It's", "The", "This", "That", "A", "An", "No", "Not", "Yes", "OK", "Ok", "Please", "You", "We", "Thanks", "Thank", "TL", "JSON", "YAML", "CSV", "XML", "API", "AI":
			return false
		}
		return true
	}
	return false
}

// walkBackValue returns the run of value-like words at the end of s
// ("the flight takes 45 minutes" -> "45 minutes").
func walkBackValue(s string) string {
	ws := strings.Fields(s)
	for len(ws) > 0 {
		last := strings.ToLower(strings.Trim(ws[len(ws)-1], ",.;:"))
		if last == "now" || last == "actually" || last == "though" {
			ws = ws[:len(ws)-1]
			continue
		}
		break
	}
	i := len(ws)
	for i > 0 {
		w := strings.Trim(ws[i-1], ",;:\"'")
		if w == "" {
			break
		}
		if valueWord(w) {
			i--
			continue
		}
		break
	}
	if i == len(ws) {
		return ""
	}
	v := strings.Trim(strings.Join(ws[i:], " "), ",;: \"'")
	if !valueLike(v) {
		return ""
	}
	return v
}

var unitWords = map[string]bool{"days": true, "day": true, "hours": true, "hour": true, "minutes": true, "minute": true,
	"seconds": true, "weeks": true, "week": true, "months": true, "month": true, "years": true, "year": true, "ml": true,
	"l": true, "km": true, "m": true, "cm": true, "mm": true, "kg": true, "g": true, "mg": true, "lb": true, "lbs": true,
	"miles": true, "percent": true, "pm": true, "am": true, "business": true, "working": true, "usd": true, "eur": true,
	"gb": true, "mb": true, "kb": true, "ms": true, "c": true, "f": true, "degrees": true, "items": true, "units": true}

func valueWord(w string) bool {
	r, _ := utf8.DecodeRuneInString(w)
	if unicode.IsDigit(r) || strings.ContainsRune("$€£", r) {
		return true
	}
	if r == '-' || r == '+' {
		r2, _ := utf8.DecodeRuneInString(w[1:])
		return unicode.IsDigit(r2)
	}
	if unitWords[strings.ToLower(w)] {
		return true
	}
	if unicode.IsUpper(r) {
		switch w {
		case "I", "It", "The", "This", "That", "A", "No", "Not", "Our", "We", "You":
			return false
		}
		return true
	}
	return false
}

// declarativeHint returns the sentence of t around position at, cleaned, or
// a generic hint with v.
func declarativeHint(t string, at int, v string) string {
	for _, sent := range reSentence.Split(t, -1) {
		if strings.Contains(sent, v) {
			return sentenceHint(sent)
		}
	}
	return "The correct answer is " + v + "."
}

// sentenceHint strips a leading interjection and capitalises the rest.
var reLeadInterjection = regexp.MustCompile(`(?i)^(?:(?:no|nope|nah|wrong|incorrect|sorry|actually|hmm|well|close|oops|but)\b[\s,!.:-]*)+`)

func sentenceHint(s string) string {
	s = strings.TrimSpace(reLeadInterjection.ReplaceAllString(strings.TrimSpace(s), ""))
	s = strings.TrimRight(s, " .!?;,")
	if s == "" {
		return ""
	}
	r, size := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[size:] + "."
}
