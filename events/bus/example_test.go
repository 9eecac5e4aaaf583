package bus_test

import (
	"context"
	"fmt"
	"log/slog"

	"citizen/events"
	"citizen/events/bus"
	"citizen/events/memstore"
)

// A worker that interprets feedback: the relay feeds the in-process bus
// from the store, the router runs the handler, and the derived event lands
// in the store.
func ExampleAddEventHandler() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logger := slog.New(slog.DiscardHandler)
	store := memstore.New(memstore.Config{})
	defer store.Close()

	b := bus.NewInProcess(bus.InProcessConfig{}, logger)
	defer b.Close()
	relay, err := bus.NewRelay(store, b.Publisher(), bus.RelayConfig{Name: "relay"}, logger)
	if err != nil {
		panic(err)
	}
	go relay.Run(ctx)

	router, err := bus.NewRouter(bus.RouterConfig{Poison: b.Publisher()}, logger)
	if err != nil {
		panic(err)
	}
	err = bus.AddEventHandler(router, bus.EventHandler{
		Name:       "feedback-interpreter",
		Topics:     []string{bus.Topic(events.TypeFeedbackReceived)},
		Subscriber: b.Subscriber(bus.SubscriberConfig{Group: "feedback-interpreter"}),
		Store:      store,
		Handle: func(ctx context.Context, ev events.Event) ([]events.Event, error) {
			p, err := events.Decode(&ev)
			if err != nil {
				return nil, bus.Permanent(err)
			}
			fb := p.(*events.FeedbackReceived)
			out, err := events.Encode(&events.FeedbackInterpreted{
				InteractionID: fb.InteractionID, FeedbackID: fb.FeedbackID,
				Polarity: 1, Strength: 0.8, Confidence: 0.9, InterpreterVersion: "v1",
			}, events.Meta{ID: events.DeterministicID(ev.ID.String(), "feedback-interpreter")})
			return []events.Event{out}, err // stream, correlation, causation, tenant come from ev
		},
	})
	if err != nil {
		panic(err)
	}
	go router.Run(ctx)

	fb, _ := events.Encode(&events.FeedbackReceived{InteractionID: "42", FeedbackID: "f1", Source: "customer", Text: "great"},
		events.Meta{Stream: events.InteractionStream("42"), CorrelationID: "42", Tenant: "acme"})
	if _, err := store.Append(ctx, fb.Stream, events.Any, fb); err != nil {
		panic(err)
	}

	// wait for the derived event in the store
	_ = store.Subscribe(ctx, 0, events.Filter{Types: []string{events.TypeFeedbackInterpreted}},
		func(_ context.Context, ev events.Event) error {
			fmt.Println(ev.Type, ev.Stream, ev.CorrelationID, ev.Tenant, ev.CausationID == fb.ID.String())
			return context.Canceled
		})
	// Output: feedback.interpreted interaction-42 42 acme true
}
