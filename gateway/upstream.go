package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"citizen/internal/jsondec"
)

// UpstreamConfig configures an engine that forwards to an OpenAI-compatible
// server (vLLM, SGLang, llama.cpp, OpenAI).
type UpstreamConfig struct {
	// BaseURL is the API root, e.g. "http://localhost:8000/v1".
	BaseURL string `yaml:"base_url"`
	// APIKey is sent as a bearer token if set.
	APIKey string `yaml:"api_key"`
	// Model is the upstream model name serving the base version.
	Model string `yaml:"model"`
	// Versions are the versions served (default: one version "base"). A
	// version other than "base" is requested upstream under its own id as
	// the model name (vLLM's LoRA adapters are selected that way) unless
	// ModelNames maps it.
	Versions   []VersionInfo     `yaml:"-"`
	ModelNames map[string]string `yaml:"model_names"`
	// Timeout bounds one upstream attempt (default 5 minutes).
	Timeout time.Duration `yaml:"timeout"`
	// MaxRetries is the number of retries after a 408, 409, 429, 5xx or a
	// connection error that happened before any output (default 2).
	// Negative disables retries.
	MaxRetries int `yaml:"max_retries"`
	// Backoff is the first retry delay (default 250 ms), doubled per retry
	// with jitter, capped at 8 s; a Retry-After from upstream wins.
	Backoff time.Duration `yaml:"backoff"`
	// RequestTokenIDs asks vLLM for token ids ("return_token_ids": true) so
	// that the exact prompt and completion ids are recorded. Other servers
	// may reject the field; then leave it off (ids are recorded as -1).
	RequestTokenIDs bool `yaml:"request_token_ids"`
	// Tokenizer is the tokenizer version string recorded.
	Tokenizer string `yaml:"tokenizer"`
	// Client is the HTTP client (default: a client without a global
	// timeout, keeping up to 1024 idle connections to the server; Timeout
	// applies per attempt).
	Client *http.Client `yaml:"-"`
}

// Upstream is an Engine backed by an OpenAI-compatible HTTP server. It
// always requests logprobs (to record the behaviour policy) and returns them
// to the client only when asked. Safe for concurrent use.
type Upstream struct {
	cfg UpstreamConfig

	mu sync.RWMutex
	// versions are the versions served: cfg.Versions, then the adapters
	// loaded (LoadAdapter).
	versions []VersionInfo
	// fallbacks maps a version whose adapter could not be loaded to the
	// version whose model answers for it (AddFallback).
	fallbacks map[string]string
}

// NewUpstream returns an upstream engine.
func NewUpstream(cfg UpstreamConfig) (*Upstream, error) {
	if cfg.BaseURL == "" || cfg.Model == "" {
		return nil, errors.New("gateway: upstream needs base_url and model")
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Minute
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 2
	}
	if cfg.MaxRetries < 0 {
		cfg.MaxRetries = 0
	}
	if cfg.Backoff == 0 {
		cfg.Backoff = 250 * time.Millisecond
	}
	if len(cfg.Versions) == 0 {
		cfg.Versions = []VersionInfo{{ID: "base"}}
	}
	if cfg.Tokenizer == "" {
		cfg.Tokenizer = "upstream:" + cfg.Model
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Transport: upstreamTransport()}
	}
	return &Upstream{cfg: cfg, versions: slices.Clone(cfg.Versions), fallbacks: map[string]string{}}, nil
}

// upstreamIdleConns is how many idle keep-alive connections the default
// client keeps to the upstream server. net/http's default of 2 per host
// makes every request beyond the second concurrent one dial a new
// connection and close it after: at 64 concurrent requests, dialing was
// a fifth of a gateway-only process's CPU (bench/hotpath profile).
const upstreamIdleConns = 1024

func upstreamTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = upstreamIdleConns
	tr.MaxIdleConnsPerHost = upstreamIdleConns
	return tr
}

// Name implements Engine.
func (u *Upstream) Name() string { return "upstream" }

// Versions implements Engine: the configured versions, the adapters
// loaded, and the versions served by a fallback.
func (u *Upstream) Versions(context.Context) ([]VersionInfo, error) {
	u.mu.RLock()
	defer u.mu.RUnlock()
	out := slices.Clone(u.versions)
	for id, by := range u.fallbacks {
		if served, ok := u.resolveLocked(id); ok {
			out = append(out, VersionInfo{ID: id, Parent: by, ServedBy: served})
		}
	}
	return out, nil
}

// modelFor returns the upstream model name that serves version and the
// version that answers (version itself, or its fallback).
func (u *Upstream) modelFor(version string) (model, served string, ok bool) {
	u.mu.RLock()
	served, ok = u.resolveLocked(version)
	u.mu.RUnlock()
	if !ok {
		return "", "", false
	}
	if m, ok := u.cfg.ModelNames[served]; ok {
		return m, served, true
	}
	if served == "base" {
		return u.cfg.Model, served, true
	}
	return served, served, true
}

type upMessage struct {
	Role       string       `json:"role"`
	Content    *string      `json:"content"`
	Name       string       `json:"name,omitempty"`
	ToolCalls  []upToolCall `json:"tool_calls,omitempty"`
	ToolCallID string       `json:"tool_call_id,omitempty"`
}

type upToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

func (u *Upstream) body(req *GenerateRequest, model string) ([]byte, error) {
	if b, ok := u.appendBody(make([]byte, 0, 512), req, model); ok {
		return b, nil
	}
	return u.mapBody(req, model)
}

// mapBody is body's general path: every field in a map, by json.Marshal.
func (u *Upstream) mapBody(req *GenerateRequest, model string) ([]byte, error) {
	b := map[string]any{"model": model, "n": req.N, "logprobs": true, "stream": req.Stream}
	msgs := make([]upMessage, len(req.Messages))
	for i, m := range req.Messages {
		content := m.Content
		um := upMessage{Role: m.Role, Content: &content, Name: m.Name, ToolCallID: m.ToolCallID}
		if m.Role == "assistant" && content == "" && len(m.ToolCalls) > 0 {
			um.Content = nil
		}
		for _, tc := range m.ToolCalls {
			var c upToolCall
			c.ID, c.Type, c.Function.Name, c.Function.Arguments = tc.ID, "function", tc.Name, tc.Arguments
			um.ToolCalls = append(um.ToolCalls, c)
		}
		msgs[i] = um
	}
	b["messages"] = msgs
	if len(req.Tools) > 0 {
		var tools []map[string]any
		for _, t := range req.Tools {
			fn := map[string]any{"name": t.Name}
			if t.Description != "" {
				fn["description"] = t.Description
			}
			if len(t.Parameters) > 0 {
				fn["parameters"] = t.Parameters
			}
			if t.Strict {
				fn["strict"] = true
			}
			tools = append(tools, map[string]any{"type": "function", "function": fn})
		}
		b["tools"] = tools
		if req.ToolChoice == "function" {
			b["tool_choice"] = map[string]any{"type": "function", "function": map[string]string{"name": req.ToolName}}
		} else {
			b["tool_choice"] = req.ToolChoice
		}
		b["parallel_tool_calls"] = req.ParallelToolCalls
	}
	switch req.ResponseFormat.Type {
	case "json_object":
		b["response_format"] = map[string]string{"type": "json_object"}
	case "json_schema":
		js := map[string]any{"name": req.ResponseFormat.Name, "strict": req.ResponseFormat.Strict}
		if len(req.ResponseFormat.Schema) > 0 {
			js["schema"] = req.ResponseFormat.Schema
		}
		b["response_format"] = map[string]any{"type": "json_schema", "json_schema": js}
	}
	if req.Temperature != nil {
		b["temperature"] = *req.Temperature
	}
	if req.TopP != nil {
		b["top_p"] = *req.TopP
	}
	if req.Seed != nil {
		b["seed"] = *req.Seed
	}
	if req.MaxTokens > 0 {
		b["max_tokens"] = req.MaxTokens
	}
	if len(req.Stop) > 0 {
		b["stop"] = req.Stop
	}
	if req.TopLogprobs > 0 {
		b["top_logprobs"] = req.TopLogprobs
	}
	if req.FrequencyPenalty != nil {
		b["frequency_penalty"] = *req.FrequencyPenalty
	}
	if req.PresencePenalty != nil {
		b["presence_penalty"] = *req.PresencePenalty
	}
	if len(req.LogitBias) > 0 {
		b["logit_bias"] = req.LogitBias
	}
	if req.User != "" {
		b["user"] = req.User
	}
	if req.Stream {
		b["stream_options"] = map[string]bool{"include_usage": true}
	}
	if u.cfg.RequestTokenIDs {
		b["return_token_ids"] = true
	}
	return json.Marshal(b)
}

// Generate implements Engine.
func (u *Upstream) Generate(ctx context.Context, req *GenerateRequest, emit func(Delta) error) (*Result, error) {
	model, served, ok := u.modelFor(req.Version)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownVersion, req.Version)
	}
	body, err := u.body(req, model)
	if err != nil {
		return nil, &EngineError{Status: http.StatusBadRequest, Message: "cannot encode the request", Err: err}
	}
	var last *EngineError
	for attempt := 0; attempt <= u.cfg.MaxRetries; attempt++ {
		if attempt > 0 {
			wait := u.cfg.Backoff << (attempt - 1)
			if wait > 8*time.Second {
				wait = 8 * time.Second
			}
			wait = wait/2 + time.Duration(rand.Int64N(int64(wait/2)+1))
			if last.RetryAfter > 0 && last.RetryAfter < time.Minute {
				wait = last.RetryAfter
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
		}
		res, started, err := u.attempt(ctx, req, body, emit)
		if err == nil {
			res.Version = served
			return res, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var ee *EngineError
		if !errors.As(err, &ee) || started || !retryable(ee.Status) {
			return nil, err
		}
		last = ee
	}
	return nil, last
}

func retryable(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusConflict || status == http.StatusTooManyRequests || status >= 500
}

func retryAfter(h http.Header) time.Duration {
	if ms, err := strconv.ParseFloat(h.Get("retry-after-ms"), 64); err == nil && ms >= 0 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	v := h.Get("Retry-After")
	if secs, err := strconv.ParseFloat(v, 64); err == nil && secs >= 0 {
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return time.Until(t)
	}
	return 0
}

// attempt makes one upstream call; started reports whether output was
// emitted (then it must not be retried).
func (u *Upstream) attempt(ctx context.Context, req *GenerateRequest, body []byte, emit func(Delta) error) (*Result, bool, error) {
	actx, cancel := context.WithTimeout(ctx, u.cfg.Timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(actx, http.MethodPost, u.cfg.BaseURL+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return nil, false, &EngineError{Status: http.StatusBadGateway, Message: "bad upstream URL", Err: err}
	}
	hr.Header.Set("Content-Type", "application/json")
	if req.Stream {
		hr.Header.Set("Accept", "text/event-stream")
	}
	if u.cfg.APIKey != "" {
		hr.Header.Set("Authorization", "Bearer "+u.cfg.APIKey)
	}
	start := time.Now()
	resp, err := u.cfg.Client.Do(hr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		status := http.StatusBadGateway
		if actx.Err() != nil {
			status = http.StatusGatewayTimeout
		}
		return nil, false, &EngineError{Status: status, Message: "upstream unreachable", Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		status := resp.StatusCode
		switch {
		case status == http.StatusTooManyRequests, status == http.StatusServiceUnavailable:
		case status >= 500:
			status = http.StatusBadGateway
		case status == http.StatusBadRequest || status == http.StatusUnprocessableEntity:
			status = http.StatusBadRequest
		default:
			status = http.StatusBadGateway
		}
		return nil, false, &EngineError{Status: status, Message: fmt.Sprintf("upstream answered %d: %s", resp.StatusCode, upstreamMessage(msg)),
			RetryAfter: retryAfter(resp.Header)}
	}
	if req.Stream {
		return u.readStream(resp.Body, req, emit, start)
	}
	var out upResponse
	buf := answerBuffers.Get().(*bytes.Buffer)
	defer putAnswerBuffer(buf)
	if n := resp.ContentLength; n > 0 && n <= 64<<20 {
		buf.Grow(int(n) + bytes.MinRead)
	}
	_, err = buf.ReadFrom(io.LimitReader(resp.Body, 64<<20))
	if err == nil {
		err = decodeUpstream(buf.Bytes(), &out)
	}
	if err != nil {
		return nil, false, &EngineError{Status: http.StatusBadGateway, Message: "upstream answered malformed JSON", Err: err}
	}
	res := &Result{Version: req.Version, Tokenizer: u.cfg.Tokenizer, PromptTokens: out.PromptTokenIDs, Fingerprint: out.SystemFingerprint}
	if out.Usage != nil {
		res.Usage = *out.Usage
	}
	for _, ch := range out.Choices {
		cr := ChoiceResult{Index: ch.Index, FinishReason: ch.FinishReason}
		if ch.Message.Content != nil {
			cr.Content = *ch.Message.Content
		}
		for _, tc := range ch.Message.ToolCalls {
			cr.ToolCalls = append(cr.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		cr.Tokens = upTokens(ch.Logprobs, ch.TokenIDs)
		res.Choices = append(res.Choices, cr)
	}
	if len(res.Choices) != req.N {
		return nil, false, &EngineError{Status: http.StatusBadGateway, Message: fmt.Sprintf("upstream answered %d choices, want %d", len(res.Choices), req.N)}
	}
	sortChoices(res.Choices)
	return res, false, nil
}

// answerBuffers hold upstream answers while they are decoded (the decoded
// answer shares no bytes with its buffer).
var answerBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func putAnswerBuffer(b *bytes.Buffer) {
	if b.Cap() <= 1<<20 {
		b.Reset()
		answerBuffers.Put(b)
	}
}

func upstreamMessage(b []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	return strings.TrimSpace(strings.ToValidUTF8(string(b), ""))
}

type upLogprobs struct {
	Content []upTokenLogprob `json:"content"`
}

type upTokenLogprob struct {
	Token       string         `json:"token"`
	Logprob     float32        `json:"logprob"`
	TopLogprobs []upTopLogprob `json:"top_logprobs"`
}

type upTopLogprob struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
}

// upResponse is an upstream answer or stream chunk; decodeUpResponse reads
// it without reflection.
type upResponse struct {
	SystemFingerprint string     `json:"system_fingerprint"`
	PromptTokenIDs    []int      `json:"prompt_token_ids"`
	Usage             *Usage     `json:"usage"`
	Choices           []upChoice `json:"choices"`
}

type upChoice struct {
	Index        int         `json:"index"`
	Message      upOutput    `json:"message"`
	Delta        upOutput    `json:"delta"`
	FinishReason string      `json:"finish_reason"`
	Logprobs     *upLogprobs `json:"logprobs"`
	TokenIDs     []int       `json:"token_ids"`
}

// upOutput is a choice's message, or a chunk's delta.
type upOutput struct {
	Content   *string      `json:"content"`
	ToolCalls []upToolCall `json:"tool_calls"`
}

// tokenIDOf reads vLLM's "token_id:123" token strings; -1 otherwise.
func tokenIDOf(s string) int {
	if v, ok := strings.CutPrefix(s, "token_id:"); ok {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return -1
}

func upTokens(lp *upLogprobs, ids []int) []Token {
	var out []Token
	if lp != nil {
		for i, c := range lp.Content {
			t := Token{ID: tokenIDOf(c.Token), Text: c.Token, Logprob: c.Logprob}
			if i < len(ids) {
				t.ID = ids[i]
			}
			for _, a := range c.TopLogprobs {
				t.Top = append(t.Top, TopToken{ID: tokenIDOf(a.Token), Text: a.Token, Logprob: a.Logprob})
			}
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		for _, id := range ids {
			out = append(out, Token{ID: id, Logprob: float32(0)})
		}
	}
	return out
}

func sortChoices(cs []ChoiceResult) {
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && cs[j].Index < cs[j-1].Index; j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
}

// readStream passes an upstream SSE stream through emit and assembles the
// Result.
func (u *Upstream) readStream(body io.Reader, req *GenerateRequest, emit func(Delta) error, start time.Time) (*Result, bool, error) {
	res := &Result{Version: req.Version, Tokenizer: u.cfg.Tokenizer}
	res.Choices = make([]ChoiceResult, req.N)
	for i := range res.Choices {
		res.Choices[i].Index = i
	}
	var content = make([]strings.Builder, req.N)
	started := false
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	done := false
	for sc.Scan() {
		line := sc.Bytes()
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimSpace(data)
		if string(data) == "[DONE]" {
			done = true
			break
		}
		var ch upResponse
		var errKey bool
		if r := jsondec.NewReader(data); !decodeUpResponse(r, &ch, &errKey) || !r.AtEnd() || errKey {
			// Anything but a plain chunk (an error chunk, a form the
			// hand-written decoder leaves to encoding/json).
			ch = upResponse{}
			if err := json.Unmarshal(data, &ch); err != nil {
				return nil, started, &EngineError{Status: http.StatusBadGateway, Message: "upstream sent a malformed chunk", Err: err}
			}
			var upErr struct {
				Error *struct {
					Message string `json:"message"`
				} `json:"error"`
			}
			if json.Unmarshal(data, &upErr) == nil && upErr.Error != nil {
				return nil, started, &EngineError{Status: http.StatusBadGateway, Message: "upstream stream error: " + upErr.Error.Message}
			}
		}
		if ch.SystemFingerprint != "" {
			res.Fingerprint = ch.SystemFingerprint
		}
		if len(ch.PromptTokenIDs) > 0 {
			res.PromptTokens = ch.PromptTokenIDs
		}
		if ch.Usage != nil {
			res.Usage = *ch.Usage
		}
		for _, c := range ch.Choices {
			if c.Index < 0 || c.Index >= req.N {
				return nil, started, &EngineError{Status: http.StatusBadGateway, Message: "upstream sent an unknown choice index"}
			}
			cr := &res.Choices[c.Index]
			if c.FinishReason != "" {
				cr.FinishReason = c.FinishReason
			}
			toks := upTokens(c.Logprobs, c.TokenIDs)
			if c.Delta.Content != nil && *c.Delta.Content != "" || len(toks) > 0 {
				text := ""
				if c.Delta.Content != nil {
					text = *c.Delta.Content
				}
				content[c.Index].WriteString(text)
				cr.Tokens = append(cr.Tokens, toks...)
				d := Delta{Choice: c.Index, Text: text}
				if len(toks) == 1 {
					d.Token = &toks[0]
				}
				if !started {
					res.TTFT = time.Since(start)
				}
				started = true
				if text != "" || d.Token != nil {
					if err := emit(d); err != nil {
						return nil, started, err
					}
				}
			}
			for _, tc := range c.Delta.ToolCalls {
				idx := 0
				if tc.Index != nil {
					idx = *tc.Index
				}
				for len(cr.ToolCalls) <= idx {
					cr.ToolCalls = append(cr.ToolCalls, ToolCall{})
				}
				call := &cr.ToolCalls[idx]
				if tc.ID != "" {
					call.ID = tc.ID
				}
				if tc.Function.Name != "" {
					call.Name = tc.Function.Name
				}
				call.Arguments += tc.Function.Arguments
				if !started {
					res.TTFT = time.Since(start)
				}
				started = true
				if err := emit(Delta{Choice: c.Index, ToolCall: &ToolCallDelta{Index: idx, ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}}); err != nil {
					return nil, started, err
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, started, &EngineError{Status: http.StatusBadGateway, Message: "upstream stream broke", Err: err}
	}
	if !done {
		return nil, started, &EngineError{Status: http.StatusBadGateway, Message: "upstream stream ended without [DONE]"}
	}
	for i := range res.Choices {
		res.Choices[i].Content = content[i].String()
		if res.Choices[i].FinishReason == "" {
			res.Choices[i].FinishReason = FinishStop
		}
	}
	if res.Usage.TotalTokens == 0 {
		res.Usage.PromptTokens = len(res.PromptTokens)
		for _, c := range res.Choices {
			res.Usage.CompletionTokens += len(c.Tokens)
		}
		res.Usage.TotalTokens = res.Usage.PromptTokens + res.Usage.CompletionTokens
	}
	return res, started, nil
}
