package bus_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"citizen/events"
)

// feedback returns a valid feedback.received event for interaction n.
func feedback(t testing.TB, interaction, i int) events.Event {
	t.Helper()
	ev, err := events.Encode(&events.FeedbackReceived{
		InteractionID: fmt.Sprint(interaction),
		FeedbackID:    fmt.Sprintf("f%d-%d", interaction, i),
		Source:        "customer",
		Text:          "fine",
	}, events.Meta{
		Stream:        events.InteractionStream(fmt.Sprint(interaction)),
		CorrelationID: fmt.Sprintf("corr-%d", interaction),
		Tenant:        "acme",
	})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// testCtx is a context bounded by the test's deadline (or 30 s).
func testCtx(t testing.TB) context.Context {
	t.Helper()
	d := 30 * time.Second
	if tt, ok := t.(*testing.T); ok {
		if dl, ok := tt.Deadline(); ok {
			d = min(d, time.Until(dl)-time.Second)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
