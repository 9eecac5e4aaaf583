package bus_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"citizen/events"
	"citizen/events/bus"
	"citizen/events/memstore"
	"citizen/internal/cputime"
)

// BenchmarkRelayBusHandler measures events/s from the store through the
// relay and the in-process bus to a router handler: b.N events are in the
// store (100 streams) before the clock starts, streams interleaved; it stops when the handler
// has seen them all. derive=1 makes the handler derive one event per input
// and append it to the store (which the relay then publishes too).
func BenchmarkRelayBusHandler(b *testing.B) {
	for _, derive := range []bool{false, true} {
		for _, par := range []int{1, 8} {
			b.Run(fmt.Sprintf("derive=%d/parallelism=%d", map[bool]int{false: 0, true: 1}[derive], par), func(b *testing.B) {
				benchPipeline(b, derive, par)
			})
		}
	}
}

func benchPipeline(b *testing.B, derive bool, par int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := memstore.New(memstore.Config{})
	defer store.Close()
	const streams = 100
	for i := range b.N { // streams interleave, as concurrent interactions do
		s := i % streams
		if _, err := store.Append(ctx, events.InteractionStream(fmt.Sprint(s)), events.Any, feedback(b, s, i)); err != nil {
			b.Fatal(err)
		}
	}
	bb := bus.NewInProcess(bus.InProcessConfig{}, nil)
	defer bb.Close()
	relay, err := bus.NewRelay(store, bb.Publisher(), bus.RelayConfig{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	r, err := bus.NewRouter(bus.RouterConfig{Poison: bb.Publisher()}, nil)
	if err != nil {
		b.Fatal(err)
	}
	var seen atomic.Int64
	all := make(chan struct{})
	n := int64(b.N)
	err = bus.AddEventHandler(r, bus.EventHandler{
		Name:       "bench",
		Topics:     []string{bus.Topic(events.TypeFeedbackReceived)},
		Subscriber: bb.Subscriber(bus.SubscriberConfig{Group: "bench", Parallelism: par}),
		Store:      store,
		Handle: func(ctx context.Context, ev events.Event) ([]events.Event, error) {
			var out []events.Event
			if derive {
				d, err := events.Encode(&events.FeedbackInterpreted{InteractionID: "1", FeedbackID: "f",
					InterpreterVersion: "bench"}, events.Meta{ID: events.DeterministicID(ev.ID.String(), "bench")})
				if err != nil {
					return nil, err
				}
				out = append(out, d)
			}
			if seen.Add(1) == n {
				close(all)
			}
			return out, nil
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cputime.Process()
	start := time.Now()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = relay.Run(ctx) }()
	go func() { defer wg.Done(); _ = r.Run(ctx) }()
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		b.Fatalf("handled %d of %d", seen.Load(), n)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	// CPU time per event is steadier than events/s on a shared machine
	b.ReportMetric(float64((cputime.Process()-cpu0).Microseconds())/float64(b.N), "cpu-us/event")
	cancel()
	wg.Wait()
}
