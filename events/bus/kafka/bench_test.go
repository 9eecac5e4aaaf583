package kafka_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/twmb/franz-go/pkg/kfake"

	"citizen/events"
	"citizen/events/bus"
	"citizen/events/bus/kafka"
	"citizen/events/memstore"
)

// benchBrokers is KAFKA_BROKERS if set, else an in-process kfake cluster.
func benchBrokers(b *testing.B) []string {
	if v := os.Getenv("KAFKA_BROKERS"); v != "" {
		return strings.Split(v, ",")
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	return c.ListenAddrs()
}

// BenchmarkLonePublish is the latency of one synchronous Publish of one
// event (kafka-go's default batch timeout would make it 1 s).
func BenchmarkLonePublish(b *testing.B) {
	brokers := benchBrokers(b)
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer pub.Close()
	topic := "bench-" + watermill.NewShortUUID()
	msgs := make([]events.Event, b.N+1)
	for i := range msgs {
		msgs[i] = feedbackEvent(b, i%100, i, uint64(i+1))
	}
	if err := pub.Publish(topic, mustMessage(b, msgs[b.N])); err != nil { // creates the topic
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		if err := pub.Publish(topic, mustMessage(b, msgs[i])); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "ms/publish")
}

// BenchmarkRelayKafkaHandler is BenchmarkRelayBusHandler of package bus
// over Kafka: b.N events in a memstore (100 streams) go through the relay,
// a Kafka topic with 4 partitions and a router handler (one subscriber
// with 4 consumers in one group) that decodes and acks each.
func BenchmarkRelayKafkaHandler(b *testing.B) {
	brokers := benchBrokers(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := memstore.New(memstore.Config{})
	defer store.Close()
	for i := range b.N {
		ev := feedbackEvent(b, i%100, i, 0)
		if _, err := store.Append(ctx, ev.Stream, events.Any, ev); err != nil {
			b.Fatal(err)
		}
	}
	suffix := "-" + watermill.NewShortUUID() // fresh topics against a real broker
	tc := kafka.TopicConfig{Partitions: 4}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Topic: tc}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer pub.Close()
	topicOf := func(ev events.Event) string { return bus.Topic(ev.Type) + suffix }
	relay, err := bus.NewRelay(store, pub, bus.RelayConfig{Topic: topicOf}, nil)
	if err != nil {
		b.Fatal(err)
	}
	sub, err := kafka.NewSubscriber(kafka.SubscriberConfig{Brokers: brokers, Group: "bench" + suffix, Consumers: 4,
		CommitInterval: time.Second, MaxWait: 100 * time.Millisecond, HeartbeatInterval: 500 * time.Millisecond, Topic: tc}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	r, err := bus.NewRouter(bus.RouterConfig{Poison: pub}, nil)
	if err != nil {
		b.Fatal(err)
	}
	var seen atomic.Int64
	all := make(chan struct{})
	ids := sync.Map{}
	err = bus.AddEventHandler(r, bus.EventHandler{Name: "bench", Topics: []string{bus.Topic(events.TypeFeedbackReceived) + suffix},
		Subscriber: sub, Store: store, Handle: func(ctx context.Context, ev events.Event) ([]events.Event, error) {
			if _, dup := ids.LoadOrStore(ev.ID, true); !dup && seen.Add(1) == int64(b.N) {
				close(all)
			}
			return nil, nil
		}})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = relay.Run(ctx) }()
	go func() { defer wg.Done(); _ = r.Run(ctx) }()
	select {
	case <-all:
	case <-time.After(time.Minute):
		b.Fatalf("handled %d of %d", seen.Load(), b.N)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	cancel()
	wg.Wait()
}
