package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeOpenAI is a minimal OpenAI-compatible server in vLLM's dialect (token
// ids as "token_id:N" when asked, return_token_ids). It fails the first
// `fail` calls with failStatus.
type fakeOpenAI struct {
	calls      atomic.Int64
	fail       atomic.Int64
	failStatus int
	lastBody   atomic.Value // map[string]any
}

func (f *fakeOpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer up-key" {
		http.Error(w, `{"error":{"message":"bad path or key"}}`, 404)
		return
	}
	if f.fail.Add(-1) >= 0 {
		w.Header().Set("retry-after-ms", "1")
		http.Error(w, `{"error":{"message":"busy"}}`, f.failStatus)
		return
	}
	b, _ := io.ReadAll(r.Body)
	var req map[string]any
	json.Unmarshal(b, &req)
	f.lastBody.Store(req)
	toks := []struct {
		id   int
		text string
	}{{101, "Hel"}, {102, "lo"}, {103, "!"}}
	lp := func(i int) map[string]any {
		return map[string]any{"token": toks[i].text, "logprob": -0.5 * float64(i), "bytes": []int{},
			"top_logprobs": []map[string]any{{"token": toks[i].text, "logprob": -0.5 * float64(i)}}}
	}
	if req["stream"] == true {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range toks {
			ch := map[string]any{"id": "x", "object": "chat.completion.chunk", "choices": []map[string]any{{"index": 0,
				"delta": map[string]any{"content": toks[i].text}, "logprobs": map[string]any{"content": []any{lp(i)}}, "token_ids": []int{toks[i].id}}}}
			if i == 0 {
				ch["prompt_token_ids"] = []int{1, 2, 3}
			}
			b, _ := json.Marshal(ch)
			fmt.Fprintf(w, "data: %s\n\n", b)
			w.(http.Flusher).Flush()
		}
		fmt.Fprintf(w, "data: %s\n\n", `{"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)
		fmt.Fprintf(w, "data: %s\n\n", `{"id":"x","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}}`)
		fmt.Fprint(w, "data: [DONE]\n\n")
		return
	}
	var content []any
	for i := range toks {
		content = append(content, lp(i))
	}
	json.NewEncoder(w).Encode(map[string]any{"id": "x", "object": "chat.completion", "system_fingerprint": "fp_up",
		"prompt_token_ids": []int{1, 2, 3},
		"choices": []map[string]any{{"index": 0, "message": map[string]any{"role": "assistant", "content": "Hello!"},
			"finish_reason": "stop", "logprobs": map[string]any{"content": content}, "token_ids": []int{101, 102, 103}}},
		"usage": map[string]any{"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}})
}

func newUpstreamEnv(t *testing.T, f *fakeOpenAI) *env {
	up := httptest.NewServer(f)
	t.Cleanup(up.Close)
	eng, err := NewUpstream(UpstreamConfig{BaseURL: up.URL + "/v1", APIKey: "up-key", Model: "llama", RequestTokenIDs: true,
		Backoff: time.Millisecond, MaxRetries: 2, Tokenizer: "llama3@1"})
	if err != nil {
		t.Fatal(err)
	}
	return newEnv(t, func(c *Config, d *Deps) { d.Engine = eng })
}

func TestUpstreamEngine(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			f := &fakeOpenAI{failStatus: 503}
			f.fail.Store(2)
			e := newUpstreamEnv(t, f)
			resp, body := e.post("/v1/chat/completions", keyA, map[string]any{"model": "citizen", "messages": userMsg("hi"), "stream": stream, "max_tokens": 5})
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			if f.calls.Load() != 3 {
				t.Fatalf("want 2 retries, got %d calls", f.calls.Load())
			}
			if stream {
				datas := sse(t, body)
				if datas[len(datas)-1] != "[DONE]" || !strings.Contains(string(body), `"content":"Hel"`) {
					t.Fatalf("stream: %s", body)
				}
			} else if !strings.Contains(string(body), `"content":"Hello!"`) || strings.Contains(string(body), `"logprob"`) {
				t.Fatalf("body (logprobs must stay hidden unless asked): %s", body)
			}
			req := f.lastBody.Load().(map[string]any)
			if req["model"] != "llama" || req["logprobs"] != true || req["max_tokens"] != float64(5) || req["return_token_ids"] != true {
				t.Fatalf("upstream request: %v", req)
			}
			rec := e.interactions()[0]
			if !reflect.DeepEqual(rec.PromptTokens, []int{1, 2, 3}) || !reflect.DeepEqual(rec.Choices[0].CompletionTokens, []int{101, 102, 103}) ||
				rec.Choices[0].Logprobs[1].Logprob != -0.5 || rec.Tokenizer != "llama3@1" || rec.Engine != "upstream" || rec.Usage.TotalTokens != 6 {
				t.Fatalf("record: %+v", rec)
			}
		})
	}
}

func TestUpstreamGivesUp(t *testing.T) {
	f := &fakeOpenAI{failStatus: 429}
	f.fail.Store(10)
	e := newUpstreamEnv(t, f)
	resp, body := e.post("/v1/chat/completions", keyA, map[string]any{"model": "citizen", "messages": userMsg("hi")})
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || f.calls.Load() != 3 {
		t.Fatalf("%d after %d calls: %s", resp.StatusCode, f.calls.Load(), body)
	}
	if len(e.interactions()) != 0 {
		t.Fatal("recorded a failure")
	}
	// 400 from upstream is not retried and is the client's error.
	f2 := &fakeOpenAI{failStatus: 400}
	f2.fail.Store(1)
	e2 := newUpstreamEnv(t, f2)
	if resp, _ := e2.post("/v1/chat/completions", keyA, map[string]any{"model": "citizen", "messages": userMsg("hi")}); resp.StatusCode != 400 || f2.calls.Load() != 1 {
		t.Fatalf("%d after %d calls", resp.StatusCode, f2.calls.Load())
	}
	if _, err := NewUpstream(UpstreamConfig{}); err == nil {
		t.Fatal("config without base URL accepted")
	}
	u, _ := NewUpstream(UpstreamConfig{BaseURL: "http://127.0.0.1:1", Model: "m"})
	if _, err := u.Generate(context.Background(), &GenerateRequest{Version: "v9", N: 1}, nil); err == nil {
		t.Fatal("unknown version accepted")
	}
}

// An upstream stream that breaks after some output is not retried (the
// client has seen output): the client gets an error event, no [DONE], and
// nothing is recorded.
func TestUpstreamStreamBreaks(t *testing.T) {
	var calls atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n")
	}))
	defer up.Close()
	eng, err := NewUpstream(UpstreamConfig{BaseURL: up.URL, Model: "m", Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *Config, d *Deps) { d.Engine = eng })
	resp, body := e.post("/v1/chat/completions", keyA, map[string]any{"model": "citizen", "messages": userMsg("hi"), "stream": true})
	datas := sse(t, body)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"content":"Hel"`) || !strings.Contains(datas[len(datas)-1], `"error"`) || slices.Contains(datas, "[DONE]") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if calls.Load() != 1 || len(e.interactions()) != 0 {
		t.Fatalf("calls %d, recorded %d", calls.Load(), len(e.interactions()))
	}
}
