package services

import (
	"bufio"
	"citizen/gateway"
	"citizen/internal/modules"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
)

// tenancyEnv is a running `citizen serve` (stub engine) with keys of two
// tenants and an operator, and acme's data in the store: a completion
// whose prompt and feedback carry acmeSecret.
type tenancyEnv struct {
	t        *testing.T
	base     string
	dir      string
	app      *App
	acme     string // keys
	beta     string
	operator string
	acmeID   string // acme's completion id
}

const acmeSecret = "acme-private-7f3a"

func newTenancyEnv(t *testing.T) *tenancyEnv {
	t.Helper()
	dir := t.TempDir()
	key := func(tenant string) string {
		secret, _, err := gateway.CreateKey(filepath.Join(dir, "keys.json"), gateway.KeySpec{Tenant: tenant})
		if err != nil {
			t.Fatalf("create key: %v", err)
		}
		return secret
	}
	e := &tenancyEnv{t: t, dir: dir, acme: key("acme"), beta: key("beta"), operator: key("operator")}
	addr := freeAddr(t)
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg, err := ParseConfig(fs, []string{"--data-dir", dir, "--model.engine", "stub", "--gateway.listen", addr, "--gateway.dev-mode", "off"},
		Env{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	logs := newSyncBuffer()
	e.app = &App{Config: cfg, Log: NewLogger(cfg.Log, logs)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- modules.New(e.app.Log, e.app.Modules()...).Run(ctx, cfg.Target, cfg.ShutdownTimeout) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	e.base = "http://" + addr
	waitServing(t, e.base, logs)
	code, body := e.do("POST", "/v1/chat/completions", e.acme,
		`{"model":"citizen","messages":[{"role":"user","content":"`+acmeSecret+` what is the refund window?"}],"metadata":{"type":"policy"}}`)
	if code != 200 {
		t.Fatalf("completion: %d %s", code, body)
	}
	var comp struct{ ID string }
	json.Unmarshal([]byte(body), &comp)
	e.acmeID = comp.ID
	if code, body := e.do("POST", "/v1/feedback", e.acme, fmt.Sprintf(`{"interaction_id":%q,"text":"no, %s says 60 days"}`, comp.ID, acmeSecret)); code != 200 {
		t.Fatalf("feedback: %d %s", code, body)
	}
	// acme's interpretation is stored before any check runs
	e.streamUntil(e.operator, "/v1/ops/stream?after=0&types=feedback.interpreted", `"tenant":"acme"`)
	return e
}

func waitServing(t *testing.T, base string, logs fmt.Stringer) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready; logs:\n%s", logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *tenancyEnv) do(method, path, key, body string) (int, string) {
	return e.doT(e.t, method, path, key, body)
}

func (e *tenancyEnv) doT(t *testing.T, method, path, key, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, e.base+path, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("%s %s is a stream: use streamUntil", method, path)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// streamUntil reads an SSE stream until a data line contains want and
// returns everything read; a non-200 answer returns its status and body.
func (e *tenancyEnv) streamUntil(key, path, want string) (int, string) {
	return e.streamUntilT(e.t, key, path, want)
}

func (e *tenancyEnv) streamUntilT(t *testing.T, key, path, want string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.base+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var got strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		got.WriteString(line + "\n")
		if strings.HasPrefix(line, "data:") && strings.Contains(line, want) {
			return 200, got.String()
		}
	}
	t.Fatalf("stream %s ended before %q: %v\n%s", path, want, sc.Err(), got.String())
	return 0, ""
}

// isolationRule checks one route for the three callers.
type isolationRule func(t *testing.T, e *tenancyEnv)

// TestTenantIsolation walks every route the gateway serves. A route
// without a rule here fails the test, so a new route cannot ship without
// saying who may see what through it.
func TestTenantIsolation(t *testing.T) {
	e := newTenancyEnv(t)
	noLeak := func(t *testing.T, what string, code int, body string) {
		t.Helper()
		if strings.Contains(body, acmeSecret) || strings.Contains(body, e.acmeID) {
			t.Errorf("%s leaks acme's data (%d): %.300s", what, code, body)
		}
	}
	// public: no key needed, and no tenant's data in it
	public := func(path string) isolationRule {
		return func(t *testing.T, e *tenancyEnv) {
			code, body := e.doT(t, "GET", path, "", "")
			if code != 200 && code != 503 {
				t.Errorf("GET %s without a key: %d", path, code)
			}
			noLeak(t, "GET "+path, code, body)
		}
	}
	// operatorOnly: tenants get 403, the operator gets ok
	operatorOnly := func(method, path string, ok ...int) isolationRule {
		return func(t *testing.T, e *tenancyEnv) {
			for _, k := range []string{e.acme, e.beta} {
				if code, body := e.doT(t, method, path, k, ""); code != 403 || !strings.Contains(body, `"permission_error"`) {
					t.Errorf("%s %s with a tenant key: %d %s", method, path, code, body)
				}
			}
			code, body := e.doT(t, method, path, e.operator, "")
			if !containsInt(ok, code) {
				t.Errorf("%s %s with the operator key: %d %s", method, path, code, body)
			}
		}
	}
	// ownInteraction: acme reads it, beta gets 404 and nothing of it
	ownInteraction := func(method, suffix string, body string) isolationRule {
		return func(t *testing.T, e *tenancyEnv) {
			path := strings.Replace(suffix, ":id", e.acmeID, 1)
			code, got := e.doT(t, method, path, e.beta, body)
			if code != 404 {
				t.Errorf("%s %s by beta: %d %s", method, path, code, got)
			}
			noLeak(t, method+" "+path+" by beta", code, got)
			if code, got := e.doT(t, method, path, e.acme, body); code != 200 {
				t.Errorf("%s %s by acme: %d %s", method, path, code, got)
			}
		}
	}
	// ownTenantRead: a tenant naming another is refused; its own read
	// holds nothing of acme's and no cross-tenant rollout; the operator
	// reads
	ownTenantRead := func(path string) isolationRule {
		return func(t *testing.T, e *tenancyEnv) {
			if code, body := e.doT(t, "GET", path+"?tenant=acme", e.beta, ""); code != 403 {
				t.Errorf("GET %s?tenant=acme by beta: %d %s", path, code, body)
			}
			code, body := e.doT(t, "GET", path, e.beta, "")
			if code != 200 {
				t.Errorf("GET %s by beta: %d %s", path, code, body)
			}
			noLeak(t, "GET "+path+" by beta", code, body)
			if strings.Contains(body, `"tenant":"acme"`) || strings.Contains(body, "rollout.") {
				t.Errorf("GET %s by beta shows other tenants' or cross-tenant events: %.400s", path, body)
			}
			if code, body := e.doT(t, "GET", path, e.operator, ""); code != 200 {
				t.Errorf("GET %s by the operator: %d %s", path, code, body)
			}
		}
	}
	rules := map[string]isolationRule{
		"GET /healthz":          public("/healthz"),
		"GET /readyz":           public("/readyz"),
		"GET /metrics":          public("/metrics"),
		"GET /openapi.yaml":     public("/openapi.yaml"),
		"GET /ops":              public("/ops"),
		"GET /ops/dashboard.js": public("/ops/dashboard.js"),
		"POST /v1/chat/completions": func(t *testing.T, e *tenancyEnv) {
			code, body := e.doT(t, "POST", "/v1/chat/completions", e.beta, `{"model":"citizen","messages":[{"role":"user","content":"hi"}]}`)
			if code != 200 {
				t.Errorf("beta's completion: %d %s", code, body)
			}
			noLeak(t, "beta's completion", code, body)
		},
		"POST /v1/responses": func(t *testing.T, e *tenancyEnv) {
			code, body := e.doT(t, "POST", "/v1/responses", e.beta, `{"model":"citizen","input":"hi"}`)
			if code != 200 {
				t.Errorf("beta's response: %d %s", code, body)
			}
			noLeak(t, "beta's response", code, body)
			if code, _ := e.doT(t, "POST", "/v1/responses", "", `{"model":"citizen","input":"hi"}`); code != 401 {
				t.Errorf("a response without a key: %d", code)
			}
		},
		"POST /v1/embeddings": func(t *testing.T, e *tenancyEnv) {
			code, body := e.doT(t, "POST", "/v1/embeddings", e.beta, `{"model":"citizen","input":"hi"}`)
			if code != 200 {
				t.Errorf("beta's embeddings: %d %s", code, body)
			}
			noLeak(t, "beta's embeddings", code, body)
			if code, _ := e.doT(t, "POST", "/v1/embeddings", "", `{"model":"citizen","input":"hi"}`); code != 401 {
				t.Errorf("embeddings without a key: %d", code)
			}
		},
		"GET /v1/chat/completions": func(t *testing.T, e *tenancyEnv) {
			code, body := e.doT(t, "GET", "/v1/chat/completions?limit=100", e.beta, "")
			if code != 200 {
				t.Errorf("beta's list: %d %s", code, body)
			}
			noLeak(t, "beta's list", code, body)
			if _, body := e.doT(t, "GET", "/v1/chat/completions?limit=100", e.acme, ""); !strings.Contains(body, e.acmeID) {
				t.Errorf("acme's list lacks its completion: %s", body)
			}
		},
		"GET /v1/chat/completions/:id":          ownInteraction("GET", "/v1/chat/completions/:id", ""),
		"GET /v1/chat/completions/:id/messages": ownInteraction("GET", "/v1/chat/completions/:id/messages", ""),
		"POST /v1/chat/completions/:id": ownInteraction("POST", "/v1/chat/completions/:id",
			`{"metadata":{"type":"policy"}}`),
		"DELETE /v1/chat/completions/:id": func(t *testing.T, e *tenancyEnv) {
			// acme's own completion for this rule: deleting e.acmeID would
			// change what the other rules see
			code, body := e.doT(t, "POST", "/v1/chat/completions", e.acme, `{"model":"citizen","messages":[{"role":"user","content":"`+acmeSecret+`"}]}`)
			if code != 200 {
				t.Fatal(code, body)
			}
			var comp struct{ ID string }
			json.Unmarshal([]byte(body), &comp)
			code, got := e.doT(t, "DELETE", "/v1/chat/completions/"+comp.ID, e.beta, "")
			if code != 404 {
				t.Errorf("beta deleting acme's completion: %d %s", code, got)
			}
			noLeak(t, "beta's delete", code, got)
			if code, got := e.doT(t, "GET", "/v1/chat/completions/"+comp.ID, e.acme, ""); code != 200 {
				t.Errorf("acme's completion after beta's delete: %d %s", code, got)
			}
			if code, got := e.doT(t, "DELETE", "/v1/chat/completions/"+comp.ID, e.acme, ""); code != 200 {
				t.Errorf("acme's delete: %d %s", code, got)
			}
		},
		"GET /v1/interactions/:id": ownInteraction("GET", "/v1/interactions/:id", ""),
		"POST /v1/chat/completions/:id/feedback": ownInteraction("POST", "/v1/chat/completions/:id/feedback",
			`{"text":"thanks","feedback_id":"iso-1"}`),
		"POST /v1/feedback": func(t *testing.T, e *tenancyEnv) {
			body := fmt.Sprintf(`{"interaction_id":%q,"text":"great","feedback_id":"iso-2"}`, e.acmeID)
			if code, got := e.doT(t, "POST", "/v1/feedback", e.beta, body); code != 404 {
				t.Errorf("beta's feedback on acme's interaction: %d %s", code, got)
			}
			if code, got := e.doT(t, "POST", "/v1/feedback", e.acme, body); code != 200 {
				t.Errorf("acme's feedback: %d %s", code, got)
			}
		},
		"GET /v1/models": func(t *testing.T, e *tenancyEnv) {
			if code, _ := e.doT(t, "GET", "/v1/models", e.beta, ""); code != 200 {
				t.Errorf("models: %d", code)
			}
			if code, _ := e.doT(t, "GET", "/v1/models", "", ""); code != 401 {
				t.Errorf("models without a key: %d", code)
			}
		},
		"GET /v1/models/:model": func(t *testing.T, e *tenancyEnv) {
			if code, _ := e.doT(t, "GET", "/v1/models/citizen", e.beta, ""); code != 200 {
				t.Errorf("model: %d", code)
			}
		},
		"GET /v1/ops/rollout":          operatorOnly("GET", "/v1/ops/rollout", 200),
		"GET /v1/ops/versions":         operatorOnly("GET", "/v1/ops/versions", 200),
		"POST /v1/ops/rollout/:action": operatorOnly("POST", "/v1/ops/rollout/pause", 409),
		"POST /v1/ops/rollout/start": func(t *testing.T, e *tenancyEnv) {
			// starting a canary is an operator's decision: a tenant key is
			// refused whatever it names; the operator reaches the action
			// (no such version here: 404)
			for _, k := range []string{e.acme, e.beta} {
				if code, body := e.doT(t, "POST", "/v1/ops/rollout/start", k, `{"candidate":"d0001"}`); code != 403 || !strings.Contains(body, `"permission_error"`) {
					t.Errorf("start with a tenant key: %d %s", code, body)
				}
			}
			if code, body := e.doT(t, "POST", "/v1/ops/rollout/start", e.operator, `{"candidate":"nosuch"}`); code != 404 {
				t.Errorf("start with the operator key: %d %s", code, body)
			}
		},
		"GET /v1/ops/scoreboard":           operatorOnly("GET", "/v1/ops/scoreboard", 200),
		"POST /v1/ops/lessons/:id/retire":  operatorOnly("POST", "/v1/ops/lessons/nosuch/retire", 404),
		"POST /v1/ops/lessons/:id/approve": operatorOnly("POST", "/v1/ops/lessons/nosuch/approve", 404),
		"GET /v1/ops/series":               ownTenantRead("/v1/ops/series"),
		"GET /v1/ops/recent":               ownTenantRead("/v1/ops/recent"),
		"GET /v1/ops/lessons": func(t *testing.T, e *tenancyEnv) {
			code, body := e.doT(t, "GET", "/v1/ops/lessons?tenant=acme", e.beta, "")
			if code != 200 {
				t.Errorf("lessons: %d %s", code, body)
			}
			noLeak(t, "beta's lessons", code, body)
		},
		"GET /v1/ops/failure-modes": func(t *testing.T, e *tenancyEnv) {
			code, body := e.doT(t, "GET", "/v1/ops/failure-modes?tenant=acme", e.beta, "")
			if code != 200 {
				t.Errorf("failure modes: %d %s", code, body)
			}
			noLeak(t, "beta's failure modes", code, body)
		},
		"GET /v1/ops/stream": func(t *testing.T, e *tenancyEnv) {
			for _, q := range []string{"?after=0&tenant=acme", "?after=0&tenant=beta&tenant=acme"} {
				if code, body := e.streamUntilT(t, e.beta, "/v1/ops/stream"+q, "-"); code != 403 && code != 400 {
					t.Errorf("beta asking for acme's stream %s: %d %s", q, code, body)
				}
			}
			// beta's own feedback, interpreted after acme's: a leak would
			// show acme's events first
			code, body := e.doT(t, "POST", "/v1/chat/completions", e.beta, `{"model":"citizen","messages":[{"role":"user","content":"hello"}]}`)
			if code != 200 {
				t.Fatal(code, body)
			}
			var comp struct{ ID string }
			json.Unmarshal([]byte(body), &comp)
			if code, body := e.doT(t, "POST", "/v1/feedback", e.beta, fmt.Sprintf(`{"interaction_id":%q,"text":"wrong"}`, comp.ID)); code != 200 {
				t.Fatal(code, body)
			}
			for _, q := range []string{"?after=0", "?after=0&types=feedback.interpreted", "?after=0&tenant=beta"} {
				code, body := e.streamUntilT(t, e.beta, "/v1/ops/stream"+q, comp.ID[len("chatcmpl-"):])
				noLeak(t, "beta's stream "+q, code, body)
				if strings.Contains(body, `"tenant":"acme"`) || strings.Contains(body, "rollout.") || strings.Contains(body, "weights.trained") {
					t.Errorf("beta's stream %s shows other tenants' or cross-tenant events: %.400s", q, body)
				}
			}
			if code, body := e.streamUntilT(t, e.operator, "/v1/ops/stream?after=0", `"tenant":"acme"`); code != 200 {
				t.Errorf("operator stream: %d %s", code, body)
			}
		},
	}
	gw, ok := e.app.Gateway.Handler().(*echo.Echo)
	if !ok {
		t.Fatal("the gateway's handler is not an *echo.Echo")
	}
	seen := map[string]bool{}
	for _, r := range gw.Routes() {
		name := r.Method + " " + r.Path
		if seen[name] || strings.HasPrefix(r.Path, "/*") || r.Method == "echo_route_not_found" {
			continue
		}
		seen[name] = true
		rule, ok := rules[name]
		if !ok {
			t.Errorf("route %s has no isolation rule in TestTenantIsolation", name)
			continue
		}
		t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) { rule(t, e) })
	}
	for name := range rules {
		if !seen[name] {
			t.Errorf("rule for %s, which the gateway does not serve", name)
		}
	}
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// TestRevokedKeyEndsStream: a stream opened with a key ends within about
// a second of `citizen keys revoke`.
func TestRevokedKeyEndsStream(t *testing.T) {
	e := newTenancyEnv(t)
	req, _ := http.NewRequest("GET", e.base+"/v1/ops/stream?after=0", nil)
	req.Header.Set("Authorization", "Bearer "+e.acme)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	ended := make(chan struct{})
	go func() { io.Copy(io.Discard, resp.Body); close(ended) }()
	keys, err := gateway.ListKeys(filepath.Join(e.dir, "keys.json"))
	if err != nil {
		t.Fatal(err)
	}
	var id string
	for _, k := range keys {
		if k.Tenant == "acme" {
			id = k.ID
		}
	}
	revoked := time.Now()
	if err := gateway.RevokeKey(filepath.Join(e.dir, "keys.json"), id); err != nil {
		t.Fatalf("revoke %q: %v", id, err)
	}
	select {
	case <-ended:
		t.Logf("stream ended %v after the revocation", time.Since(revoked).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("the stream outlived its key's revocation")
	}
	if code, _ := e.do("GET", "/v1/models", e.acme, ""); code != 401 {
		t.Fatalf("revoked key still accepted: %d", code)
	}
}
