package kafka_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"citizen/events/bus/kafka"
)

// checkBacklog publishes 10 messages, acks 4 in one group and wants the
// brokers to report 6 owed by it, and nothing known of a group that never
// committed or of a topic that does not exist.
func checkBacklog(t *testing.T, brokers []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topic := fmt.Sprintf("backlog-%d", time.Now().UnixNano())
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: brokers}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	for i := range 10 {
		m := message.NewMessage(watermill.NewUUID(), []byte(fmt.Sprint(i)))
		m.Metadata.Set("stream", "s") // one partition: the first 4 taken are the first 4 published
		if err := pub.Publish(topic, m); err != nil {
			t.Fatal(err)
		}
	}
	group := "backlog-" + topic
	sub, err := kafka.NewSubscriber(kafka.SubscriberConfig{Brokers: brokers, Group: group,
		SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second, HeartbeatInterval: 500 * time.Millisecond, MaxWait: 100 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := kafka.NewBacklog(brokers)
	if err != nil {
		t.Fatal(err)
	}
	if n, known, err := b.Backlog(ctx, group, []string{topic}); err != nil || known {
		t.Fatalf("before any commit: backlog %d (known %v), %v; want it unknown", n, known, err)
	}
	sctx, scancel := context.WithCancel(ctx)
	msgs, err := sub.Subscribe(sctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		select {
		case m := <-msgs:
			m.Ack()
		case <-ctx.Done():
			t.Fatal("no message")
		}
	}
	// the fourth ack's commit is synchronous but runs after Ack returns
	var n int64
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if n, _, err = b.Backlog(ctx, group, []string{topic}); err != nil {
			t.Fatal(err)
		}
		if n == 6 {
			break
		}
	}
	scancel()
	sub.Close()
	if n != 6 {
		t.Errorf("after 4 of 10 acked: backlog %d, want 6", n)
	}
	if n, known, err := b.Backlog(ctx, "never-"+group, []string{topic}); err != nil || known {
		t.Errorf("a group that never joined: backlog %d (known %v), %v; want it unknown", n, known, err)
	}
	if n, known, err := b.Backlog(ctx, group, []string{topic + "-missing"}); err != nil || known || n != 0 {
		t.Errorf("a missing topic: backlog %d (known %v), %v; want 0, unknown", n, known, err)
	}
}

func TestBacklogKfake(t *testing.T) { checkBacklog(t, kfakeBrokers(t)) }

func TestBacklogApacheKafka(t *testing.T) { checkBacklog(t, realBrokers(t)) }
