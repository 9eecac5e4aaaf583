package feedback

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// The trained part of the embedded interpreter: a multinomial logistic
// regression for polarity, a logistic ranker for correction candidates
// and a logistic calibrator for the confidence. The weights are trained
// on testdata/general/train.jsonl and heldout.jsonl and the older in-sample sets
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
	// Polarity: feature -> weights for classes -1, 0, +1.
	Polarity map[string][3]float64 `json:"polarity"`
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

const modelFormat = 1

// model is the loaded model.
type model struct {
	pol   map[string][3]float64
	rank  map[string]float64
	calib []float64
	emit  float64
	unc   float64
}

var embeddedModel = mustLoadModel(modelJSON)

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
	return &model{pol: mf.Polarity, rank: mf.Ranker, calib: mf.Calib, emit: mf.Emit, unc: mf.Uncertain}, nil
}

// polarityProbs returns the probabilities of polarity -1, 0, +1.
func polarityProbs(w map[string][3]float64, f features) [3]float64 {
	var acc [3]fixedSum
	for k, v := range f {
		if ws, ok := w[k]; ok {
			for c := 0; c < 3; c++ {
				acc[c].add(ws[c] * v)
			}
		}
	}
	return softmax3([3]float64{acc[0].value(), acc[1].value(), acc[2].value()})
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

func softmax3(z [3]float64) [3]float64 {
	m := math.Max(z[0], math.Max(z[1], z[2]))
	var p [3]float64
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
func novelty(w map[string][3]float64, f features) float64 {
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
