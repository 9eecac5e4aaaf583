package hotpath

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// MockConfig configures the mock upstream.
type MockConfig struct {
	// Tokens is the number of completion tokens every answer has (default
	// 16); a streamed answer sends one chunk per token.
	Tokens int
	// PromptTokens is the prompt length reported in usage and in
	// prompt_token_ids (default 24).
	PromptTokens int
}

func (c MockConfig) withDefaults() MockConfig {
	if c.Tokens <= 0 {
		c.Tokens = 16
	}
	if c.PromptTokens <= 0 {
		c.PromptTokens = 24
	}
	return c
}

// Mock is an OpenAI-compatible chat completions server that answers at
// once: POST /v1/chat/completions, non-streaming and streaming (SSE), with
// per-token logprobs when asked ("logprobs": true) and vLLM's token ids
// when asked ("return_token_ids": true), the fields citizen's upstream
// engine sends and records. Every answer is the same text; its cost is
// reading the request and writing prebuilt bytes, so the time measured
// through it is the caller's. Safe for concurrent use.
type Mock struct {
	cfg      MockConfig
	requests atomic.Int64
	// Prebuilt answers, indexed by [logprobs][tokenIDs].
	full [2][2][]byte
	// chunks[logprobs][tokenIDs] are the streamed "data: ..." events,
	// head the role chunk, tail the finish, usage and [DONE] events.
	chunks [2][2][][]byte
}

// mockWord is the text of every completion token.
const mockWord = " ok"

// NewMock returns a mock upstream.
func NewMock(cfg MockConfig) *Mock {
	m := &Mock{cfg: cfg.withDefaults()}
	for lp := range 2 {
		for ids := range 2 {
			m.full[lp][ids] = m.buildFull(lp == 1, ids == 1)
			m.chunks[lp][ids] = m.buildChunks(lp == 1, ids == 1)
		}
	}
	return m
}

// Requests is the number of chat completions answered.
func (m *Mock) Requests() int64 { return m.requests.Load() }

type mockLogprob struct {
	Token       string    `json:"token"`
	Logprob     float32   `json:"logprob"`
	Bytes       []int     `json:"bytes"`
	TopLogprobs []float32 `json:"top_logprobs"`
}

func (m *Mock) tokenLogprobs(n int) map[string]any {
	content := make([]mockLogprob, n)
	for i := range content {
		content[i] = mockLogprob{Token: mockWord, Logprob: -0.125, Bytes: []int{' ', 'o', 'k'}, TopLogprobs: []float32{}}
	}
	return map[string]any{"content": content}
}

func seq(n, from int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i
	}
	return out
}

func (m *Mock) usage() map[string]int {
	return map[string]int{"prompt_tokens": m.cfg.PromptTokens, "completion_tokens": m.cfg.Tokens, "total_tokens": m.cfg.PromptTokens + m.cfg.Tokens}
}

func (m *Mock) buildFull(logprobs, tokenIDs bool) []byte {
	text := ""
	for range m.cfg.Tokens {
		text += mockWord
	}
	choice := map[string]any{"index": 0, "finish_reason": "stop",
		"message": map[string]any{"role": "assistant", "content": text, "refusal": nil}, "logprobs": nil}
	if logprobs {
		choice["logprobs"] = m.tokenLogprobs(m.cfg.Tokens)
	}
	resp := map[string]any{"id": "chatcmpl-mock", "object": "chat.completion", "created": 1700000000, "model": "mock",
		"system_fingerprint": "fp_mock", "choices": []any{choice}, "usage": m.usage()}
	if tokenIDs {
		choice["token_ids"] = seq(m.cfg.Tokens, 1000)
		resp["prompt_token_ids"] = seq(m.cfg.PromptTokens, 100)
	}
	b, _ := json.Marshal(resp)
	return b
}

func sse(v any) []byte {
	b, _ := json.Marshal(v)
	return append(append([]byte("data: "), b...), '\n', '\n')
}

func (m *Mock) buildChunks(logprobs, tokenIDs bool) [][]byte {
	base := func(choices []any) map[string]any {
		return map[string]any{"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 1700000000, "model": "mock",
			"system_fingerprint": "fp_mock", "choices": choices}
	}
	var out [][]byte
	head := base([]any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": ""}, "logprobs": nil, "finish_reason": nil}})
	if tokenIDs {
		head["prompt_token_ids"] = seq(m.cfg.PromptTokens, 100)
	}
	out = append(out, sse(head))
	for i := range m.cfg.Tokens {
		c := map[string]any{"index": 0, "delta": map[string]any{"content": mockWord}, "logprobs": nil, "finish_reason": nil}
		if logprobs {
			c["logprobs"] = m.tokenLogprobs(1)
		}
		if tokenIDs {
			c["token_ids"] = []int{1000 + i}
		}
		out = append(out, sse(base([]any{c})))
	}
	out = append(out, sse(base([]any{map[string]any{"index": 0, "delta": map[string]any{}, "logprobs": nil, "finish_reason": "stop"}})))
	u := base([]any{})
	u["usage"] = m.usage()
	out = append(out, sse(u))
	out = append(out, []byte("data: [DONE]\n\n"))
	return out
}

// mockRequest is the part of a chat completion request the mock reads.
type mockRequest struct {
	Model          string          `json:"model"`
	Messages       json.RawMessage `json:"messages"`
	Stream         bool            `json:"stream"`
	Logprobs       bool            `json:"logprobs"`
	ReturnTokenIDs bool            `json:"return_token_ids"`
	N              *int            `json:"n"`
}

func mockError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": nil, "code": nil}})
	w.Write(b)
}

// ServeHTTP implements http.Handler.
func (m *Mock) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/chat/completions", "/chat/completions":
	case "/v1/models", "/models":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[{"id":"mock","object":"model","created":1700000000,"owned_by":"bench"}]}`)
		return
	case "/healthz", "/health":
		io.WriteString(w, "ok\n")
		return
	default:
		mockError(w, http.StatusNotFound, "no route "+r.URL.Path)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		mockError(w, http.StatusMethodNotAllowed, "POST only")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		mockError(w, http.StatusBadRequest, "cannot read the body: "+err.Error())
		return
	}
	var req mockRequest
	if err := json.Unmarshal(body, &req); err != nil {
		mockError(w, http.StatusBadRequest, "the body is not a JSON object: "+err.Error())
		return
	}
	if len(bytes.TrimSpace(req.Messages)) == 0 || req.Messages[0] != '[' {
		mockError(w, http.StatusBadRequest, "messages must be an array")
		return
	}
	if req.N != nil && *req.N > 1 {
		mockError(w, http.StatusBadRequest, "the mock answers n=1 only")
		return
	}
	m.requests.Add(1)
	lp, ids := b2i(req.Logprobs), b2i(req.ReturnTokenIDs)
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(m.full[lp][ids])))
		w.Write(m.full[lp][ids])
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl, _ := w.(http.Flusher)
	for _, c := range m.chunks[lp][ids] {
		if _, err := w.Write(c); err != nil {
			return
		}
		if fl != nil {
			fl.Flush()
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ServeMock runs a mock on addr until ctx ends; it writes "listening
// ADDR\n" to ready once it accepts connections (ADDR is the bound address,
// so addr may use port 0).
func ServeMock(ctx context.Context, addr string, cfg MockConfig, ready io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("hotpath: mock: %w", err)
	}
	srv := &http.Server{Handler: NewMock(cfg), ReadHeaderTimeout: 10 * time.Second}
	if ready != nil {
		fmt.Fprintf(ready, "listening %s\n", ln.Addr())
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		<-errc
		return nil
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("hotpath: mock: %w", err)
	}
}
