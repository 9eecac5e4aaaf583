package services

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"citizen/events"
	"citizen/events/bus/transport"
	"citizen/events/eventlog"
	"citizen/internal/cputime"
	"citizen/internal/modules"
)

// lagRecorded builds interaction.recorded events like the workplace's: an
// order lookup with a tool call and its result in the history, and 48
// completion tokens with top-5 logprobs; every other one a policy question
// with a reference answer.
func lagRecorded(b *testing.B, run, n int) []events.Event {
	tool := events.Tool{Name: "get_order_status", Parameters: json.RawMessage(`{"type":"object","required":["order_id"],"properties":{"order_id":{"type":"string"}}}`)}
	out := make([]events.Event, n)
	for i := range out {
		lps := make([]events.TokenLogprob, 48)
		for k := range lps {
			lp := -0.05 * float32(k%7)
			lps[k] = events.TokenLogprob{Token: k, Logprob: lp, Top: []events.TopLogprob{
				{Token: k, Logprob: lp}, {Token: k + 1, Logprob: -2}, {Token: k + 2, Logprob: -3}, {Token: k + 3, Logprob: -4}, {Token: k + 4, Logprob: -5}}}
		}
		id := fmt.Sprintf("lag-%d-%d", run, i)
		r := &events.InteractionRecorded{InteractionID: id, Tenant: "acme", ModelVersion: "base", Model: "citizen",
			Metadata: map[string]string{"type": "policy", "expected": "30 days"},
			Messages: []events.ChatMessage{{Role: "user", Content: "What is the refund window?"}},
			Choices: []events.Choice{{Message: events.ChatMessage{Role: "assistant", Content: "You can return items within 30 days of delivery."},
				FinishReason: "stop", Logprobs: lps}}}
		if i%2 == 0 {
			r.Metadata = map[string]string{"type": "order_status", "expected": "shipped"}
			r.Tools = []events.Tool{tool}
			r.Messages = []events.ChatMessage{{Role: "user", Content: fmt.Sprintf("Where is my order K%05d?", i%100000)},
				{Role: "assistant", ToolCalls: []events.ToolCall{{ID: "c1", Name: "get_order_status", Arguments: fmt.Sprintf(`{"order_id":"K%05d"}`, i%100000)}}},
				{Role: "tool", ToolCallID: "c1", Content: `{"status":"shipped","eta":"2026-12-05"}`}}
			r.Choices[0].Message.Content = "Your order has shipped and should arrive on 2026-12-05."
		}
		ev, err := events.Encode(r, events.Meta{Stream: events.InteractionStream(id), Tenant: "acme", CorrelationID: id})
		if err != nil {
			b.Fatal(err)
		}
		out[i] = ev
	}
	return out
}

// BenchmarkReflectionLag measures the lag from interaction.recorded to
// interaction.evaluated under an offered load of 1,000 interactions/s: the
// reflection target of `citizen serve` (durable embedded store, relay,
// in-process bus, the reflection worker's router with the evaluator, the
// detectors and the scoreboard, and the memory indexer it depends on)
// runs in this process; the benchmark appends b.N interaction.recorded
// events on an open-loop schedule (one per millisecond at rate=1000;
// appenders do not wait for each other) and subscribes to the store for
// the evaluations. Lag is the time from an append's return (the recording
// is durable) to its evaluation being delivered by the store's
// subscription. Reported: ms-p50, ms-p99, ms-max; events/s, the
// evaluations per second achieved (first append to last evaluation);
// appended/s, the durable appends per second achieved (below the offered
// rate when the machine cannot keep the schedule). Run:
//
//	go test ./services -run XXX -bench BenchmarkReflectionLag -benchtime 3000x -count 5
//
// "rate=1000/parallelism=1" is the headline: serve's wiring, where each
// consumer group handles one message at a time, so every evaluation waits
// for its own durable append. "parallelism=16" is the same path with the
// bus subscribers allowed 16 messages in flight (the store then commits
// their appends in groups). "rate=200" is serve's wiring at a load this
// shared machine sustains: the lag of the path itself, without queueing.
// cpu-ms/op is the process's CPU time (user+system) per interaction, every
// worker included: 1,000/s needs it below 1 ms per core the process gets.
func BenchmarkReflectionLag(b *testing.B) {
	for _, c := range []struct{ rate, par int }{{1000, 1}, {1000, 16}, {200, 1}} {
		b.Run(fmt.Sprintf("rate=%d/parallelism=%d", c.rate, c.par), func(b *testing.B) { reflectionLag(b, c.rate, c.par) })
	}
}

// reflectionLag offers rate interactions per second with par messages in
// flight per bus subscription.
func reflectionLag(b *testing.B, rate, par int) {
	cfg := DefaultConfig()
	cfg.DataDir = b.TempDir()
	logs := newSyncBuffer()
	app := &App{Config: cfg, Log: NewLogger(LogConfig{Level: "warn", Format: "text"}, logs)}
	stores := make(chan events.Store, 1)
	mods := app.Modules()
	for i := range mods {
		if mods[i].Name == "bus" && par > 1 {
			init := mods[i].Init
			mods[i].Init = func(ctx context.Context) (modules.Service, error) {
				svc, err := init(ctx)
				if ib, ok := app.Bus.(*transport.InProcess); ok {
					ib.Parallelism = par
				}
				return svc, err
			}
		}
		if mods[i].Name == "store" {
			init := mods[i].Init
			mods[i].Init = func(ctx context.Context) (modules.Service, error) {
				svc, err := init(ctx)
				stores <- app.Store
				return svc, err
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- modules.New(app.Log, mods...).Run(ctx, []string{"reflection"}, 30*time.Second) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}()
	var st events.Store
	select {
	case st = <-stores:
	case err := <-done:
		b.Fatal(err)
	}

	evs := lagRecorded(b, 0, b.N)
	appended := make([]time.Time, b.N)
	index := make(map[string]int, b.N)
	for i := range evs {
		index[evs[i].CorrelationID] = i
	}
	after, err := st.LastPosition(ctx)
	if err != nil {
		b.Fatal(err)
	}
	// seen[i] is when interaction i's evaluation was delivered; read
	// after allIn is closed.
	seen := make([]time.Time, b.N)
	delivered := 0
	allIn := make(chan struct{})
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	subDone := make(chan error, 1)
	go func() {
		subDone <- st.Subscribe(sctx, after, events.Filter{Types: []string{events.TypeInteractionEvaluated}}, func(_ context.Context, ev events.Event) error {
			now := time.Now()
			if i, ok := index[ev.CorrelationID]; ok && seen[i].IsZero() {
				seen[i] = now
				if delivered++; delivered == b.N {
					close(allIn)
				}
			}
			return nil
		})
	}()

	stats := func() eventlog.Stats {
		if es, ok := st.(*eventlog.Store); ok {
			return es.Stats()
		}
		return eventlog.Stats{}
	}
	st0, cpu0 := stats(), cputime.Seconds()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	var appendErr error
	var once sync.Once
	for i := range evs {
		if d := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(rate))); d > 0 {
			time.Sleep(d) // pacing the offered load, not synchronisation
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, err := st.Append(ctx, evs[i].Stream, events.NoStream, evs[i])
			now := time.Now()
			if err != nil {
				once.Do(func() { appendErr = err })
				return
			}
			appended[i] = now
		}(i)
	}
	wg.Wait()
	offered := time.Since(start)
	if appendErr != nil {
		b.Fatal(appendErr)
	}
	select {
	case <-allIn:
	case err := <-subDone:
		b.Fatal(err)
	case <-time.After(30*time.Second + 10*offered):
		missing := 0
		for i := range seen {
			if seen[i].IsZero() {
				missing++
			}
		}
		b.Fatalf("%d of %d evaluations still missing %s after the first append; logs:\n%s", missing, b.N, time.Since(start), logs)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	st1, cpu1 := stats(), cputime.Seconds()
	scancel()
	<-subDone

	// An evaluation delivered before its appender goroutine got the
	// append's return (the appender was not scheduled yet) counts as 0.
	lags := make([]float64, b.N)
	for i := range lags {
		lags[i] = max(0, float64(seen[i].Sub(appended[i]).Microseconds())/1000)
	}
	slices.Sort(lags)
	p := func(q float64) float64 { return lags[min(len(lags)-1, int(math.Ceil(q*float64(len(lags))))-1)] }
	b.ReportMetric(p(0.5), "ms-p50")
	b.ReportMetric(p(0.99), "ms-p99")
	b.ReportMetric(lags[len(lags)-1], "ms-max")
	b.ReportMetric(float64(b.N)/offered.Seconds(), "appended/s")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
	b.ReportMetric((cpu1-cpu0)*1000/float64(b.N), "cpu-ms/op")
	if syncs := st1.Syncs - st0.Syncs; syncs > 0 {
		b.ReportMetric(float64(syncs)/float64(b.N), "syncs/op")
		b.ReportMetric(float64((st1.SyncTime-st0.SyncTime).Microseconds())/1000/float64(syncs), "ms/sync")
	}
}
