package reflection

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"citizen/events"
)

// memStream is a minimal in-memory stream store for tests.
type memStream struct{ evs []events.Event }

func (m *memStream) append(t *testing.T, p events.Payload, meta events.Meta) events.Event {
	t.Helper()
	if meta.Time.IsZero() {
		meta.Time = time.Date(2026, 11, 30, 1, 0, len(m.evs), 0, time.UTC)
	}
	ev, err := events.Encode(p, meta)
	if err != nil {
		t.Fatal(err)
	}
	var rev uint64
	for _, x := range m.evs {
		if x.Stream == ev.Stream {
			rev++
		}
	}
	ev.Revision, ev.Position = rev, uint64(len(m.evs)+1)
	m.evs = append(m.evs, ev)
	return ev
}

func (m *memStream) ReadStream(_ context.Context, stream string, from uint64, _ events.Direction, max int) ([]events.Event, error) {
	var out []events.Event
	for _, ev := range m.evs {
		if ev.Stream == stream && ev.Revision >= from && len(out) < max {
			out = append(out, ev)
		}
	}
	if len(out) == 0 && from == 0 {
		return nil, events.ErrStreamNotFound
	}
	return out, nil
}

func decodeEval(t *testing.T, ev events.Event) *events.InteractionEvaluated {
	t.Helper()
	p, err := events.Decode(&ev)
	if err != nil {
		t.Fatal(err)
	}
	return p.(*events.InteractionEvaluated)
}

func TestEvaluatorHandleLifecycle(t *testing.T) {
	st := &memStream{}
	e, err := NewEvaluator(EvaluatorConfig{Reader: st}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stream := events.InteractionStream("i1")
	recEv := st.append(t, rec("41", map[string]string{"type": "arithmetic"}), events.Meta{Stream: stream, Tenant: "acme"})

	out, err := e.Handle(ctx, recEv)
	if err != nil || len(out) != 1 {
		t.Fatalf("%v %v", out, err)
	}
	first := decodeEval(t, out[0])
	if first.Seq != 1 || first.TaskType != "arithmetic" || out[0].ID != events.DeterministicID(recEv.ID.String(), events.TypeInteractionEvaluated) ||
		out[0].CausationID != recEv.ID.String() || out[0].CorrelationID != "i1" || out[0].Tenant != "acme" || out[0].Stream != stream {
		t.Errorf("first: %+v %+v", out[0], first)
	}
	// the evaluation is appended; late feedback arrives
	st.evs = append(st.evs, out[0])
	fr := st.append(t, &events.FeedbackReceived{InteractionID: "i1", FeedbackID: "f1", Source: "customer", Text: "no, it's 42", Outcome: "failure"}, events.Meta{Stream: stream, Tenant: "acme"})
	out, err = e.Handle(ctx, fr)
	if err != nil || len(out) != 1 {
		t.Fatalf("%v %v", out, err)
	}
	second := decodeEval(t, out[0])
	if second.Seq != 2 || second.Outcome != "failure" || second.RewardTerms["outcome"] != -1 || second.Reward >= first.Reward {
		t.Errorf("second: %+v", second)
	}
	secondBytes, _ := json.Marshal(out)
	st.evs = append(st.evs, out[0])
	fi := st.append(t, &events.FeedbackInterpreted{InteractionID: "i1", FeedbackID: "f1", Polarity: -0.9, Strength: 0.8, Correction: "42", Confidence: 0.8, InterpreterVersion: "lexicon-1"}, events.Meta{Stream: stream, Tenant: "acme"})
	out, err = e.Handle(ctx, fi)
	if err != nil || len(out) != 1 {
		t.Fatalf("%v %v", out, err)
	}
	third := decodeEval(t, out[0])
	if third.Seq != 3 || third.FeedbackPolarity == nil || *third.FeedbackPolarity != -0.9 {
		t.Errorf("third: %+v", third)
	}
	// the correction became the numeric grader's reference
	found := false
	for _, g := range third.Graders {
		if g.Name == "answer" && g.Score == 0 {
			found = true
		}
	}
	if !found {
		t.Errorf("no failing answer grader from the correction: %+v", third.Graders)
	}
	st.evs = append(st.evs, out[0])

	// replaying the feedback.received later gives the same event, byte for byte
	again, err := e.Handle(ctx, fr)
	if err != nil {
		t.Fatal(err)
	}
	againBytes, _ := json.Marshal(again)
	if !bytes.Equal(secondBytes, againBytes) {
		t.Errorf("replay differs:\n%s\n%s", secondBytes, againBytes)
	}
}

func TestEvaluatorRatingWithoutInterpretation(t *testing.T) {
	st := &memStream{}
	e, _ := NewEvaluator(EvaluatorConfig{Reader: st}, nil)
	stream := events.InteractionStream("i2")
	r := rec("x", nil)
	r.InteractionID = "i2"
	st.append(t, r, events.Meta{Stream: stream})
	five := 5.0
	fr := st.append(t, &events.FeedbackReceived{InteractionID: "i2", FeedbackID: "f", Source: "customer", Rating: &five}, events.Meta{Stream: stream})
	out, err := e.Handle(context.Background(), fr)
	if err != nil || len(out) != 1 {
		t.Fatal(out, err)
	}
	if ev := decodeEval(t, out[0]); ev.FeedbackPolarity == nil || *ev.FeedbackPolarity != 1 || ev.Seq != 2 {
		t.Errorf("%+v", ev)
	}
}

func TestEvaluatorEdgeCases(t *testing.T) {
	ctx := context.Background()
	st := &memStream{}
	e, _ := NewEvaluator(EvaluatorConfig{Reader: st}, nil)
	// feedback for an unrecorded interaction: nothing, no error
	fr := st.append(t, &events.FeedbackReceived{InteractionID: "ghost", FeedbackID: "f", Source: "customer", Text: "bad"}, events.Meta{Stream: "interaction-ghost"})
	if out, err := e.Handle(ctx, fr); err != nil || out != nil {
		t.Errorf("ghost: %v %v", out, err)
	}
	// malformed trigger
	bad := fr
	bad.Data = json.RawMessage(`{"nope":1}`)
	if _, err := e.Handle(ctx, bad); !errors.Is(err, events.ErrMalformed) {
		t.Errorf("malformed: %v", err)
	}
	// other types are ignored
	an, _ := events.Encode(&events.AnomalyDetected{Kind: "x", Version: "v"}, events.Meta{Stream: "version-v"})
	if out, err := e.Handle(ctx, an); err != nil || out != nil {
		t.Errorf("anomaly: %v %v", out, err)
	}
	// feedback without a reader is a configuration error
	e2, _ := NewEvaluator(EvaluatorConfig{}, nil)
	if _, err := e2.Handle(ctx, fr); err == nil {
		t.Error("no reader: no error")
	}
	// a bad config is refused
	cfg := DefaultConfig()
	cfg.Policy.Timeout = "whenever"
	if _, err := NewEvaluator(EvaluatorConfig{Config: &cfg}, nil); err == nil {
		t.Error("bad config accepted")
	}
}
