package services

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"citizen/events"
	"citizen/events/pgstore"
)

// TestScaleOutLearns runs the learning loop across processes on one
// PostgreSQL store and one Kafka cluster: two gateways serving the tiny
// model, a worker (reflection, feedback, memory) and a trainer (distiller,
// rollout), sharing a data directory for the distiller's adapters (the
// compose file's distill volume). Graded traffic goes to both gateways;
// the first training cycle's dataset must hold interactions recorded by
// each, and its candidate's canary must be served by both.
func TestScaleOutLearns(t *testing.T) {
	pgURL, brokers := os.Getenv("CITIZEN_PG_URL"), os.Getenv("KAFKA_BROKERS")
	if pgURL == "" || brokers == "" {
		t.Skip("CITIZEN_PG_URL and KAFKA_BROKERS must both be set: export CITIZEN_PG_URL=$(events/pgstore/testdata/start-postgres.sh) KAFKA_BROKERS=$(events/bus/kafka/testdata/start-kafka.sh)")
	}
	if testing.Short() {
		t.Skip("-short: four citizen processes train and roll out on PostgreSQL and Kafka")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	data := t.TempDir()
	d := newDeployment(t, pgURL, brokers, "--model.name=tiny", "--data-dir", data,
		"--distill.min-new-graded=40", "--distill.max-steps=4", "--distill.rehearsal=off",
		"--rollout.steps=0.5,1", "--rollout.min-per-arm=5")
	d.start("worker", "reflection,feedback,memory")
	d.start("trainer", "distiller,rollout")
	gws := []*proc{d.start("gateway-1", "gateway"), d.start("gateway-2", "gateway")}
	st, err := pgstore.Open(ctx, pgstore.Config{URL: pgURL, Schema: d.ns, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	client := &http.Client{Timeout: 30 * time.Second}
	post := func(base, path, body string) (int, []byte, http.Header) {
		req, _ := http.NewRequestWithContext(ctx, "POST", base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer sk-citizen-dev")
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b, resp.Header
	}
	// graded traffic to both gateways: policy questions, half judged a
	// success and half a failure by their feedback
	byGateway := map[string]int{} // interaction id -> gateway index
	trained := func() *events.WeightsTrained {
		evs, err := st.ReadAll(ctx, 0, events.Filter{Types: []string{events.TypeWeightsTrained}}, 10)
		if err != nil || len(evs) == 0 {
			return nil
		}
		p, err := events.Decode(&evs[0])
		if err != nil {
			t.Fatal(err)
		}
		return p.(*events.WeightsTrained)
	}
	var wt *events.WeightsTrained
	for i := 0; wt == nil; i++ {
		if ctx.Err() != nil {
			t.Fatal("no training cycle within the test's time")
		}
		gi := i % 2
		code, body, _ := post(gws[gi].base, "/v1/chat/completions", fmt.Sprintf(
			`{"model":"citizen","messages":[{"role":"user","content":"What is your refund window? (%d)"}],"max_tokens":12,"metadata":{"type":"policy"},"user":"u%d"}`, i, i%7))
		if code != 200 {
			t.Fatalf("completion via gateway-%d: %d %s", gi+1, code, body)
		}
		var comp struct{ ID string }
		json.Unmarshal(body, &comp)
		id := strings.TrimPrefix(comp.ID, "chatcmpl-")
		byGateway[id] = gi
		outcome := "success"
		if i%2 == 1 {
			outcome = "failure"
		}
		if code, body, _ := post(gws[(gi+1)%2].base, "/v1/feedback", fmt.Sprintf(`{"interaction_id":%q,"outcome":%q,"feedback_id":"f%d"}`, comp.ID, outcome, i)); code != 200 {
			t.Fatalf("feedback: %d %s", code, body)
		}
		if i >= 40 && i%10 == 0 {
			wt = trained()
		}
	}
	if wt == nil {
		wt = trained()
	}
	t.Logf("cycle %s (accepted %v) after %d completions", wt.Version, wt.Accepted, len(byGateway))

	// its dataset holds interactions recorded by each gateway
	seen := [2]int{}
	for _, name := range []string{"train.jsonl", "holdout.jsonl"} {
		f, err := os.Open(filepath.Join(data, "distill", "datasets", wt.Version, name))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var ex struct {
				Interaction string `json:"interaction"`
			}
			if json.Unmarshal(sc.Bytes(), &ex) == nil {
				if gi, ok := byGateway[strings.TrimPrefix(ex.Interaction, "chatcmpl-")]; ok {
					seen[gi]++
				}
			}
		}
		f.Close()
	}
	if seen[0] == 0 || seen[1] == 0 {
		t.Fatalf("cycle %s trained on %d interactions of gateway-1 and %d of gateway-2", wt.Version, seen[0], seen[1])
	}
	t.Logf("cycle %s trained on %d interactions of gateway-1 and %d of gateway-2", wt.Version, seen[0], seen[1])

	// its canary is served by both gateways (an accepted candidate starts
	// by itself; a rejected one is started by the operator)
	if !wt.Accepted {
		if code, body, _ := post(gws[0].base, "/v1/ops/rollout/start", fmt.Sprintf(`{"candidate":%q}`, wt.Version)); code != 200 {
			t.Fatalf("starting the canary of %s: %d %s", wt.Version, code, body)
		}
	}
	served := [2]bool{}
	for i := 0; !served[0] || !served[1]; i++ {
		if ctx.Err() != nil {
			t.Fatalf("canary %s served by gateway-1 %v, gateway-2 %v", wt.Version, served[0], served[1])
		}
		gi := i % 2
		code, body, h := post(gws[gi].base, "/v1/chat/completions", fmt.Sprintf(
			`{"model":"citizen","messages":[{"role":"user","content":"Hello (%d)"}],"max_tokens":4,"metadata":{"conversation_id":"c%d"}}`, i, i))
		if code != 200 {
			t.Fatalf("completion via gateway-%d: %d %s", gi+1, code, body)
		}
		if h.Get("X-Citizen-Model-Version") == wt.Version {
			served[gi] = true
		}
		if i%40 == 39 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	t.Logf("canary %s served by both gateways", wt.Version)
}
