package services

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"citizen/model"
	"citizen/model/chat"
	"citizen/pretrain"
	"citizen/workplace"
)

// TestServedAccuracyMatchesOffline: the base model answers the workplace's
// tasks through citizen's HTTP API exactly as it does offline: the same
// conversations (same seed) get the same grades, so the accuracy per type
// is the same. (Greedy decoding is the default for requests without a
// temperature, and the engine's results do not depend on batching.)
func TestServedAccuracyMatchesOffline(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the base model on 180 conversations")
	}
	const n, seed = 180, 77
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	logs := newSyncBuffer()
	go func() {
		done <- serveMain(ctx, []string{"serve", "--data-dir", t.TempDir(), "--target", "gateway", "--gateway.listen", addr,
			"--model.checkpoint", "../model/base"}, Env{Stdout: io.Discard, Stderr: logs})
	}()
	base := "http://" + addr
	deadline := time.Now().Add(60 * time.Second)
	for {
		if resp, err := http.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready:\n%s", logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	shape := workplace.Config{Interactions: n, Seed: seed, Concurrency: 4, Users: 4}
	online := shape
	online.Target, online.APIKey = base, "sk-citizen-dev"
	served, err := workplace.Run(ctx, online, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := chat.Open("../model/base", model.EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close()
	offline, err := workplace.EvaluateWith(ctx, pretrain.AnswerFunc(cm, ""), shape)
	if err != nil {
		t.Fatal(err)
	}
	if served.Total.Completed != n || offline.Total.Completed != n {
		t.Fatalf("completed: served %d offline %d of %d", served.Total.Completed, offline.Total.Completed, n)
	}
	for typ, off := range offline.ByType {
		on := served.ByType[typ]
		t.Logf("%-16s offline %.3f (%d)  served %.3f (%d)", typ, off.Accuracy, off.Completed, on.Accuracy, on.Completed)
		if on.Completed != off.Completed || on.Correct != off.Correct {
			t.Errorf("%s: served %d/%d correct, offline %d/%d", typ, on.Correct, on.Completed, off.Correct, off.Completed)
		}
	}
	cancel()
	<-done
}
