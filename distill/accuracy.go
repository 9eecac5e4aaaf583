package distill

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"citizen/events"
	"citizen/model"
	"citizen/model/chat"
)

// Grade judges an answer to an example's prompt: a score in [0, 1] and
// whether the grader could judge it at all (a checker for the type, a
// known right answer).
type Grade func(ex Example, answer events.ChatMessage) (score float64, ok bool)

var evalSeq atomic.Uint64

// Accuracy is the grader-based evaluator hook: it answers every example's
// prompt greedily with cm (its engine must run the same base model; the
// adapter is registered on it for the call) and returns per type the mean
// score of the answers grade could judge. Wire the graders that know the
// task types (reflection's, the workplace's checkers) through grade.
func Accuracy(cm *chat.Model, maxTokens int, grade Grade) EvalFunc {
	if maxTokens <= 0 {
		maxTokens = 96
	}
	return func(ctx context.Context, _ *model.Model, a *model.Adapter, exs []Example) (map[string]float64, error) {
		name := ""
		if a != nil {
			name = fmt.Sprintf("distill-eval-%d", evalSeq.Add(1))
			if err := cm.Engine.RegisterAdapter(name, a); err != nil {
				return nil, err
			}
			defer cm.Engine.RemoveAdapter(name)
		}
		sum, n := map[string]float64{}, map[string]int{}
		for _, ex := range exs {
			c, err := cm.Complete(ctx, chat.Request{Messages: toTok(ex.Messages), MaxTokens: maxTokens, Adapter: name})
			if errors.Is(err, chat.ErrPromptTooLong) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if s, ok := grade(ex, fromTok(c.Message)); ok {
				sum[ex.Type] += s
				n[ex.Type]++
			}
		}
		out := map[string]float64{}
		for t, s := range sum {
			out[t] = s / float64(n[t])
		}
		return out, nil
	}
}
