package distill

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"slices"

	"citizen/events"
	"citizen/model"
	"citizen/model/chat"
)

// Rehearsal: every cycle rehearses a sample of the base model's own
// training data beside its window's examples (the pretraining mix of
// InstructGPT's PPO-ptx), so that the update moves within what the base
// already knows instead of away from it.
//
// Why: any adapter update of the size a fix needs (a changed fact)
// flips the answers the embedded base only just gets right: a
// third of its right arithmetic answers win by under half a nat. A
// random update of the same KL loses as many, and a KL term, which is
// quadratic near the parent, barely resists 0.1-nat shifts. Rehearsing
// the base's training conversations (the right answers it was fitted to)
// pulls those answers back towards the pretraining optimum.
//
// What is rehearsed: the near-ties, the conversations whose answer the
// base wins by under Objective.RehearsalMargin (1 nat) at some token or
// gets wrong, by the margins the file records (citizen pretrain measures
// them) or the first rehearsing cycle measures (prepareRehearsal). A
// uniform sample spent most of its slots on classifications and JSON the
// base wins by many nats, whose loss, and so gradient, is next to
// nothing; the same 8 conversations per step drawn from the near-ties
// protect at least as much at half the weight. How hard rehearsal may
// pull is limited by the fixes: the first fix after a drift is learnt
// from a few corrections, and a rehearsal weighted to protect most
// outweighs them.
//
// A type of the lessons the cycle consolidates (Manifest.LessonTypes) is
// left out of the rehearsal: the base's data states the facts the
// lessons corrected, and rehearsing it would undo the fix.

// KindRehearsal is a conversation of the base's training data, rehearsed
// against forgetting (Dataset.Rehearsal; not in Train).
const KindRehearsal = "rehearsal"

// RehearsalCase is one conversation of the base's training data: a task
// type and messages ending with the assistant's answer, which is what is
// rehearsed (the earlier turns are its prompt).
type RehearsalCase struct {
	Type     string               `json:"type"`
	Messages []events.ChatMessage `json:"messages"`
	// Margin is the base's smallest margin along the answer, in nats (at
	// each answer token, its logit over the best other token's; negative
	// where the base would answer otherwise), as MeasureRehearsal records
	// it with the checkpoint. Nil: not measured; the distiller's first
	// rehearsing cycle measures it (13-30 s for 6,000 conversations of
	// the embedded base on 2 cores, which is why citizen pretrain
	// records it).
	Margin *float64 `json:"margin,omitempty"`
}

// RehearsalFile is the name of a base checkpoint's rehearsal sample
// (services reads <checkpoint>/rehearsal.jsonl by default) and of a
// dataset's rehearsed examples.
const RehearsalFile = "rehearsal.jsonl"

// ParseRehearsal reads rehearsal cases: JSON Lines, one RehearsalCase per
// line (blank lines are skipped). Every case needs a type and messages
// ending with an assistant message that has content or tool calls; roles
// are system, developer, user, assistant or tool; an unknown field is an
// error. Errors name the line; nothing is returned with one.
func ParseRehearsal(r io.Reader) ([]RehearsalCase, error) {
	return parseJSONL(r, "rehearsal", (*RehearsalCase).validate)
}

func (c *RehearsalCase) validate() error {
	if c.Type == "" {
		return errors.New(`no "type"`)
	}
	if len(c.Messages) == 0 {
		return errors.New(`no "messages"`)
	}
	for i, m := range c.Messages {
		switch m.Role {
		case "system", "developer", "user", "assistant", "tool":
		default:
			return fmt.Errorf("message %d: role %q (system, developer, user, assistant or tool)", i, m.Role)
		}
	}
	last := c.Messages[len(c.Messages)-1]
	if last.Role != "assistant" {
		return fmt.Errorf("the last message is the %s's; a case ends with the answer to rehearse (role assistant)", last.Role)
	}
	if last.Content == "" && len(last.ToolCalls) == 0 {
		return errors.New("the last message (the answer) is empty")
	}
	return nil
}

// LoadRehearsal reads a rehearsal file (ParseRehearsal).
func LoadRehearsal(path string) ([]RehearsalCase, error) { return loadJSONL(path, ParseRehearsal) }

// WriteRehearsal writes cases as ParseRehearsal reads them.
func WriteRehearsal(w io.Writer, cases []RehearsalCase) error { return encodeJSONL(w, cases) }

// MeasureRehearsal records in each case that fits in maxLen tokens the
// margin of m (the base the cases are rehearsed against) along its
// answer (RehearsalCase.Margin).
func MeasureRehearsal(ctx context.Context, m *model.Model, tok chat.Format, cases []RehearsalCase, maxLen int) error {
	exs, idx, err := rehearsalExamples(tok, cases, maxLen)
	if err != nil {
		return err
	}
	margins, err := answerMargins(ctx, m, nil, exs)
	if err != nil {
		return err
	}
	for k, i := range idx {
		cases[i].Margin = &margins[k]
	}
	return nil
}

// rehearsalExamples renders cases with tok: the last assistant message's
// tokens (its end token included) are the completion, everything before
// it the prompt. Cases longer than maxLen tokens are left out; idx[k] is
// the case of out[k].
func rehearsalExamples(tok chat.Format, cases []RehearsalCase, maxLen int) (out []Example, idx []int, err error) {
	out = make([]Example, 0, len(cases))
	for i := range cases {
		c := &cases[i]
		ids, mask, err := tok.RenderChat(toTok(c.Messages), false)
		if err != nil {
			return nil, nil, fmt.Errorf("distill: rehearsal case %d: %w", i, err)
		}
		end := len(mask)
		for end > 0 && !mask[end-1] {
			end--
		}
		start := end
		for start > 0 && mask[start-1] {
			start--
		}
		if start == 0 || start == end || end > maxLen {
			continue
		}
		out = append(out, Example{Type: c.Type, Kind: KindRehearsal, Messages: c.Messages[:len(c.Messages)-1],
			Answer: c.Messages[len(c.Messages)-1], PromptTokens: ids[:start:start], CompletionTokens: ids[start:end:end], Weight: 1})
		idx = append(idx, i)
	}
	return out, idx, nil
}

// rehearsalSample draws n of pool's examples (without repeats while the
// pool lasts) for the cycle named version, leaving out the types in
// changed; the draw depends only on the version and the seed, so a
// replayed cycle rehearses the same.
func rehearsalSample(pool []Example, changed []string, n int, version string, seed uint64) []Example {
	var idx []int
	for i := range pool {
		if !slices.Contains(changed, pool[i].Type) {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 || n <= 0 {
		return nil
	}
	h := fnv.New64a()
	h.Write([]byte(version))
	rng := rand.New(rand.NewPCG(h.Sum64(), seed))
	out := make([]Example, 0, n)
	for len(out) < n {
		rng.Shuffle(len(idx), func(i, j int) { idx[i], idx[j] = idx[j], idx[i] })
		for _, i := range idx[:min(len(idx), n-len(out))] {
			out = append(out, pool[i])
		}
	}
	return out
}

// answerMargins returns, for each of exs, the smallest margin of m with
// adapter a (nil: the base) along its completion: at each completion
// token, the token's logit over the best other token's (negative where
// the greedy choice differs). It reads the logits of chunks of evalChunk
// packed sequences.
func answerMargins(ctx context.Context, m *model.Model, a *model.Adapter, exs []Example) ([]float64, error) {
	margins, _, err := answerLeads(ctx, m, a, exs, math.Inf(1))
	return margins, err
}

// answerLeads is answerMargins with, for each example, how many of its
// completion's first tokens m ranks first by at least sure: the prefix of
// the completion that a greedy decode with m reproduces.
func answerLeads(ctx context.Context, m *model.Model, a *model.Adapter, exs []Example, sure float64) ([]float64, []int, error) {
	V := m.Config.VocabSize
	out := make([]float64, len(exs))
	leads := make([]int, len(exs))
	for lo := 0; lo < len(exs); lo += evalChunk {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		chunk := make([]*Example, 0, evalChunk)
		for i := lo; i < min(lo+evalChunk, len(exs)); i++ {
			chunk = append(chunk, &exs[i])
		}
		b, rows, ys := packChunk(chunk)
		logits, err := m.TargetLogits(b, a)
		if err != nil {
			return nil, nil, err
		}
		for k := range chunk {
			margin, lead, leading := math.Inf(1), 0, true
			for r := rows[k][0]; r < rows[k][1]; r++ {
				row, y := logits[r*V:(r+1)*V], ys[r]
				other := float32(math.Inf(-1))
				for j, v := range row {
					if j != y && v > other {
						other = v
					}
				}
				mt := float64(row[y] - other)
				margin = min(margin, mt)
				if leading = leading && mt >= sure; leading {
					lead++
				}
			}
			out[lo+k], leads[lo+k] = margin, lead
		}
	}
	return out, leads, nil
}

// nearTies keeps the examples whose margin is under threshold (all of
// them for a negative threshold, or when none is: then every answer is
// won clearly and nothing is more at risk than anything else).
func nearTies(exs []Example, margins []float64, threshold float64) []Example {
	if threshold < 0 {
		return exs
	}
	var out []Example
	for i := range exs {
		if margins[i] < threshold {
			out = append(out, exs[i])
		}
	}
	if len(out) == 0 {
		return exs
	}
	return out
}
