package feedback

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

var updateModel = flag.Bool("update", false, "retrain the embedded interpreter's model on the general set's training files and the older in-sample sets and write testdata/model.json")

// trainOpts are the hyper-parameters of the trained parts.
type trainOpts struct {
	PolL2     float64 // L2 strength of the polarity classifier on n-gram features
	StructL2  float64 // L2 strength on the other (lexicon, rule, value, form) features
	RankL2    float64 // L2 strength of the candidate ranker
	CalL2     float64 // L2 strength of the calibrator
	MinDF     int     // a feature must occur in this many training comments
	AuxWeight float64 // weight of the older in-sample sets (no answers)
	Folds     int
	// RankAll trains the ranker on the candidates of every comment (a
	// candidate of a non-negative comment is not its correction), not
	// only on the negative ones.
	RankAll bool
	// FoldByLang (development) makes each language other than English a
	// fold of its own (English is split in two), so that the
	// cross-validation measures how the model carries to a language it
	// was not trained on; Folds must be 8.
	FoldByLang bool
	// Coarse (development) trains the polarity classifier on the three
	// polarities instead of the kinds of comment.
	Coarse bool
	// NoTrain4 (development) leaves train4.jsonl out of training, to
	// compare the cross-validation with and without it.
	NoTrain4 bool
	// NoTrain5 (development) leaves train5.jsonl out of training.
	NoTrain5 bool
}

var defaultTrainOpts = trainOpts{PolL2: 1, StructL2: 0.1, RankL2: 1, CalL2: 0.01, MinDF: 2, AuxWeight: 0.2, Folds: 5}

// texample is one training comment with its analysis.
type texample struct {
	id      string
	src     string // the file it came from
	general bool   // from the general set's training files (scored in CV); else an older set
	fold    int
	w       float64
	pol     int
	allowed uint64 // the polarity classes the example may belong to (polarityClasses)
	corr    string // NormalizeCorrection of the label
	kind    string
	lang    string
	a       analysis
}

func foldOf(id string, k int) int {
	h := fnv.New32a()
	h.Write([]byte(os.Getenv("FEEDBACK_FOLD_SALT") + id))
	return int(h.Sum32() % uint32(k))
}

// langFold is the fold of a record under FoldByLang.
func langFold(id, lang string) int {
	switch lang {
	case "de":
		return 2
	case "es":
		return 3
	case "fr":
		return 4
	case "it":
		return 5
	case "pt":
		return 6
	case "nl":
		return 7
	}
	return foldOf(id, 2)
}

// trainFile is one file of the general set that trains the model, with
// the split its records carry.
type trainFile struct{ path, split string }

// generalTrainFiles are the general set's training files, in the order
// loadTrainExamples reads them: both splits of comments.jsonl,
// heldout2.jsonl (its three held-out evaluations used, HELDOUT2.md) and
// train4.jsonl (written as training data, TRAIN4.md; left out with
// o.NoTrain4). heldout3.jsonl, the held-out set, is never among them.
func generalTrainFiles(o trainOpts) []trainFile {
	fs := []trainFile{
		{"testdata/general/train.jsonl", "train"},
		{"testdata/general/heldout.jsonl", "heldout"},
		{"testdata/general/heldout2.jsonl", "heldout2"},
	}
	if !o.NoTrain4 {
		fs = append(fs, trainFile{"testdata/general/train4.jsonl", "train"})
	}
	if !o.NoTrain5 {
		fs = append(fs, trainFile{"testdata/general/train5.jsonl", "train"})
	}
	return fs
}

// loadTrainExamples analyses the general set's training files and the
// older in-sample sets.
func loadTrainExamples(t testing.TB, o trainOpts) []*texample {
	var exs []*texample
	for _, tf := range generalTrainFiles(o) {
		for _, r := range loadGeneral(t, tf.path) {
			if r.Split != tf.split {
				t.Fatalf("%s: split %q in %s", r.ID, r.Split, tf.path)
			}
			fold := foldOf(r.ID, o.Folds)
			if o.FoldByLang {
				fold = langFold(r.ID, r.Lang)
			}
			exs = append(exs, &texample{id: r.ID, src: tf.path, general: true, fold: fold, w: 1, pol: r.Polarity,
				corr: NormalizeCorrection(r.Correction), kind: r.Kind, lang: r.Lang,
				a: analyze(Input{Text: r.Text, AnswerText: r.Answer, PromptText: r.Question})})
		}
	}
	for _, path := range []string{"testdata/labelled.jsonl", "testdata/heldout.jsonl"} {
		for i, l := range loadSet(t, path) {
			id := fmt.Sprintf("%s#%d", path, i)
			fold := foldOf(id, o.Folds)
			if o.FoldByLang {
				fold = langFold(id, "en")
			}
			exs = append(exs, &texample{id: id, fold: fold, w: o.AuxWeight, pol: l.Polarity,
				corr: NormalizeCorrection(l.Correction), kind: "legacy", lang: "en", a: analyze(Input{Text: l.Text})})
		}
	}
	return exs
}

// sparse rows over a vocabulary.
type srow struct {
	idx []int32
	val []float64
}

type vocab struct {
	names []string
	index map[string]int32
}

// buildVocab: "bias" first, then the features that occur in at least
// minDF rows, sorted.
func buildVocab(rows []features, minDF int) vocab {
	df := map[string]int{}
	for _, f := range rows {
		for k, v := range f {
			if v != 0 {
				df[k]++
			}
		}
	}
	names := []string{"bias"}
	for k, n := range df {
		if k != "bias" && n >= minDF {
			names = append(names, k)
		}
	}
	sort.Strings(names[1:])
	v := vocab{names: names, index: map[string]int32{}}
	for i, n := range names {
		v.index[n] = int32(i)
	}
	return v
}

func (v vocab) row(f features) srow {
	var r srow
	for k, x := range f {
		if i, ok := v.index[k]; ok && x != 0 {
			r.idx = append(r.idx, i)
			r.val = append(r.val, x)
		}
	}
	// a fixed order makes training bitwise deterministic
	sort.Sort(byIdx(r))
	return r
}

type byIdx srow

func (b byIdx) Len() int           { return len(b.idx) }
func (b byIdx) Less(i, j int) bool { return b.idx[i] < b.idx[j] }
func (b byIdx) Swap(i, j int) {
	b.idx[i], b.idx[j] = b.idx[j], b.idx[i]
	b.val[i], b.val[j] = b.val[j], b.val[i]
}

// fitSoftmax trains a 3-class logistic regression (weighted cross-entropy
// plus l2/2·|W|², the bias unpenalised) and returns feature -> weights.
// fitSoftmax trains a multinomial logistic regression over K classes in
// which example n may belong to any class of the set allowed[n] (a bit
// mask): its loss is -log of their summed probability, so a comment
// labelled with a polarity but no kind is credited to whichever kind of
// that polarity fits it. It returns feature -> K weights.
func fitSoftmax(rows []srow, allowed []uint64, w []float64, voc vocab, K int, l2, l2s float64) map[string][]float64 {
	nf := len(voc.names)
	x := make([]float64, nf*K)
	pen := make([]float64, nf*K)
	for i, name := range voc.names {
		v := l2
		if !isNgram(name) {
			v = l2s
		}
		if i == 0 {
			v = 0
		}
		for c := 0; c < K; c++ {
			pen[i*K+c] = v
		}
	}
	// The rows are split into a fixed number of chunks whose gradients
	// are summed in chunk order, so the result does not depend on how
	// many cores ran them.
	const chunks = 8
	partG := make([][]float64, chunks)
	partLoss := make([]float64, chunks)
	for i := range partG {
		partG[i] = make([]float64, len(x))
	}
	chunkObj := func(ch int, p []float64) {
		g := partG[ch]
		for i := range g {
			g[i] = 0
		}
		z := make([]float64, K)
		d := make([]float64, K)
		loss := 0.0
		for n := ch * len(rows) / chunks; n < (ch+1)*len(rows)/chunks; n++ {
			r := rows[n]
			for c := range z {
				z[c] = 0
			}
			for k, fi := range r.idx {
				ws := p[int(fi)*K : int(fi)*K+K]
				v := r.val[k]
				for c := range ws {
					z[c] += ws[c] * v
				}
			}
			pr := softmax(z)
			pa := 0.0
			for c := 0; c < K; c++ {
				if allowed[n]&(1<<c) != 0 {
					pa += pr[c]
				}
			}
			pa = math.Max(pa, 1e-300)
			loss -= w[n] * math.Log(pa)
			for c := 0; c < K; c++ {
				d[c] = pr[c]
				if allowed[n]&(1<<c) != 0 {
					d[c] -= pr[c] / pa
				}
				d[c] *= w[n]
			}
			for k, fi := range r.idx {
				gs := g[int(fi)*K : int(fi)*K+K]
				v := r.val[k]
				for c := range gs {
					gs[c] += d[c] * v
				}
			}
		}
		partLoss[ch] = loss
	}
	obj := func(p, g []float64) float64 {
		var wg sync.WaitGroup
		next := make(chan int, chunks)
		for ch := 0; ch < chunks; ch++ {
			next <- ch
		}
		close(next)
		for range min(runtime.GOMAXPROCS(0), chunks) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ch := range next {
					chunkObj(ch, p)
				}
			}()
		}
		wg.Wait()
		loss := 0.0
		for i := range g {
			g[i] = 0
		}
		for ch := 0; ch < chunks; ch++ {
			loss += partLoss[ch]
			for i, v := range partG[ch] {
				g[i] += v
			}
		}
		for i := K; i < len(p); i++ {
			loss += 0.5 * pen[i] * p[i] * p[i]
			g[i] += pen[i] * p[i]
		}
		return loss
	}
	x = lbfgs(obj, x, 400, 1e-5)
	out := map[string][]float64{}
	for i, name := range voc.names {
		ws := append([]float64(nil), x[i*K:(i+1)*K]...)
		sum := 0.0
		for _, v := range ws {
			sum += math.Abs(v)
		}
		if sum > 1e-4 {
			out[name] = ws
		}
	}
	return out
}

// minClassSize is the number of training comments a kind needs, at one
// polarity, to be a class of the polarity classifier of its own; the
// comments of rarer kinds count toward every class of their polarity.
const minClassSize = 10

// polarityClasses returns the polarity classifier's classes (every kind
// and polarity with at least minClassSize general training comments,
// in order) and sets each example's set of allowed classes. With
// o.Coarse the classes are the three polarities.
func polarityClasses(exs []*texample, o trainOpts) []polClass {
	var classes []polClass
	if o.Coarse {
		classes = []polClass{{"negative", -1}, {"neutral", 0}, {"positive", 1}}
	} else {
		count := map[polClass]int{}
		for _, e := range exs {
			if e.general {
				count[polClass{e.kind, e.pol}]++
			}
		}
		for c, n := range count {
			if n >= minClassSize {
				classes = append(classes, c)
			}
		}
		sort.Slice(classes, func(i, j int) bool {
			if classes[i].Kind != classes[j].Kind {
				return classes[i].Kind < classes[j].Kind
			}
			return classes[i].Polarity < classes[j].Polarity
		})
	}
	if len(classes) > 64 {
		panic("polarityClasses: more than 64 classes")
	}
	for _, e := range exs {
		e.allowed = 0
		for c, pc := range classes {
			if pc.Kind == e.kind && pc.Polarity == e.pol {
				e.allowed = 1 << c
			}
		}
		if e.allowed == 0 {
			for c, pc := range classes {
				if pc.Polarity == e.pol {
					e.allowed |= 1 << c
				}
			}
		}
	}
	return classes
}

// isNgram: word, bigram and character n-gram features.
func isNgram(name string) bool {
	for _, p := range []string{"w:", "b:", "c:", "first:", "last:"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// fitLogistic trains a binary logistic regression and returns feature ->
// weight.
func fitLogistic(rows []srow, y []float64, w []float64, voc vocab, l2 float64) map[string]float64 {
	return fitLogisticGroups(rows, y, w, voc, l2, func(string) float64 { return 1 })
}

// fitLogisticGroups is fitLogistic with the L2 strength of each feature
// multiplied by mult(name).
func fitLogisticGroups(rows []srow, y []float64, w []float64, voc vocab, l2 float64, mult func(string) float64) map[string]float64 {
	x := make([]float64, len(voc.names))
	pen := make([]float64, len(voc.names))
	for i, name := range voc.names {
		pen[i] = l2 * mult(name)
	}
	obj := func(p, g []float64) float64 {
		for i := range g {
			g[i] = 0
		}
		loss := 0.0
		for n, r := range rows {
			z := 0.0
			for k, fi := range r.idx {
				z += p[fi] * r.val[k]
			}
			pr := sigmoid(z)
			loss -= w[n] * (y[n]*math.Log(math.Max(pr, 1e-300)) + (1-y[n])*math.Log(math.Max(1-pr, 1e-300)))
			d := w[n] * (pr - y[n])
			for k, fi := range r.idx {
				g[fi] += d * r.val[k]
			}
		}
		for i := 1; i < len(p); i++ {
			loss += 0.5 * pen[i] * p[i] * p[i]
			g[i] += pen[i] * p[i]
		}
		return loss
	}
	x = lbfgs(obj, x, 400, 1e-6)
	out := map[string]float64{}
	for i, name := range voc.names {
		if math.Abs(x[i]) > 1e-4 {
			out[name] = x[i]
		}
	}
	return out
}

func trainPolarity(exs []*texample, classes []polClass, sel func(*texample) bool, o trainOpts) polClassifier {
	var fs []features
	var allowed []uint64
	var w []float64
	for _, e := range exs {
		if sel(e) {
			fs = append(fs, e.a.pf)
			allowed = append(allowed, e.allowed)
			w = append(w, e.w)
		}
	}
	voc := buildVocab(fs, o.MinDF)
	rows := make([]srow, len(fs))
	for i, f := range fs {
		rows[i] = voc.row(f)
	}
	pc, err := newPolClassifier(fitSoftmax(rows, allowed, w, voc, len(classes), o.PolL2, o.StructL2), classes)
	if err != nil {
		panic(err)
	}
	return pc
}

func trainRanker(exs []*texample, probs [][3]float64, sel func(*texample) bool, o trainOpts) map[string]float64 {
	var fs []features
	var y, w []float64
	for n, e := range exs {
		if !sel(e) || e.pol != -1 && !o.RankAll {
			continue // P(candidate | negative comment)
		}
		for _, c := range e.a.cands {
			fs = append(fs, rankFeatures(c, probs[n], e.a.doc.lang, e.a.pf))
			lab := 0.0
			if e.corr != "" && NormalizeCorrection(c.canon) == e.corr {
				lab = 1
			}
			y = append(y, lab)
			w = append(w, e.w)
		}
	}
	voc := buildVocab(fs, o.MinDF)
	rows := make([]srow, len(fs))
	for i, f := range fs {
		rows[i] = voc.row(f)
	}
	return fitLogisticGroups(rows, y, w, voc, o.RankL2, func(name string) float64 {
		name = strings.TrimPrefix(strings.TrimPrefix(name, "N:"), "Y:")
		for _, p := range []string{"p1:", "p2:", "n1:", "p12:", "kl:", "lang:"} {
			if strings.HasPrefix(name, p) {
				return 3
			}
		}
		return 1
	})
}

// outcome of one decision against its labels.
type outcome struct {
	polOK   bool
	tp, fp  int
	fn      int
	corrOK  bool // the correction (or its absence) is right
	conf    float64
	pmax    float64
	best    float64
	hasCand bool
	emitted bool
	class   int
	pred    string
}

func score(d decision, pol int, gold string) outcome {
	o := outcome{polOK: d.class == pol, pmax: d.probs[d.class+1], best: d.best, hasCand: d.bestIdx >= 0, emitted: d.emitted, conf: d.confidence}
	have := NormalizeCorrection(d.correction)
	switch {
	case gold != "" && have == gold:
		o.tp = 1
	case gold == "" && have != "":
		o.fp = 1
	case gold != "" && have == "":
		o.fn = 1
	case gold != "" && have != gold:
		o.fp, o.fn = 1, 1
	}
	o.corrOK = have == gold
	o.class, o.pred = d.class, d.correction
	return o
}

// cvReport is the cross-validated performance on train.jsonl.
type cvReport struct {
	PolAcc, P, R, F1 float64
	Emit             float64
	Uncertain        float64
	Coverage         float64
	KeptAcc          float64
	ECE              float64
	N                int
	outcomes         []outcome
	scores           [][]float64 // out-of-fold candidate scores (development)
	pneg             []float64
}

// trainAll runs the cross-validation and fits the final model.
func trainAll(exs []*texample, o trainOpts) (modelFile, cvReport) {
	K := o.Folds
	classes := polarityClasses(exs, o)
	oofP := make([][3]float64, len(exs))
	oofNov := make([]float64, len(exs))
	for k := 0; k < K; k++ {
		pol := trainPolarity(exs, classes, func(e *texample) bool { return e.fold != k }, o)
		for n, e := range exs {
			if e.fold == k {
				oofP[n] = polarityProbs(pol, e.a.pf)
				oofNov[n] = novelty(pol, e.a.pf)
			}
		}
	}
	// out-of-fold decisions with fold models
	type dec struct {
		best    float64
		bestIdx int
	}
	oofBest := make([]dec, len(exs))
	devScores := make([][]float64, len(exs))
	for k := 0; k < K; k++ {
		rk := trainRanker(exs, oofP, func(e *texample) bool { return e.fold != k }, o)
		for n, e := range exs {
			if e.fold != k {
				continue
			}
			d := dec{bestIdx: -1}
			devScores[n] = make([]float64, len(e.a.cands))
			for i, c := range e.a.cands {
				s := math.Sqrt(oofP[n][0]) * rankScore(rk, rankFeatures(c, oofP[n], e.a.doc.lang, e.a.pf))
				devScores[n][i] = s
				if d.bestIdx < 0 || s > d.best {
					d.best, d.bestIdx = s, i
				}
			}
			oofBest[n] = d
		}
	}
	decideAt := func(n int, emit float64) decision {
		e := exs[n]
		d := decision{probs: oofP[n], bestIdx: oofBest[n].bestIdx, best: oofBest[n].best}
		d.class = argmax3(d.probs) - 1
		if d.bestIdx >= 0 && d.best >= emit {
			d.emitted = true
			d.correction = e.a.cands[d.bestIdx].canon
			d.class = -1
		}
		return d
	}
	evalAt := func(emit float64) (acc, p, r, f float64) {
		var ok, tp, fp, fn, n int
		for i, e := range exs {
			if !e.general {
				continue
			}
			sc := score(decideAt(i, emit), e.pol, e.corr)
			n++
			if sc.polOK {
				ok++
			}
			tp += sc.tp
			fp += sc.fp
			fn += sc.fn
		}
		p, r, f = f1(tp, fp, fn)
		return float64(ok) / float64(n), p, r, f
	}
	bestEmit, bestScore := 0.5, -1.0
	for emit := 0.05; emit < 0.951; emit += 0.01 {
		acc, _, _, f := evalAt(emit)
		if s := f + acc; s > bestScore+1e-9 {
			bestScore, bestEmit = s, math.Round(emit*100)/100
		}
	}
	var rep cvReport
	rep.Emit = bestEmit
	rep.PolAcc, rep.P, rep.R, rep.F1 = evalAt(bestEmit)
	// calibrator: joint correctness of the out-of-fold decisions
	var cx [][nCalib]float64
	var cy, cw []float64
	var cfold []int
	var cgen []bool
	var couts []outcome
	for i, e := range exs {
		d := decideAt(i, bestEmit)
		sc := score(d, e.pol, e.corr)
		cx = append(cx, calibFeatures(sc.pmax, d.emitted, d.best, d.bestIdx >= 0, oofNov[i]))
		y := 0.0
		if sc.polOK && sc.corrOK {
			y = 1
		}
		cy = append(cy, y)
		cw = append(cw, e.w)
		cfold = append(cfold, e.fold)
		cgen = append(cgen, e.general)
		couts = append(couts, sc)
	}
	fitCal := func(sel func(int) bool) []float64 {
		voc := vocab{}
		for i := 0; i < nCalib; i++ {
			voc.names = append(voc.names, "c"+strconv.Itoa(i))
		}
		var rows []srow
		var y, w []float64
		for i := range cx {
			if !sel(i) {
				continue
			}
			r := srow{}
			for k := 0; k < nCalib; k++ {
				if cx[i][k] != 0 {
					r.idx = append(r.idx, int32(k))
					r.val = append(r.val, cx[i][k])
				}
			}
			rows = append(rows, r)
			y = append(y, cy[i])
			w = append(w, cw[i])
		}
		m := fitLogistic(rows, y, w, voc, o.CalL2)
		out := make([]float64, nCalib)
		for k := range out {
			out[k] = m["c"+strconv.Itoa(k)]
		}
		return out
	}
	for k := 0; k < K; k++ {
		wk := fitCal(func(i int) bool { return cfold[i] != k })
		for i := range cx {
			if cfold[i] == k {
				couts[i].conf = calibrate(wk, cx[i])
			}
		}
	}
	var gen []outcome
	for i := range couts {
		if cgen[i] {
			gen = append(gen, couts[i])
		}
	}
	rep.outcomes = gen
	for i, e := range exs {
		if e.general {
			rep.scores = append(rep.scores, devScores[i])
			rep.pneg = append(rep.pneg, oofP[i][0])
		}
	}
	rep.N = len(gen)
	rep.ECE, _ = reliability(gen, 10)
	// the threshold: lowest at which the kept interpretations reach the
	// target accuracy
	rep.Uncertain = 1
	for th := 0.0; th <= 1.0001; th += 0.01 {
		kept, right := 0, 0
		for _, g := range gen {
			if g.conf >= th {
				kept++
				if g.polOK && g.corrOK {
					right++
				}
			}
		}
		if kept > 0 && float64(right)/float64(kept) >= uncertainTargetAccuracy {
			rep.Uncertain = math.Round(th*100) / 100
			rep.Coverage = float64(kept) / float64(len(gen))
			rep.KeptAcc = float64(right) / float64(kept)
			break
		}
	}
	// the final model
	all := func(*texample) bool { return true }
	mf := modelFile{Format: modelFormat, Interpreter: EmbeddedVersion}
	mf.Polarity = trainPolarity(exs, classes, all, o).w
	mf.PolarityClasses = classes
	mf.Ranker = trainRanker(exs, oofP, all, o)
	mf.Calib = fitCal(func(int) bool { return true })
	mf.Emit = bestEmit
	mf.Uncertain = rep.Uncertain
	mf.CV = map[string]float64{"polarity_accuracy": rep.PolAcc, "correction_precision": rep.P, "correction_recall": rep.R,
		"correction_f1": rep.F1, "ece": rep.ECE, "kept_share": rep.Coverage, "kept_accuracy": rep.KeptAcc, "n": float64(rep.N)}
	return mf, rep
}

// reliability returns the expected calibration error of the outcomes'
// confidences against joint correctness over nb equal-width bins, and
// the bins (count, mean confidence, accuracy).
func reliability(outs []outcome, nb int) (float64, [][3]float64) {
	bins := make([][3]float64, nb)
	for _, o := range outs {
		b := int(o.conf * float64(nb))
		if b >= nb {
			b = nb - 1
		}
		if b < 0 {
			b = 0
		}
		bins[b][0]++
		bins[b][1] += o.conf
		if o.polOK && o.corrOK {
			bins[b][2]++
		}
	}
	ece := 0.0
	for b := range bins {
		if n := bins[b][0]; n > 0 {
			bins[b][1] /= n
			bins[b][2] /= n
			ece += n / float64(len(outs)) * math.Abs(bins[b][1]-bins[b][2])
		}
	}
	return ece, bins
}

// roundSig rounds x to 6 significant digits, so that the file is stable
// against the last bits of the optimiser.
func roundSig(x float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'g', 6, 64), 64)
	return v
}

// roundPolarity rounds a polarity weight to 4 significant digits and
// writes weights under 1e-4 as 0: the classifier has a weight per
// feature and kind (about 600,000), and a comment's score moves by less
// than 0.03 for it, while the file shrinks from 7.7 to 4.9 MB.
func roundPolarity(x float64) float64 {
	if math.Abs(x) < 1e-4 {
		return 0
	}
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'g', 4, 64), 64)
	return v
}

func encodeModel(mf modelFile) []byte {
	for k, w := range mf.Polarity {
		for c := range w {
			w[c] = roundPolarity(w[c])
		}
		mf.Polarity[k] = w
	}
	for k, w := range mf.Ranker {
		mf.Ranker[k] = roundSig(w)
	}
	for i := range mf.Calib {
		mf.Calib[i] = roundSig(mf.Calib[i])
	}
	for k, v := range mf.CV {
		mf.CV[k] = math.Round(v*10000) / 10000
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(mf); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// TestTrainModel retrains the embedded interpreter's model with 5-fold
// cross-validation on the general set's training files
// (generalTrainFiles: train.jsonl, heldout.jsonl, heldout2.jsonl,
// train4.jsonl and train5.jsonl; the
// older in-sample sets are always in the training folds), reports the
// cross-validated figures, and checks that testdata/model.json is what
// training produces (with -update it writes the file). The held-out set,
// heldout3.jsonl, is never read here.
//
//	go test ./reflection/feedback -run TestTrainModel -v
//	go test ./reflection/feedback -run TestTrainModel -update
func TestTrainModel(t *testing.T) {
	if testing.Short() {
		t.Skip("training takes a few seconds")
	}
	exs := loadTrainExamples(t, defaultTrainOpts)
	mf, rep := trainAll(exs, defaultTrainOpts)
	t.Logf("5-fold CV on the general set (n=%d): polarity %.3f, correction P %.3f R %.3f F1 %.3f, emit at %.2f; ECE %.3f; uncertain below %.2f keeps %.1f%% at accuracy %.3f",
		rep.N, rep.PolAcc, rep.P, rep.R, rep.F1, rep.Emit, rep.ECE, rep.Uncertain, 100*rep.Coverage, rep.KeptAcc)
	t.Logf("model: %d polarity features, %d ranker features", len(mf.Polarity), len(mf.Ranker))
	b := encodeModel(mf)
	if *updateModel {
		if err := os.WriteFile("testdata/model.json", b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote testdata/model.json (%d bytes)", len(b))
	} else {
		old, err := loadModel(modelJSON)
		if err != nil {
			t.Fatal(err)
		}
		now, err := loadModel(b)
		if err != nil {
			t.Fatal(err)
		}
		if diff := modelDiff(old, now); diff != "" {
			t.Errorf("testdata/model.json is stale (%s): run go test ./reflection/feedback -run TestTrainModel -update, and bump EmbeddedVersion", diff)
		}
	}
	if mf.Uncertain != UncertainBelow {
		t.Errorf("cross-validation puts the uncertainty threshold at %.2f, UncertainBelow is %.2f: update the constant", mf.Uncertain, UncertainBelow)
	}
	var mfile modelFile
	if err := json.Unmarshal(modelJSON, &mfile); err == nil && mfile.Interpreter != EmbeddedVersion && !*updateModel {
		t.Errorf("model.json was written for %q, EmbeddedVersion is %q", mfile.Interpreter, EmbeddedVersion)
	}
}

// modelDiff describes how two models differ beyond rounding ("" if not).
func modelDiff(a, b *model) string {
	close := func(x, y float64) bool { return math.Abs(x-y) <= 1e-3*math.Max(1, math.Max(math.Abs(x), math.Abs(y))) }
	if len(a.pol.pol) != len(b.pol.pol) {
		return fmt.Sprintf("%d vs %d polarity classes", len(a.pol.pol), len(b.pol.pol))
	}
	if len(a.pol.w) != len(b.pol.w) {
		return fmt.Sprintf("%d vs %d polarity features", len(a.pol.w), len(b.pol.w))
	}
	for k, w := range a.pol.w {
		v, ok := b.pol.w[k]
		if !ok {
			return "polarity weight " + k
		}
		for c := range w {
			if !close(w[c], v[c]) {
				return "polarity weight " + k
			}
		}
	}
	if len(a.rank) != len(b.rank) {
		return fmt.Sprintf("%d vs %d ranker features", len(a.rank), len(b.rank))
	}
	for k, w := range a.rank {
		if v, ok := b.rank[k]; !ok || !close(w, v) {
			return "ranker weight " + k
		}
	}
	for i := range a.calib {
		if !close(a.calib[i], b.calib[i]) {
			return "calibrator"
		}
	}
	if !close(a.emit, b.emit) || !close(a.unc, b.unc) {
		return "thresholds"
	}
	return ""
}

// TestDevCV prints the cross-validated figures per kind and language on
// the training files, and with -dev=cvmiss their misses (never the
// held-out set), for development: -args -dev=cv.
func TestDevCV(t *testing.T) {
	if *devFlag != "cv" && *devFlag != "cvmiss" {
		t.Skip("dev only")
	}
	o := defaultTrainOpts
	if s := os.Getenv("FB_OPTS"); s != "" {
		if err := json.Unmarshal([]byte(s), &o); err != nil {
			t.Fatal(err)
		}
	}
	exs := loadTrainExamples(t, o)
	_, rep := trainAll(exs, o)
	fmt.Printf("CV n=%d polarity %.3f  correction P %.3f R %.3f F1 %.3f emit %.2f  ECE %.3f  unc %.2f keep %.2f acc %.3f\n",
		rep.N, rep.PolAcc, rep.P, rep.R, rep.F1, rep.Emit, rep.ECE, rep.Uncertain, rep.Coverage, rep.KeptAcc)
	var gen []*texample
	for _, e := range exs {
		if e.general {
			gen = append(gen, e)
		}
	}
	type agg struct{ n, ok, tp, fp, fn int }
	byKind := map[string]*agg{}
	byLang := map[string]*agg{}
	bySrc := map[string]*agg{}
	bump := func(m map[string]*agg, key string, o outcome) {
		a := m[key]
		if a == nil {
			a = &agg{}
			m[key] = a
		}
		a.n++
		if o.polOK {
			a.ok++
		}
		a.tp += o.tp
		a.fp += o.fp
		a.fn += o.fn
	}
	for i, e := range gen {
		bump(byKind, e.kind, rep.outcomes[i])
		bump(byLang, e.lang, rep.outcomes[i])
		bump(bySrc, e.src, rep.outcomes[i])
	}
	for _, m := range []map[string]*agg{byKind, byLang, bySrc} {
		var keys []string
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			a := m[k]
			_, _, f := f1(a.tp, a.fp, a.fn)
			fmt.Printf("  %-30s n=%3d pol %.2f  corr tp %2d fp %2d fn %2d F1 %.2f\n", k, a.n, float64(a.ok)/float64(a.n), a.tp, a.fp, a.fn, f)
		}
	}
	if *devFlag == "cvmiss" {
		// the general examples, in the order loadTrainExamples reads them
		var recs []generalRecord
		for _, tf := range generalTrainFiles(o) {
			recs = append(recs, loadGeneral(t, tf.path)...)
		}
		for i, e := range gen {
			o := rep.outcomes[i]
			if o.polOK && o.corrOK {
				continue
			}
			r := recs[i]
			var cs []string
			for k, c := range e.a.cands {
				cs = append(cs, fmt.Sprintf("%s:%.2f", c.canon, rep.scores[i][k]))
			}
			cs = append(cs, fmt.Sprintf("pneg:%.2f", rep.pneg[i]))
			var cjs []string
			for k := range e.a.pf {
				if strings.HasPrefix(k, "cj:") {
					cjs = append(cjs, k[3:])
				}
			}
			sort.Strings(cjs)
			fmt.Printf("MISS %-4s %-22s pol %+d→%+d corr %q→%q cands %v conf %.2f %v | %s | %s\n", r.Lang, trunc(r.Kind, 22), e.pol, o.class, r.Correction, o.pred, cs, o.conf, cjs, trunc(r.Answer, 50), trunc(r.Text, 150))
		}
	}
}

// TestDevGateBins (development, train only): the out-of-fold best
// candidate's score by value kind against whether it is the correction.
func TestDevGateBins(t *testing.T) {
	if *devFlag != "bins" {
		t.Skip("dev only")
	}
	exs := loadTrainExamples(t, defaultTrainOpts)
	_, rep := trainAll(exs, defaultTrainOpts)
	var gen []*texample
	for _, e := range exs {
		if e.general {
			gen = append(gen, e)
		}
	}
	type cell struct{ right, wrong, none int }
	bins := map[string]*[10]cell{}
	for i, e := range gen {
		if len(rep.scores[i]) == 0 {
			continue
		}
		b := 0
		for k := range rep.scores[i] {
			if rep.scores[i][k] > rep.scores[i][b] {
				b = k
			}
		}
		c := e.a.cands[b]
		g := "value"
		if c.kind == vName {
			g = "name"
		} else if c.kind == vYesNo {
			g = "yesno"
		}
		if bins[g] == nil {
			bins[g] = &[10]cell{}
		}
		bi := min(int(rep.scores[i][b]*10), 9)
		switch {
		case e.corr == "":
			bins[g][bi].none++
		case NormalizeCorrection(c.canon) == e.corr:
			bins[g][bi].right++
		default:
			bins[g][bi].wrong++
		}
	}
	for g, bs := range bins {
		for i, c := range bs {
			fmt.Printf("%-6s [%.1f) right %3d wrong %3d none %3d\n", g, float64(i)/10, c.right, c.wrong, c.none)
		}
	}
}

// TestDevFeature (development, train only): the labels of the train
// comments that have the polarity feature FB_FEAT.
func TestDevFeature(t *testing.T) {
	name := os.Getenv("FB_FEAT")
	if *devFlag != "feat" || name == "" {
		t.Skip("dev only")
	}
	recs := loadGeneral(t, "testdata/general/train.jsonl")
	count := map[int]int{}
	for _, r := range recs {
		a := analyze(Input{Text: r.Text, AnswerText: r.Answer, PromptText: r.Question})
		if a.pf[name] == 0 {
			continue
		}
		count[r.Polarity]++
		fmt.Printf("%+d %-22s %q | %s\n", r.Polarity, r.Kind, r.Correction, trunc(r.Text, 140))
	}
	fmt.Println(name, count)
}
