package distill

import (
	"context"
	"fmt"

	"citizen/events"
	"citizen/internal/statement"
	"citizen/model"
	"citizen/model/chat"
)

// maxCorrectionChecks bounds the corrected hold-out examples the check
// asks, and separately the stale questions (each costs a greedy answer
// per model).
const maxCorrectionChecks = 32

// correctionCheck asks the candidate and the parent (nil: the base),
// greedily, two kinds of questions, at most maxCorrectionChecks of each:
//
//   - the hold-out's corrected questions whose correction replaces a
//     statement most of its type's corrections replaced (replaced,
//     Manifest.Replaced: what the cycle teaches at full weight; a one-off
//     correction is not expected to be learnt), counting the answers
//     that state the correction as the corrected answer would
//     (correctedAnswer: the recorded answer with the correction in place
//     of the span it corrects, or the correction itself);
//   - the stale questions (Dataset.Stale): questions whose recorded
//     answer states a changed fact and that drew no feedback, counting
//     the answers that state a replacement and none of the stale
//     statements (number-bounded: "60 days" and not "30 days"): the
//     newest half of them (staleSplit).
//
// Where Config.Revise checks an answer, one it rejects is not counted
// right ("No, the refund window is 60 days." for an item bought 45 days
// ago states the replacement and a verdict it made wrong).
//
// The first kind is the customers' own questions, one or two in the
// first cycles after a drift; the second is the newest questions the
// change made stale (staleSplit), which the training data leaves out
// (the older ones are learnt as updates: staleUpdates). In bench
// runs one or two held-out corrections could not tell a weak fix (73% of
// refund questions right once served) from a strong one (92%), and the
// weak one held the only canary slot for 1,600 conversations.
//
// It is evidence for the rollout (ordering waiting candidates and
// superseding a running one, rollout.Config.Order and Supersede), not
// part of the gate's decision: a candidate is trained on the parent's
// stable version, whose corrections it must not lose, which the
// log-likelihood scores already check.
func (d *Distiller) correctionCheck(ctx context.Context, version string, cand, parent *model.Adapter, hold []Example, replaced []string, stale []StaleQuestion) (*events.CorrectionCheck, error) {
	cfg := d.cfg
	if cfg.Chat == nil {
		return nil, nil
	}
	var asked []*Example
	for i := range hold {
		if hold[i].Correction != "" && len(hold[i].Answer.ToolCalls) == 0 && replacesFact(&hold[i], replaced) {
			asked = append(asked, &hold[i])
		}
	}
	asked = asked[max(0, len(asked)-maxCorrectionChecks):]
	_, stale = staleSplit(stale)
	if len(asked) == 0 && len(stale) == 0 {
		return nil, nil
	}
	candName := "distill-check-" + version
	if err := cfg.Chat.Engine.RegisterAdapter(candName, cand); err != nil {
		return nil, err
	}
	defer cfg.Chat.Engine.RemoveAdapter(candName)
	parentName := ""
	if parent != nil {
		parentName = "distill-check-parent-" + version
		if err := cfg.Chat.Engine.RegisterAdapter(parentName, parent); err != nil {
			return nil, err
		}
		defer cfg.Chat.Engine.RemoveAdapter(parentName)
	}
	out := &events.CorrectionCheck{N: len(asked), Stale: len(stale)}
	// ask counts, for the candidate and the parent, whether the greedy
	// answer to ex is right.
	ask := func(ex *Example, answerTokens int, candRight, parentRight *int, right func(answer string) bool) error {
		msgs, maxTokens := toTok(ex.Messages), max(answerTokens, 16)+8
		for _, m := range []struct {
			adapter string
			right   *int
		}{{candName, candRight}, {parentName, parentRight}} {
			c, err := cfg.Chat.Complete(ctx, chat.Request{Messages: msgs, MaxTokens: maxTokens, Adapter: m.adapter})
			if err != nil {
				return fmt.Errorf("correction check: %w", err)
			}
			if right(c.Message.Content) {
				*m.right++
			}
		}
		return nil
	}
	for _, ex := range asked {
		if err := ask(ex, len(ex.TargetTokens), &out.Candidate, &out.Parent, d.correctionRight(ex)); err != nil {
			return nil, err
		}
	}
	for i := range stale {
		q := &stale[i]
		right := func(a string) bool { return d.staleRight(q, a) }
		if err := ask(&q.Example, len(q.CompletionTokens), &out.StaleCandidate, &out.StaleParent, right); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// correctionRight says which answers to corrected ex the check counts
// right: those containing the corrected answer, or, when Config.Revise
// rejects that (an edit wrong beside the correction), those that state
// the correction and pass.
func (d *Distiller) correctionRight(ex *Example) func(answer string) bool {
	want, _ := d.correctedAnswer(ex)
	if d.rejects(ex, want) {
		return func(a string) bool { return containsFold(a, ex.Correction) && !d.rejects(ex, a) }
	}
	return func(a string) bool { return containsFold(a, want) }
}

// staleRight reports whether the check counts answer to q right: it
// states a replacement and none of the stale statements, and
// Config.Revise does not reject it.
func (d *Distiller) staleRight(q *StaleQuestion, answer string) bool {
	return q.answered(answer) && !d.rejects(&q.Example, answer)
}

// answered reports whether answer states a replacement of q's stale
// statements and none of them.
func (q *StaleQuestion) answered(answer string) bool {
	a := statement.Normalize(answer)
	for _, s := range q.Stale {
		if statement.Contains(a, s) {
			return false
		}
	}
	for _, r := range q.Replacements {
		if statement.Contains(a, r) {
			return true
		}
	}
	return false
}
