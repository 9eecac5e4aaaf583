package bus_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"citizen/events"
	"citizen/events/bus"
	"citizen/events/memstore"
)

// crashingPub publishes through to the bus until its budget of messages
// is spent; then it publishes only part of the batch, stops or kills the
// relay (cancels its context) and fails.
type crashingPub struct {
	inner message.Publisher
	mu    sync.Mutex
	left  int
	crash func()
	max   uint64 // highest position that reached the bus
}

func (p *crashingPub) arm(left int, crash func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.left, p.crash = left, crash
}

func (p *crashingPub) Publish(topic string, msgs ...*message.Message) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(msgs)
	crash := p.crash != nil && p.left < n
	if crash {
		n = max(p.left, 0)
	}
	if err := p.inner.Publish(topic, msgs[:n]...); err != nil {
		return err
	}
	for _, m := range msgs[:n] {
		ev, err := bus.FromMessage(m)
		if err != nil {
			return err
		}
		p.max = max(p.max, ev.Position)
	}
	if crash {
		p.crash()
		p.crash = nil
		return errors.New("crashed")
	}
	p.left -= n
	return nil
}

func (p *crashingPub) Close() error { return nil }

// crashingStore drops checkpoint saves once the relay "crashed" and checks
// that a saved checkpoint never passes what was published.
type crashingStore struct {
	events.Store
	pub     *crashingPub
	t       *testing.T
	mu      sync.Mutex
	crashed bool
}

func (s *crashingStore) SaveCheckpoint(ctx context.Context, name string, pos uint64) error {
	s.mu.Lock()
	crashed := s.crashed
	s.mu.Unlock()
	if crashed {
		return errors.New("process is gone")
	}
	s.pub.mu.Lock()
	published := s.pub.max
	s.pub.mu.Unlock()
	if pos > published {
		s.t.Errorf("checkpoint %d saved beyond the last published position %d", pos, published)
	}
	return s.Store.SaveCheckpoint(ctx, name, pos)
}

func TestRelayRestartsNeverSkip(t *testing.T) {
	ctx := testCtx(t)
	const n, streams = 3000, 40
	mem := memstore.New(memstore.Config{})
	defer mem.Close()
	b := bus.NewInProcess(bus.InProcessConfig{}, nil)
	defer b.Close()
	pub := &crashingPub{inner: b.Publisher()}
	store := &crashingStore{Store: mem, pub: pub, t: t}

	// the consumer: dedupes by id, checks per-stream order of first sightings
	msgs, err := b.Subscriber(bus.SubscriberConfig{Group: "check"}).Subscribe(ctx, bus.Topic(events.TypeFeedbackReceived))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	lastPos := map[string]uint64{}
	received := 0
	allSeen := make(chan struct{})
	consumerDone := make(chan struct{})
	go func() {
		defer close(consumerDone)
		for m := range msgs {
			ev, err := bus.FromMessage(m)
			if err != nil {
				t.Error(err)
				return
			}
			received++
			if !seen[m.UUID] {
				seen[m.UUID] = true
				if ev.Position <= lastPos[ev.Stream] {
					t.Errorf("stream %s: position %d after %d", ev.Stream, ev.Position, lastPos[ev.Stream])
				}
				lastPos[ev.Stream] = ev.Position
				if len(seen) == n {
					close(allSeen)
				}
			}
			m.Ack()
		}
	}()

	// the writer appends while the relay crashes and restarts
	go func() {
		rng := rand.New(rand.NewPCG(1, 2))
		for i := 0; i < n; {
			k := min(1+rng.IntN(20), n-i)
			s := rng.IntN(streams)
			batch := make([]events.Event, k)
			for j := range batch {
				batch[j] = feedback(t, s, i+j)
			}
			if _, err := mem.Append(ctx, events.InteractionStream(fmt.Sprint(s)), events.Any, batch...); err != nil {
				t.Error(err)
				return
			}
			i += k
		}
	}()

	rng := rand.New(rand.NewPCG(3, 4))
	runs := 0
	for done := false; !done; runs++ {
		relay, err := bus.NewRelay(store, pub, bus.RelayConfig{Name: "relay", BatchSize: 1 + rng.IntN(64),
			CheckpointEvery: 1 + rng.IntN(100)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		store.mu.Lock()
		store.crashed = false
		store.mu.Unlock()
		graceful := rng.IntN(2) == 0 // stopped (saves allowed) or killed (no more saves)
		pub.arm(rng.IntN(400), func() {
			store.mu.Lock()
			store.crashed = !graceful
			store.mu.Unlock()
			cancel()
		})
		go func() {
			select {
			case <-allSeen:
				cancel()
			case <-rctx.Done():
			}
		}()
		if err := relay.Run(rctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		if ctx.Err() != nil {
			t.Fatal("timed out")
		}
		select {
		case <-allSeen:
			store.mu.Lock()
			done = !store.crashed // the final checkpoint was saved
			store.mu.Unlock()
		default:
		}
	}
	// the last run ended cleanly: its checkpoint covers everything
	if pos, found, err := mem.Checkpoint(ctx, "relay"); err != nil || !found || pos != n {
		t.Fatalf("final checkpoint %d (found %v, err %v), want %d", pos, found, err, n)
	}
	_ = b.Close()
	<-consumerDone
	if runs < 5 {
		t.Fatalf("only %d relay runs; the test should crash it several times", runs)
	}
	t.Logf("%d relay runs, %d messages received for %d events (%d duplicates)", runs, received, n, received-n)
}

func TestRelayResumesFromCheckpoint(t *testing.T) {
	ctx := testCtx(t)
	mem := memstore.New(memstore.Config{})
	defer mem.Close()
	var evs []events.Event
	for i := range 10 {
		evs = append(evs, feedback(t, 1, i))
	}
	if _, err := mem.Append(ctx, "interaction-1", events.Any, evs...); err != nil {
		t.Fatal(err)
	}
	if err := mem.SaveCheckpoint(ctx, "r", 7); err != nil {
		t.Fatal(err)
	}
	b := bus.NewInProcess(bus.InProcessConfig{}, nil)
	defer b.Close()
	ch, err := b.Subscriber(bus.SubscriberConfig{Group: "g"}).Subscribe(ctx, bus.Topic(events.TypeFeedbackReceived))
	if err != nil {
		t.Fatal(err)
	}
	relay, _ := bus.NewRelay(mem, b.Publisher(), bus.RelayConfig{Name: "r"}, nil)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- relay.Run(rctx) }()
	for want := uint64(8); want <= 10; want++ {
		m := recv(t, ch)
		if m.Metadata.Get(bus.MetaPosition) != fmt.Sprint(want) {
			t.Fatalf("got position %s, want %d", m.Metadata.Get(bus.MetaPosition), want)
		}
		m.Ack()
	}
	none(t, ch)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if pos, _, _ := mem.Checkpoint(ctx, "r"); pos != 10 {
		t.Fatalf("checkpoint %d after clean stop, want 10", pos)
	}
}

func TestRelayReturnsStoreErrors(t *testing.T) {
	ctx := testCtx(t)
	mem := memstore.New(memstore.Config{})
	b := bus.NewInProcess(bus.InProcessConfig{}, nil)
	defer b.Close()
	relay, _ := bus.NewRelay(mem, b.Publisher(), bus.RelayConfig{}, nil)
	ch, _ := b.Subscriber(bus.SubscriberConfig{Group: "g"}).Subscribe(ctx, bus.Topic(events.TypeFeedbackReceived))
	done := make(chan error, 1)
	go func() { done <- relay.Run(ctx) }()
	if _, err := mem.Append(ctx, "interaction-1", events.Any, feedback(t, 1, 1)); err != nil {
		t.Fatal(err)
	}
	recv(t, ch).Ack() // the relay is live
	_ = mem.Close()
	if err := <-done; !errors.Is(err, events.ErrClosed) {
		t.Fatalf("Run returned %v, want ErrClosed", err)
	}
}

// corruptingStore hands out the event at position bad with broken data.
type corruptingStore struct {
	events.Store
	bad uint64
}

func (s corruptingStore) Subscribe(ctx context.Context, after uint64, f events.Filter, h events.Handler) error {
	return s.Store.Subscribe(ctx, after, f, func(ctx context.Context, ev events.Event) error {
		if ev.Position == s.bad {
			ev.Data = []byte("{")
		}
		return h(ctx, ev)
	})
}

func TestRelayStopsAtAnEventItCannotPublish(t *testing.T) {
	ctx := testCtx(t)
	mem := memstore.New(memstore.Config{})
	defer mem.Close()
	for i := range 3 {
		if _, err := mem.Append(ctx, "interaction-1", events.Any, feedback(t, 1, i)); err != nil {
			t.Fatal(err)
		}
	}
	b := bus.NewInProcess(bus.InProcessConfig{}, nil)
	defer b.Close()
	ch, _ := b.Subscriber(bus.SubscriberConfig{Group: "g"}).Subscribe(ctx, bus.Topic(events.TypeFeedbackReceived))
	relay, _ := bus.NewRelay(corruptingStore{Store: mem, bad: 2}, b.Publisher(), bus.RelayConfig{BatchSize: 1}, nil)
	err := relay.Run(ctx)
	if !errors.Is(err, events.ErrMalformed) || !strings.Contains(err.Error(), "position 2") {
		t.Fatalf("Run returned %v, want ErrMalformed at position 2", err)
	}
	if m := recv(t, ch); m.Metadata.Get(bus.MetaPosition) != "1" {
		t.Fatalf("published position %s", m.Metadata.Get(bus.MetaPosition))
	}
	none(t, ch)
	// published but not acknowledged by g: the in-process bus holds it
	// only in memory, so the checkpoint stays before it
	if pos, _, _ := mem.Checkpoint(ctx, "relay"); pos != 0 {
		t.Fatalf("checkpoint %d, want 0 (nothing acknowledged)", pos)
	}
}

// The relay's checkpoint on the in-process bus never passes an event that
// a consumer group has not acknowledged: after a crash (here: the bus is
// dropped with unacknowledged messages in it), a new relay publishes those
// again, so every worker still handles every event.
func TestRelayCheckpointsOnlyAcknowledged(t *testing.T) {
	ctx := testCtx(t)
	mem := memstore.New(memstore.Config{})
	defer mem.Close()
	for i := range 5 {
		if _, err := mem.Append(ctx, fmt.Sprintf("interaction-%d", i), events.Any, feedback(t, 1, i)); err != nil {
			t.Fatal(err)
		}
	}
	topic := bus.Topic(events.TypeFeedbackReceived)
	b := bus.NewInProcess(bus.InProcessConfig{}, nil)
	fast := b.Subscriber(bus.SubscriberConfig{Group: "fast"})
	slow := b.Subscriber(bus.SubscriberConfig{Group: "slow"})
	fast.(bus.Reserver).Reserve(topic)
	slow.(bus.Reserver).Reserve(topic)
	rctx, stop := context.WithCancel(ctx)
	relay, _ := bus.NewRelay(mem, b.Publisher(), bus.RelayConfig{CheckpointEvery: 1, CheckpointInterval: time.Millisecond}, nil)
	done := make(chan error, 1)
	go func() { done <- relay.Run(rctx) }()
	fch, _ := fast.Subscribe(ctx, topic)
	sch, _ := slow.Subscribe(ctx, topic)
	for range 5 {
		recv(t, fch).Ack()
	}
	for range 2 { // slow handles positions 1 and 2 only
		recv(t, sch).Ack()
	}
	// wait until the checkpoint reaches what slow acknowledged; it must
	// never pass it
	for {
		pos, _, _ := mem.Checkpoint(ctx, "relay")
		if pos > 2 {
			t.Fatalf("checkpoint %d passed the slow group's last ack (2)", pos)
		}
		if pos == 2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if pos, _, _ := mem.Checkpoint(ctx, "relay"); pos != 2 {
		t.Fatalf("checkpoint on exit %d, want 2", pos)
	}
	b.Close() // the process dies: what the bus held is gone
	b2 := bus.NewInProcess(bus.InProcessConfig{}, nil)
	defer b2.Close()
	sch2, _ := b2.Subscriber(bus.SubscriberConfig{Group: "slow"}).Subscribe(ctx, topic)
	relay2, _ := bus.NewRelay(mem, b2.Publisher(), bus.RelayConfig{}, nil)
	go relay2.Run(ctx)
	for want := 3; want <= 5; want++ {
		m := recv(t, sch2)
		if m.Metadata.Get(bus.MetaPosition) != fmt.Sprint(want) {
			t.Fatalf("republished position %s, want %d", m.Metadata.Get(bus.MetaPosition), want)
		}
		m.Ack()
	}
}
