package gguf

import (
	"context"
	"runtime/debug"
	"testing"

	"citizen/model"
)

// BenchmarkSmolLM2ServingRSS measures the resident memory serving adds: the
// process's VmRSS after loading the quantized checkpoint and answering the
// ChatML question with 64 greedy tokens (weights, KV cache and scratch
// buffers in use), less VmRSS before the load. scripts/llamacpp_bench.py
// measures llama.cpp the same way on the same file and tokens.
func BenchmarkSmolLM2ServingRSS(b *testing.B) {
	if procStatus()["VmRSS"] == 0 {
		b.Skip("no /proc/self/status")
	}
	var rss float64
	for range b.N {
		debug.FreeOSMemory()
		before := procStatus()["VmRSS"]
		m := loadSmol(b, "quant")
		e := model.NewEngine(m, model.EngineConfig{})
		res, err := e.Generate(context.Background(), model.Request{PromptIDs: chatmlParis, MaxTokens: 65})
		if err != nil || len(res.Tokens) != 65 {
			b.Fatalf("generate: %d tokens, %v", len(res.Tokens), err)
		}
		debug.FreeOSMemory()
		rss = procStatus()["VmRSS"] - before
		e.Close()
	}
	b.ReportMetric(rss, "MiB-rss")
	b.ReportMetric(0, "ns/op")
}
