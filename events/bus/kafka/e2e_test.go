package kafka_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"citizen/events"
	"citizen/events/bus"
	"citizen/events/bus/kafka"
	"citizen/events/memstore"
)

func TestEndToEndKafka(t *testing.T) { endToEnd(t, kfakeBrokers(t)) }

func TestEndToEndApacheKafka(t *testing.T) { endToEnd(t, realBrokers(t)) }

// endToEnd: store → relay → Kafka → router handler → derived event
// appended to the store.
func endToEnd(t *testing.T, brokers []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	store := memstore.New(memstore.Config{})
	defer store.Close()
	suffix := "-" + watermill.NewShortUUID()
	tc := kafka.TopicConfig{Partitions: 3}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Topic: tc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	relay, err := bus.NewRelay(store, pub, bus.RelayConfig{Topic: func(ev events.Event) string { return bus.Topic(ev.Type) + suffix }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := kafka.NewSubscriber(kafka.SubscriberConfig{Brokers: brokers, Group: "interpreter" + suffix, Consumers: 2,
		MaxWait: 100 * time.Millisecond, HeartbeatInterval: 500 * time.Millisecond, Topic: tc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	r, err := bus.NewRouter(bus.RouterConfig{Poison: pub, PoisonTopic: bus.PoisonTopic + suffix}, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = bus.AddEventHandler(r, bus.EventHandler{Name: "interpreter", Topics: []string{bus.Topic(events.TypeFeedbackReceived) + suffix},
		Subscriber: sub, Store: store, Handle: func(ctx context.Context, ev events.Event) ([]events.Event, error) {
			out, err := events.Encode(&events.FeedbackInterpreted{InteractionID: "x", FeedbackID: "y", InterpreterVersion: "t"},
				events.Meta{ID: events.DeterministicID(ev.ID.String(), "interpreter")})
			return []events.Event{out}, err
		}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	causes := map[string]events.Event{}
	for i := range n {
		ev := feedbackEvent(t, i%7, i, 0)
		if _, err := store.Append(ctx, ev.Stream, events.Any, ev); err != nil {
			t.Fatal(err)
		}
		causes[ev.ID.String()] = ev
	}
	rctx, rcancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = relay.Run(rctx) }()
	go func() { defer wg.Done(); _ = r.Run(rctx) }()
	defer func() { rcancel(); wg.Wait() }()

	// follow the store until every cause has its derived event
	derived := map[string]bool{}
	err = store.Subscribe(ctx, 0, events.Filter{Types: []string{events.TypeFeedbackInterpreted}}, func(_ context.Context, ev events.Event) error {
		cause, ok := causes[ev.CausationID]
		if !ok || ev.Stream != cause.Stream || ev.CorrelationID != cause.CorrelationID {
			t.Errorf("derived %+v does not match its cause", ev)
		}
		if derived[ev.CausationID] {
			t.Errorf("cause %s derived twice", ev.CausationID)
		}
		derived[ev.CausationID] = true
		if len(derived) == n {
			return context.Canceled // done
		}
		return nil
	})
	if len(derived) != n {
		t.Fatalf("%d of %d derived events (%v)", len(derived), n, err)
	}
}
