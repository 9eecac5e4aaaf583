package feedback

import (
	"context"
	"strings"
	"testing"

	"citizen/events"
)

// oldInterpreter stands for an earlier interpreter version: it reads
// every comment as mild praise with no correction.
type oldInterpreter struct{}

func (oldInterpreter) Interpret(context.Context, Input) (Interpretation, error) {
	return Interpretation{Polarity: 0.5, Confidence: 0.95, Version: "embedded-0"}, nil
}

func TestReinterpreterCountsChanges(t *testing.T) {
	recorded := func(id, question, answer string) events.Event {
		ev, err := events.Encode(&events.InteractionRecorded{
			Messages: []events.ChatMessage{{Role: "user", Content: question}},
			Choices:  []events.Choice{{Message: events.ChatMessage{Role: "assistant", Content: answer}}},
		}, events.Meta{Stream: events.InteractionStream(id), Tenant: "acme", Time: t0})
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	var log []events.Event
	old := NewIngester(IngesterConfig{Interpreter: oldInterpreter{}}, nil)
	now := NewIngester(IngesterConfig{}, nil)
	add := func(ing *Ingester, id, text string) {
		fb := feedbackEvent(t, events.FeedbackReceived{InteractionID: id, FeedbackID: "f-" + id + text[:3], Source: "customer", Text: text})
		log = append(log, fb)
		out, err := ing.Handle(context.Background(), fb)
		if err != nil {
			t.Fatal(err)
		}
		log = append(log, out...)
	}
	log = append(log, recorded("a", "How long do I have to return an item?", "You can return items within 30 days of delivery."))
	log = append(log, recorded("b", "Do you ship on Saturdays?", "Yes, we deliver on Saturdays."))
	add(old, "a", "No, it's 60 days.")      // old: praise, no correction; now: a correction
	add(old, "b", "Perfect, thanks a lot!") // old and now: praise
	add(now, "b", "Great, exactly what I needed.")
	// an interpretation whose feedback is not in the log
	orphan, err := events.Encode(&events.FeedbackInterpreted{InteractionID: "c", Polarity: 1, InterpreterVersion: "embedded-0"},
		events.Meta{Stream: events.InteractionStream("c"), CausationID: "missing", Time: t0})
	if err != nil {
		t.Fatal(err)
	}
	log = append(log, orphan)

	r := NewReinterpreter()
	for _, ev := range log {
		if err := r.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	s := r.Summary()
	if s.Current != EmbeddedVersion || s.Compared != 3 || s.Older != 2 || s.ByVersion["embedded-0"] != 2 || s.ByVersion[EmbeddedVersion] != 1 ||
		s.PolarityChanged != 1 || s.CorrectionChanged != 1 || s.Unmatched != 1 || len(s.Examples) != 1 {
		t.Fatalf("summary %+v", s)
	}
	e := s.Examples[0]
	if e.Stream != "interaction-a" || e.Version != "embedded-0" || e.Polarity != 0.5 || e.NowPolarity >= 0 || e.NowCorrection != "60 days" {
		t.Errorf("example %+v", e)
	}
	if str := s.String(); !strings.Contains(str, "polarity changed 1, correction changed 1") || !strings.Contains(str, `"60 days"`) {
		t.Errorf("report %s", str)
	}
	// a second pass over the same log gives the same summary
	r2 := NewReinterpreter()
	for _, ev := range log {
		r2.Apply(ev)
	}
	if r2.Summary().String() != s.String() {
		t.Errorf("not deterministic:\n%s\n%s", r2.Summary(), s)
	}
	// a malformed event of a read type is an error, not a panic
	bad := events.Event{Type: events.TypeFeedbackReceived, Data: []byte("{")}
	if err := NewReinterpreter().Apply(bad); err == nil {
		t.Error("malformed feedback.received accepted")
	}
}
