package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"citizen/events"
	"citizen/events/memstore"
)

// fakeBacklog answers each group's backlog from a table; a group it does
// not hold is unknown.
type fakeBacklog struct {
	owes map[string]int64
	err  error
}

func (f *fakeBacklog) Backlog(_ context.Context, group string, _ []string) (int64, bool, error) {
	if f.err != nil {
		return 0, false, f.err
	}
	n, ok := f.owes[group]
	return n, ok, nil
}

// The watch adds the events the relay has not published to what each
// known group owes on the bus, says why it is over bus.max_backlog, clears
// once the groups catch up and keeps its verdict while the bus cannot be
// read.
func TestBacklogWatch(t *testing.T) {
	ctx := context.Background()
	st := memstore.New(memstore.Config{})
	for i := range 10 {
		ev, err := events.Encode(&events.FeedbackReceived{InteractionID: fmt.Sprint("i", i), FeedbackID: fmt.Sprint("f", i), Source: "harness", Outcome: "success"},
			events.Meta{Stream: events.InteractionStream(fmt.Sprint("i", i)), Tenant: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Append(ctx, ev.Stream, events.Any, ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.SaveCheckpoint(ctx, "relay", 4); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	groups := map[string][]string{"reflection": {"a"}, "feedback": {"b"}, "memory": {"c"}}
	w, err := NewBacklogWatch(WatchConfig{Store: st, Max: 25, Groups: groups, RelayCheckpoint: "relay"}, reg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	src := &fakeBacklog{owes: map[string]int64{"reflection": 20, "feedback": 1}}
	w.measure(ctx, src, nil)
	if err := w.Err(); err == nil || !strings.Contains(err.Error(), "reflection owes 26 messages") {
		t.Fatalf("20 on the bus + 6 unpublished over 25: %v", err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "citizen_worker_backlog_messages" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got[m.GetLabel()[0].GetValue()] = m.GetGauge().GetValue()
		}
	}
	if len(got) != 2 || got["reflection"] != 26 || got["feedback"] != 7 {
		t.Errorf("gauges %v, want reflection 26 and feedback 7 only (the unknown groups left out)", got)
	}
	src.err = errors.New("brokers down")
	w.measure(ctx, src, nil)
	if w.Err() == nil {
		t.Error("an unreadable bus cleared the verdict")
	}
	src.err = nil
	src.owes["reflection"] = 19
	w.measure(ctx, src, nil)
	if err := w.Err(); err != nil {
		t.Errorf("19 + 6 is not over 25: %v", err)
	}
}
