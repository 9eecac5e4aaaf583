package inference

import (
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"citizen/gateway"
	"citizen/gateway/embedded"
	"citizen/model"
	"citizen/model/chat"
)

var (
	tinyOnce sync.Once
	tinyCM   *chat.Model
	tinyErr  error
)

// tiny opens the committed tiny base checkpoint once for the package.
func tiny(t *testing.T) *chat.Model {
	t.Helper()
	tinyOnce.Do(func() { tinyCM, tinyErr = chat.Open("../../model/base", model.EngineConfig{}) })
	if tinyErr != nil {
		t.Fatal(tinyErr)
	}
	return tinyCM
}

// writeAdapter saves a LoRA adapter with random weights (so that it
// changes the model's answers) in PEFT's layout under dir.
func writeAdapter(t *testing.T, base model.Config, dir string, seed uint64) {
	t.Helper()
	a, err := model.NewAdapter("a", base, model.LoRAConfig{Rank: 4, Alpha: 8, TargetModules: []string{"q_proj", "v_proj", "o_proj"}}, seed)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 7))
	for i := range a.Params {
		a.Params[i] = float32(r.NormFloat64() * 0.3)
	}
	if _, err := a.SavePEFT(dir, "citizen-base-tiny"); err != nil {
		t.Fatal(err)
	}
}

type testServer struct {
	*Server
	url string
	eng *embedded.Engine
}

func newTestServer(t *testing.T) *testServer {
	t.Helper()
	cm := tiny(t)
	eng := embedded.New(cm, embedded.Config{})
	base := cm.Engine.Model().Config
	srv, err := New(Config{ServedModelName: "tiny", BaseRoot: "../../model/base",
		Load: func(dir string) (*model.Adapter, error) { return model.LoadPEFT(dir, base) }}, eng, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		for name := range srv.Adapters() {
			eng.RemoveVersion(name)
		}
	})
	return &testServer{Server: srv, url: hs.URL, eng: eng}
}

func (s *testServer) post(t *testing.T, path, body string) (int, string, string) {
	t.Helper()
	resp, err := http.Post(s.url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// TestAdapterAPI: vLLM's runtime adapter API. A load answers 200 with
// vLLM's plain-text message and the adapter is listed and servable by its
// name; every bad call answers a JSON error (400, or 404 for a path
// without an adapter or an unknown name) and changes nothing.
func TestAdapterAPI(t *testing.T) {
	s := newTestServer(t)
	base := tiny(t).Engine.Model().Config
	dir := t.TempDir()
	good := filepath.Join(dir, "v1")
	writeAdapter(t, base, good, 1)
	bad := filepath.Join(dir, "bad")
	os.MkdirAll(bad, 0o700)
	os.WriteFile(filepath.Join(bad, model.AdapterConfigFile), []byte(`{"peft_type": "LORA", "r": 4`), 0o600)

	code, ctype, body := s.post(t, "/v1/load_lora_adapter", `{"lora_name": "v1", "lora_path": "`+good+`"}`)
	if code != 200 || !strings.HasPrefix(ctype, "text/plain") || body != "Success: LoRA adapter 'v1' added successfully." {
		t.Fatalf("load: %d %s %q", code, ctype, body)
	}
	want := map[string]string{"v1": good}
	for _, c := range []struct {
		name, path, body string
		status           int
		msg              string
	}{
		{"bad JSON", "/v1/load_lora_adapter", `{"lora_name": "v2",`, 400, "invalid request body"},
		{"unknown field", "/v1/load_lora_adapter", `{"lora_name": "v2", "lora_path": "` + good + `", "rank": 4}`, 400, "unknown field"},
		{"missing path", "/v1/load_lora_adapter", `{"lora_name": "v2"}`, 400, "Both 'lora_name' and 'lora_path' must be provided."},
		{"already loaded", "/v1/load_lora_adapter", `{"lora_name": "v1", "lora_path": "` + good + `"}`, 400, "has already been loaded"},
		{"the base's name", "/v1/load_lora_adapter", `{"lora_name": "tiny", "lora_path": "` + good + `"}`, 400, "base model"},
		{"no adapter at the path", "/v1/load_lora_adapter", `{"lora_name": "v2", "lora_path": "` + filepath.Join(dir, "nothing") + `"}`, 404, "No adapter found"},
		{"broken adapter", "/v1/load_lora_adapter", `{"lora_name": "v2", "lora_path": "` + bad + `"}`, 400, "Loading lora v2 failed"},
		{"unload bad JSON", "/v1/unload_lora_adapter", `[]`, 400, "invalid request body"},
		{"unload no name", "/v1/unload_lora_adapter", `{}`, 400, "needs to be provided"},
		{"unload unknown", "/v1/unload_lora_adapter", `{"lora_name": "v9"}`, 404, "cannot be found"},
		{"chat unknown model", "/v1/chat/completions", `{"model": "v9", "messages": [{"role": "user", "content": "hi"}]}`, 404, "does not exist"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, ctype, body := s.post(t, c.path, c.body)
			var e apiError
			if code != c.status || ctype != "application/json" || json.Unmarshal([]byte(body), &e) != nil ||
				e.Error.Code != c.status || !strings.Contains(e.Error.Message, c.msg) || e.Error.Type == "" {
				t.Fatalf("%d %s %s; want %d with %q", code, ctype, body, c.status, c.msg)
			}
			if got := s.Adapters(); !reflect.DeepEqual(got, want) {
				t.Fatalf("adapters changed: %v", got)
			}
		})
	}
	// Listed, with its path as root and the base as parent.
	resp, err := http.Get(s.url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID, Object, Root string
			Parent           *string
		}
	}
	json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if list.Object != "list" || len(list.Data) != 2 || list.Data[0].ID != "tiny" || list.Data[0].Parent != nil ||
		list.Data[1].ID != "v1" || list.Data[1].Root != good || list.Data[1].Parent == nil || *list.Data[1].Parent != "tiny" {
		t.Fatalf("models: %+v", list)
	}
	code, _, body = s.post(t, "/v1/chat/completions", `{"model": "v1", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}`)
	if code != 200 || !strings.Contains(body, `"model":"v1"`) {
		t.Fatalf("chat with the adapter: %d %s", code, body)
	}
	code, _, body = s.post(t, "/v1/unload_lora_adapter", `{"lora_name": "v1"}`)
	if code != 200 || body != "Success: LoRA adapter 'v1' removed successfully." || len(s.Adapters()) != 0 {
		t.Fatalf("unload: %d %q %v", code, body, s.Adapters())
	}
	if code, _, _ := s.post(t, "/v1/chat/completions", `{"model": "v1", "messages": [{"role": "user", "content": "hi"}]}`); code != 404 {
		t.Fatalf("chat with an unloaded adapter: %d", code)
	}
}

// TestUpstreamReadsTheDialect: gateway.Upstream, pointed at the server,
// loads an adapter by name and gets exactly what the embedded engine
// produces in process (content, token ids, logprobs, prompt ids), for the
// base and the adapter, streamed or not; the adapter's answers differ
// from the base's.
func TestUpstreamReadsTheDialect(t *testing.T) {
	s := newTestServer(t)
	base := tiny(t).Engine.Model().Config
	dir := filepath.Join(t.TempDir(), "v1")
	writeAdapter(t, base, dir, 2)
	up, err := gateway.NewUpstream(gateway.UpstreamConfig{BaseURL: s.url + "/v1", Model: "tiny", RequestTokenIDs: true, Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := up.LoadAdapter(ctx, "v1", "base", dir); err != nil {
		t.Fatal(err)
	}
	// Loading again (another gateway, a restart) is accepted; another
	// path under the same name is not.
	if err := up.LoadAdapter(ctx, "v1", "base", dir); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if err := up.LoadAdapter(ctx, "v1", "base", t.TempDir()); err == nil || !strings.Contains(err.Error(), "already serves") {
		t.Fatalf("same name, other path: %v", err)
	}
	if err := up.LoadAdapter(ctx, "v2", "base", filepath.Join(t.TempDir(), "none")); err == nil || !strings.Contains(err.Error(), "No adapter found") {
		t.Fatalf("missing adapter: %v", err)
	}
	if vs, _ := up.Versions(ctx); len(vs) != 2 || vs[1].ID != "v1" {
		t.Fatalf("versions: %+v", vs)
	}
	local := embedded.New(tiny(t), embedded.Config{})
	a, err := model.LoadPEFT(dir, base)
	if err != nil {
		t.Fatal(err)
	}
	if err := local.AddVersion("local-v1", "base", a); err != nil {
		t.Fatal(err)
	}
	defer local.RemoveVersion("local-v1")
	first := map[string][]gateway.Token{}
	for _, version := range []string{"base", "v1"} {
		for _, stream := range []bool{false, true} {
			req := func(v string) *gateway.GenerateRequest {
				// ToolChoice "none", as the server's decoding of a request
				// without tools sets it (it masks the tool-call token).
				return &gateway.GenerateRequest{Version: v, N: 1, MaxTokens: 12, Stream: stream, Logprobs: true, TopLogprobs: 2, ToolChoice: "none",
					Messages: []gateway.Message{{Role: "user", Content: "What is 2+3?"}}}
			}
			got, err := up.Generate(ctx, req(version), func(gateway.Delta) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			lv := version
			if version == "v1" {
				lv = "local-v1"
			}
			want, err := local.Generate(ctx, req(lv), func(gateway.Delta) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			if got.Version != version || !reflect.DeepEqual(got.PromptTokens, want.PromptTokens) || got.Choices[0].Content != want.Choices[0].Content {
				t.Fatalf("%s stream=%v: %+v\nwant %+v", version, stream, got, want)
			}
			g, w := got.Choices[0].Tokens, want.Choices[0].Tokens
			if len(g) != len(w) || len(g) == 0 {
				t.Fatalf("%s stream=%v: %d tokens, want %d", version, stream, len(g), len(w))
			}
			// The alternatives' ids are not in vLLM's answer unless
			// tokens are sent as ids.
			for i := range g {
				ok := g[i].ID == w[i].ID && g[i].Text == w[i].Text && g[i].Logprob == w[i].Logprob && len(g[i].Top) == len(w[i].Top)
				for j := 0; ok && j < len(g[i].Top); j++ {
					ok = g[i].Top[j].Text == w[i].Top[j].Text && g[i].Top[j].Logprob == w[i].Top[j].Logprob
				}
				if !ok {
					t.Fatalf("%s stream=%v token %d: %+v, want %+v", version, stream, i, g[i], w[i])
				}
			}
			first[version] = g
		}
	}
	if reflect.DeepEqual(first["base"], first["v1"]) {
		t.Fatal("the adapter's tokens and logprobs are the base's: it was not applied")
	}
}

// TestCompletions: raw-prompt completions in vLLM's shape: token ids per
// choice (prompt and completion), logprobs with tokens as "token_id:N",
// and a stream whose pieces add up to the same completion.
func TestCompletions(t *testing.T) {
	s := newTestServer(t)
	body := `{"model": "tiny", "prompt": "The refund window is", "max_tokens": 6, "logprobs": 1, "return_token_ids": true, "return_tokens_as_token_ids": true`
	code, _, out := s.post(t, "/v1/completions", body+`}`)
	if code != 200 {
		t.Fatalf("%d %s", code, out)
	}
	var res completionResponse
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Choices) != 1 {
		t.Fatalf("%v %s", err, out)
	}
	c := res.Choices[0]
	if len(c.PromptTokenIDs) == 0 || len(c.TokenIDs) == 0 || c.Logprobs == nil || len(c.Logprobs.Tokens) != len(c.TokenIDs) ||
		res.Usage.CompletionTokens != len(c.TokenIDs) || c.FinishReason == nil {
		t.Fatalf("choice: %s", out)
	}
	for i, id := range c.TokenIDs {
		if c.Logprobs.Tokens[i] != tokenText(id, "", true) {
			t.Fatalf("token %d: %q, id %d", i, c.Logprobs.Tokens[i], id)
		}
	}
	code, _, stream := s.post(t, "/v1/completions", body+`, "stream": true}`)
	if code != 200 || !strings.HasSuffix(stream, "data: [DONE]\n\n") {
		t.Fatalf("stream: %d %s", code, stream)
	}
	var text string
	var ids []int
	for _, line := range strings.Split(stream, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ch completionResponse
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatal(err)
		}
		for _, x := range ch.Choices {
			text += x.Text
			ids = append(ids, x.TokenIDs...)
		}
	}
	if text != c.Text || !reflect.DeepEqual(ids, c.TokenIDs) {
		t.Fatalf("stream %q %v, want %q %v", text, ids, c.Text, c.TokenIDs)
	}
	if code, _, out := s.post(t, "/v1/completions", `{"model": "tiny", "prompt": {"a": 1}}`); code != 400 {
		t.Fatalf("bad prompt: %d %s", code, out)
	}
}
