package events_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"citizen/events"
)

func TestLocalLeaserOneHolder(t *testing.T) {
	var l events.LocalLeaser
	ctx := context.Background()
	a, err := l.Acquire(ctx, "relay")
	if err != nil {
		t.Fatal(err)
	}
	// another name is independent
	other, err := l.Acquire(ctx, "distiller")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release(ctx)

	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := l.Acquire(short, "relay"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Acquire while held: %v, want deadline exceeded", err)
	}
	got := make(chan events.Lease, 1)
	go func() {
		b, err := l.Acquire(ctx, "relay")
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Lost():
	default:
		t.Fatal("Lost not closed by Release")
	}
	if err := a.Release(ctx); err != nil { // twice is fine
		t.Fatal(err)
	}
	b := <-got
	select {
	case <-b.Lost():
		t.Fatal("the new holder's lease is lost")
	default:
	}
	if _, err := l.Acquire(ctx, ""); err == nil {
		t.Fatal("empty name accepted")
	}
}

// A lease that is lost stops the leased work, which runs again once the
// lease is held again; at no time do two runs overlap.
func TestRunLeasedFailsOver(t *testing.T) {
	var l events.LocalLeaser
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var running, maxRunning, starts atomic.Int32
	run := func(ctx context.Context) error {
		n := running.Add(1)
		starts.Add(1)
		for {
			m := maxRunning.Load()
			if n <= m || maxRunning.CompareAndSwap(m, n) {
				break
			}
		}
		<-ctx.Done()
		running.Add(-1)
		return nil
	}
	ctxA, cancelA := context.WithCancel(ctx)
	doneA := make(chan error, 1)
	go func() { doneA <- events.RunLeased(ctxA, &l, "relay", nil, run) }()
	waitFor(t, func() bool { return starts.Load() == 1 })
	doneB := make(chan error, 1)
	go func() { doneB <- events.RunLeased(ctx, &l, "relay", nil, run) }()

	cancelA() // the holder stops: B takes over
	if err := <-doneA; err != nil {
		t.Fatalf("cancelled RunLeased: %v", err)
	}
	waitFor(t, func() bool { return starts.Load() == 2 })
	cancel()
	if err := <-doneB; err != nil {
		t.Fatal(err)
	}
	if maxRunning.Load() != 1 {
		t.Fatalf("%d runs at once", maxRunning.Load())
	}
}

func TestRunLeasedReturnsRunError(t *testing.T) {
	var l events.LocalLeaser
	boom := errors.New("boom")
	err := events.RunLeased(context.Background(), &l, "rollout", nil, func(context.Context) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want boom", err)
	}
	// the lease was released
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ls, err := l.Acquire(ctx, "rollout")
	if err != nil {
		t.Fatalf("lease not released after run failed: %v", err)
	}
	ls.Release(ctx)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}
