package feedback

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
)

// The trained part of the embedded interpreter: a multinomial logistic
// regression over kinds of comment for polarity (see polClassifier), a
// logistic ranker for correction candidates
// and a logistic calibrator for the confidence. The weights are trained
// on the general set's training files (testdata/general: train.jsonl,
// heldout.jsonl, heldout2.jsonl, train4.jsonl, train5.jsonl) and the older in-sample sets
// (testdata/labelled.jsonl, testdata/heldout.jsonl) by
//
//	go test ./reflection/feedback -run TestTrainModel -update
//
// which writes testdata/model.json; TestTrainModel without -update
// retrains and fails if the committed file differs, so the weights
// always match the code that computes the features.

//go:embed testdata/model.json
var modelJSON []byte

// modelFile is the serialised model.
type modelFile struct {
	// Format of the file; bump when the layout changes.
	Format int `json:"format"`
	// Interpreter is EmbeddedVersion when the file was written.
	Interpreter string `json:"interpreter"`
	// Polarity: feature -> one weight per class of PolarityClasses.
	Polarity map[string][]float64 `json:"polarity"`
	// PolarityClasses: the classifier's classes, each a kind of comment
	// with the polarity its comments have ("policy_complaint/0").
	PolarityClasses []polClass `json:"polarity_classes"`
	// Ranker: feature -> weight of a candidate being the correction.
	Ranker map[string]float64 `json:"ranker"`
	// Calib: weights of the confidence calibrator (see calibFeatures).
	Calib []float64 `json:"calib"`
	// Emit: the ranker probability at or above which the best candidate
	// is the correction (chosen by cross-validation on train).
	Emit float64 `json:"emit"`
	// Uncertain: the calibrated confidence below which an interpretation
	// is marked uncertain (chosen by cross-validation on train); see
	// UncertainBelow.
	Uncertain float64 `json:"uncertain"`
	// CV: the cross-validated figures on train the file was chosen with.
	CV map[string]float64 `json:"cv,omitempty"`
}

const modelFormat = 2

// model is the loaded model.
type model struct {
	pol   polClassifier
	rank  map[string]float64
	calib []float64
	emit  float64
	unc   float64
}

// embeddedModel is the shipped model, parsed on first use (the file is
// a few megabytes; programs that never interpret feedback do not pay for
// it).
var embeddedModel = sync.OnceValue(func() *model { return mustLoadModel(modelJSON) })

func mustLoadModel(b []byte) *model {
	m, err := loadModel(b)
	if err != nil {
		panic(err) // the embedded file is part of the build; TestTrainModel guards it
	}
	return m
}

func loadModel(b []byte) (*model, error) {
	var mf modelFile
	if err := json.Unmarshal(b, &mf); err != nil {
		return nil, fmt.Errorf("feedback: model: %w", err)
	}
	if mf.Format != modelFormat {
		return nil, fmt.Errorf("feedback: model format %d, want %d", mf.Format, modelFormat)
	}
	if len(mf.Calib) != nCalib {
		return nil, fmt.Errorf("feedback: model has %d calibrator weights, want %d", len(mf.Calib), nCalib)
	}
	pc, err := newPolClassifier(mf.Polarity, mf.PolarityClasses)
	if err != nil {
		return nil, err
	}
	return &model{pol: pc, rank: mf.Ranker, calib: mf.Calib, emit: mf.Emit, unc: mf.Uncertain}, nil
}

// polClass is one class of the polarity classifier: a kind of comment
// (the labelling guide's kinds) and the polarity its comments carry.
type polClass struct {
	Kind     string `json:"kind"`
	Polarity int    `json:"polarity"`
}

// polClassifier is a softmax over kinds of comment, whose probabilities
// are summed by polarity. One linear score per polarity must cover
// kinds that have little in common (a neutral comment is a greeting, a
// policy complaint or a format request); a score per kind lets each
// keep its own words, and the words a complaint about a price shares
// with a complaint about the answer no longer pull them to one class.
type polClassifier struct {
	w   map[string][]float64
	pol []int // index into the probability vector (polarity+1) per class
}

func newPolClassifier(w map[string][]float64, classes []polClass) (polClassifier, error) {
	if len(classes) == 0 {
		return polClassifier{}, fmt.Errorf("feedback: model has no polarity classes")
	}
	pc := polClassifier{w: w, pol: make([]int, len(classes))}
	for i, c := range classes {
		if c.Polarity < -1 || c.Polarity > 1 {
			return polClassifier{}, fmt.Errorf("feedback: polarity class %q has polarity %d", c.Kind, c.Polarity)
		}
		pc.pol[i] = c.Polarity + 1
	}
	for k, ws := range w {
		if len(ws) != len(classes) {
			return polClassifier{}, fmt.Errorf("feedback: feature %q has %d weights for %d classes", k, len(ws), len(classes))
		}
	}
	return pc, nil
}

// polarityProbs returns the probabilities of polarity -1, 0, +1.
func polarityProbs(pc polClassifier, f features) [3]float64 {
	var p [3]float64
	for c, q := range pc.classProbs(f) {
		p[pc.pol[c]] += q
	}
	return p
}

// classProbs returns the probability of each class.
func (pc polClassifier) classProbs(f features) []float64 {
	acc := make([]fixedSum, len(pc.pol))
	for k, v := range f {
		if ws, ok := pc.w[k]; ok {
			for c, x := range ws {
				acc[c].add(x * v)
			}
		}
	}
	z := make([]float64, len(acc))
	for c := range acc {
		z[c] = acc[c].value()
	}
	return softmax(z)
}

// fixedSum adds terms in fixed point (2^-32 units), so that the sum does
// not depend on the order of the terms (Go randomises map iteration):
// the interpreter is deterministic to the last bit.
type fixedSum struct{ n int64 }

const fixedScale = 1 << 32

func (s *fixedSum) add(x float64) {
	x = clamp(x, -1e6, 1e6)
	s.n += int64(math.Round(x * fixedScale))
}

func (s fixedSum) value() float64 { return float64(s.n) / fixedScale }

// softmax returns the probabilities of the scores z.
func softmax(z []float64) []float64 {
	m := math.Inf(-1)
	for _, x := range z {
		m = math.Max(m, x)
	}
	p := make([]float64, len(z))
	s := 0.0
	for c := range z {
		p[c] = math.Exp(z[c] - m)
		s += p[c]
	}
	for c := range p {
		p[c] /= s
	}
	return p
}

func sigmoid(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}

func logit(p float64) float64 {
	p = clamp(p, 1e-6, 1-1e-6)
	return math.Log(p / (1 - p))
}

// rankFeatures are a candidate's features plus the comment's polarity
// probabilities and language.
//
// Names and yes/no candidates have weights of their own (their features
// are prefixed "N:" and "Y:"): the same context means different things
// for a name and for a number.
func rankFeatures(c *cand, p [3]float64, lang string, pf features) features {
	g := ""
	switch c.kind {
	case vName:
		g = "N:"
	case vYesNo:
		g = "Y:"
	}
	f := features{"bias": 1, g + "pneg": p[0], g + "pneu": p[1], g + "ppos": p[2]}
	if g != "" {
		f[g+"bias"] = 1
	}
	for k, v := range c.feats {
		f[g+k] = v
	}
	// the comment's conjunction and form features
	for k, v := range pf {
		if strings.HasPrefix(k, "cj:") || strings.HasPrefix(k, "form:") {
			f[g+"d"+k] = v
		}
	}
	if lang != "" {
		f["lang:"+lang] = 1
		f["kl:"+c.kind.String()+":"+lang] = 1
	}
	return f
}

func rankScore(w map[string]float64, f features) float64 {
	var z fixedSum
	for k, v := range f {
		if wk, ok := w[k]; ok {
			z.add(wk * v)
		}
	}
	return sigmoid(z.value())
}

// nCalib is the number of calibrator inputs.
const nCalib = 7

// novelty is the share of a comment's words (the "w:" features) that the
// polarity classifier has no weight for: a comment unlike the training
// comments gets a lower confidence.
func novelty(pc polClassifier, f features) float64 {
	w := pc.w
	n, unknown := 0, 0
	for k := range f {
		if len(k) > 2 && k[0] == 'w' && k[1] == ':' && !strings.Contains(k, "|") {
			n++
			if _, ok := w[k]; !ok {
				unknown++
			}
		}
	}
	if n == 0 {
		return 0
	}
	return float64(unknown) / float64(n)
}

// calibFeatures: the inputs of the confidence calibrator, from the
// polarity probabilities of the chosen class, whether a correction was
// emitted, the ranker's best probability and the comment's novelty.
func calibFeatures(pmax float64, emitted bool, best float64, hasCand bool, nov float64) [nCalib]float64 {
	var x [nCalib]float64
	x[6] = nov
	x[0] = 1
	x[1] = logit(pmax)
	if emitted {
		x[2] = 1
		x[3] = logit(best)
	} else if hasCand {
		x[4] = logit(1 - best)
	}
	if hasCand {
		x[5] = 1
	}
	return x
}

func calibrate(w []float64, x [nCalib]float64) float64 {
	z := 0.0
	for i := range x {
		z += w[i] * x[i]
	}
	return sigmoid(z)
}
