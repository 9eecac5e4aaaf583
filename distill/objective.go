package distill

import (
	"context"
	"fmt"
	"math"
	"strings"

	"citizen/model"
)

// Objective says what a cycle optimises; the parts combine.
//
//   - PolicyGradient: on every policy example's recorded completion
//     tokens, per-token weight = advantage × min(ImportanceCap,
//     exp(logp_current − logp_behaviour)), the ratio computed in the
//     training step's own forward pass of the policy being trained and
//     held constant (stop-gradient; model.Batch.BehaviourLogprobs).
//     Without recorded behaviour logprobs the ratio is 1.
//   - SelfDistill: revised answers (the teacher saw the correction, the
//     hint or a lesson; the student does not) are learnt with weight
//     SelfDistillWeight (FallbackWeight for a correction rendered as the
//     answer).
//   - Anchors (from the pipeline) are learnt with their weight.
//   - Rehearsal: the cycle's sample of the base's training conversations
//     (Dataset.Rehearsal, Config.Rehearsal) is learnt with weight
//     RehearsalWeight, Hyper.RehearsalSeqs of them beside every step's
//     batch (rehearsal.go says why).
//   - KLCoef > 0 adds the k3 KL term to the parent (the stable version) on
//     the completion tokens of the examples that keep what the parent
//     said (anchors and recorded answers without feedback), with the
//     parent's logprobs as RefLogprobs. A corrected example (a recorded
//     answer that drew a correction, or its revision) is meant to move its
//     tokens away from the parent, and the KL term would pull exactly
//     those back: it gets none unless KLOnCorrected is set.
type Objective struct {
	PolicyGradient bool
	ImportanceCap  float64 // c of the truncated ratio (default 2)
	SelfDistill    bool
	// SelfDistillWeight weighs a teacher's revision that was checked (it
	// states the correction, or Revise passed it), and an answer that
	// consolidates a lesson; default 6: a correction is rare in a window
	// and has to outweigh what pretraining said (docs/benchmarks/distill.md).
	SelfDistillWeight float64
	// CorrectionFallback: when the teacher's revision does not contain the
	// correction, learn the correction itself rendered as the answer
	// (CorrectionTemplate) instead of dropping the example.
	CorrectionFallback bool
	// FallbackWeight weighs a correction fallback (default 2): a rendering
	// of the correction, not the model's own words. With the fallbacks at
	// 6 as well, the tiny model's cycle test lost 0.06 nats/token on
	// another type and an inverted-reward candidate passed the gate.
	FallbackWeight float64
	// OneOffWeight weighs the revision or fallback of a one-off
	// correction (default 1: as much as any recorded good answer): one
	// that states no promoted lesson's value (Example.Lesson), such as the
	// right sum for one arithmetic question. The weights above are for
	// what customers established; memorising single answers at 6 costs
	// other types accuracy.
	OneOffWeight float64
	KLCoef       float64
	// Rehearsal learns the cycle's rehearsal sample; RehearsalWeight
	// weighs it (default 1.5). RehearsalMargin selects what is rehearsed:
	// the conversations whose answer the base wins by less than this many
	// nats at some token (its logit over the best other token's), or
	// gets wrong (default 1; negative: every conversation). Those are the
	// answers an adapter update flips; the base wins the rest of its data
	// by more than that at every token, and rehearsing those gives next
	// to no gradient (rehearsal.go).
	Rehearsal       bool
	RehearsalWeight float64
	RehearsalMargin float64
	// KLOnCorrected applies the KL term to corrected examples too (see
	// correctedExample). Off by default: with it, the k3 term works
	// against exactly the tokens the revisions teach.
	KLOnCorrected bool
}

// correctedExample reports whether ex carries a correction, which says
// what the answer should be (the recorded answer that drew it, or its
// revision), or consolidates a lesson (a revised answer with a lesson
// behind it). A revision from a hint alone is the teacher's guess,
// checked by no one unless Config.Revise is set: it keeps the KL term.
func correctedExample(ex *Example) bool {
	return ex.Correction != "" || ex.Kind == KindRevised && (ex.Lesson != "" || len(ex.Lessons) > 0)
}

// klExempt reports whether the KL term leaves ex out: a corrected
// example (unless KLOnCorrected), and a rehearsed one, whose answer is
// the base's training data, not the parent's.
func (o Objective) klExempt(ex *Example) bool {
	return o.KLCoef > 0 && (ex.Kind == KindRehearsal || !o.KLOnCorrected && correctedExample(ex))
}

// noReference is the reference of a sequence of n tokens that the KL term
// leaves out: NaN at every position (model.Batch.RefLogprobs).
func noReference(n int) []float32 {
	r := make([]float32, n)
	for i := range r {
		r[i] = float32(math.NaN())
	}
	return r
}

// DefaultObjective is policy gradient + self-distillation (with the
// correction fallback) + the KL term at 0.5 + rehearsal (when the
// distiller has rehearsal cases). On the learning test's tiny
// model, policy gradient alone lowered the hold-out log-likelihood of
// another type's good answers by 0.15 nats/token (it fits the training
// prompts' answers); KLCoef 0.05 left 0.04-0.07 of that (the gate rejected
// 3 of 5 seeds), 0.5 about 0.02 while the corrected type still gained 0.35
// (docs/benchmarks/distill.md).
func DefaultObjective() Objective {
	return Objective{PolicyGradient: true, SelfDistill: true, CorrectionFallback: true, KLCoef: 0.5, Rehearsal: true}
}

func (o *Objective) defaults() {
	if o.ImportanceCap <= 0 {
		o.ImportanceCap = 2
	}
	if o.SelfDistillWeight <= 0 {
		o.SelfDistillWeight = 6
	}
	if o.FallbackWeight <= 0 {
		o.FallbackWeight = 2
	}
	if o.OneOffWeight <= 0 {
		o.OneOffWeight = 1
	}
	if o.RehearsalWeight <= 0 {
		o.RehearsalWeight = 1.5
	}
	if o.RehearsalMargin == 0 {
		o.RehearsalMargin = 1
	}
}

// Name is a short description for lineage, e.g. "pg+sd+anchors+kl".
func (o Objective) Name() string {
	var parts []string
	if o.PolicyGradient {
		parts = append(parts, "pg")
	}
	if o.SelfDistill {
		parts = append(parts, "sd")
	}
	parts = append(parts, "anchors")
	if o.KLCoef > 0 {
		parts = append(parts, "kl")
	}
	if o.Rehearsal {
		parts = append(parts, "rehearsal")
	}
	return strings.Join(parts, "+")
}

// uses reports whether the objective trains on an example of this kind.
func (o Objective) uses(kind string) bool {
	switch kind {
	case KindPolicy:
		return o.PolicyGradient
	case KindRevised:
		return o.SelfDistill
	case KindAnchor:
		return true
	case KindRehearsal:
		return o.Rehearsal
	}
	return false
}

// tokenWeights returns the per-token loss weights of ex's completion
// (index j is CompletionTokens[j]); a policy example's importance ratio
// is the batch's (Objective.batch), applied in the loss.
func (o Objective) tokenWeights(ex *Example) []float32 {
	w := make([]float32, len(ex.CompletionTokens))
	var k float64
	switch ex.Kind {
	case KindPolicy:
		k = ex.Advantage
	case KindRevised:
		k = o.SelfDistillWeight
	case KindRehearsal:
		k = o.RehearsalWeight
	default:
		k = 1
	}
	for j := range w {
		w[j] = float32(k * weightOr1(ex.Weight))
	}
	return w
}

func weightOr1(w float64) float64 {
	if w == 0 {
		return 1
	}
	return w
}

// batch packs examples: loss on the completion tokens only, weights from
// the objective, a policy example's behaviour logprobs for its truncated
// importance ratio, and reference logprobs (aligned with each full
// sequence) for the KL term when ref is not nil.
func (o Objective) batch(exs []*Example, ref [][]float32) (*model.Batch, error) {
	b := &model.Batch{RatioCap: float32(o.ImportanceCap)}
	for i, ex := range exs {
		seq := ex.Sequence()
		P := len(ex.PromptTokens)
		mask := make([]bool, len(seq))
		weights := make([]float32, len(seq))
		tw := o.tokenWeights(ex)
		for j := range ex.CompletionTokens {
			mask[P+j] = true
			weights[P+j] = tw[j]
		}
		var r []float32
		if o.KLCoef > 0 {
			if ref == nil || len(ref[i]) != len(seq) {
				return nil, fmt.Errorf("distill: KL term needs reference logprobs for every sequence")
			}
			r = ref[i]
		}
		b.AddSequence(seq, mask, weights, r, 1)
		if ex.Kind == KindPolicy && len(ex.BehaviourLogprobs) == len(ex.CompletionTokens) {
			beh := noReference(len(seq))
			copy(beh[P:], ex.BehaviourLogprobs)
			b.AddBehaviour(beh)
		}
	}
	if o.KLCoef > 0 {
		b.KLCoef = float32(o.KLCoef)
	}
	return b, nil
}

// completionLogprobs returns, per example, the model's logprobs of the
// completion tokens (and, when full, of the whole sequence aligned with
// it). Sequences run in packed chunks of at most chunk.
func completionLogprobs(ctx context.Context, m *model.Model, a *model.Adapter, exs []*Example, chunk int) (comp, full [][]float32, err error) {
	comp = make([][]float32, len(exs))
	full = make([][]float32, len(exs))
	for lo := 0; lo < len(exs); lo += chunk {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		hi := min(lo+chunk, len(exs))
		seqs := make([][]int, 0, hi-lo)
		for _, ex := range exs[lo:hi] {
			seqs = append(seqs, ex.Sequence())
		}
		lps, err := m.SequenceLogprobs(seqs, a)
		if err != nil {
			return nil, nil, err
		}
		for k, lp := range lps {
			ex := exs[lo+k]
			full[lo+k] = lp
			comp[lo+k] = lp[len(ex.PromptTokens):]
		}
	}
	return comp, full, nil
}
