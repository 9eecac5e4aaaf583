package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"citizen/events"
	"citizen/events/eventstest"
)

type acked struct {
	stream   string
	revision uint64
	position uint64
}

// TestCrashDuringAppends crashes PostgreSQL (pg_ctl stop -m immediate: no
// checkpoint, shared buffers and unflushed WAL lost, recovery on restart)
// while 16 writers append and a subscriber follows, then restarts it.
// Writers get ErrUnavailable while it is down and retry the same event
// (same id, same expected revision) until it is acknowledged. Afterwards
// every acknowledged event is stored at the position and revision it was
// acknowledged with, nothing is stored twice, positions are 1..N without
// gaps, and the subscriber, which rode out the outage, saw exactly that
// sequence.
func TestCrashDuringAppends(t *testing.T) {
	c := privateCluster(t)
	schema := newSchema(t, c.url)
	s := openT(t, Config{URL: c.url, Schema: schema, RetryTimeout: 300 * time.Millisecond, PollInterval: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var mu sync.Mutex
	ack := map[string]acked{} // by event id
	var nAcked, nUnavailable, nFailed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stream := fmt.Sprintf("crash-%d", w)
			exp := events.NoStream
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				n := 1 + i%3
				batch := make([]events.Event, n)
				for j := range batch {
					batch[j] = eventstest.Feedback(t, fmt.Sprintf("w%d-%d-%d", w, i, j))
				}
				for {
					r, err := s.Append(ctx, stream, exp, batch...)
					if err == nil {
						mu.Lock()
						for j := range batch {
							ack[batch[j].ID.String()] = acked{stream, r.NextRevision - uint64(n-1-j), r.FirstPosition + uint64(j)}
						}
						mu.Unlock()
						nAcked.Add(int64(n))
						exp = events.Exact(r.NextRevision)
						break
					}
					if !errors.Is(err, ErrUnavailable) {
						nFailed.Add(1)
						errs <- fmt.Errorf("writer %d: %w", w, err)
						return
					}
					nUnavailable.Add(1)
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	sub := newSeqCollector()
	sctx, scancel := context.WithCancel(ctx)
	subDone := make(chan error, 1)
	go func() { subDone <- s.Subscribe(sctx, 0, events.Filter{}, sub.handle) }()

	// A writer's error (a lost acknowledged event shows as a wrong
	// expected revision) ends the waits early.
	waitUntil(t, ctx, "acknowledged appends before the crash", func() bool { return nAcked.Load() >= 1500 || nFailed.Load() > 0 })
	c.script(t, "kill")
	before := nAcked.Load()
	time.Sleep(500 * time.Millisecond) // writers fail and retry against a dead server
	c.script(t, "start")
	waitUntil(t, ctx, "acknowledged appends after the restart", func() bool { return nAcked.Load() >= before+1500 || nFailed.Load() > 0 })
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("acknowledged %d events (%d before the crash), %d ErrUnavailable retries by writers; stats %+v",
		nAcked.Load(), before, nUnavailable.Load(), s.Stats())
	if nUnavailable.Load() == 0 {
		t.Fatal("no writer saw the server go away: the crash did not happen during appends")
	}

	// Read back through a new Store, as another process would.
	s2 := openT(t, Config{URL: c.url, Schema: schema})
	all, err := s2.ReadAll(ctx, 0, events.Filter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(ack) {
		t.Fatalf("%d events stored, %d acknowledged (every attempted event was eventually acknowledged)", len(all), len(ack))
	}
	seen := map[string]bool{}
	nextRev := map[string]uint64{}
	for i, ev := range all {
		if ev.Position != uint64(i+1) {
			t.Fatalf("event %d at position %d: positions not 1..N", i, ev.Position)
		}
		id := ev.ID.String()
		if seen[id] {
			t.Fatalf("%s stored twice", id)
		}
		seen[id] = true
		a, ok := ack[id]
		if !ok || a.position != ev.Position || a.stream != ev.Stream || a.revision != ev.Revision {
			t.Fatalf("stored %s at %d (%s rev %d), acknowledged %+v (%v)", id, ev.Position, ev.Stream, ev.Revision, a, ok)
		}
		if ev.Revision != nextRev[ev.Stream] {
			t.Fatalf("%s: revision %d, want %d", ev.Stream, ev.Revision, nextRev[ev.Stream])
		}
		nextRev[ev.Stream]++
	}
	if lp, err := s2.LastPosition(ctx); err != nil || lp != uint64(len(all)) {
		t.Fatalf("LastPosition %d, %v; want %d", lp, err, len(all))
	}
	got := sub.waitFor(t, ctx, len(all))
	scancel()
	if err := <-subDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("subscription ended with %v", err)
	}
	for i := range all {
		if got[i].ID != all[i].ID || got[i].Position != all[i].Position {
			t.Fatalf("subscriber's event %d is %s at %d, store has %s at %d", i, got[i].ID, got[i].Position, all[i].ID, all[i].Position)
		}
	}
}

// waitUntil polls cond every 10 ms until it holds or ctx ends.
func waitUntil(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
	}
}

// seqCollector records a subscription and checks as it goes that
// positions are consecutive (the handler's error ends the subscription).
type seqCollector struct {
	mu   sync.Mutex
	evs  []events.Event
	err  error // the gap found, if any
	wake chan struct{}
}

func newSeqCollector() *seqCollector { return &seqCollector{wake: make(chan struct{}, 1)} }

func (c *seqCollector) handle(_ context.Context, ev events.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.evs); n > 0 && ev.Position != c.evs[n-1].Position+1 || n == 0 && ev.Position != 1 {
		last := uint64(0)
		if n > 0 {
			last = c.evs[n-1].Position
		}
		c.err = fmt.Errorf("subscriber got position %d after %d", ev.Position, last)
		c.signal()
		return c.err
	}
	c.evs = append(c.evs, ev)
	c.signal()
	return nil
}

func (c *seqCollector) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *seqCollector) waitFor(t *testing.T, ctx context.Context, n int) []events.Event {
	t.Helper()
	for {
		c.mu.Lock()
		got, err := append([]events.Event(nil), c.evs...), c.err
		c.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) >= n {
			return got
		}
		select {
		case <-c.wake:
		case <-ctx.Done():
			t.Fatalf("subscriber has %d events, want %d", len(got), n)
		}
	}
}
