package replay

import (
	"context"
	"strings"
	"testing"
	"time"

	"citizen/events"
	"citizen/events/memstore"
	"citizen/reflection/feedback"
)

// TestReplayReinterpretsFeedback: `citizen events replay` re-reads each
// recorded feedback with the current interpreter and reports what an
// older interpreter version recorded differently.
func TestReplayReinterpretsFeedback(t *testing.T) {
	ctx := context.Background()
	st := memstore.New(memstore.Config{})
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	stream := events.InteractionStream("i1")
	rec, err := events.Encode(&events.InteractionRecorded{
		Messages: []events.ChatMessage{{Role: "user", Content: "How long do I have to return an item?"}},
		Choices:  []events.Choice{{Message: events.ChatMessage{Role: "assistant", Content: "You can return items within 30 days of delivery."}}},
	}, events.Meta{Stream: stream, Tenant: "acme", Time: at})
	if err != nil {
		t.Fatal(err)
	}
	fb, err := events.Encode(&events.FeedbackReceived{InteractionID: "i1", FeedbackID: "f1", Source: "customer", Text: "No, it's 60 days."},
		events.Meta{Stream: stream, Tenant: "acme", Time: at})
	if err != nil {
		t.Fatal(err)
	}
	// what an earlier interpreter recorded: praise, no correction
	old, err := events.Encode(&events.FeedbackInterpreted{InteractionID: "i1", FeedbackID: "f1", Polarity: 0.4, Confidence: 0.9, InterpreterVersion: "embedded-1"},
		events.Meta{Stream: stream, Tenant: "acme", CausationID: fb.ID.String(), Time: at})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, stream, events.Any, rec, fb, old); err != nil {
		t.Fatal(err)
	}
	res, err := Run(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := res.Projections["feedback"].(feedback.ReinterpretSummary)
	if !ok {
		t.Fatalf("no feedback projection: %+v", res.Projections)
	}
	if s.Compared != 1 || s.Older != 1 || s.PolarityChanged != 1 || s.CorrectionChanged != 1 || len(s.Examples) != 1 || s.Examples[0].NowCorrection != "60 days" {
		t.Errorf("summary %+v", s)
	}
	if out := res.String(); !strings.Contains(out, "feedback: re-read with "+feedback.EmbeddedVersion) || !strings.Contains(out, "correction changed 1") {
		t.Errorf("report:\n%s", out)
	}
}
