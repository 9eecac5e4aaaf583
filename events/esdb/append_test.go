package esdb

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"citizen/events"
	"citizen/events/eventstest"
)

// The tests below drive Append against the fake server: which retries are
// answered from the stored copies, which partial batches are refused, and
// that no append reads more than its batch's length.

func fakeStore(t *testing.T) (*Store, *fakeServer) {
	t.Helper()
	f := newFake()
	s := newStore(Config{}, f)
	t.Cleanup(func() { s.Close() })
	return s, f
}

func batch(t *testing.T, n int, tag string) []events.Event {
	out := make([]events.Event, n)
	for i := range out {
		out[i] = eventstest.Feedback(t, fmt.Sprintf("%s-%d", tag, i))
	}
	return out
}

func mustAppend(t *testing.T, s *Store, stream string, exp events.ExpectedRevision, evs ...events.Event) events.AppendResult {
	t.Helper()
	r, err := s.Append(context.Background(), stream, exp, evs...)
	if err != nil {
		t.Fatalf("append %s: %v", exp, err)
	}
	return r
}

func TestAppendExactRetry(t *testing.T) {
	s, f := fakeStore(t)
	b := batch(t, 3, "b")
	r1 := mustAppend(t, s, "st", events.NoStream, b...)
	if r1.NextRevision != 2 || r1.FirstPosition >= r1.LastPosition {
		t.Fatalf("first append %+v", r1)
	}
	// The same call again, and with an expectation that no longer holds
	// or never did: the stored copies, nothing written.
	for _, exp := range []events.ExpectedRevision{events.NoStream, events.Exact(7), events.Exact(0)} {
		if r := mustAppend(t, s, "st", exp, b...); r != r1 {
			t.Fatalf("retry with %s: %+v, want %+v", exp, r, r1)
		}
	}
	ev := eventstest.Feedback(t, "exact")
	r3 := mustAppend(t, s, "st", events.Exact(2), ev)
	mustAppend(t, s, "st", events.Exact(3), eventstest.Feedback(t, "after"))
	// A late retry: the stream moved on, the server restarted.
	f.restart()
	if r := mustAppend(t, s, "st", events.Exact(2), ev); r != r3 {
		t.Fatalf("late exact retry: %+v, want %+v", r, r3)
	}
	if n := f.streamLen("st"); n != 5 {
		t.Fatalf("stream has %d events, want 5", n)
	}
	if f.maxCount > 3 {
		t.Fatalf("a read asked for %d events; batches have at most 3", f.maxCount)
	}
}

func TestAppendAnyRetry(t *testing.T) {
	s, f := fakeStore(t)
	b := batch(t, 2, "a")
	r1 := mustAppend(t, s, "st", events.Any, b...)
	// Right after a lost reply: the tail, without asking the server.
	calls := f.appends
	if r := mustAppend(t, s, "st", events.Any, b...); r != r1 {
		t.Fatalf("tail retry: %+v, want %+v", r, r1)
	}
	if r := mustAppend(t, s, "st", events.StreamExists, b...); r != r1 {
		t.Fatalf("StreamExists tail retry: %+v, want %+v", r, r1)
	}
	if f.appends != calls {
		t.Fatalf("a tail retry reached the server")
	}
	// Other events after it: the server's idempotency cache answers.
	mustAppend(t, s, "st", events.Any, eventstest.Feedback(t, "other"))
	if r := mustAppend(t, s, "st", events.Any, b...); r != r1 {
		t.Fatalf("cached retry: %+v, want %+v", r, r1)
	}
	if n := f.streamLen("st"); n != 3 {
		t.Fatalf("stream has %d events, want 3", n)
	}
	// Out of the cache and not the tail: written again, as the package
	// doc says.
	f.restart()
	r := mustAppend(t, s, "st", events.Any, b...)
	if r == r1 || f.streamLen("st") != 5 {
		t.Fatalf("retry after restart: %+v (stream %d events); the documented limit changed", r, f.streamLen("st"))
	}
	if f.maxCount > 2 {
		t.Fatalf("a read asked for %d events; batches have at most 2", f.maxCount)
	}
}

func TestAppendPartialBatch(t *testing.T) {
	cases := []struct {
		name  string
		setup func(s *Store, a, b events.Event)
		exp   events.ExpectedRevision
	}{
		// a and b stored right after revision 0; the batch a, b, c.
		{"exact", func(s *Store, a, b events.Event) { mustAppend(t, s, "st", events.Exact(0), a, b) }, events.Exact(0)},
		{"no stream", func(s *Store, a, b events.Event) {}, events.NoStream},
		// a is the stream's last event.
		{"any tail", func(s *Store, a, b events.Event) { mustAppend(t, s, "st", events.Any, a) }, events.Any},
		// a is stored with others after it; the server's cache finds it.
		{"any cached", func(s *Store, a, b events.Event) {
			mustAppend(t, s, "st", events.Any, a)
			mustAppend(t, s, "st", events.Any, eventstest.Feedback(t, "x"))
		}, events.Any},
		{"stream exists cached", func(s *Store, a, b events.Event) {
			mustAppend(t, s, "st", events.Any, a)
			mustAppend(t, s, "st", events.Any, eventstest.Feedback(t, "x"))
		}, events.StreamExists},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, f := fakeStore(t)
			evs := batch(t, 3, "p")
			if c.exp == events.NoStream {
				mustAppend(t, s, "st", events.NoStream, evs[0], evs[1])
			} else {
				mustAppend(t, s, "st", events.NoStream, eventstest.Feedback(t, "seed"))
				c.setup(s, evs[0], evs[1])
			}
			before := f.streamLen("st")
			_, err := s.Append(context.Background(), "st", c.exp, evs...)
			if !errors.Is(err, events.ErrMalformed) || errors.Is(err, events.ErrWrongExpectedRevision) {
				t.Fatalf("partial batch: %v, want ErrMalformed", err)
			}
			if n := f.streamLen("st"); n != before {
				t.Fatalf("refused batch wrote %d events", n-before)
			}
		})
	}
}

func TestAppendWrongRevision(t *testing.T) {
	s, _ := fakeStore(t)
	mustAppend(t, s, "st", events.NoStream, batch(t, 3, "w")...)
	for _, c := range []struct {
		stream string
		exp    events.ExpectedRevision
		exists bool
		actual uint64
	}{
		{"st", events.Exact(1), true, 2},
		{"st", events.Exact(9), true, 2},
		{"st", events.NoStream, true, 2},
		{"none", events.StreamExists, false, 0},
		{"none", events.Exact(0), false, 0},
	} {
		_, err := s.Append(context.Background(), c.stream, c.exp, eventstest.Feedback(t, "fresh"))
		var wr *events.WrongRevisionError
		if !errors.As(err, &wr) || wr.Exists != c.exists || wr.Actual != c.actual || wr.Expected != c.exp {
			t.Errorf("%s on %s: %v, want wrong revision (exists %v, actual %d)", c.exp, c.stream, err, c.exists, c.actual)
		}
	}
}

func TestBatchStart(t *testing.T) {
	for _, c := range []struct {
		exp   events.ExpectedRevision
		acked uint64
		n     int
		want  uint64
		ok    bool
	}{
		{events.Exact(4), 99, 3, 5, true},
		{events.NoStream, 99, 3, 0, true},
		{events.Any, 9, 3, 7, true},
		{events.StreamExists, 2, 3, 0, true},
		{events.Any, 1, 3, 0, false},
	} {
		got, ok := batchStart(c.exp, c.acked, c.n)
		if got != c.want || ok != c.ok {
			t.Errorf("batchStart(%s, %d, %d) = %d, %v; want %d, %v", c.exp, c.acked, c.n, got, ok, c.want, c.ok)
		}
	}
}
