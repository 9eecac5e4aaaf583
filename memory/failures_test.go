package memory_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"citizen/memory"
	"citizen/workplace"
)

// TestFailureModesSeparatePlantedModes plants three failure modes in
// workplace traffic: refund-window answers that missed a policy drift,
// shipping-fee answers that missed another, and JSON extractions answered
// as prose. Mining must put each planted mode into its own cluster.
func TestFailureModesSeparatePlantedModes(t *testing.T) {
	ctx := context.Background()
	convs := workplace.Corpus(3, 4000, workplace.CorpusOptions{Families: []string{"policy", "json_extract"}, HintRate: -1})
	emb := memory.NewHashEmbedder(512)
	var texts []string
	for _, c := range convs {
		texts = append(texts, firstUser(c))
	}
	emb.Fit(texts)
	fl := memory.NewFailureLog(0, 0)
	planted := map[string]string{} // interaction id -> mode
	t0 := time.Unix(1_800_000_000, 0)
	n := 0
	for i, c := range convs {
		prompt := firstUser(c)
		answer := c.Messages[len(c.Messages)-1].Content
		mode := ""
		switch {
		case c.Type == "policy" && strings.Contains(answer, "refund window") && !strings.Contains(prompt, "ago"):
			mode = "refund"
		case c.Type == "policy" && strings.Contains(answer, "Standard shipping costs"):
			mode = "shipping"
		case c.Type == "json_extract" && i%3 == 0:
			mode = "prose"
			answer = strings.NewReplacer("{", "", "}", "", `"`, "").Replace(answer)
		}
		if mode == "" || n >= 300 {
			continue
		}
		n++
		reward := -0.8
		id := fmt.Sprint("i", i)
		planted[id] = mode
		v := memory.InteractionView{ID: id, Tenant: "acme", Type: c.Type, Prompt: prompt, Answer: answer,
			Time: t0.Add(time.Duration(i) * time.Second), Reward: &reward}
		vec, _ := emb.Embed(ctx, []string{v.Text()})
		fl.Observe(v, vec[0])
	}
	modes := fl.Mine(memory.MineOptions{})
	if len(modes) < 3 {
		t.Fatalf("want at least 3 clusters, got %d", len(modes))
	}
	// Every reported cluster must be at least 90% one planted mode (modes
	// never mix), at least 80% of each mode must land in clusters it
	// dominates (a mode may split by sub-task: the JSON family has three
	// kinds of extraction), and the two policy modes must not share one.
	total := map[string]int{}
	for _, m := range planted {
		total[m]++
	}
	covered := map[string]int{}
	clustersOf := map[string][]int{}
	for ci, fm := range modes {
		count := map[string]int{}
		for _, id := range fm.Members {
			count[planted[id]]++
		}
		top, topN := "", 0
		for m, k := range count {
			if k > topN {
				top, topN = m, k
			}
		}
		purity := float64(topN) / float64(fm.Size)
		t.Logf("cluster %d: type %s size %d trend %s, %.0f%% %s, e.g. %q", ci, fm.Type, fm.Size, fm.Trend, 100*purity, top, fm.Representatives[0].Prompt)
		if purity < 0.9 {
			t.Errorf("cluster %d mixes failure modes: %v", ci, count)
		}
		covered[top] += topN
		clustersOf[top] = append(clustersOf[top], ci)
	}
	for mode, tot := range total {
		r := float64(covered[mode]) / float64(tot)
		t.Logf("mode %s: %d planted, %.0f%% in %d cluster(s) it dominates", mode, tot, 100*r, len(clustersOf[mode]))
		if r < 0.8 {
			t.Errorf("mode %s: only %.2f of it in clusters it dominates", mode, r)
		}
	}
	if len(clustersOf["refund"]) == 0 || len(clustersOf["shipping"]) == 0 {
		t.Fatal("a policy failure mode has no cluster of its own")
	}
	// A failure that later gets a good grade leaves the log.
	for id := range planted {
		good := 0.9
		fl.Observe(memory.InteractionView{ID: id, Reward: &good}, nil)
	}
	if got := fl.Mine(memory.MineOptions{}); len(got) != 0 {
		t.Fatalf("fixed interactions still mined: %d clusters", len(got))
	}
}

func TestFailureModesHandler(t *testing.T) {
	fl := memory.NewFailureLog(0, 0)
	emb := memory.NewHashEmbedder(64)
	for i, tenant := range []string{"acme", "acme", "acme", "globex", "globex", "globex"} {
		r := -1.0
		v := memory.InteractionView{ID: fmt.Sprint(i), Tenant: tenant, Type: "policy", Prompt: "How long is the refund window?", Answer: "30 days", Time: time.Unix(int64(i), 0), Reward: &r}
		vec, _ := emb.Embed(context.Background(), []string{v.Text()})
		fl.Observe(v, vec[0])
	}
	h := memory.FailureModesHandler(fl, func(r *http.Request) string { return r.Header.Get("X-Tenant") })
	get := func(url, tenant string) (int, string) {
		req := httptest.NewRequest("GET", url, nil)
		req.Header.Set("X-Tenant", tenant)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code, w.Body.String()
	}
	code, body := get("/v1/ops/failure-modes?type=policy", "acme")
	if code != 200 || !strings.Contains(body, `"size":3`) || strings.Contains(body, `"size":6`) {
		t.Fatalf("tenant scoping: %d %s", code, body)
	}
	if code, body := get("/v1/ops/failure-modes?min_size=zero", "acme"); code != 400 || !strings.Contains(body, "min_size") {
		t.Fatalf("bad param: %d %s", code, body)
	}
	for _, sim := range []string{"NaN", "nan", "0", "1.5", "-Inf"} {
		if code, body := get("/v1/ops/failure-modes?similarity="+sim, "acme"); code != 400 || !strings.Contains(body, "similarity") {
			t.Fatalf("similarity=%s: %d %s", sim, code, body)
		}
	}
	if code, body := get("/v1/ops/failure-modes?type=nothing", ""); code != 200 || !strings.Contains(body, `"data":[]`) {
		t.Fatalf("empty: %d %s", code, body)
	}
}
