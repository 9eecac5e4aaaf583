package services

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"citizen/events/memstore"
	"citizen/gateway"

	"github.com/labstack/echo/v4"
	"gopkg.in/yaml.v3"
)

// openAIRoutes are the routes that follow OpenAI's API and are documented
// by OpenAI's own document; every other route belongs in
// gateway/openapi.yaml.
var openAIRoutes = map[string]bool{
	"POST /v1/chat/completions":             true,
	"GET /v1/chat/completions":              true,
	"GET /v1/chat/completions/:id":          true,
	"POST /v1/chat/completions/:id":         true,
	"DELETE /v1/chat/completions/:id":       true,
	"GET /v1/chat/completions/:id/messages": true,
	"POST /v1/responses":                    true,
	"POST /v1/embeddings":                   true,
	"GET /v1/models":                        true,
	"GET /v1/models/:model":                 true,
}

// servedRoutes returns "METHOD /path" (echo's :param form) for every route
// of a gateway wired as `citizen serve` wires it, the operator routes
// included, and its handler.
func servedRoutes(t *testing.T) ([]string, http.Handler) {
	t.Helper()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg, err := ParseConfig(fs, []string{"--data-dir", t.TempDir(), "--model.engine", "stub"},
		Env{Stderr: io.Discard, LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	a := &App{Config: cfg, Log: slog.New(slog.DiscardHandler), Store: memstore.New(memstore.Config{}), Engine: gateway.NewStubEngine()}
	if _, err := a.initGateway(context.Background()); err != nil {
		t.Fatal(err)
	}
	e, ok := a.Gateway.Handler().(*echo.Echo)
	if !ok {
		t.Fatalf("the gateway's handler is a %T, not *echo.Echo", a.Gateway.Handler())
	}
	var out []string
	for _, r := range e.Routes() {
		// the same filter as TestTenantIsolation: echo's not-found routes
		if strings.HasPrefix(r.Path, "/*") || r.Method == "echo_route_not_found" {
			continue
		}
		if name := r.Method + " " + r.Path; !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, e
}

var echoParam = regexp.MustCompile(`:([A-Za-z0-9_]+)`)

// openAPIPath turns echo's /a/:id into OpenAPI's /a/{id}.
func openAPIPath(echoPath string) string { return echoParam.ReplaceAllString(echoPath, "{$1}") }

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// openAPIProblems checks doc, an OpenAPI 3.1 document in YAML, against
// routes ("METHOD /path" in echo's form): every route outside
// openAIRoutes has an operation with the same method and path, every
// operation is a route, each operation has responses and declares the
// parameters of its path, and every local $ref resolves.
func openAPIProblems(doc []byte, routes []string) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	var root map[string]any
	if err := yaml.Unmarshal(doc, &root); err != nil {
		return []string{"the document is not YAML: " + err.Error()}
	}
	if v, _ := root["openapi"].(string); !strings.HasPrefix(v, "3.1.") {
		bad("openapi is %q, want 3.1.x", v)
	}
	paths, _ := root["paths"].(map[string]any)
	if len(paths) == 0 {
		bad("the document has no paths")
	}
	documented := map[string]bool{}
	for path, item := range paths {
		ops, ok := item.(map[string]any)
		if !ok {
			bad("path %s is not an object", path)
			continue
		}
		for key, v := range ops {
			if !slices.Contains(httpMethods, key) {
				continue
			}
			name := strings.ToUpper(key) + " " + path
			documented[name] = true
			op, _ := v.(map[string]any)
			if rs, _ := op["responses"].(map[string]any); len(rs) == 0 {
				bad("%s has no responses", name)
			}
			declared := map[string]bool{}
			params, _ := op["parameters"].([]any)
			if shared, ok := ops["parameters"].([]any); ok {
				params = append(params, shared...)
			}
			for _, p := range params {
				pm, _ := p.(map[string]any)
				if ref, ok := pm["$ref"].(string); ok {
					pm, _ = resolveRef(root, ref).(map[string]any)
				}
				if pm["in"] == "path" {
					n, _ := pm["name"].(string)
					declared[n] = true
				}
			}
			for _, m := range regexp.MustCompile(`\{([^}]+)\}`).FindAllStringSubmatch(path, -1) {
				if !declared[m[1]] {
					bad("%s does not declare its path parameter %s", name, m[1])
				}
			}
		}
	}
	served := map[string]bool{}
	for _, r := range routes {
		method, path, _ := strings.Cut(r, " ")
		name := method + " " + openAPIPath(path)
		served[name] = true
		if !openAIRoutes[r] && !documented[name] {
			bad("route %s is not in gateway/openapi.yaml", name)
		}
	}
	for name := range documented {
		if !served[name] {
			bad("gateway/openapi.yaml documents %s, which the server does not serve", name)
		}
	}
	for _, r := range refs(root, nil) {
		if resolveRef(root, r) == nil {
			bad("$ref %s does not resolve", r)
		}
	}
	sort.Strings(problems)
	return problems
}

// refs lists every $ref in v.
func refs(v any, out []string) []string {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && k == "$ref" {
				out = append(out, s)
			} else {
				out = refs(e, out)
			}
		}
	case []any:
		for _, e := range x {
			out = refs(e, out)
		}
	}
	return out
}

// resolveRef follows a local reference (#/a/b); nil when it does not
// resolve.
func resolveRef(root map[string]any, ref string) any {
	rest, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil
	}
	var cur any = root
	for _, part := range strings.Split(rest, "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		if cur, ok = m[part]; !ok {
			return nil
		}
	}
	return cur
}

// TestOpenAPIMatchesRoutes: gateway/openapi.yaml documents exactly the
// routes citizen adds to OpenAI's API, and the server serves it without a
// key.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	routes, h := servedRoutes(t)
	for _, p := range openAPIProblems(gateway.OpenAPI, routes) {
		t.Error(p)
	}
	for r := range openAIRoutes {
		if !slices.Contains(routes, r) {
			t.Errorf("openAIRoutes names %s, which the server does not serve", r)
		}
	}
	req := httptest.NewRequest("GET", "/openapi.yaml", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 200 || !bytes.Equal(rec.Body.Bytes(), gateway.OpenAPI) || rec.Header().Get("Content-Type") != "application/yaml" {
		t.Errorf("GET /openapi.yaml without a key: %d %q, %d bytes", rec.Code, rec.Header().Get("Content-Type"), rec.Body.Len())
	}
}

// TestOpenAPIProblemsReported keeps the check honest: each change to the
// document or the routes is reported.
func TestOpenAPIProblemsReported(t *testing.T) {
	routes, _ := servedRoutes(t)
	if p := openAPIProblems(gateway.OpenAPI, routes); len(p) > 0 {
		t.Fatalf("the document has problems already: %v", p)
	}
	edit := func(t *testing.T, f func(paths map[string]any)) []byte {
		var root map[string]any
		if err := yaml.Unmarshal(gateway.OpenAPI, &root); err != nil {
			t.Fatal(err)
		}
		f(root["paths"].(map[string]any))
		b, err := yaml.Marshal(root)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	op := func(paths map[string]any, path string) map[string]any { return paths[path].(map[string]any) }
	cases := []struct {
		name   string
		doc    func(t *testing.T) []byte
		routes []string
		want   string
	}{
		{"a route left out", func(t *testing.T) []byte {
			return edit(t, func(p map[string]any) { delete(p, "/v1/interactions/{id}") })
		}, routes, "route GET /v1/interactions/{id} is not in gateway/openapi.yaml"},
		{"a method changed", func(t *testing.T) []byte {
			return edit(t, func(p map[string]any) { o := op(p, "/v1/feedback"); o["put"] = o["post"]; delete(o, "post") })
		}, routes, "documents PUT /v1/feedback, which the server does not serve"},
		{"a path not served", func(t *testing.T) []byte {
			return edit(t, func(p map[string]any) { p["/v1/ops/nosuch"] = p["/v1/ops/versions"] })
		}, routes, "documents GET /v1/ops/nosuch"},
		{"no responses", func(t *testing.T) []byte {
			return edit(t, func(p map[string]any) { delete(op(p, "/healthz")["get"].(map[string]any), "responses") })
		}, routes, "GET /healthz has no responses"},
		{"a path parameter undeclared", func(t *testing.T) []byte {
			return edit(t, func(p map[string]any) {
				delete(op(p, "/v1/ops/rollout/{action}")["post"].(map[string]any), "parameters")
			})
		}, routes, "POST /v1/ops/rollout/{action} does not declare its path parameter action"},
		{"a dangling $ref", func(t *testing.T) []byte {
			return []byte(strings.Replace(string(gateway.OpenAPI), `"#/components/schemas/Lesson"`, `"#/components/schemas/Lessen"`, 1))
		}, routes, "$ref #/components/schemas/Lessen does not resolve"},
		{"a new route", func(*testing.T) []byte { return gateway.OpenAPI },
			append(slices.Clone(routes), "GET /v1/ops/new/:id"), "route GET /v1/ops/new/{id} is not in gateway/openapi.yaml"},
		{"not YAML", func(*testing.T) []byte { return []byte("openapi: [") }, routes, "not YAML"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := openAPIProblems(c.doc(t), c.routes)
			if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, c.want) }) {
				t.Errorf("problems %q lack %q", got, c.want)
			}
		})
	}
}
