package distill

import (
	"slices"

	"citizen/events"
	"citizen/internal/statement"
	"citizen/model/chat"
)

// staleSplit divides the stale questions (Dataset.Stale, store order)
// into the older ones, which the cycle learns as updates (staleUpdates),
// and the newest half (rounded up), at most maxCorrectionChecks, which
// the correction check asks. The check's questions are always the
// newest, and the split point (the learnt count) never falls as
// questions arrive, so no version was trained on a question a later
// cycle's check asks: questions only move from the check to the training
// data as newer ones arrive.
//
// Half, not all, while there are fewer than twice maxCorrectionChecks:
// the first cycles after a drift see 20-40 stale answers, and when the
// check asked all of them the first fix learnt none. In bench learn's
// thirteenth-session runs two first fixes, each with a check of 31-32
// stale questions and so few or no updates, answered 21 and 24 of them
// right; each gave way in its first step to a later fix at 32 of 32,
// whose first step started over, and one of those drifts recovered
// after 2,200 conversations. Sixteen questions still tell a fix that
// learnt the change (most right) from one that did not (a few).
func staleSplit(stale []StaleQuestion) (learn, ask []StaleQuestion) {
	n := len(stale) - min(maxCorrectionChecks, len(stale)-len(stale)/2)
	return stale[:n], stale[n:]
}

// staleUpdates renders stale questions as training examples
// (KindUpdated): the recorded answer with each changed fact it states
// replaced by what customers' corrections replaced it with ("No, the
// refund window is 30 days." becomes "No, the refund window is 60
// days."). Only the tokens from the first changed one on are learnt
// (Example.LossFrom): the words before it are the recorded answer's, and
// whether they are still right in the changed world (the verdict "No"
// for an item bought 45 days ago, now inside the window) is what no
// correction said. Exact duplicates (same prompt, same updated answer)
// are kept once; a question whose answer cannot be updated (the
// replacement matches no span, or more than one) is left out.
//
// A drift reaches the data as a few corrections: in bench learn's
// slowest seed the first three cycles that knew "policy: 30 days" had
// changed had one or two of them, and their candidates answered 1, 0
// and 11 of 32 stale questions right. Every answer the store holds that
// states the old fact says, updated, what the corrections taught, on
// another question.
//
// At most limit updates are kept, the newest (limit <= 0: all), and they
// share weight total: each weighs total/n, at most each. Every update
// teaches the same few tokens ("60 days."), and the pull they add up to
// reaches other types' answers that put a number after "is": at 6 each,
// up to 25 a cycle, the gate rejected 6 of 11 candidates of a seed-2
// run for arithmetic and unit conversion, the first fix among them.
//
// revise, when not nil, vets an updated answer and may replace it
// (Config.Revise: "No, the refund window is 60 days." for an item bought
// 45 days ago goes to the teacher, whose "Yes, the refund window is 60
// days." replaces it); it is asked only about the updates kept. An
// answer it vetted (a check applied and passed: the verdict follows from
// the new window) is learnt whole, the verdict included; the others from
// the replacement on. Learning only the revised verdicts would teach
// one side: in a replay of bench learn's seed-7 first fix, revised
// "Yes" answers beside updates whose "No" was context only made the
// candidate say "Yes" for 54 items bought 60 days ago or more, of 500
// fresh refund questions (1 without the check; 10 with vetted updates
// learnt whole).
func staleUpdates(tok chat.Format, stale []StaleQuestion, maxSeqLen, limit int, each, total float64, revise func(q *StaleQuestion, updated string) (string, bool)) []Example {
	var out []Example
	seen := map[[32]byte]bool{}
	for i := len(stale) - 1; i >= 0 && (limit <= 0 || len(out) < limit); i-- { // the newest first
		q := &stale[i]
		content, ok := updatedAnswer(q)
		if !ok {
			continue
		}
		vetted := false
		if revise != nil {
			content, vetted = revise(q, content)
		}
		ids, err := answerTokens(tok, q.Messages, content)
		if err != nil || maxSeqLen > 0 && len(q.PromptTokens)+len(ids) > maxSeqLen {
			continue
		}
		recorded, err := answerTokens(tok, q.Messages, q.Answer.Content)
		if err != nil {
			continue
		}
		h := tokenHash(q.PromptTokens, ids)
		if seen[h] {
			continue
		}
		seen[h] = true
		ex := q.Example
		ex.Kind, ex.Advantage, ex.BehaviourLogprobs, ex.TargetTokens = KindUpdated, 0, nil, nil
		ex.Answer = events.ChatMessage{Role: "assistant", Content: content}
		ex.CompletionTokens, ex.LossFrom = ids, sharedPrefix(ids, recorded)
		if vetted {
			ex.LossFrom = 0
		}
		out = append(out, ex)
	}
	slices.Reverse(out) // store order: the newest last
	for i := range out {
		out[i].Weight = min(each, total/float64(len(out)))
	}
	return out
}

// updatedAnswer is q's recorded answer with each stale statement replaced
// by its replacement (editAnswer), when every replacement found its one
// span and the result states none of the stale statements.
func updatedAnswer(q *StaleQuestion) (string, bool) {
	content := q.Answer.Content
	for i, r := range q.Replacements {
		if statement.Contains(statement.Normalize(content), q.Stale[i]) {
			e, ok := editAnswer(content, r)
			if !ok {
				return "", false
			}
			content = e
		}
	}
	n := statement.Normalize(content)
	for _, s := range q.Stale {
		if statement.Contains(n, s) {
			return "", false
		}
	}
	return content, content != q.Answer.Content
}

// defaultUpdateWeight and defaultUpdateTotal are Objective.UpdateWeight's
// and Objective.UpdateTotal's defaults (their docs say why).
const (
	defaultUpdateWeight = 6
	defaultUpdateTotal  = 48
)
