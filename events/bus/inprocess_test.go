package bus_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"

	"citizen/events"
	"citizen/events/bus"
)

// TestInProcessPubSub runs watermill's conformance suite. The features say
// what the in-process bus promises: consumer groups, order (per ordering
// key; the suite's messages have none, so they are delivered one at a time
// per group), persistence across Publisher/Subscriber instances of one
// bus, at-least-once (not exactly-once) delivery.
func TestInProcessPubSub(t *testing.T) {
	b := bus.NewInProcess(bus.InProcessConfig{}, nil)
	t.Cleanup(func() { _ = b.Close() })
	tests.TestPubSub(t, tests.Features{
		ConsumerGroups:      true,
		ExactlyOnceDelivery: false,
		GuaranteedOrder:     true,
		Persistent:          true,
	},
		func(t *testing.T) (message.Publisher, message.Subscriber) {
			return b.Publisher(), b.Subscriber(bus.SubscriberConfig{Group: "default"})
		},
		func(t *testing.T, group string) (message.Publisher, message.Subscriber) {
			return b.Publisher(), b.Subscriber(bus.SubscriberConfig{Group: group})
		},
	)
}

func keyed(key string, i int) *message.Message {
	m := message.NewMessage(watermill.NewUUID(), fmt.Appendf(nil, "%s-%d", key, i))
	m.Metadata.Set(bus.MetaStream, key)
	return m
}

func recv(t *testing.T, ch <-chan *message.Message) *message.Message {
	t.Helper()
	select {
	case m, ok := <-ch:
		if !ok {
			t.Fatal("channel closed")
		}
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no message")
	}
	return nil
}

// none asserts that nothing arrives within a short window.
func none(t *testing.T, ch <-chan *message.Message) {
	t.Helper()
	select {
	case m := <-ch:
		t.Fatalf("unexpected message %s", m.Payload)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestInProcessGroups(t *testing.T) {
	b := bus.NewInProcess(bus.InProcessConfig{}, nil)
	defer b.Close()
	ctx := testCtx(t)
	const n = 200
	// two members of group "a" and one of group "b", all subscribed first
	a1, a2 := b.Subscriber(bus.SubscriberConfig{Group: "a"}), b.Subscriber(bus.SubscriberConfig{Group: "a"})
	gb := b.Subscriber(bus.SubscriberConfig{Group: "b"})
	var chans []<-chan *message.Message
	for _, s := range []message.Subscriber{a1, a2, gb} {
		ch, err := s.Subscribe(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
	}
	pub := b.Publisher()
	for i := range n {
		if err := pub.Publish("t", keyed(fmt.Sprint(i%10), i)); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	got := map[string][]string{} // group -> payloads
	var wg sync.WaitGroup
	done := make(chan struct{})
	for i, ch := range chans {
		g := "a"
		if i == 2 {
			g = "b"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case m := <-ch:
					mu.Lock()
					got[g] = append(got[g], string(m.Payload))
					full := len(got["a"]) == n && len(got["b"]) == n
					mu.Unlock()
					m.Ack()
					if full {
						close(done)
					}
				case <-done:
					return
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, g := range []string{"a", "b"} {
		seen := map[string]bool{}
		for _, p := range got[g] {
			if seen[p] {
				t.Fatalf("group %s got %s twice", g, p)
			}
			seen[p] = true
		}
		if len(seen) != n {
			t.Fatalf("group %s got %d distinct messages, want %d", g, len(seen), n)
		}
	}
	// a third group created now starts from the oldest retained message;
	// groups a and b consumed everything, so nothing is retained
	late, err := b.Subscriber(bus.SubscriberConfig{Group: "late"}).Subscribe(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	none(t, late)
	_ = pub.Publish("t", keyed("x", 0))
	if m := recv(t, late); string(m.Payload) != "x-0" {
		t.Fatalf("late group got %s", m.Payload)
	}
}

func TestInProcessOrderPerKeyWithParallelism(t *testing.T) {
	b := bus.NewInProcess(bus.InProcessConfig{}, nil)
	defer b.Close()
	ctx := testCtx(t)
	pub := b.Publisher()
	for _, m := range []*message.Message{keyed("a", 1), keyed("b", 1), keyed("a", 2)} {
		if err := pub.Publish("t", m); err != nil {
			t.Fatal(err)
		}
	}
	ch, err := b.Subscriber(bus.SubscriberConfig{Group: "g", Parallelism: 4}).Subscribe(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	// another key may be in flight at the same time, and keys are
	// independent: a-1 and b-1 may arrive in either order
	a1, b1 := recv(t, ch), recv(t, ch)
	if string(a1.Payload) == "b-1" {
		a1, b1 = b1, a1
	}
	if string(a1.Payload) != "a-1" || string(b1.Payload) != "b-1" {
		t.Fatalf("got %s, %s", a1.Payload, b1.Payload)
	}
	none(t, ch) // a-2 waits for a-1
	a1.Nack()
	if m := recv(t, ch); string(m.Payload) != "a-1" {
		t.Fatalf("redelivery: got %s", m.Payload)
	} else {
		m.Ack()
	}
	if m := recv(t, ch); string(m.Payload) != "a-2" {
		t.Fatalf("got %s", m.Payload)
	} else {
		m.Ack()
	}
	b1.Ack()
	none(t, ch)
}

func TestInProcessOrderUnderLoad(t *testing.T) {
	b := bus.NewInProcess(bus.InProcessConfig{MaxBacklog: 64}, nil)
	defer b.Close()
	ctx := testCtx(t)
	const keys, per = 8, 200
	ch, err := b.Subscriber(bus.SubscriberConfig{Group: "g", Parallelism: 8}).Subscribe(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		pub := b.Publisher()
		for i := range per {
			for k := range keys {
				if err := pub.Publish("t", keyed(fmt.Sprint(k), i)); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	next := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range keys * per {
		m := recv(t, ch)
		wg.Add(1)
		go func() { // ack out of order, sometimes nack
			defer wg.Done()
			var k string
			var i int
			fmt.Sscanf(string(m.Payload), "%1s-%d", &k, &i)
			mu.Lock()
			if i != next[k] {
				t.Errorf("key %s: got %d, want %d", k, i, next[k])
			}
			nack := i%7 == 3 && next[k+"nacked"] != i+1
			if nack {
				next[k+"nacked"] = i + 1
			} else {
				next[k]++
			}
			mu.Unlock()
			if nack {
				m.Nack()
			} else {
				m.Ack()
			}
		}()
	}
	// the nacked ones come again
	wg.Wait()
	for {
		mu.Lock()
		sum := 0
		for k := range keys {
			sum += next[fmt.Sprint(k)]
		}
		mu.Unlock()
		if sum == keys*per {
			break
		}
		m := recv(t, ch)
		var k string
		var i int
		fmt.Sscanf(string(m.Payload), "%1s-%d", &k, &i)
		mu.Lock()
		if i != next[k] {
			t.Fatalf("key %s: got %d, want %d", k, i, next[k])
		}
		next[k]++
		mu.Unlock()
		m.Ack()
	}
}

func TestInProcessBackPressureAndRetention(t *testing.T) {
	b := bus.NewInProcess(bus.InProcessConfig{MaxBacklog: 4}, nil)
	defer b.Close()
	ctx := testCtx(t)
	pub := b.Publisher()

	// no group: the oldest messages are dropped, publishing never blocks
	for i := range 10 {
		if err := pub.Publish("free", keyed("k", i)); err != nil {
			t.Fatal(err)
		}
	}
	ch, err := b.Subscriber(bus.SubscriberConfig{Group: "g"}).Subscribe(ctx, "free")
	if err != nil {
		t.Fatal(err)
	}
	for i := 6; i < 10; i++ {
		m := recv(t, ch)
		if string(m.Payload) != fmt.Sprintf("k-%d", i) {
			t.Fatalf("got %s, want k-%d", m.Payload, i)
		}
		m.Ack()
	}

	// a live group that does not ack blocks the publisher at MaxBacklog
	ch, err = b.Subscriber(bus.SubscriberConfig{Group: "slow"}).Subscribe(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	published := make(chan int, 10)
	go func() {
		for i := range 10 {
			if err := pub.Publish("held", keyed("k", i)); err != nil {
				t.Error(err)
				return
			}
			published <- i
		}
		close(published)
	}()
	first := recv(t, ch) // k-0 in flight; k-1..k-4 fill the backlog
	for range 5 {
		<-published
	}
	select {
	case i := <-published:
		t.Fatalf("publish %d should block while the group lags", i)
	case <-time.After(50 * time.Millisecond):
	}
	first.Ack()
	for i := 1; i < 10; i++ {
		m := recv(t, ch)
		if string(m.Payload) != fmt.Sprintf("k-%d", i) {
			t.Fatalf("got %s, want k-%d", m.Payload, i)
		}
		m.Ack()
	}
	for range published {
	}

	// Close unblocks everything
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish("held", keyed("k", 99)); !errors.Is(err, events.ErrClosed) {
		t.Fatalf("publish after close: %v", err)
	}
	if _, err := b.Subscriber(bus.SubscriberConfig{}).Subscribe(context.Background(), "x"); !errors.Is(err, events.ErrClosed) {
		t.Fatalf("subscribe after close: %v", err)
	}
}

// A publisher blocked by a lagging live group is released as that group
// catches up, even while an idle group keeps the backlog from shrinking;
// the idle group then loses the oldest messages.
func TestInProcessBackPressureWithIdleGroup(t *testing.T) {
	b := bus.NewInProcess(bus.InProcessConfig{MaxBacklog: 4}, nil)
	defer b.Close()
	ctx := testCtx(t)
	idle := b.Subscriber(bus.SubscriberConfig{Group: "idle"})
	if _, err := idle.Subscribe(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if err := idle.Close(); err != nil {
		t.Fatal(err)
	}
	ch, err := b.Subscriber(bus.SubscriberConfig{Group: "live"}).Subscribe(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	done := make(chan error, 1)
	go func() {
		pub := b.Publisher()
		for i := range n {
			if err := pub.Publish("t", keyed("k", i)); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for i := range n {
		m := recv(t, ch)
		if string(m.Payload) != fmt.Sprintf("k-%d", i) {
			t.Fatalf("got %s, want k-%d", m.Payload, i)
		}
		m.Ack()
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	late, err := b.Subscriber(bus.SubscriberConfig{Group: "idle"}).Subscribe(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if m := recv(t, late); string(m.Payload) != fmt.Sprintf("k-%d", n-4) {
		t.Fatalf("idle group resumed at %s, want the oldest retained k-%d", m.Payload, n-4)
	}
}

// TestInProcessBacklog counts what a group owes: messages not taken, in
// flight and nacked; a group that has not joined owes every retained one.
func TestInProcessBacklog(t *testing.T) {
	b := bus.NewInProcess(bus.InProcessConfig{}, nil)
	t.Cleanup(func() { _ = b.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	backlog := func(group string, topics ...string) int64 {
		t.Helper()
		n, known, err := b.Backlog(ctx, group, topics)
		if err != nil {
			t.Fatal(err)
		}
		if !known {
			return -1
		}
		return n
	}
	for i := range 10 {
		topic := "a"
		if i%2 == 1 {
			topic = "b"
		}
		if err := b.Publisher().Publish(topic, message.NewMessage(watermill.NewUUID(), []byte(fmt.Sprint(i)))); err != nil {
			t.Fatal(err)
		}
	}
	if n := backlog("g", "a", "b", "missing"); n != -1 {
		t.Fatalf("before the group joined: %d, want it unknown (-1)", n)
	}
	msgs, err := b.Subscriber(bus.SubscriberConfig{Group: "g", Parallelism: 1}).Subscribe(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	(<-msgs).Ack()
	(<-msgs).Ack()
	m := <-msgs // in flight
	if n := backlog("g", "a"); n != 3 {
		t.Errorf("2 of 5 acked, one in flight: %d, want 3", n)
	}
	m.Nack()
	if n := backlog("g", "a"); n != 3 {
		t.Errorf("after a nack: %d, want 3", n)
	}
	for range 3 {
		(<-msgs).Ack()
	}
	deadline := time.Now().Add(5 * time.Second)
	for backlog("g", "a") != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // the last ack settles after Ack returns
	}
	if n := backlog("g", "a", "b"); n != 5 {
		t.Errorf("a drained, b untouched: %d, want 5", n)
	}
	b.Subscriber(bus.SubscriberConfig{Group: "reserved"}).(bus.Reserver).Reserve("b")
	if n := backlog("reserved", "b"); n != 5 {
		t.Errorf("a group that reserved b: %d, want 5", n)
	}
}
