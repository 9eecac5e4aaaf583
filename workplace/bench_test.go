package workplace

import (
	"context"
	"testing"
)

func BenchmarkCorpus(b *testing.B) {
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n += len(Corpus(int64(n), 100, CorpusOptions{}))
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "conversations/s")
}

func BenchmarkEvaluate(b *testing.B) {
	answer := func(ctx context.Context, msgs []Message, tools []Tool) (Message, error) {
		return Message{Role: "assistant", Content: "The answer is 42."}, nil
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if _, err := Evaluate(context.Background(), answer, 100, int64(n)); err != nil {
			b.Fatal(err)
		}
		n += 100
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "conversations/s")
}
