package feedback

import (
	"context"
	"math"
	"strings"
	"unicode/utf8"
)

// EmbeddedVersion identifies the embedded interpreter: its rules,
// lexicons and trained weights (testdata/model.json). Bump it whenever
// any of them changes, so that re-interpretation of history can be told
// apart.
const EmbeddedVersion = "embedded-8"

// MaxTextBytes bounds the feedback text an interpreter reads. Longer text is
// not interpreted (low-confidence neutral, Note "too-large").
const MaxTextBytes = 64 << 10

// UncertainBelow is the calibrated confidence below which the embedded
// interpreter marks an interpretation Uncertain. It was chosen by 5-fold
// cross-validation on the general set's training files (train.jsonl,
// heldout.jsonl, heldout2.jsonl, train4.jsonl and train5.jsonl) as the lowest
// threshold at which the interpretations kept (confidence at or above
// it) are fully right (polarity sign and correction) at least
// uncertainTargetAccuracy of the time; TestTrainModel checks that the
// committed model agrees with it.
const UncertainBelow = 0.81

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
func NewEmbedded() *Embedded { return &Embedded{m: embeddedModel()} }

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
		m = embeddedModel()
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
