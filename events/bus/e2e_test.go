package bus_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"citizen/events"
	"citizen/events/bus"
	"citizen/events/memstore"
)

// pipeline wires store → relay → in-process bus → router handler that
// derives one feedback.interpreted per feedback.received (appended to the
// store, relayed again) and a second consumer group on the derived topic.
type pipeline struct {
	store   *memstore.Store
	b       *bus.InProcess
	derived <-chan *message.Message
}

func startPipeline(t testing.TB, ctx context.Context, derive bool) *pipeline {
	p := &pipeline{store: memstore.New(memstore.Config{}), b: bus.NewInProcess(bus.InProcessConfig{}, nil)}
	relay, err := bus.NewRelay(p.store, p.b.Publisher(), bus.RelayConfig{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := bus.NewRouter(bus.RouterConfig{Poison: p.b.Publisher()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = bus.AddEventHandler(r, bus.EventHandler{
		Name:       "interpreter",
		Topics:     []string{bus.Topic(events.TypeFeedbackReceived)},
		Subscriber: p.b.Subscriber(bus.SubscriberConfig{Group: "interpreter", Parallelism: 4}),
		Store:      p.store,
		Handle: func(ctx context.Context, ev events.Event) ([]events.Event, error) {
			if !derive {
				return nil, nil
			}
			pl, err := events.Decode(&ev)
			if err != nil {
				return nil, bus.Permanent(err)
			}
			fb := pl.(*events.FeedbackReceived)
			out, err := events.Encode(&events.FeedbackInterpreted{InteractionID: fb.InteractionID, FeedbackID: fb.FeedbackID,
				Polarity: 1, Strength: 0.5, Confidence: 0.9, InterpreterVersion: "test"},
				events.Meta{ID: events.DeterministicID(ev.ID.String(), "interpreter")})
			return []events.Event{out}, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	p.derived, err = p.b.Subscriber(bus.SubscriberConfig{Group: "audit"}).Subscribe(ctx, bus.Topic(events.TypeFeedbackInterpreted))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := relay.Run(ctx); err != nil {
			t.Error(err)
		}
	}()
	go func() {
		defer wg.Done()
		if err := r.Run(ctx); err != nil {
			t.Error(err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		_ = p.b.Close()
		_ = p.store.Close()
	})
	<-r.Running()
	return p
}

func TestEndToEnd(t *testing.T) {
	ctx := testCtx(t)
	p := startPipeline(t, ctx, true)
	const n, streams = 300, 20
	causes := map[string]events.Event{}
	for i := range n {
		ev := feedback(t, i%streams, i)
		causes[ev.ID.String()] = ev
		if _, err := p.store.Append(ctx, ev.Stream, events.Any, ev); err != nil {
			t.Fatal(err)
		}
	}
	// the derived events come back over the bus (appended, then relayed)
	got := map[string]bool{}
	for len(got) < n {
		m := recv(t, p.derived)
		ev, err := bus.FromMessage(m)
		if err != nil {
			t.Fatal(err)
		}
		cause, ok := causes[ev.CausationID]
		if !ok {
			t.Fatalf("derived event %s has unknown causation %q", ev.ID, ev.CausationID)
		}
		if ev.Stream != cause.Stream || ev.CorrelationID != cause.CorrelationID || ev.Tenant != cause.Tenant ||
			ev.ID != events.DeterministicID(cause.ID.String(), "interpreter") {
			t.Fatalf("derived %+v does not match cause %+v", ev, cause)
		}
		got[ev.CausationID] = true
		m.Ack()
	}
	all, err := p.store.ReadAll(ctx, 0, events.Filter{Types: []string{events.TypeFeedbackInterpreted}}, 10*n)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != n {
		t.Fatalf("store has %d derived events, want %d", len(all), n)
	}
	// per stream, derived events follow their causes' order
	last := map[string]int{}
	for _, ev := range all {
		cause := causes[ev.CausationID]
		pl, err := events.Decode(&cause)
		if err != nil {
			t.Fatal(err)
		}
		var s, i int
		if _, err := fmt.Sscanf(pl.(*events.FeedbackReceived).FeedbackID, "f%d-%d", &s, &i); err != nil {
			t.Fatal(err)
		}
		if i < last[ev.Stream] {
			t.Fatalf("stream %s: derived from %d after %d", ev.Stream, i, last[ev.Stream])
		}
		last[ev.Stream] = i
	}
}
