package distill

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"

	"citizen/model"
)

// EvalFunc scores a model (base m with adapter a, nil for the base) on
// examples and returns a score per key, higher better; keys are usually
// task types. The gate compares candidate and parent key by key.
type EvalFunc func(ctx context.Context, m *model.Model, a *model.Adapter, exs []Example) (map[string]float64, error)

// evalTarget is the completion an example is scored on: the corrected
// answer when there is one (Example.TargetTokens), else the recorded
// answer when it was good; nil when the example has no good answer.
func evalTarget(ex *Example, good float64) []int {
	if len(ex.TargetTokens) > 0 {
		return ex.TargetTokens
	}
	if ex.Reward >= good && len(ex.CompletionTokens) > 0 {
		return ex.CompletionTokens
	}
	return nil
}

// scoredTarget is ex's evaluation target (evalTarget) when the offline
// evaluators score it: it has a prompt, and prompt and target fit the
// model's context (maxPos positions); nil otherwise.
func scoredTarget(ex *Example, good float64, maxPos int) []int {
	tgt := evalTarget(ex, good)
	if tgt == nil || len(ex.PromptTokens) == 0 || len(ex.PromptTokens)+len(tgt) > maxPos {
		return nil
	}
	return tgt
}

// evalChunk is how many sequences the offline evaluators run packed in
// one forward pass.
const evalChunk = 16

// evalChunks calls fn with the examples of exs that are scored
// (scoredTarget: an evaluation target and a prompt that fit m's context
// together). Each is a copy with CompletionTokens set to its target; they
// come in order, at most evalChunk at a time, with their indices in exs.
// It stops at ctx's cancellation or fn's first error and returns it.
func evalChunks(ctx context.Context, m *model.Model, exs []Example, good float64, fn func(chunk []*Example, idx []int) error) error {
	var chunk []*Example
	var idx []int
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		err := fn(chunk, idx)
		chunk, idx = nil, nil
		return err
	}
	for i := range exs {
		if err := ctx.Err(); err != nil {
			return err
		}
		tgt := scoredTarget(&exs[i], good, m.Config.MaxPositionEmbeddings)
		if tgt == nil {
			continue
		}
		ex := exs[i]
		ex.CompletionTokens = tgt
		chunk, idx = append(chunk, &ex), append(idx, i)
		if len(chunk) == evalChunk {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// packChunk is chunk's sequences (prompt and completion) as one packed
// batch whose targets are the completion tokens, and per sequence its
// rows of m.TargetLogits(b, ...): rows[k] = [lo, hi), row r predicting
// ys[r].
func packChunk(chunk []*Example) (b *model.Batch, rows [][2]int, ys []int) {
	b = &model.Batch{}
	rows = make([][2]int, len(chunk))
	for k, ex := range chunk {
		seq := ex.Sequence()
		mask := make([]bool, len(seq))
		for j := len(ex.PromptTokens); j < len(seq); j++ {
			mask[j] = true
		}
		lo := len(ys)
		b.AddSequence(seq, mask, nil, nil, 1)
		for _, y := range b.Targets[len(b.Targets)-len(seq):] {
			if y >= 0 {
				ys = append(ys, y)
			}
		}
		rows[k] = [2]int{lo, len(ys)}
	}
	return b, rows, ys
}

// keyMeans accumulates a mean per key.
type keyMeans struct {
	sum map[string]float64
	n   map[string]int
}

func (a *keyMeans) add(k string, v float64) { a.addN(k, v, 1) }

// addN adds n values that sum to sum.
func (a *keyMeans) addN(k string, sum float64, n int) {
	if a.sum == nil {
		a.sum, a.n = map[string]float64{}, map[string]int{}
	}
	a.sum[k] += sum
	a.n[k] += n
}

// means is the mean of every key that has a value.
func (a *keyMeans) means() map[string]float64 {
	out := map[string]float64{}
	for k, s := range a.sum {
		out[k] = s / float64(a.n[k])
	}
	return out
}

// LogLikelihood is the default evaluator: per type, the mean per-token
// log-likelihood of the good answers and the corrected answers (reward of
// at least good, or a correction's target). Types with no such answer get
// no key. (The Distiller computes the same scores and the KL of its gate
// in one pass, gateLogLikelihood, when no other evaluator is configured.)
func LogLikelihood(good float64) EvalFunc {
	return func(ctx context.Context, m *model.Model, a *model.Adapter, exs []Example) (map[string]float64, error) {
		var ll keyMeans
		err := evalChunks(ctx, m, exs, good, func(chunk []*Example, _ []int) error {
			comp, _, err := completionLogprobs(ctx, m, a, chunk, len(chunk))
			if err != nil {
				return err
			}
			for i, ex := range chunk {
				for _, lp := range comp[i] {
					ll.add(ex.Type, float64(lp))
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		return ll.means(), nil
	}
}

// Combine runs several evaluators and prefixes each one's keys with its
// name and a slash ("ll/policy", "acc/policy").
func Combine(evals map[string]EvalFunc) EvalFunc {
	return func(ctx context.Context, m *model.Model, a *model.Adapter, exs []Example) (map[string]float64, error) {
		out := map[string]float64{}
		for _, name := range slices.Sorted(maps.Keys(evals)) {
			r, err := evals[name](ctx, m, a, exs)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			for k, v := range r {
				out[name+"/"+k] = v
			}
		}
		return out, nil
	}
}

// measuresKL reports whether the gate measures the KL to the parent on a
// hold-out example (regression false) or a regression-suite example:
// where nothing was meant to change, the regression suite and the
// hold-out's good answers, not its corrected answers (a correction's
// target), which are.
func measuresKL(ex *Example, regression bool) bool {
	return regression || len(ex.TargetTokens) == 0
}

// MeanKL is the exact mean per-token KL(candidate ‖ parent) over the
// evaluation targets' completion positions of exs (the full next-token
// distributions, not a sample estimate). Sequences run packed, 16 at a
// time.
func MeanKL(ctx context.Context, m *model.Model, cand, parent *model.Adapter, exs []Example, good float64) (float64, error) {
	V := m.Config.VocabSize
	var total float64
	var n int
	err := evalChunks(ctx, m, exs, good, func(chunk []*Example, _ []int) error {
		rows, _, lc, lp, err := chunkLogits(m, chunk, cand, parent)
		if err != nil {
			return err
		}
		for _, r := range rows {
			for t := r[0]; t < r[1]; t++ {
				total += klRow(lc[t*V:(t+1)*V], lp[t*V:(t+1)*V])
				n++
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, nil
	}
	return total / float64(n), nil
}

// chunkLogits packs chunk (packChunk) and returns its completion rows,
// the token each row predicts, and the logits of cand (lc) and of parent
// (lp) at those rows.
func chunkLogits(m *model.Model, chunk []*Example, cand, parent *model.Adapter) (rows [][2]int, ys []int, lc, lp []float32, err error) {
	b, rows, ys := packChunk(chunk)
	if lc, err = m.TargetLogits(b, cand); err != nil {
		return nil, nil, nil, nil, err
	}
	if lp, err = m.TargetLogits(b, parent); err != nil {
		return nil, nil, nil, nil, err
	}
	return rows, ys, lc, lp, nil
}

// gateLogLikelihood is the offline gate's evidence under the default
// evaluator in one pass: for each packed chunk of the scored examples of
// hold and then regression, the candidate's and the parent's logits once,
// and from them
//
//   - candEval and parentEval: what LogLikelihood(good) returns for cand
//     and for parent on hold, with the keys of its scores on regression
//     added prefixed "regression/" (as Distiller.evaluate returns them);
//   - kl: MeanKL(cand ‖ parent) over the examples that measuresKL (hold's
//     without a correction target, and regression).
//
// The results are LogLikelihood's and MeanKL's up to float rounding: the
// KL's terms are MeanKL's (klRow's), summed per sequence first; a
// log-probability here is the target's logit minus the row's log-sum-exp
// in float64 (math.Exp) where the model's uses its float32 exponential,
// which moves a score by a few parts in 1e9
// (TestGateOnePassMatchesEvaluators).
func gateLogLikelihood(ctx context.Context, m *model.Model, cand, parent *model.Adapter, hold, regression []Example, good float64) (candEval, parentEval map[string]float64, kl float64, err error) {
	V := m.Config.VocabSize
	exs := append(append(make([]Example, 0, len(hold)+len(regression)), hold...), regression...)
	var llc, llp keyMeans
	var total float64
	var n int
	err = evalChunks(ctx, m, exs, good, func(chunk []*Example, idx []int) error {
		rows, ys, lc, lp, err := chunkLogits(m, chunk, cand, parent)
		if err != nil {
			return err
		}
		// Per sequence, in parallel: the sums of the candidate's and the
		// parent's log-probabilities of its target and of the KL, added up
		// in order after, so the result does not depend on the schedule.
		type sums struct {
			key     string
			kl      bool
			c, p, d float64
			n       int
		}
		seqs := make([]sums, len(chunk))
		var wg sync.WaitGroup
		for k, ex := range chunk {
			reg := idx[k] >= len(hold)
			seqs[k] = sums{key: ex.Type, kl: measuresKL(ex, reg), n: rows[k][1] - rows[k][0]}
			if reg {
				seqs[k].key = "regression/" + ex.Type
			}
			wg.Add(1)
			go func(s *sums, lo, hi int) {
				defer wg.Done()
				var c, p, d float64
				for t := lo; t < hi; t++ {
					rc, rp, y := lc[t*V:(t+1)*V], lp[t*V:(t+1)*V], ys[t]
					zc, zp := logSumExp(rc), logSumExp(rp)
					// Rounded to float32 as the model's log-probabilities
					// are, which LogLikelihood averages.
					c += float64(float32(float64(rc[y]) - zc))
					p += float64(float32(float64(rp[y]) - zp))
					if s.kl {
						d += klRowLSE(rc, rp, zc, zp)
					}
				}
				s.c, s.p, s.d = c, p, d
			}(&seqs[k], rows[k][0], rows[k][1])
		}
		wg.Wait()
		for _, s := range seqs {
			llc.addN(s.key, s.c, s.n)
			llp.addN(s.key, s.p, s.n)
			if s.kl {
				total += s.d
				n += s.n
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, 0, err
	}
	if n > 0 {
		kl = total / float64(n)
	}
	return llc.means(), llp.means(), kl, nil
}

// logSumExp is log Σ exp(x[i]), in float64.
func logSumExp(x []float32) float64 {
	mx := math.Inf(-1)
	for _, v := range x {
		if f := float64(v); f > mx { // a NaN makes the sum NaN below
			mx = f
		}
	}
	s := 0.0
	for _, v := range x {
		s += math.Exp(float64(v) - mx)
	}
	return mx + math.Log(s)
}

// klRow is KL(softmax(p) ‖ softmax(q)) of two logit rows.
func klRow(p, q []float32) float64 {
	return klRowLSE(p, q, logSumExp(p), logSumExp(q))
}

// klRowLSE is klRow given zp = logSumExp(p) and zq = logSumExp(q).
func klRowLSE(p, q []float32, zp, zq float64) float64 {
	kl := 0.0
	for i := range p {
		lpi := float64(p[i]) - zp
		kl += math.Exp(lpi) * (lpi - (float64(q[i]) - zq))
	}
	return math.Max(kl, 0)
}

// GateConfig is the offline gate's policy.
type GateConfig struct {
	// MaxRegression: the candidate is rejected when any key's score is
	// more than this below the parent's (default 0.05; for the default
	// log-likelihood evaluator that is nats per token). It is the
	// tolerance of a key scored on at least RefExamples examples; see
	// DecideCounts for smaller ones.
	MaxRegression float64
	// RefExamples is the evaluation-set size at which a key's tolerance is
	// MaxRegression (default 32). A key scored on n < RefExamples examples
	// gets MaxRegression·sqrt(RefExamples/n): a mean over few answers
	// moves by chance about 1/sqrt(n) as much, and a fixed tolerance on
	// two or three hold-out answers rejects candidates on noise.
	RefExamples int
	// KLBudget: the candidate is rejected when its mean per-token KL to
	// the parent exceeds this (default 0.5 nats). The Distiller measures it
	// on the hold-out's good answers and the regression suite, not on the
	// corrected answers (which are meant to change).
	KLBudget float64
	// MaxSuiteLoss: the candidate is rejected when, on a task type of the
	// regression suite (Config.Suite), it answers more than MaxSuiteLoss·N
	// of the type's N questions fewer right than its parent or than the
	// base (default 0.02, two questions in 100: a smaller loss is within
	// what learning one fact cost the embedded model's arithmetic and
	// unit conversion in every bench learn candidate, 1 to 3 points on
	// 300 questions, and a 300-question suite measures it with a standard
	// error of about 2 points).
	MaxSuiteLoss float64
}

func (g *GateConfig) defaults() {
	if g.MaxRegression == 0 {
		g.MaxRegression = 0.05
	}
	if g.KLBudget == 0 {
		g.KLBudget = 0.5
	}
	if g.RefExamples == 0 {
		g.RefExamples = 32
	}
	if g.MaxSuiteLoss == 0 {
		g.MaxSuiteLoss = 0.02
	}
}

// Tolerance is the regression a key scored on n examples may show: the
// MaxRegression scaled by sqrt(RefExamples/n) below RefExamples (n <= 0:
// MaxRegression, as for a key of unknown size).
func (g GateConfig) Tolerance(n int) float64 {
	g.defaults()
	if n <= 0 || n >= g.RefExamples {
		return g.MaxRegression
	}
	return g.MaxRegression * math.Sqrt(float64(g.RefExamples)/float64(n))
}

// countOf is counts[k], else the count of k without an evaluator's name
// ("ll/policy" -> "policy", "regression/ll/policy" -> "regression/policy",
// the keys of Combine).
func countOf(counts map[string]int, k string) int {
	if n, ok := counts[k]; ok {
		return n
	}
	pre, rest := "", k
	if r, ok := strings.CutPrefix(k, "regression/"); ok {
		pre, rest = "regression/", r
	}
	if _, typ, ok := strings.Cut(rest, "/"); ok {
		return counts[pre+typ]
	}
	return 0
}

// Decide applies the gate with the fixed tolerance MaxRegression for
// every key: accepted, or the reasons for rejection.
func (g GateConfig) Decide(cand, parent map[string]float64, kl float64) (bool, string) {
	return g.DecideCounts(cand, parent, nil, kl)
}

// DecideCounts applies the gate with each key's tolerance scaled by the
// number of examples it was scored on (counts[key]; see Tolerance; a key
// without a count gets MaxRegression): accepted with an empty reason, or
// the reasons for rejection.
func (g GateConfig) DecideCounts(cand, parent map[string]float64, counts map[string]int, kl float64) (bool, string) {
	return g.Verdict(g.Reasons(cand, parent, counts, kl))
}

// Reasons are the gate's reasons to reject a candidate on its scores
// (DecideCounts) and KL: none when it passes.
func (g GateConfig) Reasons(cand, parent map[string]float64, counts map[string]int, kl float64) []string {
	g.defaults()
	var reasons []string
	for _, k := range slices.Sorted(maps.Keys(parent)) {
		c, ok := cand[k]
		switch {
		case !ok:
			reasons = append(reasons, fmt.Sprintf("%s: no candidate score", k))
			continue
		case !finite(c) || !finite(parent[k]):
			// A NaN compares false with every tolerance: it would pass.
			reasons = append(reasons, fmt.Sprintf("%s: score not a finite number (parent %v, candidate %v)", k, parent[k], c))
			continue
		}
		cnt := countOf(counts, k)
		if tol := g.Tolerance(cnt); c < parent[k]-tol {
			n := ""
			if cnt > 0 {
				n = fmt.Sprintf(" on %d", cnt)
			}
			reasons = append(reasons, fmt.Sprintf("%s regressed %.4f -> %.4f%s (max %.4f)", k, parent[k], c, n, tol))
		}
	}
	if !finite(kl) {
		reasons = append(reasons, fmt.Sprintf("KL to parent %v is not a finite number", kl))
	} else if kl > g.KLBudget {
		reasons = append(reasons, fmt.Sprintf("KL to parent %.4f over budget %.4f", kl, g.KLBudget))
	}
	if len(parent) == 0 {
		reasons = append(reasons, "no offline evidence (empty hold-out and regression suite)")
	}
	return reasons
}

// Verdict turns the reasons to reject (Reasons, SuiteReasons) into the
// gate's decision: accepted with an empty reason when there are none, else
// rejected with them ("gate: ...").
func (g GateConfig) Verdict(reasons []string) (bool, string) {
	if len(reasons) == 0 {
		return true, ""
	}
	reasons = slices.Sorted(slices.Values(reasons))
	return false, "gate: " + strings.Join(reasons, "; ")
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// evalCounts is the number of scored examples (scoredTarget: a good or
// corrected answer that fits the context of maxPos positions) per task
// type in the hold-out and, prefixed "regression/", in the regression
// suite: the sizes the gate scales its tolerance by.
func evalCounts(hold, regression []Example, good float64, maxPos int) map[string]int {
	out := map[string]int{}
	count := func(exs []Example, prefix string) {
		for i := range exs {
			if scoredTarget(&exs[i], good, maxPos) != nil {
				out[prefix+exs[i].Type]++
			}
		}
	}
	count(hold, "")
	count(regression, "regression/")
	return out
}

// gateEvidence is what the offline gate compares: cand's and parent's
// scores on the hold-out and the regression suite (evaluate) and the mean
// KL(cand ‖ parent) where nothing was meant to change (measuresKL). With
// the default evaluator (Config.Evaluator nil) it is one pass over both
// models (gateLogLikelihood); with another, the Evaluator for each and
// MeanKL.
func (d *Distiller) gateEvidence(ctx context.Context, cand, parent *model.Adapter, hold []Example) (candEval, parentEval map[string]float64, kl float64, err error) {
	cfg := d.cfg
	if cfg.Evaluator == nil {
		return gateLogLikelihood(ctx, cfg.Base, cand, parent, hold, cfg.Regression, cfg.Pipeline.GoodReward)
	}
	if candEval, err = d.evaluate(ctx, cand, hold); err != nil {
		return nil, nil, 0, err
	}
	if parentEval, err = d.evaluate(ctx, parent, hold); err != nil {
		return nil, nil, 0, err
	}
	var klSet []Example
	for i := range hold {
		if measuresKL(&hold[i], false) {
			klSet = append(klSet, hold[i])
		}
	}
	klSet = append(klSet, cfg.Regression...)
	if kl, err = MeanKL(ctx, cfg.Base, cand, parent, klSet, cfg.Pipeline.GoodReward); err != nil {
		return nil, nil, 0, err
	}
	return candEval, parentEval, kl, nil
}

// evaluate scores an adapter with cfg.Evaluator (non-nil) on the hold-out
// and the regression suite.
func (d *Distiller) evaluate(ctx context.Context, a *model.Adapter, hold []Example) (map[string]float64, error) {
	out, err := d.cfg.Evaluator(ctx, d.cfg.Base, a, hold)
	if err != nil {
		return nil, err
	}
	if len(d.cfg.Regression) > 0 {
		r, err := d.cfg.Evaluator(ctx, d.cfg.Base, a, d.cfg.Regression)
		if err != nil {
			return nil, err
		}
		for k, v := range r {
			out["regression/"+k] = v
		}
	}
	return out, nil
}
