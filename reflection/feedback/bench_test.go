package feedback

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sort"
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

// BenchmarkInterpretLatency measures the embedded interpreter on the
// comments of testdata/general/train.jsonl with their answers and
// questions, one comment per operation, and reports the 99th percentile
// of the per-comment latency in wall time ("ms-p99"; the target is 5 ms
// on one core) and in the thread's CPU time ("cpu-ms-p99", which does not
// count time the scheduler gave to other processes on a shared machine),
// and the medians. Run on one core:
//
//	go test ./reflection/feedback -run XXX -bench BenchmarkInterpretLatency -cpu 1
func BenchmarkInterpretLatency(b *testing.B) {
	recs := loadGeneral(b, "testdata/general/train.jsonl")
	e := NewEmbedded()
	ctx := context.Background()
	ins := make([]Input, len(recs))
	for i, r := range recs {
		ins[i] = Input{Text: r.Text, AnswerText: r.Answer, PromptText: r.Question}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var wall, cpu []time.Duration
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		t0, c0 := time.Now(), threadCPU()
		e.Interpret(ctx, ins[i%len(ins)])
		cpu = append(cpu, threadCPU()-c0)
		wall = append(wall, time.Since(t0))
	}
	q := func(lat []time.Duration, p float64) float64 {
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		k := int(math.Ceil(p*float64(len(lat)))) - 1
		if k < 0 {
			k = 0
		}
		return float64(lat[k]) / float64(time.Millisecond)
	}
	b.ReportMetric(q(wall, 0.99), "ms-p99")
	b.ReportMetric(q(wall, 0.50), "ms-p50")
	if threadCPU() > 0 {
		b.ReportMetric(q(cpu, 0.99), "cpu-ms-p99")
		b.ReportMetric(q(cpu, 0.50), "cpu-ms-p50")
	}
}
