package bus_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"citizen/events"
	"citizen/events/bus"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runRouterLogged starts and stops a router with three handlers, logging at
// level, and returns what was logged.
func runRouterLogged(t *testing.T, level slog.Level) string {
	t.Helper()
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level}))
	b := bus.NewInProcess(bus.InProcessConfig{}, nil)
	defer b.Close()
	r, err := bus.NewRouter(bus.RouterConfig{Poison: b.Publisher()}, log)
	if err != nil {
		t.Fatal(err)
	}
	err = bus.AddEventHandler(r, bus.EventHandler{Name: "h", Topics: []string{bus.Topic(events.TypeFeedbackReceived),
		bus.Topic(events.TypeInteractionRecorded), bus.Topic(events.TypeInteractionEvaluated)},
		Subscriber: b.Subscriber(bus.SubscriberConfig{Group: "g"}), Store: newFakeAppender(),
		Handle: func(context.Context, events.Event) ([]events.Event, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testCtx(t))
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	<-r.Running()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// The router's lifecycle lines (an "Adding handler" per handler at every
// start) are DEBUG: a start at INFO logs none of them.
func TestRouterLifecycleLogsAtDebug(t *testing.T) {
	if out := runRouterLogged(t, slog.LevelInfo); out != "" {
		t.Fatalf("router logged at INFO:\n%s", out)
	}
	out := runRouterLogged(t, slog.LevelDebug)
	if n := strings.Count(out, `msg="Adding handler"`); n != 3 {
		t.Fatalf("%d Adding handler lines at DEBUG, want 3:\n%s", n, out)
	}
	if strings.Contains(out, "level=INFO") {
		t.Fatalf("router logged at INFO:\n%s", out)
	}
}
