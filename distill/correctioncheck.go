package distill

import (
	"context"
	"fmt"

	"citizen/events"
	"citizen/model"
	"citizen/model/chat"
)

// maxCorrectionChecks bounds the corrected hold-out examples the check
// asks (each costs a greedy answer per model).
const maxCorrectionChecks = 32

// correctionCheck asks the candidate and the parent (nil: the base) the
// hold-out's corrected questions whose correction replaces a statement
// most of its type's corrections replaced (replaced, Manifest.Replaced:
// what the cycle teaches at full weight; a one-off correction is not
// expected to be learnt), greedily, and counts the answers that state the
// correction as the corrected answer would (correctedAnswer: the recorded
// answer with the correction in place of the span it corrects, or the
// correction itself): the most recent maxCorrectionChecks of them. It is
// evidence for choosing among waiting candidates (rollout.Config.Order
// "best"), not part of the gate's decision: on a few examples one answer
// more or less is noise, and a candidate is trained on the parent's stable
// version, whose corrections it must not lose, which the log-likelihood
// scores already check.
func (d *Distiller) correctionCheck(ctx context.Context, version string, cand, parent *model.Adapter, hold []Example, replaced []string) (*events.CorrectionCheck, error) {
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
	if len(asked) == 0 {
		return nil, nil
	}
	asked = asked[max(0, len(asked)-maxCorrectionChecks):]
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
	out := &events.CorrectionCheck{N: len(asked)}
	for _, ex := range asked {
		want, _ := d.correctedAnswer(ex)
		msgs, maxTokens := toTok(ex.Messages), max(len(ex.TargetTokens), 16)+8
		for _, m := range []struct {
			adapter string
			right   *int
		}{{candName, &out.Candidate}, {parentName, &out.Parent}} {
			c, err := cfg.Chat.Complete(ctx, chat.Request{Messages: msgs, MaxTokens: maxTokens, Adapter: m.adapter})
			if err != nil {
				return nil, fmt.Errorf("correction check: %w", err)
			}
			if containsFold(c.Message.Content, want) {
				*m.right++
			}
		}
	}
	return out, nil
}
