package bus_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/google/uuid"

	"citizen/events"
	"citizen/events/bus"
)

// fakeAppender records appends, keeps one copy per event id, and can fail.
type fakeAppender struct {
	mu      sync.Mutex
	evs     []events.Event
	ids     map[uuid.UUID]bool
	fail    int // fail this many appends first
	calls   int
	stream  []string
	changed chan struct{} // closed and replaced on every call
}

func newFakeAppender() *fakeAppender { return &fakeAppender{changed: make(chan struct{})} }

func (f *fakeAppender) Append(_ context.Context, stream string, _ events.ExpectedRevision, evs ...events.Event) (events.AppendResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	defer func() {
		close(f.changed)
		f.changed = make(chan struct{})
	}()
	if f.fail > 0 {
		f.fail--
		return events.AppendResult{}, errors.New("store unavailable")
	}
	if f.ids == nil {
		f.ids = map[uuid.UUID]bool{}
	}
	for _, ev := range evs {
		if err := ev.Validate(); err != nil {
			return events.AppendResult{}, err
		}
	}
	for _, ev := range evs {
		if !f.ids[ev.ID] {
			f.ids[ev.ID] = true
			ev.Stream = stream
			f.evs = append(f.evs, ev)
			f.stream = append(f.stream, stream)
		}
	}
	return events.AppendResult{}, nil
}

func (f *fakeAppender) events() []events.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]events.Event(nil), f.evs...)
}

type routerFixture struct {
	b      *bus.InProcess
	store  *fakeAppender
	poison <-chan *message.Message
	topic  string
}

// startRouter runs a router with one event handler on topic and returns
// the poison topic's messages.
func startRouter(t *testing.T, maxAttempts int, h bus.HandlerFunc) *routerFixture {
	t.Helper()
	ctx := testCtx(t)
	f := &routerFixture{b: bus.NewInProcess(bus.InProcessConfig{}, nil), store: newFakeAppender(),
		topic: bus.Topic(events.TypeFeedbackReceived)}
	t.Cleanup(func() { _ = f.b.Close() })
	var err error
	f.poison, err = f.b.Subscriber(bus.SubscriberConfig{Group: "test"}).Subscribe(ctx, bus.PoisonTopic)
	if err != nil {
		t.Fatal(err)
	}
	r, err := bus.NewRouter(bus.RouterConfig{Poison: f.b.Publisher(), MaxAttempts: maxAttempts,
		InitialInterval: time.Millisecond, MaxInterval: 5 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = bus.AddEventHandler(r, bus.EventHandler{Name: "interpreter", Topics: []string{f.topic},
		Subscriber: f.b.Subscriber(bus.SubscriberConfig{Group: "interpreter"}), Store: f.store, Handle: h})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	select {
	case <-r.Running():
	case <-ctx.Done():
		t.Fatal("router did not start")
	}
	return f
}

func (f *routerFixture) publish(t *testing.T, evs ...events.Event) {
	t.Helper()
	for i, ev := range evs {
		ev.Position = uint64(i + 1)
		msg, err := bus.ToMessage(ev)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.b.Publisher().Publish(f.topic, msg); err != nil {
			t.Fatal(err)
		}
	}
}

// interpret derives a feedback.interpreted event from a feedback.received.
func interpret(ev events.Event) ([]events.Event, error) {
	out, err := events.Encode(&events.FeedbackInterpreted{InteractionID: "1", FeedbackID: "f", Polarity: 1,
		Strength: 1, Confidence: 1, InterpreterVersion: "v1"}, events.Meta{})
	out.ID = uuid.Nil // let the helper derive it
	return []events.Event{out}, err
}

// handled returns a channel that gets the number of each call.
func counter() (func() int, *atomic.Int32) {
	var n atomic.Int32
	return func() int { return int(n.Add(1)) }, &n
}

// waitFor waits until cond holds for the store (checked after each append).
func (f *fakeAppender) waitFor(t *testing.T, cond func(calls int, evs []events.Event) bool) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		f.mu.Lock()
		ok, changed := cond(f.calls, f.evs), f.changed
		f.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatal("condition not met")
		}
	}
}

func nEvents(n int) func(int, []events.Event) bool {
	return func(_ int, evs []events.Event) bool { return len(evs) == n }
}

func TestRouterRetryThenSuccess(t *testing.T) {
	next, calls := counter()
	f := startRouter(t, 5, func(ctx context.Context, ev events.Event) ([]events.Event, error) {
		if next() < 3 {
			return nil, errors.New("flaky")
		}
		return interpret(ev)
	})
	f.store.mu.Lock()
	f.store.fail = 1 // the first append fails too: a 4th call is needed
	f.store.mu.Unlock()
	cause := feedback(t, 1, 1)
	f.publish(t, cause)
	f.store.waitFor(t, nEvents(1))
	if calls.Load() != 4 {
		t.Fatalf("handler called %d times, want 4", calls.Load())
	}
	none(t, f.poison)
	d := f.store.events()[0]
	if d.ID != events.DeterministicID(cause.ID.String(), "interpreter", events.TypeFeedbackInterpreted, "0") {
		t.Fatalf("derived id %s is not the deterministic one", d.ID)
	}
}

func TestRouterPoisonAfterMaxAttempts(t *testing.T) {
	next, calls := counter()
	f := startRouter(t, 3, func(ctx context.Context, ev events.Event) ([]events.Event, error) {
		if ev.Data != nil && strings.Contains(string(ev.Data), "f1-2") {
			return interpret(ev) // the second message is fine
		}
		next()
		return nil, errors.New("grader exploded")
	})
	bad, good := feedback(t, 1, 1), feedback(t, 1, 2)
	f.publish(t, bad, good)
	p := recv(t, f.poison)
	p.Ack()
	if calls.Load() != 3 {
		t.Fatalf("handler called %d times before poisoning, want 3", calls.Load())
	}
	if p.UUID != bad.ID.String() {
		t.Fatalf("poisoned %s, want %s", p.UUID, bad.ID)
	}
	if r := p.Metadata.Get(middleware.ReasonForPoisonedKey); !strings.Contains(r, "grader exploded") {
		t.Fatalf("reason %q", r)
	}
	if h := p.Metadata.Get(middleware.PoisonedHandlerKey); h != "interpreter" {
		t.Fatalf("handler %q", h)
	}
	if ev, err := bus.FromMessage(p); err != nil || ev.ID != bad.ID {
		t.Fatalf("poisoned message should still carry the event: %v", err)
	}
	// acked: the next message (same stream) is handled
	f.store.waitFor(t, nEvents(1))
	none(t, f.poison)
}

func TestRouterPanicRecovered(t *testing.T) {
	next, calls := counter()
	f := startRouter(t, 4, func(ctx context.Context, ev events.Event) ([]events.Event, error) {
		if strings.Contains(string(ev.Data), "f1-1") {
			next()
			panic("nil map somewhere")
		}
		if strings.Contains(string(ev.Data), "f2-1") && next() == 5 { // panics once, then works
			panic("once")
		}
		return interpret(ev)
	})
	f.publish(t, feedback(t, 1, 1))
	p := recv(t, f.poison)
	p.Ack()
	if calls.Load() != 4 {
		t.Fatalf("panicking handler called %d times, want 4", calls.Load())
	}
	if r := p.Metadata.Get(middleware.ReasonForPoisonedKey); !strings.Contains(r, "nil map somewhere") {
		t.Fatalf("reason %q", r)
	}
	f.publish(t, feedback(t, 2, 1))
	f.store.waitFor(t, nEvents(1))
	none(t, f.poison)
}

func TestRouterPermanentErrorsSkipRetries(t *testing.T) {
	next, calls := counter()
	f := startRouter(t, 5, func(ctx context.Context, ev events.Event) ([]events.Event, error) {
		next()
		if strings.Contains(string(ev.Data), "f1-1") {
			return nil, bus.Permanent(errors.New("cannot interpret"))
		}
		d, err := interpret(ev)
		d[0].Data = []byte("{") // the store rejects it: ErrMalformed
		return d, err
	})
	f.publish(t, feedback(t, 1, 1))
	p := recv(t, f.poison)
	p.Ack()
	if calls.Load() != 1 {
		t.Fatalf("called %d times, want 1", calls.Load())
	}
	f.publish(t, feedback(t, 2, 1))
	p = recv(t, f.poison)
	p.Ack()
	if calls.Load() != 2 || !strings.Contains(p.Metadata.Get(middleware.ReasonForPoisonedKey), "malformed") {
		t.Fatalf("called %d times, reason %q", calls.Load(), p.Metadata.Get(middleware.ReasonForPoisonedKey))
	}
	// a message that is not an event: poisoned without calling the handler
	junk := message.NewMessage(uuid.NewString(), []byte("junk"))
	if err := f.b.Publisher().Publish(f.topic, junk); err != nil {
		t.Fatal(err)
	}
	p = recv(t, f.poison)
	p.Ack()
	if p.UUID != junk.UUID || calls.Load() != 2 {
		t.Fatalf("poisoned %s after %d calls", p.UUID, calls.Load())
	}
}

func TestRouterCorrelationAndIdempotency(t *testing.T) {
	f := startRouter(t, 3, func(ctx context.Context, ev events.Event) ([]events.Event, error) {
		d, err := interpret(ev)
		other, _ := interpret(ev)
		other[0].Stream = "version-v1" // a second stream, appended separately
		other[0].CorrelationID = "explicit"
		return append(d, other...), err
	})
	cause := feedback(t, 5, 1)
	cause.CausationID = "gateway"
	f.publish(t, cause, cause) // delivered twice (at-least-once)
	f.store.waitFor(t, func(calls int, _ []events.Event) bool { return calls == 4 })
	got := f.store.events()
	if len(got) != 2 {
		t.Fatalf("store has %d events, want 2 (duplicates must dedupe by id)", len(got))
	}
	d := got[0]
	if d.Stream != cause.Stream || d.CorrelationID != "corr-5" || d.CausationID != cause.ID.String() || d.Tenant != "acme" {
		t.Fatalf("derived envelope not propagated: %+v", d)
	}
	if got[1].Stream != "version-v1" || got[1].CorrelationID != "explicit" || got[1].ID == d.ID {
		t.Fatalf("second derived event: %+v", got[1])
	}
}

func TestRouterMessageCorrelationMiddleware(t *testing.T) {
	b := bus.NewInProcess(bus.InProcessConfig{}, nil)
	defer b.Close()
	ctx := testCtx(t)
	r, err := bus.NewRouter(bus.RouterConfig{Poison: b.Publisher()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sub := b.Subscriber(bus.SubscriberConfig{Group: "g"})
	r.AddHandler("copy", "in", sub, "out", b.Publisher(), func(msg *message.Message) ([]*message.Message, error) {
		return []*message.Message{message.NewMessage(uuid.NewString(), nil)}, nil
	})
	out, err := b.Subscriber(bus.SubscriberConfig{Group: "g"}).Subscribe(ctx, "out")
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	defer func() { cancel(); <-done }()
	in := message.NewMessage(uuid.NewString(), nil)
	in.Metadata.Set(bus.MetaCorrelationID, "c-42")
	if err := b.Publisher().Publish("in", in); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, out); m.Metadata.Get(bus.MetaCorrelationID) != "c-42" {
		t.Fatalf("correlation id not propagated: %v", m.Metadata)
	}
}

func TestRouterConfigValidation(t *testing.T) {
	if _, err := bus.NewRouter(bus.RouterConfig{}, nil); err == nil {
		t.Fatal("missing poison publisher accepted")
	}
	b := bus.NewInProcess(bus.InProcessConfig{}, nil)
	if _, err := bus.NewRouter(bus.RouterConfig{Poison: b.Publisher(), MaxAttempts: -1}, nil); err == nil {
		t.Fatal("negative attempts accepted")
	}
	r, _ := bus.NewRouter(bus.RouterConfig{Poison: b.Publisher()}, nil)
	h := bus.EventHandler{Name: "x", Topics: []string{"a", "b"}, Subscriber: b.Subscriber(bus.SubscriberConfig{}),
		Store: newFakeAppender(), Handle: func(context.Context, events.Event) ([]events.Event, error) { return nil, nil }}
	if err := bus.AddEventHandler(r, h); err != nil {
		t.Fatal(err)
	}
	if err := bus.AddEventHandler(r, h); err == nil {
		t.Fatal("duplicate handler accepted")
	}
	if _, ok := r.Handlers()["x@a"]; !ok {
		t.Fatalf("handlers: %v", r.Handlers())
	}
	h.Topics = nil
	if err := bus.AddEventHandler(r, h); err == nil {
		t.Fatal("no topics accepted")
	}
}
