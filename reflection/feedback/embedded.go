package feedback

import (
	"context"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// EmbeddedVersion identifies the embedded interpreter: its rules,
// lexicons and trained weights (testdata/model.json). Bump it whenever
// any of them changes, so that re-interpretation of history can be told
// apart.
const EmbeddedVersion = "embedded-6"

// MaxTextBytes bounds the feedback text an interpreter reads. Longer text is
// not interpreted (low-confidence neutral, Note "too-large").
const MaxTextBytes = 64 << 10

// UncertainBelow is the calibrated confidence below which the embedded
// interpreter marks an interpretation Uncertain. It was chosen by 5-fold
// cross-validation on the general set (train.jsonl and heldout.jsonl) as the lowest
// threshold at which the interpretations kept (confidence at or above
// it) are fully right (polarity sign and correction) at least
// uncertainTargetAccuracy of the time; TestTrainModel checks that the
// committed model agrees with it.
const UncertainBelow = 0.88

// uncertainTargetAccuracy is the accuracy the kept interpretations must
// reach in cross-validation when UncertainBelow is chosen.
const uncertainTargetAccuracy = 0.95

// Embedded is the dependency-free interpreter. A comment is tokenized in
// any of seven languages (en de es fr it pt nl); its values (numbers,
// money, times, ranges, dates, durations, quantities, statuses) are
// parsed into canonical form and read against the answer's values to
// give correction candidates (stated, typed by the answer, computed from
// it, or implied); a logistic classifier over word and character n-grams,
// multilingual lexicon classes and the candidates gives the polarity; a
// logistic ranker picks the correction; a calibrator gives the
// confidence. English rules add aspects and hints. A structured rating,
// outcome or explicit correction is combined with the text. It is safe
// for concurrent use and never returns an error.
type Embedded struct {
	m *model
}

// NewEmbedded returns the embedded interpreter with its trained weights.
func NewEmbedded() *Embedded { return &Embedded{m: embeddedModel} }

// Interpret implements Interpreter. It never fails; ctx is not consulted.
func (e *Embedded) Interpret(_ context.Context, in Input) (Interpretation, error) {
	return e.interpret(in), nil
}

// wtok is a word token with its position.
type wtok struct {
	w             string
	sent, clause  int
	clauseEndNext bool // the next token ends the clause (or the text ends)
}

// contrib is one polar piece of evidence.
type contrib struct {
	v   float64
	at  int // word index
	pos bool
	// interj: a sarcasm-prone interjection ("great," "thanks.")
	interj bool
}

// textAnalysis is what the English rules found in the text alone.
type textAnalysis struct {
	score     float64
	pos, neg  float64 // weighted positive and negative parts of score
	evidence  int
	aspects   map[string]bool
	sarcasm   bool
	contrast  bool
	emphasis  bool
	imperativ string // an imperative sentence usable as a hint
	note      string
	foreign   bool // no English word among three or more words
	words     []string
}

// analysis is everything computed from an Input before the trained
// parts decide.
type analysis struct {
	doc   docInfo
	ans   answerInfo
	ta    textAnalysis
	cands []*cand
	pf    features
}

// analyze parses the comment and the answer and builds the features.
func analyze(in Input) analysis {
	var a analysis
	a.ta = analyzeText(in.Text)
	if a.ta.note != "" {
		return a
	}
	a.ans = analyzeAnswer(in.AnswerText, in.PromptText)
	toks := lex(in.Text)
	lang := guessLang(toks)
	if lang == "" {
		lang = a.ans.lang
	}
	ctx := a.ans.ctx
	ctx.lang = lang
	a.doc = docInfo{text: in.Text, toks: toks, lang: lang, vals: parseValues(toks, ctx)}
	a.doc.exprs = findExprs(toks, a.doc.vals, lang)
	a.doc.stats()
	a.cands = genCandidates(a.doc, a.ans)
	a.pf = polarityFeatures(a.doc, a.ans, a.cands, a.ta)
	return a
}

// decision is what the trained parts made of an analysis.
type decision struct {
	probs      [3]float64 // polarity -1, 0, +1
	class      int        // -1, 0, +1
	correction string
	best       float64 // the best candidate's ranker probability
	bestIdx    int     // -1 if there is no candidate
	emitted    bool
	confidence float64
}

// decide applies the model to an analysis.
func (m *model) decide(a analysis) decision {
	d := decision{bestIdx: -1}
	d.probs = polarityProbs(m.pol, a.pf)
	for i, c := range a.cands {
		// P(c is the correction) = P(the comment is negative) ·
		// P(c is the correction | negative): only negative comments
		// correct (GUIDE.md), and the ranker is trained on those
		s := math.Sqrt(d.probs[0]) * rankScore(m.rank, rankFeatures(c, d.probs, a.doc.lang, a.pf))
		if d.bestIdx < 0 || s > d.best {
			d.best, d.bestIdx = s, i
		}
	}
	d.class = argmax3(d.probs) - 1
	if d.bestIdx >= 0 && d.best >= m.emit {
		d.emitted = true
		d.correction = a.cands[d.bestIdx].canon
		d.class = -1 // a stated right answer means the answer was wrong
	}
	d.confidence = calibrate(m.calib, calibFeatures(d.probs[d.class+1], d.emitted, d.best, d.bestIdx >= 0, novelty(m.pol, a.pf)))
	return d
}

func argmax3(p [3]float64) int {
	best := 0
	for c := 1; c < 3; c++ {
		if p[c] > p[best] {
			best = c
		}
	}
	return best
}

func (e *Embedded) interpret(in Input) Interpretation {
	m := e.m
	if m == nil {
		m = embeddedModel
	}
	a := analyze(in)
	ta := a.ta
	out := Interpretation{Version: EmbeddedVersion, Note: ta.note}
	aspects := ta.aspects
	if aspects == nil {
		aspects = map[string]bool{}
	}
	var ex extraction
	type term struct{ p, c float64 }
	var terms []term
	textConf := 0.0
	if ta.note == "" {
		d := m.decide(a)
		textConf = d.confidence
		if d.emitted {
			now := ""
			if reNow.MatchString(in.Text) {
				now = "now "
			}
			ex = extraction{value: d.correction, hint: "The correct answer is " + now + d.correction + "."}
		}
		var pol float64
		switch d.class {
		case 1:
			pol = math.Max(d.probs[2]-d.probs[0], PolaritySignThreshold)
		case -1:
			pol = math.Min(d.probs[2]-d.probs[0], -PolaritySignThreshold)
			if d.emitted {
				pol = math.Min(pol, -0.5)
			}
		}
		terms = append(terms, term{pol, d.confidence})
		if a.doc.lang != "en" && a.doc.lang != "" {
			foreignAspects(a.doc.toks, aspects, d.class)
		}
	}
	// an explicit correction beats the extracted one
	if c := strings.TrimSpace(in.Correction); c != "" && utf8.ValidString(c) {
		if len(c) > 1024 {
			c = c[:1024]
		}
		ex = extraction{value: c, hint: "The correct answer is " + c + "."}
	}
	if ex.value != "" && strings.HasPrefix(ex.hint, "The correct answer is ") {
		if subj := promptSubject(in.PromptText); subj != "" {
			rest := strings.TrimPrefix(ex.hint, "The correct answer is ")
			ex.hint = subj + " is " + rest
		}
	}
	if in.Rating != nil && !math.IsNaN(*in.Rating) && !math.IsInf(*in.Rating, 0) {
		terms = append(terms, term{ratingPolarity(*in.Rating), 0.9})
	}
	if p, w := outcomePolarity(in.Outcome); w > 0 {
		terms = append(terms, term{p, w})
	}
	if in.Correction != "" {
		terms = append(terms, term{-0.6, 0.8})
	}
	if ex.value != "" {
		aspects[AspectCorrectness] = true
		out.Correction = ex.value
	}
	if len(terms) == 0 {
		out.Confidence = 0.05
		out.Uncertain = true
		out.Aspects = sortAspects(aspects)
		out.Hint = hintFor(ta, aspects, ex, 0)
		return out
	}
	var num, den, miss float64 = 0, 0, 1
	for _, t := range terms {
		num += t.p * t.c
		den += t.c
		miss *= 1 - t.c
	}
	if den > 0 {
		out.Polarity = clamp(num/den, -1, 1)
	}
	if math.Abs(out.Polarity) < 1e-9 {
		out.Polarity = 0
	}
	if len(terms) == 1 && ta.note == "" {
		// the text alone: its calibrated confidence
		out.Confidence = clamp(textConf, 0, 1)
	} else {
		out.Confidence = clamp(1-miss, 0, 0.99)
	}
	out.Uncertain = out.Confidence < UncertainBelow
	st := math.Abs(out.Polarity)
	if ta.emphasis {
		st *= 1.25
	}
	out.Strength = clamp(st, 0, 1)
	out.Aspects = sortAspects(aspects)
	out.Hint = hintFor(ta, aspects, ex, out.Polarity)
	return out
}

// foreignAspects names aspects from the multilingual lexicon, for text
// that the English rules cannot read.
func foreignAspects(toks []tok, set map[string]bool, class int) {
	for i := range toks {
		cl, _ := lexMatch(toks, i)
		if cl&lLength != 0 && class < 0 {
			set[AspectLength] = true
		}
		if cl&lTone != 0 && class < 0 {
			set[AspectTone] = true
		}
		if cl&lWrong != 0 && class < 0 {
			set[AspectCorrectness] = true
		}
	}
}

// hintFor builds teacher context from the interpretation.
func hintFor(ta textAnalysis, aspects map[string]bool, ex extraction, pol float64) string {
	if ex.hint != "" {
		return ex.hint
	}
	if ta.imperativ != "" {
		return ta.imperativ
	}
	if pol >= 0 {
		return ""
	}
	has := func(ws ...string) bool {
		for _, w := range ta.words {
			for _, x := range ws {
				if w == x {
					return true
				}
			}
		}
		return false
	}
	switch {
	case aspects[AspectLength] && has("short", "detail", "details", "more"):
		return "Give more detail."
	case aspects[AspectLength]:
		return "Be more concise."
	case aspects[AspectFormat] && has("json"):
		return "Answer with valid JSON only."
	case aspects[AspectFormat]:
		return "Follow the requested output format exactly."
	case aspects[AspectTone] && has("formal"):
		return "Use a friendlier, less formal tone."
	case aspects[AspectTone] && has("casual", "emojis", "emoji"):
		return "Use a more formal, professional tone."
	case aspects[AspectTone]:
		return "Be polite and respectful."
	case aspects[AspectToolUse]:
		return "Call tools only when needed, with valid arguments."
	case aspects[AspectCompleteness]:
		return "Answer every part of the question completely."
	case aspects[AspectCorrectness]:
		return "The previous answer was wrong; check the facts before answering."
	}
	return ""
}

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
