package gateway

import (
	"context"
	"fmt"
	"time"

	"citizen/events"
)

// record appends interaction.recorded to interaction-<id> (expecting no
// stream) and returns once the store says it is durable. The event id is
// derived from the interaction id, so a retried append cannot duplicate it.
func (r *request) record(ctx context.Context, res *Result) error {
	rec := r.interaction(res)
	ev, err := events.Encode(rec, events.Meta{
		Stream:        events.InteractionStream(r.iid),
		CorrelationID: r.iid,
		Tenant:        r.key.Tenant,
		ID:            events.DeterministicID(events.TypeInteractionRecorded, r.iid),
		// The request's start, so a stored completion's "created" equals
		// the one the client got.
		Time: r.start.UTC(),
	})
	if err == nil {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.s.cfg.RecordTimeout)
		t0 := time.Now()
		_, err = r.s.store.Append(actx, ev.Stream, events.NoStream, ev)
		r.s.metrics.recordTime.Observe(time.Since(t0).Seconds())
		cancel()
	}
	if err != nil {
		r.s.metrics.recordFail.Inc()
		r.s.log.Error("recording the interaction failed; the client gets an error", "interaction", r.iid, "err", err)
		return fmt.Errorf("gateway: recording %s: %w", r.iid, err)
	}
	r.s.metrics.recorded.Inc()
	r.s.proj.add(entryOf(r.iid, r.key.Tenant, r.created, rec))
	return nil
}

func (r *request) interaction(res *Result) *events.InteractionRecorded {
	g := &r.dec.Gen
	rec := &events.InteractionRecorded{
		InteractionID: r.iid,
		Tenant:        r.key.Tenant,
		User:          g.User,
		Conversation:  r.dec.Metadata["conversation_id"],
		TaskType:      DeclaredType(r.dec.Metadata),
		Metadata:      r.dec.Metadata,
		Model:         r.dec.Model,
		ModelVersion:  res.Version,
		Engine:        r.s.engine.Name(),
		Tokenizer:     res.Tokenizer,
		Constraint:    res.Constraint,
		Params:        r.dec.Params,
		PromptTokens:  res.PromptTokens,
		Usage:         events.Usage(res.Usage),
		LatencyMS:     float64(time.Since(r.start).Microseconds()) / 1000,
		TTFTMS:        float64(r.ttft.Microseconds()) / 1000,
		Stream:        g.Stream,
	}
	msgs := g.Messages
	if r.lessons != nil {
		msgs, rec.Lessons = r.clientMessages, r.lessons
	}
	rec.Messages = make([]events.ChatMessage, len(msgs))
	for i, m := range msgs {
		rec.Messages[i] = events.ChatMessage{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID, ToolCalls: recordCalls(m.ToolCalls)}
	}
	for _, t := range g.Tools {
		rec.Tools = append(rec.Tools, events.Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
	rec.Choices = make([]events.Choice, len(res.Choices))
	for i, ch := range res.Choices {
		c := events.Choice{Index: i, FinishReason: ch.FinishReason,
			Message: events.ChatMessage{Role: "assistant", Content: ch.Content, ToolCalls: recordCalls(ch.ToolCalls)}}
		c.CompletionTokens = make([]int, len(ch.Tokens))
		c.Logprobs = make([]events.TokenLogprob, len(ch.Tokens))
		for j, t := range ch.Tokens {
			c.CompletionTokens[j] = t.ID
			lp := events.TokenLogprob{Token: t.ID, Logprob: t.Logprob}
			if len(t.Top) > 0 {
				lp.Top = make([]events.TopLogprob, len(t.Top))
				for k, a := range t.Top {
					lp.Top[k] = events.TopLogprob{Token: a.ID, Logprob: a.Logprob}
				}
			}
			c.Logprobs[j] = lp
		}
		rec.Choices[i] = c
	}
	return rec
}

func recordCalls(calls []ToolCall) []events.ToolCall {
	if len(calls) == 0 {
		return nil
	}
	out := make([]events.ToolCall, len(calls))
	for i, c := range calls {
		out[i] = events.ToolCall(c)
	}
	return out
}
