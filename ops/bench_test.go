package ops

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"citizen/events"
	"citizen/events/memstore"

	"github.com/labstack/echo/v4"
)

// BenchmarkStream measures GET /v1/ops/stream over a real HTTP connection
// on loopback: latency=one event in flight (append to the store, read by
// the client; ms-p99), burst=the time to deliver events appended in
// back to back, one append per event (events/s).
func BenchmarkStream(b *testing.B) {
	for _, mode := range []string{"latency", "burst"} {
		b.Run("mode="+mode, func(b *testing.B) {
			store := memstore.New(memstore.Config{})
			e := echo.New()
			if _, err := Register(e, Deps{Store: store}); err != nil {
				b.Fatal(err)
			}
			srv := httptest.NewServer(e)
			defer srv.Close()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v1/ops/stream?type=interaction.evaluated", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			defer resp.Body.Close()
			br := bufio.NewReaderSize(resp.Body, 1<<16)
			readEvent := func() {
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						b.Fatal(err)
					}
					if strings.HasPrefix(line, "data: ") {
						return
					}
				}
			}
			mk := func(i int) events.Event {
				id := fmt.Sprintf("b%d", i)
				ev, err := events.Encode(&events.InteractionEvaluated{InteractionID: id, Seq: 1, TaskType: "qa", ModelVersion: "v1",
					Reward: 0.5, AnswerLength: 120, RubricVersion: "r", EvaluatorVersion: "e",
					Graders: []events.GraderResult{{Name: "exact", Version: "1", Score: 1, Weight: 1, Explanation: "matches the expected answer"}}},
					events.Meta{Stream: events.InteractionStream(id), Tenant: "acme"})
				if err != nil {
					b.Fatal(err)
				}
				return ev
			}
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			if mode == "latency" {
				for i := 0; i < b.N; i++ {
					ev := mk(i)
					t0 := time.Now()
					if _, err := store.Append(ctx, ev.Stream, events.Any, ev); err != nil {
						b.Fatal(err)
					}
					readEvent()
					lat = append(lat, time.Since(t0))
				}
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "ms-p99")
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-p50")
				return
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				for i := 0; i < b.N; i++ {
					readEvent()
				}
			}()
			for i := 0; i < b.N; i++ {
				ev := mk(i)
				if _, err := store.Append(ctx, ev.Stream, events.Any, ev); err != nil {
					b.Fatal(err)
				}
			}
			<-done
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
