package rollout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"citizen/events"
	"citizen/events/eventlog"
)

// Run on the embedded log, two controllers at once (as two replicas
// would): a worse candidate is rolled back once, and a restart rebuilds
// the same state from disk.
func TestRunOnEventlogTwoReplicas(t *testing.T) {
	dir := t.TempDir()
	store, err := eventlog.Open(eventlog.Config{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cfg := Config{Stable: "v1"}
	var ctrls []*Controller
	done := make(chan error, 2)
	for i := 0; i < 2; i++ {
		c, err := New(cfg, store, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctrls = append(ctrls, c)
		go func() { done <- c.Run(ctx) }()
	}
	// waitType blocks until an event of typ is stored (or fails the test).
	waitType := func(typ string) events.Event {
		t.Helper()
		wctx, wcancel := context.WithTimeout(ctx, waitFor)
		defer wcancel()
		var got events.Event
		err := store.Subscribe(wctx, 0, events.Filter{Types: []string{typ}}, func(_ context.Context, ev events.Event) error {
			got = ev
			return errDone
		})
		if !errors.Is(err, errDone) {
			t.Fatalf("waiting for %s: %v", typ, err)
		}
		return got
	}
	appendP := func(stream string, p events.Payload) {
		ev, err := events.Encode(p, events.Meta{Stream: stream})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Append(ctx, stream, events.Any, ev); err != nil {
			t.Fatal(err)
		}
	}
	appendP(events.VersionStream("v2"), &events.WeightsTrained{Version: "v2", Parent: "v1", Accepted: true})
	waitType(events.TypeRolloutStarted)
	for i := 0; i < 500; i++ {
		v, r := "v1", 0.5
		if i%20 == 0 {
			v, r = "v2", 0.0
		}
		id := fmt.Sprint("e", i)
		appendP(events.InteractionStream(id), &events.InteractionEvaluated{InteractionID: id, Seq: 1, ModelVersion: v,
			Reward: r + 0.1*float64(i%7-3)/3, AnswerLength: 100 + i%5, RubricVersion: "r", EvaluatorVersion: "e"})
	}
	rb := waitType(events.TypeRolloutRolledBack)
	// both replicas get there; then stop them
	for _, c := range ctrls {
		if err := c.CatchUp(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	for range ctrls {
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Run: %v", err)
		}
	}
	evs, err := store.ReadStream(context.Background(), rb.Stream, 0, events.Forward, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Type != events.TypeRolloutStarted || evs[1].Type != events.TypeRolloutRolledBack {
		t.Fatalf("rollout stream: %v", evs)
	}
	live := ctrls[0].Status()
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	store2, err := eventlog.Open(eventlog.Config{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer store2.Close()
	p := NewProjection(cfg, store2)
	st, _, err := p.Sync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Stable != "v1" || st.Active != nil || len(st.History) != 1 || st.History[0] != live.History[0] {
		t.Fatalf("after reopening: %+v, live %+v", st, live)
	}
}

var errDone = errors.New("done")
