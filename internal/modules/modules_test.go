package modules

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder logs lifecycle steps in order.
type recorder struct {
	mu    sync.Mutex
	steps []string
}

func (r *recorder) add(s string) { r.mu.Lock(); r.steps = append(r.steps, s); r.mu.Unlock() }
func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.steps, " ")
}

// fakeModule runs until cancelled (or fails with fail once started) and
// records its start, drain and stop.
func fakeModule(rec *recorder, name string, deps []string, fail chan error, started chan<- string) Module {
	return Module{Name: name, Deps: deps, Init: func(ctx context.Context) (Service, error) {
		rec.add("init:" + name)
		return WithStop(
			func(ctx context.Context) error {
				if started != nil {
					started <- name
				}
				select {
				case <-ctx.Done():
					rec.add("drain:" + name)
					return nil
				case err := <-fail:
					return err
				}
			},
			func(context.Context) error { rec.add("stop:" + name); return nil },
		), nil
	}}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestManagerOrderAndCleanStop(t *testing.T) {
	rec := &recorder{}
	started := make(chan string, 3)
	m := New(quiet(),
		fakeModule(rec, "gateway", []string{"store"}, nil, started),
		fakeModule(rec, "store", nil, nil, started),
		fakeModule(rec, "reflection", []string{"store", "gateway"}, nil, started),
	)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx, []string{"all"}, time.Second) }()
	for i := 0; i < 3; i++ {
		<-started
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := "init:store init:gateway init:reflection drain:reflection stop:reflection drain:gateway stop:gateway drain:store stop:store"
	if rec.String() != want {
		t.Fatalf("lifecycle:\n got %s\nwant %s", rec, want)
	}
}

func TestManagerFailureStopsTheRest(t *testing.T) {
	rec := &recorder{}
	fail := make(chan error, 1)
	started := make(chan string, 2)
	m := New(quiet(),
		fakeModule(rec, "store", nil, nil, started),
		fakeModule(rec, "gateway", []string{"store"}, fail, started),
	)
	done := make(chan error)
	go func() { done <- m.Run(context.Background(), []string{"gateway"}, time.Second) }()
	<-started
	<-started
	boom := errors.New("listener died")
	fail <- boom
	err := <-done
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "gateway failed") {
		t.Fatalf("want gateway's failure, got %v", err)
	}
	if got := rec.String(); got != "init:store init:gateway stop:gateway drain:store stop:store" {
		t.Fatalf("lifecycle: %s", got)
	}
}

func TestManagerTargetsPullDependencies(t *testing.T) {
	rec := &recorder{}
	m := New(quiet(),
		fakeModule(rec, "store", nil, nil, nil),
		fakeModule(rec, "relay", []string{"store"}, nil, nil),
		fakeModule(rec, "gateway", []string{"store"}, nil, nil),
	)
	order, err := m.Order([]string{"relay"})
	if err != nil || strings.Join(order, ",") != "store,relay" {
		t.Fatalf("order %v %v", order, err)
	}
	if _, err := m.Order([]string{"nope"}); err == nil {
		t.Fatal("unknown module accepted")
	}
	cyc := New(quiet(), fakeModule(rec, "a", []string{"b"}, nil, nil), fakeModule(rec, "b", []string{"a"}, nil, nil))
	if _, err := cyc.Order([]string{"a"}); err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Fatalf("cycle not detected: %v", err)
	}
}

func TestManagerInitFailureStopsStarted(t *testing.T) {
	rec := &recorder{}
	bad := Module{Name: "gateway", Deps: []string{"store"}, Init: func(context.Context) (Service, error) { return nil, errors.New("port in use") }}
	m := New(quiet(), fakeModule(rec, "store", nil, nil, nil), bad)
	err := m.Run(context.Background(), []string{"all"}, time.Second)
	if err == nil || !strings.Contains(err.Error(), "port in use") {
		t.Fatalf("got %v", err)
	}
	if got := rec.String(); got != "init:store drain:store stop:store" {
		t.Fatalf("lifecycle: %s", got)
	}
}
