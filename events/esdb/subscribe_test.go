package esdb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"citizen/events"
	"citizen/events/eventstest"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// collector is a handler that records what it receives and signals when
// it holds n events.
type collector struct {
	mu   sync.Mutex
	got  []events.Event
	want int
	full chan struct{}
}

func newCollector(want int) *collector { return &collector{want: want, full: make(chan struct{})} }

func (c *collector) handle(_ context.Context, ev events.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, ev)
	if len(c.got) == c.want {
		close(c.full)
	}
	return nil
}

func (c *collector) expect(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.want, c.full = n, make(chan struct{})
	if len(c.got) >= n {
		close(c.full)
	}
}

func (c *collector) wait(t *testing.T) {
	t.Helper()
	select {
	case <-c.full:
	case <-time.After(10 * time.Second):
		c.mu.Lock()
		defer c.mu.Unlock()
		t.Fatalf("timed out with %d of %d events", len(c.got), c.want)
	}
}

func (c *collector) ids() []uuid.UUID {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]uuid.UUID, len(c.got))
	for i, ev := range c.got {
		out[i] = ev.ID
	}
	return out
}

func appendN(t *testing.T, s *Store, n int, tag string) []uuid.UUID {
	t.Helper()
	var ids []uuid.UUID
	for i := range n {
		ev := eventstest.Feedback(t, fmt.Sprintf("%s-%d", tag, i))
		mustAppend(t, s, fmt.Sprintf("interaction-%d", i%3), events.Any, ev)
		ids = append(ids, ev.ID)
	}
	return ids
}

// subscribe runs s.Subscribe in the background; the returned function
// cancels it and returns its error.
func subscribe(s *Store, after uint64, f events.Filter, h events.Handler) (stop func() error, done <-chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Subscribe(ctx, after, f, h) }()
	return func() error { cancel(); return <-errc }, errc
}

// A subscription dropped again and again, at the start, mid catch-up and
// live, by a server that sends the event at the resume position again,
// delivers every event once, in order, and resumes after the last event
// it received.
func TestSubscribeResumesWithoutGapsOrDuplicates(t *testing.T) {
	f := newFake()
	f.inclusive = true
	s := newStore(Config{ResumeInitial: time.Millisecond, ResumeMax: 2 * time.Millisecond}, f)
	defer s.Close()
	ids := appendN(t, s, 20, "stored")
	unavailable := status.Error(codes.Unavailable, "node shutting down")
	f.plans = []subPlan{
		{dropAfter: 4, dropErr: unavailable},
		{openErr: fmt.Errorf("failed to construct subscription. Reason: %w", unavailable)},
		{dropAfter: 0, dropErr: status.Error(codes.Internal, "stream terminated by RST_STREAM")},
		{dropAfter: 8, dropErr: io.EOF},
		{dropAfter: 9, dropErr: status.Error(codes.DeadlineExceeded, "deadline")},
		{dropAfter: 3, dropErr: unavailable}, // live
	}
	c := newCollector(20)
	stop, _ := subscribe(s, 0, events.Filter{}, c.handle)
	c.wait(t)
	ids = append(ids, appendN(t, s, 5, "live")...)
	c.expect(25)
	c.wait(t)
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Subscribe after cancel: %v", err)
	}
	if got := c.ids(); !slices.Equal(got, ids) {
		t.Fatalf("delivered %d events, want the %d appended in order once:\n%v\n%v", len(got), len(ids), got, ids)
	}
	// Each resume starts at the last event received before the drop.
	opens := f.opened()
	if len(opens) != 7 {
		t.Fatalf("%d subscriptions opened, want 7", len(opens))
	}
	all := f.all
	// A resumed subscription sends the event at its start again (counted
	// in its dropAfter): 0-3 | open fails | drops at once | 3-10 | 10-18 |
	// 18-20, live | 20 on.
	wantFrom := []esdb.AllPosition{esdb.Start{}, all[3].Position, all[3].Position, all[3].Position,
		all[10].Position, all[18].Position, all[20].Position}
	for i, w := range wantFrom {
		if opens[i] != w {
			t.Errorf("subscription %d from %+v, want %+v", i, opens[i], w)
		}
	}
}

// Events the filter skips move the resume position too, and a
// subscription that starts after a position starts there.
func TestSubscribeResumesAfterFilteredEvents(t *testing.T) {
	f := newFake()
	s := newStore(Config{ResumeInitial: time.Millisecond, ResumeMax: time.Millisecond}, f)
	defer s.Close()
	appendN(t, s, 9, "x") // interaction-0, -1, -2, -0, ...
	f.plans = []subPlan{{dropAfter: 4, dropErr: status.Error(codes.Unavailable, "gone")}}
	after := f.all[1].Position.Prepare
	c := newCollector(2) // interaction-0 after position 1: events 3 and 6
	stop, _ := subscribe(s, after, events.Filter{StreamPrefixes: []string{"interaction-0"}}, c.handle)
	c.wait(t)
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	opens := f.opened()
	if len(opens) != 2 || opens[0] != (esdb.Position{Commit: after, Prepare: after}) || opens[1] != f.all[5].Position {
		t.Fatalf("opened from %+v, want after %d then after event 5 (filtered out)", opens, after)
	}
	if got := c.ids(); len(got) != 2 || got[0] != f.all[3].EventID || got[1] != f.all[6].EventID {
		t.Fatalf("delivered %v", got)
	}
}

func TestSubscribeStops(t *testing.T) {
	t.Run("close while live", func(t *testing.T) {
		f := newFake()
		s := newStore(Config{}, f)
		appendN(t, s, 2, "c")
		c := newCollector(2)
		_, done := subscribe(s, 0, events.Filter{}, c.handle)
		c.wait(t)
		s.Close()
		if err := <-done; !errors.Is(err, events.ErrClosed) {
			t.Fatalf("Subscribe after Close: %v", err)
		}
	})
	t.Run("close while waiting to resume", func(t *testing.T) {
		f := newFake()
		s := newStore(Config{ResumeInitial: time.Hour}, f)
		f.plans = []subPlan{{openErr: status.Error(codes.Unavailable, "down")}}
		_, done := subscribe(s, 0, events.Filter{}, newCollector(1).handle)
		for len(f.opened()) == 0 {
			time.Sleep(time.Millisecond)
		}
		s.Close()
		select {
		case err := <-done:
			if !errors.Is(err, events.ErrClosed) {
				t.Fatalf("Subscribe after Close: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not end the backoff wait")
		}
	})
	t.Run("handler error", func(t *testing.T) {
		f := newFake()
		s := newStore(Config{}, f)
		defer s.Close()
		appendN(t, s, 3, "h")
		boom := errors.New("boom")
		err := s.Subscribe(context.Background(), 0, events.Filter{}, func(context.Context, events.Event) error { return boom })
		if !errors.Is(err, boom) || len(f.opened()) != 1 {
			t.Fatalf("handler error: %v after %d subscriptions", err, len(f.opened()))
		}
	})
	t.Run("permanent error", func(t *testing.T) {
		f := newFake()
		s := newStore(Config{ResumeInitial: time.Millisecond}, f)
		defer s.Close()
		f.plans = []subPlan{
			{dropAfter: 0, dropErr: status.Error(codes.Unavailable, "down")},
			{openErr: status.Error(codes.InvalidArgument, "bad filter")},
		}
		err := s.Subscribe(context.Background(), 0, events.Filter{}, newCollector(1).handle)
		if status.Code(err) != codes.InvalidArgument || len(f.opened()) != 2 {
			t.Fatalf("permanent error: %v after %d subscriptions", err, len(f.opened()))
		}
	})
}

// waits records the resumer's backoff waits; it cancels after stopAt.
type waits struct {
	d      []time.Duration
	stopAt int
	cancel context.CancelFunc
}

func (w *waits) wait(ctx context.Context, d time.Duration) error {
	w.d = append(w.d, d)
	if len(w.d) == w.stopAt {
		w.cancel()
	}
	return ctx.Err()
}

func TestResumerBackoffCappedAndCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	w := &waits{stopAt: 8, cancel: cancel}
	opens := 0
	r := &resumer{
		open: func(context.Context, esdb.AllPosition) (subscription, error) {
			opens++
			return nil, status.Error(codes.Unavailable, "down")
		},
		closed:  make(chan struct{}),
		backoff: backoff{initial: 10 * time.Millisecond, max: 80 * time.Millisecond},
		wait:    w.wait,
		log:     newStore(Config{}, newFake()).log,
	}
	if err := r.run(ctx, 0, newCollector(1).handle); !errors.Is(err, context.Canceled) {
		t.Fatalf("run after cancel: %v", err)
	}
	nominal := []time.Duration{10, 20, 40, 80, 80, 80, 80, 80}
	if len(w.d) != len(nominal) || opens != len(nominal) {
		t.Fatalf("%d waits, %d opens; want %d", len(w.d), opens, len(nominal))
	}
	for i, n := range nominal {
		n *= time.Millisecond
		if w.d[i] < n/2 || w.d[i] > n {
			t.Errorf("wait %d: %v, want within [%v, %v]", i, w.d[i], n/2, n)
		}
	}
}

// A subscription that received events before its drop starts the backoff
// over; one that received nothing does not.
func TestResumerBackoffResetsOnProgress(t *testing.T) {
	f := newFake()
	s := newStore(Config{}, f)
	appendN(t, s, 3, "r")
	down := status.Error(codes.Unavailable, "down")
	f.plans = []subPlan{{dropAfter: 0, dropErr: down}, {dropAfter: 0, dropErr: down}, {dropAfter: 1, dropErr: down},
		{dropAfter: 0, dropErr: down}, {dropAfter: 1, dropErr: down}}
	ctx, cancel := context.WithCancel(context.Background())
	w := &waits{stopAt: 5, cancel: cancel}
	r := &resumer{
		open: func(ctx context.Context, from esdb.AllPosition) (subscription, error) {
			return f.SubscribeToAll(ctx, esdb.SubscribeToAllOptions{From: from})
		},
		closed:  make(chan struct{}),
		backoff: backoff{initial: 8 * time.Millisecond, max: time.Second},
		wait:    w.wait,
		log:     s.log,
	}
	r.run(ctx, 0, newCollector(3).handle)
	nominal := []time.Duration{8, 16, 8, 16, 8}
	for i, n := range nominal {
		n *= time.Millisecond
		if i >= len(w.d) || w.d[i] < n/2 || w.d[i] > n {
			t.Fatalf("waits %v, want nominal %v ms", w.d, nominal)
		}
	}
}

func TestTransient(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{status.Error(codes.Unavailable, ""), true},
		{status.Error(codes.DeadlineExceeded, ""), true},
		{status.Error(codes.Aborted, ""), true},
		{status.Error(codes.Internal, "RST_STREAM"), true},
		{status.Error(codes.Unknown, ""), true},
		{fmt.Errorf("wrapped: %w", status.Error(codes.Unavailable, "")), true},
		{io.EOF, true},
		{errors.New("failed to initiate subscription"), true},
		{status.Error(codes.Unauthenticated, ""), false},
		{status.Error(codes.PermissionDenied, ""), false},
		{status.Error(codes.InvalidArgument, "bad filter"), false},
		{status.Error(codes.Unimplemented, ""), false},
		{fmt.Errorf("failed to construct subscription. Reason: %w", status.Error(codes.Unauthenticated, "")), false},
	} {
		if got := transient(c.err); got != c.want {
			t.Errorf("transient(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
