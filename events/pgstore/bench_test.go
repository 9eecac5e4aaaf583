package pgstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"citizen/events"
	"citizen/events/eventlog"
)

// BenchmarkAppend: durable appends of one 1 KB event per call from 1, 16,
// 64 and 256 goroutines to 1024 streams, on this store (synchronous_commit
// on: each Append returns after the WAL flush of its group's commit) and,
// side by side in the same run, on the embedded log (each Append returns
// after its group's fdatasync). Both check appends as the served
// configuration does (AppendCheck{Lax: true}). Headline: appends/s;
// also ms-p50, ms-p99 and, for pgstore, appends per transaction. The
// "pgstore/gather=off" runs (64 writers) turn off the committer's wait for
// the appenders its last commit released, to show what it buys.
func BenchmarkAppend(b *testing.B) {
	tmpl := benchEvent(b, 1<<10)
	lax := events.AppendCheck{Lax: true}
	for _, writers := range []int{1, 16, 64, 256} {
		backends := []string{"pgstore", "eventlog"}
		if writers == 64 {
			backends = append(backends, "pgstore/gather=off")
		}
		for _, backend := range backends {
			b.Run(fmt.Sprintf("size=1KB/writers=%d/backend=%s", writers, backend), func(b *testing.B) {
				if backend == "pgstore/gather=off" {
					defer func(w time.Duration) { maxGatherWait = w }(maxGatherWait)
					maxGatherWait = 0
					backend = "pgstore"
				}
				var st events.Store
				var pg *Store
				switch backend {
				case "pgstore":
					url := serverURL(b)
					pg = openT(b, Config{URL: url, Schema: newSchema(b, url), Check: lax, MaxConns: 4})
					st = pg
				case "eventlog":
					s, err := eventlog.Open(eventlog.Config{Dir: b.TempDir(), Check: lax, Logger: quiet})
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { s.Close() })
					st = s
				}
				b.SetBytes(int64(len(tmpl.Data)))
				el, lat := runWriters(b, st, writers, tmpl)
				b.ReportMetric(float64(b.N)/el.Seconds(), "appends/s")
				b.ReportMetric(float64(lat[len(lat)/2])/1e6, "ms-p50")
				b.ReportMetric(float64(lat[len(lat)*99/100])/1e6, "ms-p99")
				if pg != nil {
					if s := pg.Stats(); s.Groups > 0 {
						b.ReportMetric(float64(s.Appends)/float64(s.Groups), "appends/txn")
					}
				}
			})
		}
	}
}

// benchEvent returns a feedback.received event of about size bytes of data.
func benchEvent(b testing.TB, size int) events.Event {
	ev, err := events.Encode(&events.FeedbackReceived{InteractionID: "i-bench", FeedbackID: "f", Source: "harness",
		Text: strings.Repeat("x", size-80)}, events.Meta{Tenant: "tenant-a", CorrelationID: "corr"})
	if err != nil {
		b.Fatal(err)
	}
	return ev
}

// runWriters makes b.N appends of one event (a fresh id each) from
// writers goroutines and returns the elapsed time and the sorted
// latencies.
func runWriters(b *testing.B, s events.Store, writers int, tmpl events.Event) (time.Duration, []time.Duration) {
	var next atomic.Int64
	var wg sync.WaitGroup
	lats := make([][]time.Duration, writers)
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ev := tmpl
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				ev.ID = events.NewID()
				t0 := time.Now()
				if _, err := s.Append(ctx, fmt.Sprintf("bench-%d", (int(i)*7+w)%1024), events.Any, ev); err != nil {
					b.Error(err)
					return
				}
				lats[w] = append(lats[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	all := slices.Concat(lats...)
	if len(all) == 0 {
		b.Fatal("no append succeeded")
	}
	slices.Sort(all)
	return el, all
}
