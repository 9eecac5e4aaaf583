package distill

import (
	"context"
	"fmt"
	"testing"
	"time"

	"citizen/events"
	"citizen/events/memstore"
	"citizen/model/chat"
)

// world appends synthetic interactions to a store, as the gateway,
// reflection and the feedback ingester would.
type world struct {
	t     testing.TB
	store events.Store
	clock time.Time
	n     int
}

func newWorld(t testing.TB) *world {
	return &world{t: t, store: memstore.New(memstore.Config{}), clock: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}
}

func (w *world) append(stream string, p events.Payload) events.Event {
	w.t.Helper()
	w.clock = w.clock.Add(time.Second)
	ev, err := events.Encode(p, events.Meta{Stream: stream, Time: w.clock})
	if err != nil {
		w.t.Fatal(err)
	}
	res, err := w.store.Append(context.Background(), stream, events.Any, ev)
	if err != nil {
		w.t.Fatal(err)
	}
	ev.Position = res.LastPosition
	return ev
}

// chat is one recorded interaction to make.
type chatRec struct {
	typ        string
	user       string
	answer     string
	prompt     []int
	completion []int
	logprobs   []float32
}

func (w *world) record(c chatRec) string {
	w.n++
	id := fmt.Sprintf("i%04d", w.n)
	ch := events.Choice{Message: events.ChatMessage{Role: "assistant", Content: c.answer}, FinishReason: "stop", CompletionTokens: c.completion}
	for j, tok := range c.completion {
		lp := float32(-1)
		if c.logprobs != nil {
			lp = c.logprobs[j]
		}
		ch.Logprobs = append(ch.Logprobs, events.TokenLogprob{Token: tok, Logprob: lp})
	}
	w.append(events.InteractionStream(id), &events.InteractionRecorded{InteractionID: id, Tenant: "t1", TaskType: c.typ,
		Model: "citizen", ModelVersion: "base", Engine: "embedded",
		Messages:     []events.ChatMessage{{Role: "user", Content: c.user}},
		PromptTokens: c.prompt, Choices: []events.Choice{ch}})
	return id
}

// graded records a one-turn interaction of typ, answered answer, with a
// question and token ids of its own, and its evaluation with reward.
func (w *world) graded(typ, answer string, reward float64) string {
	k := w.n + 1
	id := w.record(chatRec{typ: typ, user: fmt.Sprint("question ", k), answer: answer, prompt: []int{1, k + 10}, completion: []int{3, k + 10}})
	w.evaluate(id, typ, 1, reward, true)
	return id
}

func (w *world) evaluate(id, typ string, seq int, reward float64, trainable bool) {
	w.append(events.InteractionStream(id), &events.InteractionEvaluated{InteractionID: id, Seq: seq, TaskType: typ,
		TypeSource: "given", ModelVersion: "base", Reward: reward, Trainable: trainable, EvaluatorVersion: "test"})
}

func (w *world) feedback(id, correction, hint string) {
	w.append(events.InteractionStream(id), &events.FeedbackInterpreted{InteractionID: id, FeedbackID: "f-" + id,
		Polarity: -1, Strength: 1, Correction: correction, Hint: hint, Confidence: 1, InterpreterVersion: "test"})
}

// replay builds a projection from everything in the store.
func replay(t *testing.T, s events.Store, ret Retention) *Projection {
	t.Helper()
	p := NewProjection(ret)
	evs, err := s.ReadAll(context.Background(), 0, p.Filter(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if err := p.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func chatRequest(msgs []events.ChatMessage, maxTokens int) chat.Request {
	return chat.Request{Messages: toTok(msgs), MaxTokens: maxTokens}
}
