package distill

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"

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

// LogLikelihood is the default evaluator: per type, the mean per-token
// log-likelihood of the good answers and the corrected answers (reward of
// at least good, or a correction's target). Types with no such answer get
// no key.
func LogLikelihood(good float64) EvalFunc {
	return func(ctx context.Context, m *model.Model, a *model.Adapter, exs []Example) (map[string]float64, error) {
		sum, n := map[string]float64{}, map[string]int{}
		var batch []*Example
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			comp, _, err := completionLogprobs(m, a, batch, len(batch))
			if err != nil {
				return err
			}
			for i, ex := range batch {
				for _, lp := range comp[i] {
					sum[ex.Type] += float64(lp)
					n[ex.Type]++
				}
			}
			batch = batch[:0]
			return nil
		}
		for i := range exs {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			tgt := evalTarget(&exs[i], good)
			if tgt == nil || len(exs[i].PromptTokens) == 0 || len(exs[i].PromptTokens)+len(tgt) > m.Config.MaxPositionEmbeddings {
				continue
			}
			ex := exs[i]
			ex.CompletionTokens = tgt
			batch = append(batch, &ex)
			if len(batch) == 16 {
				if err := flush(); err != nil {
					return nil, err
				}
			}
		}
		if err := flush(); err != nil {
			return nil, err
		}
		out := map[string]float64{}
		for t, s := range sum {
			out[t] = s / float64(n[t])
		}
		return out, nil
	}
}

// Combine runs several evaluators and prefixes each one's keys with its
// name and a slash ("ll/policy", "acc/policy").
func Combine(evals map[string]EvalFunc) EvalFunc {
	return func(ctx context.Context, m *model.Model, a *model.Adapter, exs []Example) (map[string]float64, error) {
		out := map[string]float64{}
		for _, name := range sortedKeys(evals) {
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

// MeanKL is the exact mean per-token KL(candidate ‖ parent) over the
// evaluation targets' completion positions of exs (the full next-token
// distributions, not a sample estimate). Sequences run packed, 16 at a
// time.
func MeanKL(ctx context.Context, m *model.Model, cand, parent *model.Adapter, exs []Example, good float64) (float64, error) {
	V := m.Config.VocabSize
	var total float64
	var n int
	b := &model.Batch{}
	var starts []int // per packed sequence: the first completion position's predictor
	var lens []int
	flush := func() error {
		if len(starts) == 0 {
			return nil
		}
		lc, err := m.Logits(b, cand)
		if err != nil {
			return err
		}
		lp, err := m.Logits(b, parent)
		if err != nil {
			return err
		}
		off := 0
		for k, P := range starts {
			for t := off + P - 1; t < off+lens[k]-1; t++ {
				total += klRow(lc[t*V:(t+1)*V], lp[t*V:(t+1)*V])
				n++
			}
			off += lens[k]
		}
		b, starts, lens = &model.Batch{}, starts[:0], lens[:0]
		return nil
	}
	for i := range exs {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		tgt := evalTarget(&exs[i], good)
		if tgt == nil || len(exs[i].PromptTokens) == 0 || len(exs[i].PromptTokens)+len(tgt) > m.Config.MaxPositionEmbeddings {
			continue
		}
		seq := append(append([]int(nil), exs[i].PromptTokens...), tgt...)
		b.AddSequence(seq, nil, nil, nil, 1)
		starts, lens = append(starts, len(exs[i].PromptTokens)), append(lens, len(seq))
		if len(starts) == 16 {
			if err := flush(); err != nil {
				return 0, err
			}
		}
	}
	if err := flush(); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, nil
	}
	return total / float64(n), nil
}

// klRow is KL(softmax(p) ‖ softmax(q)) of two logit rows.
func klRow(p, q []float32) float64 {
	lse := func(x []float32) float64 {
		mx := math.Inf(-1)
		for _, v := range x {
			mx = math.Max(mx, float64(v))
		}
		s := 0.0
		for _, v := range x {
			s += math.Exp(float64(v) - mx)
		}
		return mx + math.Log(s)
	}
	zp, zq := lse(p), lse(q)
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
	// ForceAccept accepts every candidate that trained, recording what the
	// gate would have said in the reason ("forced; gate: ..."). A test
	// hook: the rollback test needs a bad candidate (InvertRewards) to
	// reach the canary. Never set it in production.
	ForceAccept bool
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
// without a count gets MaxRegression): accepted, or the reasons for
// rejection.
func (g GateConfig) DecideCounts(cand, parent map[string]float64, counts map[string]int, kl float64) (bool, string) {
	g.defaults()
	var reasons []string
	keys := sortedKeys(parent)
	for _, k := range keys {
		c, ok := cand[k]
		if !ok {
			reasons = append(reasons, fmt.Sprintf("%s: no candidate score", k))
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
	if kl > g.KLBudget {
		reasons = append(reasons, fmt.Sprintf("KL to parent %.4f over budget %.4f", kl, g.KLBudget))
	}
	if len(parent) == 0 {
		reasons = append(reasons, "no offline evidence (empty hold-out and regression suite)")
	}
	if len(reasons) == 0 {
		return true, ""
	}
	sort.Strings(reasons)
	if g.ForceAccept {
		return true, "forced; gate: " + strings.Join(reasons, "; ")
	}
	return false, "gate: " + strings.Join(reasons, "; ")
}
