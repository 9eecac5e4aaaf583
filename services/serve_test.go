package services

import (
	"bytes"
	"citizen/events/stores"
	"citizen/replay"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

type syncBuffer struct {
	mu chan struct{}
	b  bytes.Buffer
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{mu: make(chan struct{}, 1)} }
func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu <- struct{}{}
	defer func() { <-s.mu }()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string {
	s.mu <- struct{}{}
	defer func() { <-s.mu }()
	return s.b.String()
}

func post(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer sk-citizen-dev")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestServeEndToEnd runs `citizen serve` on the durable store with the
// stub engine: a completion is recorded, feedback on it is interpreted by
// the feedback worker and every trigger is evaluated by reflection (store →
// relay → bus → router → store), the interaction read shows them all, SIGINT-style cancellation drains cleanly,
// and `citizen events replay` then finds every event decodable with no
// gaps.
func TestServeEndToEnd(t *testing.T) {
	t.Run("inprocess", func(t *testing.T) { serveEndToEnd(t) })
	t.Run("kafka", func(t *testing.T) {
		brokers := os.Getenv("KAFKA_BROKERS")
		if brokers == "" {
			if os.Getenv("CI") == "true" {
				t.Fatal("KAFKA_BROKERS is not set under CI=true (make test starts a broker)")
			}
			t.Skip("KAFKA_BROKERS not set: start one with events/bus/kafka/testdata/start-kafka.sh")
		}
		serveEndToEnd(t, "--bus.backend", "kafka", "--bus.kafka-brokers", brokers)
	})
	t.Run("postgres", func(t *testing.T) {
		url := os.Getenv("CITIZEN_PG_URL")
		if url == "" {
			if os.Getenv("CI") == "true" {
				t.Fatal("CITIZEN_PG_URL is not set under CI=true (make test starts a server)")
			}
			t.Skip("CITIZEN_PG_URL not set: start one with events/pgstore/testdata/start-postgres.sh")
		}
		schema := fmt.Sprintf("e2e_%d", time.Now().UnixNano())
		serveEndToEnd(t, "--store.backend", "postgres", "--store.pg-url", url, "--store.pg-schema", schema)
	})
}

func serveEndToEnd(t *testing.T, extra ...string) {
	dir := t.TempDir()
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := newSyncBuffer()
	done := make(chan int, 1)
	args := append([]string{"serve", "--data-dir", dir, "--model.engine", "stub", "--gateway.listen", addr}, extra...)
	go func() { done <- serveMain(ctx, args, Env{Stdout: io.Discard, Stderr: logs}) }()

	base := "http://" + addr
	deadline := time.Now().Add(20 * time.Second)
	waitServing(t, base, logs)
	code, body := post(t, base+"/v1/chat/completions", `{"model":"citizen","messages":[{"role":"user","content":"What is the refund window?"}],"metadata":{"type":"policy"}}`)
	if code != 200 {
		t.Fatalf("completion: %d %s", code, body)
	}
	var comp struct{ ID string }
	json.Unmarshal(body, &comp)
	code, body = post(t, base+"/v1/feedback", fmt.Sprintf(`{"interaction_id":%q,"text":"no - it's 60 days now","feedback_id":"f1"}`, comp.ID))
	if code != 200 {
		t.Fatalf("feedback: %d %s", code, body)
	}
	// The feedback worker's interpretation shows up on the interaction.
	for {
		req, _ := http.NewRequest("GET", base+"/v1/interactions/"+comp.ID, nil)
		req.Header.Set("Authorization", "Bearer sk-citizen-dev")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		// recorded, feedback, its interpretation, and one evaluation per
		// trigger (the recording, the feedback, the interpretation)
		if strings.Contains(string(b), "feedback.interpreted") && strings.Count(string(b), `"interaction.evaluated"`) == 3 {
			if !strings.Contains(string(b), "60 days") {
				t.Fatalf("interpretation lost the correction: %s", b)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("feedback never interpreted: %s\nlogs:\n%s", b, logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The operator endpoints of the components are mounted on the gateway.
	get := func(path string) (int, string) {
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Header.Set("Authorization", "Bearer sk-citizen-dev")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			// read until the first event, then hang up
			var got []byte
			buf := make([]byte, 4096)
			for !strings.Contains(string(got), "\ndata:") {
				n, err := resp.Body.Read(buf)
				got = append(got, buf[:n]...)
				if err != nil {
					break
				}
			}
			return resp.StatusCode, string(got)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for {
		code, body := get("/v1/ops/scoreboard?type=policy")
		if code != 200 {
			t.Fatalf("scoreboard: %d %s", code, body)
		}
		if strings.Contains(body, `"policy"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("scoreboard never counted the interaction: %s", body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if resp, err := http.Get(base + "/metrics"); err != nil {
		t.Fatal(err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, m := range []string{"citizen_memory_indexer_lag_seconds", "citizen_rollout_", "gen_ai_server_request_duration"} {
			if !strings.Contains(string(b), m) {
				t.Errorf("/metrics lacks %s", m)
			}
		}
	}
	if code, body := get("/v1/ops/failure-modes"); code != 200 || !strings.Contains(body, `"object":"list"`) {
		t.Fatalf("failure modes: %d %s", code, body)
	}
	if code, body := get("/v1/ops/stream?types=interaction.evaluated&after=0"); code != 200 || !strings.Contains(body, "interaction.evaluated") {
		t.Fatalf("stream: %d %s", code, body)
	}
	cancel()
	select {
	case rc := <-done:
		if rc != 0 {
			t.Fatalf("serve exited %d; logs:\n%s", rc, logs)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	// Replay the durable store now that serve has closed it.
	cfg, err := ParseConfig(flag.NewFlagSet("replay", flag.ContinueOnError), append([]string{"--data-dir", dir}, extra...), Env{Stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	st, err := stores.Open(cfg.Store, cfg.DataDir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rr, err := replay.Run(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	if rr.Events != 6 || rr.Gaps != 0 || len(rr.Undecodable) != 0 {
		t.Fatalf("replay: %+v", rr)
	}
}

// TestServeRefusesBadSuite: a regression suite file with a bad line stops
// the service at start with the file, the line and what is wrong, and a
// missing file with the path.
func TestServeRefusesBadSuite(t *testing.T) {
	if _, err := os.Stat(filepath.Join("..", "model", "base", "config.json")); err != nil {
		t.Skipf("no base checkpoint: %v", err)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "suite.jsonl")
	os.WriteFile(bad, []byte(`{"type":"policy","messages":[{"role":"user","content":"Refund window?"}],"expected":"30 days"}`+"\n"+
		`{"type":"policy","messages":[{"role":"user","content":"Refund window?"}],"answer":"30 days"}`+"\n"), 0o644)
	for file, want := range map[string]string{bad: `suite.jsonl: suite line 2: json: unknown field "answer"`, filepath.Join(dir, "none.jsonl"): "none.jsonl: no such file"} {
		logs := newSyncBuffer()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		code := serveMain(ctx, []string{"serve", "--data-dir", filepath.Join(dir, "data"), "--model.checkpoint", filepath.Join("..", "model", "base"),
			"--gateway.listen", freeAddr(t), "--distill.suite", file}, Env{Stdout: io.Discard, Stderr: logs})
		cancel()
		if code == 0 || !strings.Contains(logs.String(), "distill.suite: ") || !strings.Contains(logs.String(), want) {
			t.Fatalf("exit %d, want non-zero and %q in the logs:\n%s", code, want, logs)
		}
	}
}
