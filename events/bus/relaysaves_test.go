package bus_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"citizen/events"
	"citizen/events/bus"
	"citizen/events/memstore"
)

// countingStore counts checkpoint saves.
type countingStore struct {
	events.Store
	saves atomic.Int64
}

func (s *countingStore) SaveCheckpoint(ctx context.Context, name string, pos uint64) error {
	s.saves.Add(1)
	return s.Store.SaveCheckpoint(ctx, name, pos)
}

// relayLagging appends n events one at a time while a consumer group
// acknowledges each event lag events after it was published, and returns
// the relay's checkpoint saves (CheckpointEvery every, no interval).
func relayLagging(tb testing.TB, n, lag, every int) int64 {
	ctx := testCtx(tb)
	mem := memstore.New(memstore.Config{})
	defer mem.Close()
	st := &countingStore{Store: mem}
	topic := bus.Topic(events.TypeFeedbackReceived)
	b := bus.NewInProcess(bus.InProcessConfig{}, nil)
	defer b.Close()
	sub := b.Subscriber(bus.SubscriberConfig{Group: "slow", Parallelism: lag + 1})
	sub.(bus.Reserver).Reserve(topic)
	rctx, stop := context.WithCancel(ctx)
	relay, _ := bus.NewRelay(st, b.Publisher(), bus.RelayConfig{CheckpointEvery: every, CheckpointInterval: time.Hour}, nil)
	done := make(chan error, 1)
	go func() { done <- relay.Run(rctx) }()
	ch, err := sub.Subscribe(ctx, topic)
	if err != nil {
		tb.Fatal(err)
	}
	var held []*message.Message
	for i := range n {
		if _, err := mem.Append(ctx, fmt.Sprintf("interaction-%d", i), events.Any, feedback(tb, 1, i)); err != nil {
			tb.Fatal(err)
		}
		held = append(held, <-ch) // published
		if len(held) > lag {
			held[0].Ack()
			held = held[1:]
		}
	}
	stop()
	if err := <-done; err != nil {
		tb.Fatal(err)
	}
	return st.saves.Load()
}

// A relay whose consumers owe acknowledgements for more events than
// CheckpointEvery saves its checkpoint once per CheckpointEvery
// acknowledged events, not after every published batch.
func TestRelaySavesPerCheckpointEvery(t *testing.T) {
	const n, every = 600, 16
	saves := relayLagging(t, n, 4*every, every)
	if max := int64(n/every + 2); saves > max {
		t.Fatalf("%d checkpoint saves for %d events, want at most %d", saves, n, max)
	}
}

// BenchmarkRelayLagging is the relay under a consumer group that owes 256
// acknowledgements (CheckpointEvery 64); it reports checkpoint saves per
// 1,000 events (a profiling aid; the hot path's figures come from
// `citizen bench gateway`).
func BenchmarkRelayLagging(b *testing.B) {
	const n = 2000
	var saves int64
	for b.Loop() {
		saves += relayLagging(b, n, 256, 64)
	}
	b.ReportMetric(float64(saves)*1000/float64(n)/float64(b.N), "saves/1k-events")
}
