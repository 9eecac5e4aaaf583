package kafka_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	kafkago "github.com/segmentio/kafka-go"

	"citizen/events"
	"citizen/events/bus"
	"citizen/events/bus/kafka"
)

// TestEventsKeepStreamOrderAcrossPartitions publishes events of several
// streams to a 4-partition topic and checks that three members of a group
// (two subscribers, one running two consumers) together receive every
// event, each stream in order, and that the message maps back to the same
// event.
func TestEventsKeepStreamOrderAcrossPartitions(t *testing.T) {
	streamOrder(t, kfakeBrokers(t))
}

func TestEventsKeepStreamOrderAcrossPartitionsApacheKafka(t *testing.T) {
	streamOrder(t, realBrokers(t))
}

func streamOrder(t *testing.T, brokers []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topic := bus.Topic(events.TypeFeedbackReceived) + "-" + watermill.NewShortUUID()
	group := "g-" + watermill.NewShortUUID()
	tc := kafka.TopicConfig{Partitions: 4}
	if err := kafka.CreateTopics(ctx, brokers, tc, topic); err != nil {
		t.Fatal(err)
	}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers, Topic: tc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()

	// a lone publish must not wait for kafka-go's default 1 s batch timeout
	start := time.Now()
	first := feedbackEvent(t, 0, 0, 1)
	if err := pub.Publish(topic, mustMessage(t, first)); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 700*time.Millisecond {
		t.Fatalf("a lone publish took %v", d)
	}

	const streams, per = 10, 30
	want := map[string]events.Event{first.ID.String(): first}
	var msgs []*message.Message
	pos := uint64(1)
	for i := range per {
		for s := range streams {
			pos++
			ev := feedbackEvent(t, s, i, pos)
			want[ev.ID.String()] = ev
			msgs = append(msgs, mustMessage(t, ev))
		}
	}
	if err := pub.Publish(topic, msgs...); err != nil {
		t.Fatal(err)
	}

	type got struct {
		m      *message.Message
		member int
	}
	all := make(chan got)
	for member := range 2 {
		sub, err := kafka.NewSubscriber(kafka.SubscriberConfig{Brokers: brokers, Group: group, Consumers: 1 + member,
			HeartbeatInterval: 500 * time.Millisecond, MaxWait: 100 * time.Millisecond}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		ch, err := sub.Subscribe(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for m := range ch {
				select {
				case all <- got{m, member}:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	seen := map[string]bool{}
	last := map[string]uint64{}
	for len(seen) < len(want) {
		var g got
		select {
		case g = <-all:
		case <-ctx.Done():
			t.Fatalf("received %d of %d", len(seen), len(want))
		}
		ev, err := bus.FromMessage(g.m)
		if err != nil {
			t.Fatal(err)
		}
		if w, ok := want[g.m.UUID]; !ok || w.Position != ev.Position || string(w.Data) != string(ev.Data) {
			t.Fatalf("unexpected event %+v", ev)
		}
		if !seen[g.m.UUID] { // redelivery after a rebalance is allowed
			if ev.Position < last[ev.Stream] {
				t.Fatalf("stream %s: position %d after %d", ev.Stream, ev.Position, last[ev.Stream])
			}
			last[ev.Stream] = ev.Position
			seen[g.m.UUID] = true
		}
		g.m.Ack()
	}
}

func feedbackEvent(t testing.TB, stream, i int, pos uint64) events.Event {
	t.Helper()
	ev, err := events.Encode(&events.FeedbackReceived{InteractionID: fmt.Sprint(stream),
		FeedbackID: fmt.Sprintf("f%d-%d", stream, i), Source: "harness"},
		events.Meta{Stream: events.InteractionStream(fmt.Sprint(stream)), CorrelationID: "c"})
	if err != nil {
		t.Fatal(err)
	}
	ev.Position = pos
	return ev
}

func mustMessage(t testing.TB, ev events.Event) *message.Message {
	t.Helper()
	m, err := bus.ToMessage(ev)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A subscriber that joins before anything was published to its topic
// still gets the topic's messages (Subscribe creates the topic, so the
// group's assignment has its partitions).
func TestSubscribeBeforeTopicExists(t *testing.T) {
	brokers := kfakeBrokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topic := "fresh-" + watermill.NewShortUUID()
	sub, err := kafka.NewSubscriber(kafka.SubscriberConfig{Brokers: brokers, Group: "g", Consumers: 2,
		HeartbeatInterval: 500 * time.Millisecond, MaxWait: 100 * time.Millisecond, Topic: kafka.TopicConfig{Partitions: 2}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	ch, err := sub.Subscribe(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	// wait until both members have joined (the broker's view; there is no
	// event to wait on), then publish
	client := &kafkago.Client{Addr: kafkago.TCP(brokers...)}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for stable := false; !stable; {
		resp, err := client.DescribeGroups(ctx, &kafkago.DescribeGroupsRequest{GroupIDs: []string{"g"}})
		stable = err == nil && len(resp.Groups) == 1 && resp.Groups[0].GroupState == "Stable" && len(resp.Groups[0].Members) == 2
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("the group never became stable with 2 members: %+v %v", resp, err)
		}
	}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	ev := feedbackEvent(t, 1, 1, 1)
	if err := pub.Publish(topic, mustMessage(t, ev)); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-ch:
		if m.UUID != ev.ID.String() {
			t.Fatalf("got %s", m.UUID)
		}
		m.Ack()
	case <-ctx.Done():
		t.Fatal("the message never arrived")
	}
}
