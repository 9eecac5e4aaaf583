package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"

	"citizen/events"
	"citizen/events/bus"
	"citizen/events/bus/kafka"
	"citizen/events/memstore"
)

func TestPoisonDoesNotBlockItsPartition(t *testing.T) { poisonAside(t, kfakeBrokers(t)) }

func TestPoisonDoesNotBlockItsPartitionApacheKafka(t *testing.T) { poisonAside(t, realBrokers(t)) }

// poisonAside: on a one-partition topic, one stream's events reach a
// handler that fails permanently on one event and transiently, every
// time, on another. Both go to the poison topic (with the reason), and
// every other event of the partition is still handled, in order.
func poisonAside(t *testing.T, brokers []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	suffix := "-" + watermill.NewShortUUID()
	topic, poison := bus.Topic(events.TypeFeedbackReceived)+suffix, bus.PoisonTopic+suffix
	tc := kafka.TopicConfig{Partitions: 1}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Topic: tc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	const n, permanent, transient = 12, 3, 7
	evs := make([]events.Event, n)
	for i := range evs {
		evs[i] = feedbackEvent(t, 1, i, uint64(i+1))
		if err := pub.Publish(topic, mustMessage(t, evs[i])); err != nil {
			t.Fatal(err)
		}
	}
	sub, err := kafka.NewSubscriber(kafka.SubscriberConfig{Brokers: brokers, Group: "h" + suffix,
		MaxWait: 100 * time.Millisecond, Topic: tc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	psub, err := kafka.NewSubscriber(kafka.SubscriberConfig{Brokers: brokers, Group: "p" + suffix,
		MaxWait: 100 * time.Millisecond, Topic: tc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer psub.Close()
	r, err := bus.NewRouter(bus.RouterConfig{Poison: pub, PoisonTopic: poison, MaxAttempts: 3,
		InitialInterval: 10 * time.Millisecond, MaxInterval: 20 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var handled []uint64
	done := make(chan struct{})
	store := memstore.New(memstore.Config{})
	defer store.Close()
	err = bus.AddEventHandler(r, bus.EventHandler{Name: "h", Topics: []string{topic}, Subscriber: sub, Store: store,
		Handle: func(ctx context.Context, ev events.Event) ([]events.Event, error) {
			switch ev.Position {
			case permanent:
				return nil, bus.Permanent(errors.New("cannot handle this one"))
			case transient:
				return nil, errors.New("fails every time")
			}
			mu.Lock()
			defer mu.Unlock()
			handled = append(handled, ev.Position)
			if ev.Position == n {
				close(done)
			}
			return nil, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	go r.Run(rctx)
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("the partition's last event was never handled; handled %v", handled)
	}
	mu.Lock()
	want := []uint64{}
	for p := uint64(1); p <= n; p++ {
		if p != permanent && p != transient {
			want = append(want, p)
		}
	}
	if fmt.Sprint(handled) != fmt.Sprint(want) {
		t.Errorf("handled %v, want %v", handled, want)
	}
	mu.Unlock()

	msgs, err := psub.Subscribe(ctx, poison)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for len(got) < 2 {
		select {
		case m := <-msgs:
			got[m.UUID] = m.Metadata.Get("reason_poisoned")
			m.Ack()
		case <-ctx.Done():
			t.Fatalf("poison topic holds %v, want the two failing events", got)
		}
	}
	for _, p := range []int{permanent, transient} {
		if got[evs[p-1].ID.String()] == "" {
			t.Errorf("event at %d is not in the poison topic with a reason: %v", p, got)
		}
	}
}
