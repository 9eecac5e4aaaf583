package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"citizen/events"
)

func TestChatNonStreamingRecordsExactTokens(t *testing.T) {
	e := newEnv(t, nil)
	msgs := []map[string]any{
		{"role": "system", "content": "be brief"},
		{"role": "user", "content": []map[string]any{{"type": "text", "text": "héllo "}, {"type": "text", "text": "wörld"}}},
	}
	resp, body := e.post("/v1/chat/completions", keyA, map[string]any{
		"model": "citizen", "messages": msgs, "logprobs": true, "top_logprobs": 2,
		"metadata": map[string]string{"conversation_id": "c1", "task_type": "greeting"}, "seed": 7, "temperature": 0.5,
	})
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if resp.Header.Get("X-Request-Id") == "" || resp.Header.Get("X-Citizen-Model-Version") != "v1" {
		t.Fatalf("headers: %v", resp.Header)
	}
	var out completionOut
	decodeJSON(t, body, &out)
	iid, ok := InteractionID(out.ID)
	if !ok || !strings.HasPrefix(out.ID, "chatcmpl-") || out.Object != "chat.completion" || out.Model != "citizen@v1" {
		t.Fatalf("completion: %+v", out)
	}
	want := "echo: héllo wörld"
	if len(out.Choices) != 1 || *out.Choices[0].Message.Content != want || out.Choices[0].FinishReason != "stop" {
		t.Fatalf("choices: %s", body)
	}
	lp := out.Choices[0].Logprobs
	if lp == nil || len(lp.Content) != len([]rune(want)) || len(lp.Content[0].TopLogprobs) != 2 {
		t.Fatalf("logprobs: %s", body)
	}
	_, rec := e.interaction(iid)
	if rec.Tenant != "tenant-a" || rec.User != "alice" || rec.Conversation != "c1" || rec.TaskType != "greeting" || rec.ModelVersion != "v1" || rec.Tokenizer != StubTokenizer || rec.Engine != "stub" {
		t.Fatalf("record: %+v", rec)
	}
	wantPrompt := StubPromptTokens([]Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "héllo wörld"}})
	if !reflect.DeepEqual(rec.PromptTokens, wantPrompt) {
		t.Fatalf("prompt tokens %v, want %v", rec.PromptTokens, wantPrompt)
	}
	ch := rec.Choices[0]
	if !reflect.DeepEqual(ch.CompletionTokens, codepoints(want)) || ch.Message.Content != want {
		t.Fatalf("completion tokens %v", ch.CompletionTokens)
	}
	for i, l := range ch.Logprobs {
		if l.Token != ch.CompletionTokens[i] || l.Logprob != StubLogprob(i) || l.Logprob != lp.Content[i].Logprob || len(l.Top) != 2 {
			t.Fatalf("logprob %d: %+v", i, l)
		}
	}
	if rec.Usage.PromptTokens != len(wantPrompt) || rec.Usage.CompletionTokens != len(ch.CompletionTokens) || *out.Usage != Usage(rec.Usage) {
		t.Fatalf("usage %+v vs %+v", rec.Usage, out.Usage)
	}
	resp, body = e.do("GET", "/v1/chat/completions/"+out.ID, keyA, nil)
	var stored completionOut
	decodeJSON(t, body, &stored)
	if resp.StatusCode != 200 || stored.Created != out.Created || *stored.Choices[0].Message.Content != want || stored.Metadata["task_type"] != "greeting" {
		t.Fatalf("stored completion differs: %s", body)
	}
	var params map[string]any
	decodeJSON(t, rec.Params, &params)
	if params["seed"] != float64(7) || params["temperature"] != 0.5 {
		t.Fatalf("params: %s", rec.Params)
	}
}

func TestChatStreaming(t *testing.T) {
	for _, includeUsage := range []bool{false, true} {
		t.Run(fmt.Sprintf("include_usage=%v", includeUsage), func(t *testing.T) {
			e := newEnv(t, nil)
			req := map[string]any{"model": "citizen", "messages": userMsg("abc"), "stream": true, "logprobs": true, "n": 2}
			if includeUsage {
				req["stream_options"] = map[string]any{"include_usage": true}
			}
			resp, body := e.post("/v1/chat/completions", keyA, req)
			if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("status %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			datas := sse(t, body)
			if datas[len(datas)-1] != "[DONE]" {
				t.Fatalf("no [DONE]: %s", body)
			}
			var id string
			content := map[int]string{}
			finish := map[int]string{}
			var usage *Usage
			for _, d := range datas[:len(datas)-1] {
				var raw map[string]json.RawMessage
				decodeJSON(t, []byte(d), &raw)
				u, has := raw["usage"]
				if has != includeUsage {
					t.Fatalf("usage key present=%v with include_usage=%v: %s", has, includeUsage, d)
				}
				var ch struct {
					ID      string `json:"id"`
					Object  string `json:"object"`
					Choices []struct {
						Index        int     `json:"index"`
						FinishReason *string `json:"finish_reason"`
						Delta        struct {
							Role    string  `json:"role"`
							Content *string `json:"content"`
						} `json:"delta"`
						Logprobs *logprobsOut `json:"logprobs"`
					} `json:"choices"`
				}
				decodeJSON(t, []byte(d), &ch)
				if id == "" {
					id = ch.ID
				}
				if ch.ID != id || ch.Object != "chat.completion.chunk" {
					t.Fatalf("chunk: %s", d)
				}
				if usage != nil {
					t.Fatalf("chunk after the usage chunk: %s", d)
				}
				if has && string(u) != "null" {
					if len(ch.Choices) != 0 {
						t.Fatalf("usage chunk with choices: %s", d)
					}
					usage = new(Usage)
					decodeJSON(t, u, usage)
					continue
				}
				for _, c := range ch.Choices {
					if _, done := finish[c.Index]; done {
						t.Fatalf("delta after finish_reason: %s", d)
					}
					if c.Delta.Content != nil {
						if c.Delta.Role == "" && *c.Delta.Content != "" && (c.Logprobs == nil || len(c.Logprobs.Content) != 1) {
							t.Fatalf("content chunk without logprobs: %s", d)
						}
						content[c.Index] += *c.Delta.Content
					}
					if c.FinishReason != nil {
						finish[c.Index] = *c.FinishReason
					}
				}
			}
			if content[0] != "echo: abc" || content[1] != "echo: abc #1" || finish[0] != "stop" || finish[1] != "stop" {
				t.Fatalf("content %v finish %v", content, finish)
			}
			iid, _ := InteractionID(id)
			_, rec := e.interaction(iid)
			if !rec.Stream || rec.Choices[1].Message.Content != content[1] || !reflect.DeepEqual(rec.Choices[0].CompletionTokens, codepoints(content[0])) {
				t.Fatalf("record: %+v", rec.Choices)
			}
			if includeUsage != (usage != nil) || usage != nil && *usage != Usage(rec.Usage) {
				t.Fatalf("usage chunk %+v, record %+v", usage, rec.Usage)
			}
		})
	}
}

func TestToolCallRoundTrip(t *testing.T) {
	e := newEnv(t, nil)
	tools := []map[string]any{{"type": "function", "function": map[string]any{"name": "get_weather",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}}}}
	resp, body := e.post("/v1/chat/completions", keyA, map[string]any{"model": "citizen", "messages": userMsg("use the tool"), "tools": tools})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var out completionOut
	decodeJSON(t, body, &out)
	c := out.Choices[0]
	if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 || c.Message.ToolCalls[0].Function.Arguments != `{"city":"x"}` || c.Message.Content != nil {
		t.Fatalf("tool call: %s", body)
	}
	call := c.Message.ToolCalls[0]
	msgs := []map[string]any{
		{"role": "user", "content": "use the tool"},
		{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{"id": call.ID, "type": "function", "function": map[string]any{"name": call.Function.Name, "arguments": call.Function.Arguments}}}},
		{"role": "tool", "tool_call_id": call.ID, "content": "sunny"},
	}
	resp, body = e.post("/v1/chat/completions", keyA, map[string]any{"model": "citizen", "messages": msgs, "tools": tools})
	decodeJSON(t, body, &out)
	if resp.StatusCode != 200 || *out.Choices[0].Message.Content != "tool said: sunny" {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	iid, _ := InteractionID(out.ID)
	_, rec := e.interaction(iid)
	if rec.Messages[1].ToolCalls[0].ID != call.ID || rec.Messages[2].ToolCallID != call.ID || len(rec.Tools) != 1 {
		t.Fatalf("record: %+v", rec.Messages)
	}
}

func TestRecordFailureIsAnError(t *testing.T) {
	e := newEnv(t, nil)
	e.store.failing.Store(true)
	resp, body := e.post("/v1/chat/completions", keyA, map[string]any{"model": "citizen", "messages": userMsg("x")})
	if resp.StatusCode != 503 || apiErrOf(t, body).Type != "api_error" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("non-streaming: %d %s (a store that cannot record is a retryable 503)", resp.StatusCode, body)
	}
	resp, body = e.post("/v1/chat/completions", keyA, map[string]any{"model": "citizen", "messages": userMsg("x"), "stream": true})
	datas := sse(t, body)
	if resp.StatusCode != 200 || len(datas) == 0 {
		t.Fatalf("streaming: %d %s", resp.StatusCode, body)
	}
	last := datas[len(datas)-1]
	if !strings.Contains(last, `"error"`) || strings.Contains(string(body), "[DONE]") || strings.Contains(string(body), `"finish_reason":"stop"`) {
		t.Fatalf("stream must end with an error and no finish or [DONE]: %s", body)
	}
	if n := len(e.interactions()); n != 0 {
		t.Fatalf("%d interactions recorded", n)
	}
	e.store.failing.Store(false)
	if resp, _ := e.post("/v1/chat/completions", keyA, map[string]any{"model": "citizen", "messages": userMsg("x")}); resp.StatusCode != 200 {
		t.Fatal("recovers after the store does")
	}
}

// The record is durable before the client sees the finish chunk: the
// store is told to fail exactly when the engine has produced everything, so
// any finish chunk sent before the append would show up.
func TestStreamRecordsBeforeFinish(t *testing.T) {
	e := newEnv(t, nil)
	e.stub.Reply = func(req *GenerateRequest, c int) string {
		e.store.failing.Store(true) // the engine has "finished" producing when this runs
		return "hello"
	}
	_, body := e.post("/v1/chat/completions", keyA, map[string]any{"model": "citizen", "messages": userMsg("x"), "stream": true})
	if strings.Contains(string(body), "finish_reason\":\"") || strings.Contains(string(body), "[DONE]") {
		t.Fatalf("finish sent although the record failed: %s", body)
	}
}

func TestEngineErrorsAndRetryAfter(t *testing.T) {
	e := newEnv(t, nil)
	e.stub.FailNext(1, &EngineError{Status: 503, Message: "overloaded", RetryAfter: 1500 * 1e6})
	resp, body := e.post("/v1/chat/completions", keyA, map[string]any{"model": "citizen", "messages": userMsg("x")})
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "2" || resp.Header.Get("Retry-After-Ms") != "1500" {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, body)
	}
	e.stub.FailNext(1, &EngineError{Status: 503, Message: "overloaded"})
	resp, body = e.post("/v1/chat/completions", keyA, map[string]any{"model": "citizen", "messages": userMsg("x"), "stream": true})
	if resp.StatusCode != 503 || apiErrOf(t, body).Type != "api_error" {
		t.Fatalf("stream before output: %d %s", resp.StatusCode, body)
	}
	e.stub.FailNext(1, fmt.Errorf("boom"))
	resp, _ = e.post("/v1/chat/completions", keyA, map[string]any{"model": "citizen", "messages": userMsg("x")})
	if resp.StatusCode != 502 {
		t.Fatalf("plain engine error: %d", resp.StatusCode)
	}
	if n := len(e.interactions()); n != 0 {
		t.Fatalf("%d recorded", n)
	}
}

func TestStopMaxTokensAndJSONSchema(t *testing.T) {
	e := newEnv(t, nil)
	var out completionOut
	_, body := e.post("/v1/chat/completions", keyA, map[string]any{"model": "citizen", "messages": userMsg("abcdef"), "stop": "cd"})
	decodeJSON(t, body, &out)
	if *out.Choices[0].Message.Content != "echo: ab" || out.Choices[0].FinishReason != "stop" {
		t.Fatalf("stop: %s", body)
	}
	_, body = e.post("/v1/chat/completions", keyA, map[string]any{"model": "citizen", "messages": userMsg("abcdef"), "max_tokens": 3})
	decodeJSON(t, body, &out)
	if *out.Choices[0].Message.Content != "ech" || out.Choices[0].FinishReason != "length" || out.Usage.CompletionTokens != 3 {
		t.Fatalf("max_tokens: %s", body)
	}
	schema := map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}, "ok": map[string]any{"type": "boolean"}}, "required": []string{"n", "ok"}}
	_, body = e.post("/v1/chat/completions", keyA, map[string]any{"model": "citizen", "messages": userMsg("x"),
		"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "r", "schema": schema, "strict": true}}})
	decodeJSON(t, body, &out)
	var v struct {
		N  *int  `json:"n"`
		OK *bool `json:"ok"`
	}
	decodeJSON(t, []byte(*out.Choices[0].Message.Content), &v)
	if v.N == nil || v.OK == nil {
		t.Fatalf("json_schema: %s", body)
	}
}

func TestAuth(t *testing.T) {
	e := newEnv(t, nil)
	for _, key := range []string{"", "sk-wrong", DevKey} {
		resp, body := e.post("/v1/chat/completions", key, map[string]any{"model": "citizen", "messages": userMsg("x")})
		if resp.StatusCode != 401 || resp.Header.Get("X-Request-Id") == "" {
			t.Fatalf("key %q: %d %s", key, resp.StatusCode, body)
		}
		if eo := apiErrOf(t, body); eo.Code == nil || *eo.Code != "invalid_api_key" {
			t.Fatalf("key %q: %s", key, body)
		}
	}
	dev := newEnv(t, func(c *Config, d *Deps) { c.DevMode = "auto" }) // 127.0.0.1:0 is loopback
	if resp, body := dev.post("/v1/chat/completions", DevKey, map[string]any{"model": "citizen", "messages": userMsg("x")}); resp.StatusCode != 200 {
		t.Fatalf("dev key: %d %s", resp.StatusCode, body)
	}
	if (Config{DevMode: "auto", Listen: ":8080"}).DevKeyEnabled() || (Config{DevMode: "auto", Listen: "0.0.0.0:1"}).DevKeyEnabled() ||
		!(Config{DevMode: "auto", Listen: "localhost:1"}).DevKeyEnabled() || !(Config{DevMode: "on", Listen: ":1"}).DevKeyEnabled() {
		t.Fatal("DevKeyEnabled")
	}
}

func TestRateLimits(t *testing.T) {
	e := newEnv(t, nil)
	e.keys.Add("sk-limited", KeySpec{Tenant: "t", RequestsPerMinute: 2})
	e.keys.Add("sk-tokens", KeySpec{Tenant: "t", TokensPerMinute: 10})
	for i := 0; i < 2; i++ {
		if resp, body := e.post("/v1/chat/completions", "sk-limited", map[string]any{"model": "citizen", "messages": userMsg("x")}); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
	resp, body := e.post("/v1/chat/completions", "sk-limited", map[string]any{"model": "citizen", "messages": userMsg("x")})
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || apiErrOf(t, body).Type != "rate_limit_error" {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, body)
	}
	// The first request overdraws the token bucket (~30 tokens > 10).
	if resp, _ := e.post("/v1/chat/completions", "sk-tokens", map[string]any{"model": "citizen", "messages": userMsg("x")}); resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
	if resp, _ := e.post("/v1/chat/completions", "sk-tokens", map[string]any{"model": "citizen", "messages": userMsg("x")}); resp.StatusCode != 429 {
		t.Fatalf("token limit: %d", resp.StatusCode)
	}
	// Other keys are not affected.
	if resp, _ := e.post("/v1/chat/completions", keyA, map[string]any{"model": "citizen", "messages": userMsg("x")}); resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
}

func TestBodyLimit(t *testing.T) {
	e := newEnv(t, nil)
	big := strings.Repeat("a", 70<<10)
	resp, body := e.post("/v1/chat/completions", keyA, map[string]any{"model": "citizen", "messages": userMsg(big)})
	if resp.StatusCode != http.StatusRequestEntityTooLarge || apiErrOf(t, body).Type != "invalid_request_error" {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if len(e.interactions()) != 0 {
		t.Fatal("recorded")
	}
}

func TestUnknownRouteAndMethod(t *testing.T) {
	e := newEnv(t, nil)
	resp, body := e.do("GET", "/v1/nothing", keyA, nil)
	if resp.StatusCode != 404 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	apiErrOf(t, body)
	resp, body = e.do("DELETE", "/v1/models", keyA, nil)
	if resp.StatusCode != 405 && resp.StatusCode != 404 { // echo answers 404 inside a group with middleware
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	apiErrOf(t, body)
}

// brokenEngine emits two deltas and then fails.
type brokenEngine struct{ *StubEngine }

func (b brokenEngine) Generate(ctx context.Context, req *GenerateRequest, emit func(Delta) error) (*Result, error) {
	if emit != nil {
		for _, s := range []string{"par", "tial"} {
			if err := emit(Delta{Choice: 0, Text: s}); err != nil {
				return nil, err
			}
		}
	}
	return nil, &EngineError{Status: 500, Message: "model crashed"}
}

func TestEngineFailsMidStream(t *testing.T) {
	e := newEnv(t, func(c *Config, d *Deps) { d.Engine = brokenEngine{NewStubEngine()} })
	resp, body := e.post("/v1/chat/completions", keyA, map[string]any{"model": "citizen", "messages": userMsg("x"), "stream": true})
	datas := sse(t, body)
	if resp.StatusCode != 200 || len(datas) < 3 || !strings.Contains(datas[len(datas)-1], `"error"`) || strings.Contains(string(body), "[DONE]") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if len(e.interactions()) != 0 {
		t.Fatal("a failed generation was recorded")
	}
}

func TestRequestIDEchoed(t *testing.T) {
	e := newEnv(t, nil)
	req, _ := http.NewRequest("GET", e.ts.URL+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+keyA)
	req.Header.Set("X-Request-Id", "client-123")
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("X-Request-Id") != "client-123" {
		t.Fatalf("%q", resp.Header.Get("X-Request-Id"))
	}
}

// Under concurrency and a store that fails every third append, exactly the
// acknowledged completions are recorded, each with its exact tokens.
func TestOnlyAcknowledgedCompletionsAreRecorded(t *testing.T) {
	e := newEnv(t, nil)
	e.store.failEvery = 3
	type outcome struct {
		id    string
		acked bool
	}
	const n = 60
	results := make(chan outcome, n)
	for i := 0; i < n; i++ {
		go func(i int) {
			stream := i%2 == 0
			text := fmt.Sprintf("message %d", i)
			b, _ := json.Marshal(map[string]any{"model": "citizen", "messages": userMsg(text), "stream": stream})
			req, _ := http.NewRequest("POST", e.ts.URL+"/v1/chat/completions", strings.NewReader(string(b)))
			req.Header.Set("Authorization", "Bearer "+keyA)
			resp, err := e.ts.Client().Do(req)
			if err != nil {
				results <- outcome{}
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var o outcome
			if !stream {
				var c completionOut
				if resp.StatusCode == 200 && json.Unmarshal(body, &c) == nil {
					o = outcome{id: c.ID, acked: true}
				}
				results <- o
				return
			}
			datas := sse(t, body)
			var c struct {
				ID string `json:"id"`
			}
			if len(datas) > 0 {
				json.Unmarshal([]byte(datas[0]), &c)
			}
			results <- outcome{id: c.ID, acked: len(datas) > 0 && datas[len(datas)-1] == "[DONE]"}
		}(i)
	}
	acked := 0
	for i := 0; i < n; i++ {
		o := <-results
		iid, ok := InteractionID(o.id)
		if !o.acked {
			if ok {
				if _, err := e.mem.ReadStream(context.Background(), events.InteractionStream(iid), 0, events.Forward, 1); err == nil {
					t.Fatalf("%s was refused but recorded", o.id)
				}
			}
			continue
		}
		acked++
		_, rec := e.interaction(iid)
		if !reflect.DeepEqual(rec.Choices[0].CompletionTokens, codepoints(rec.Choices[0].Message.Content)) || len(rec.Choices[0].Logprobs) != len(rec.Choices[0].CompletionTokens) {
			t.Fatalf("%s recorded without exact tokens", o.id)
		}
	}
	if got := len(e.interactions()); got != acked || acked == 0 || acked == n {
		t.Fatalf("acknowledged %d of %d, recorded %d", acked, n, got)
	}
}

// A refusal by Deps.Admit is a retryable 503 overloaded, for completions
// and responses alike, and records nothing.
func TestAdmitRefusesBeforeRecording(t *testing.T) {
	var refuse atomic.Bool
	e := newEnv(t, func(_ *Config, d *Deps) {
		d.Admit = func() error {
			if refuse.Load() {
				return errors.New("reflection owes 12 messages")
			}
			return nil
		}
	})
	refuse.Store(true)
	for _, c := range []struct {
		path string
		body map[string]any
	}{
		{"/v1/chat/completions", map[string]any{"model": "citizen", "messages": userMsg("x")}},
		{"/v1/chat/completions", map[string]any{"model": "citizen", "messages": userMsg("x"), "stream": true}},
		{"/v1/responses", map[string]any{"model": "citizen", "input": "x"}},
	} {
		resp, body := e.post(c.path, keyA, c.body)
		if ae := apiErrOf(t, body); resp.StatusCode != 503 || ae.Code == nil || *ae.Code != "overloaded" || resp.Header.Get("Retry-After") == "" || !strings.Contains(ae.Message, "reflection owes 12") {
			t.Errorf("%s %v: %d %s, want 503 overloaded with Retry-After and the reason", c.path, c.body["stream"], resp.StatusCode, body)
		}
	}
	if n := len(e.interactions()); n != 0 {
		t.Fatalf("%d interactions recorded while refusing", n)
	}
	refuse.Store(false)
	if resp, body := e.post("/v1/chat/completions", keyA, map[string]any{"model": "citizen", "messages": userMsg("x")}); resp.StatusCode != 200 || len(e.interactions()) != 1 {
		t.Fatalf("admitted again: %d %s", resp.StatusCode, body)
	}
}
