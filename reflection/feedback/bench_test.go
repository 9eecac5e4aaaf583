package feedback

import (
	"context"
	"fmt"
	"testing"
	"time"

	"citizen/events"
	"citizen/internal/cputime"
)

// reportRates reports events per CPU-second ("events/s", per core) and per
// wall second.
func reportRates(b *testing.B, cpu0 float64) {
	if cpu := cputime.Seconds() - cpu0; cpu > 0 {
		b.ReportMetric(float64(b.N)/cpu, "events/s")
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "wall-events/s")
}

// BenchmarkIngest measures the embedded interpreter ("interpret", over the
// labelled comments) and the whole handler ("handle": decode
// feedback.received, interpret, encode feedback.interpreted). Run with
// -cpu 1:
//
//	go test ./reflection/feedback -run XXX -bench BenchmarkIngest -cpu 1
func BenchmarkIngest(b *testing.B) {
	set := loadLabelled(b)
	e := NewEmbedded()
	ctx := context.Background()
	b.Run("interpret", func(b *testing.B) {
		b.ReportAllocs()
		cpu0 := cputime.Seconds()
		for i := 0; b.Loop(); i++ {
			e.Interpret(ctx, Input{Text: set[i%len(set)].Text})
		}
		reportRates(b, cpu0)
	})
	evs := make([]events.Event, len(set))
	for i, l := range set {
		ev, err := events.Encode(&events.FeedbackReceived{InteractionID: fmt.Sprint(i), FeedbackID: fmt.Sprint(i), Source: "customer", Text: l.Text},
			events.Meta{Stream: events.InteractionStream(fmt.Sprint(i)), Time: time.Unix(0, 0)})
		if err != nil {
			b.Fatal(err)
		}
		evs[i] = ev
	}
	in := NewIngester(IngesterConfig{}, nil)
	b.Run("handle", func(b *testing.B) {
		b.ReportAllocs()
		cpu0 := cputime.Seconds()
		for i := 0; b.Loop(); i++ {
			if out, err := in.Handle(ctx, evs[i%len(evs)]); err != nil || len(out) != 1 {
				b.Fatal(out, err)
			}
		}
		reportRates(b, cpu0)
	})
}
