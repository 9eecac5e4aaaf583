package parallel

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

// Every index is handed out once, on at most the asked number of
// goroutines; the first error stops the rest and is returned; a
// cancelled context is returned as such.
func TestEach(t *testing.T) {
	var seen [100]atomic.Int32
	var running, most atomic.Int32
	err := Each(context.Background(), len(seen), 4, func(_ context.Context, i int) error {
		r := running.Add(1)
		for m := most.Load(); r > m && !most.CompareAndSwap(m, r); m = most.Load() {
		}
		seen[i].Add(1)
		running.Add(-1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range seen {
		if seen[i].Load() != 1 {
			t.Fatalf("index %d called %d times", i, seen[i].Load())
		}
	}
	if most.Load() > 4 {
		t.Fatalf("%d calls at once with 4 workers", most.Load())
	}
	boom := errors.New("boom")
	var calls atomic.Int32
	err = Each(context.Background(), 1000, 3, func(ctx context.Context, i int) error {
		calls.Add(1)
		if i == 10 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || calls.Load() == 1000 {
		t.Fatalf("error %v after %d calls", err, calls.Load())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Each(ctx, 10, 2, func(context.Context, int) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
	if err := Each(context.Background(), 0, 2, func(context.Context, int) error { return boom }); err != nil {
		t.Fatalf("no work: %v", err)
	}
}
