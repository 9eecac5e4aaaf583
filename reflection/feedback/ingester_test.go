package feedback

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"citizen/events"
)

type fakeReader struct {
	evs []events.Event
	err error
}

func (f *fakeReader) ReadStream(_ context.Context, stream string, from uint64, _ events.Direction, max int) ([]events.Event, error) {
	if f.err != nil {
		return nil, f.err
	}
	var out []events.Event
	for _, ev := range f.evs {
		if ev.Stream == stream {
			out = append(out, ev)
		}
	}
	if len(out) == 0 {
		return nil, events.ErrStreamNotFound
	}
	return out, nil
}

var t0 = time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)

func feedbackEvent(t *testing.T, fr events.FeedbackReceived) events.Event {
	t.Helper()
	ev, err := events.Encode(&fr, events.Meta{Stream: events.InteractionStream(fr.InteractionID), Tenant: "acme", CorrelationID: fr.InteractionID, Time: t0})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestIngesterHandle(t *testing.T) {
	in := NewIngester(IngesterConfig{}, nil)
	ev := feedbackEvent(t, events.FeedbackReceived{InteractionID: "i1", FeedbackID: "f1", Source: "customer", Text: "no - it's 60 days now"})
	out, err := in.Handle(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 {
		t.Fatalf("%d events", len(out))
	}
	got := out[0]
	if got.Type != events.TypeFeedbackInterpreted || got.Stream != ev.Stream || got.Tenant != "acme" ||
		got.CausationID != ev.ID.String() || got.CorrelationID != "i1" || !got.Time.Equal(t0) ||
		got.ID != events.DeterministicID(ev.ID.String(), events.TypeFeedbackInterpreted) {
		t.Errorf("envelope %+v", got)
	}
	p, err := events.Decode(&got)
	if err != nil {
		t.Fatal(err)
	}
	fi := p.(*events.FeedbackInterpreted)
	if fi.InteractionID != "i1" || fi.FeedbackID != "f1" || fi.Polarity >= 0 || fi.Correction != "60 days" ||
		fi.InterpreterVersion != EmbeddedVersion || fi.Hint == "" || fi.Confidence <= 0 {
		t.Errorf("payload %+v", fi)
	}
	// a retry gives byte-identical output
	again, err := in.Handle(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(out)
	b, _ := json.Marshal(again)
	if !bytes.Equal(a, b) {
		t.Errorf("retry differs:\n%s\n%s", a, b)
	}
}

func TestIngesterIgnoresOtherTypes(t *testing.T) {
	ev, _ := events.Encode(&events.InteractionRecorded{InteractionID: "i1"}, events.Meta{Stream: "interaction-i1"})
	out, err := NewIngester(IngesterConfig{}, nil).Handle(context.Background(), ev)
	if err != nil || out != nil {
		t.Errorf("got %v, %v", out, err)
	}
}

func TestIngesterMalformed(t *testing.T) {
	ev := feedbackEvent(t, events.FeedbackReceived{InteractionID: "i1", FeedbackID: "f1"})
	ev.Data = json.RawMessage(`{"interaction_id":"i1","bogus":1}`)
	_, err := NewIngester(IngesterConfig{}, nil).Handle(context.Background(), ev)
	if !errors.Is(err, events.ErrMalformed) {
		t.Errorf("err %v, want ErrMalformed", err)
	}
}

func TestIngesterBadTextIsNotAnError(t *testing.T) {
	ev := feedbackEvent(t, events.FeedbackReceived{InteractionID: "i1", FeedbackID: "f1", Text: "\x01\x02\x03\x04"})
	out, err := NewIngester(IngesterConfig{}, nil).Handle(context.Background(), ev)
	if err != nil || len(out) != 1 {
		t.Fatalf("%v %v", out, err)
	}
	p, _ := events.Decode(&out[0])
	fi := p.(*events.FeedbackInterpreted)
	if fi.Polarity != 0 || fi.Confidence > 0.1 || fi.InterpreterVersion != EmbeddedVersion+";binary" {
		t.Errorf("payload %+v", fi)
	}
}

type failingInterpreter struct{}

func (failingInterpreter) Interpret(context.Context, Input) (Interpretation, error) {
	return Interpretation{}, ErrUpstream
}

func TestIngesterInterpreterError(t *testing.T) {
	ev := feedbackEvent(t, events.FeedbackReceived{InteractionID: "i1", FeedbackID: "f1", Text: "bad"})
	_, err := NewIngester(IngesterConfig{Interpreter: failingInterpreter{}}, nil).Handle(context.Background(), ev)
	if !errors.Is(err, ErrUpstream) {
		t.Errorf("err %v", err)
	}
}

// recordingInterpreter captures its input.
type recordingInterpreter struct{ in Input }

func (r *recordingInterpreter) Interpret(ctx context.Context, in Input) (Interpretation, error) {
	r.in = in
	return NewEmbedded().Interpret(ctx, in)
}

func TestIngesterReadsInteractionContext(t *testing.T) {
	rec, _ := events.Encode(&events.InteractionRecorded{InteractionID: "i2", Tenant: "acme",
		Messages: []events.ChatMessage{{Role: "system", Content: "be nice"}, {Role: "user", Content: "What is 6*7?"}},
		Choices:  []events.Choice{{Message: events.ChatMessage{Role: "assistant", Content: "42"}}}},
		events.Meta{Stream: "interaction-i2"})
	ri := &recordingInterpreter{}
	in := NewIngester(IngesterConfig{Interpreter: ri, Reader: &fakeReader{evs: []events.Event{rec}}}, nil)
	ev := feedbackEvent(t, events.FeedbackReceived{InteractionID: "i2", FeedbackID: "f2", Text: "yes it's 42 now, thanks"})
	out, err := in.Handle(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if ri.in.PromptText != "What is 6*7?" || ri.in.AnswerText != "42" {
		t.Errorf("input %+v", ri.in)
	}
	p, _ := events.Decode(&out[0])
	if fi := p.(*events.FeedbackInterpreted); fi.Correction != "" {
		t.Errorf("confirmation read as correction: %+v", fi)
	}
	// a stream-read failure is returned for retry; a missing stream is not
	in = NewIngester(IngesterConfig{Reader: &fakeReader{err: events.ErrClosed}}, nil)
	if _, err := in.Handle(context.Background(), ev); !errors.Is(err, events.ErrClosed) {
		t.Errorf("err %v", err)
	}
	in = NewIngester(IngesterConfig{Reader: &fakeReader{}}, nil)
	if _, err := in.Handle(context.Background(), ev); err != nil {
		t.Errorf("err %v", err)
	}
}
