package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"citizen/events"

	"github.com/labstack/echo/v4"
)

// Completion ids are "chatcmpl-<interaction id>", the interaction id being
// the UUIDv7 of the interaction (its stream is interaction-<id>).
const completionPrefix = "chatcmpl-"

// CompletionID returns the completion id of an interaction.
func CompletionID(interactionID string) string { return completionPrefix + interactionID }

// InteractionID returns the interaction id of a completion id, of a
// response id ("resp_<interaction id>", see responses.go) or of an
// interaction id (unchanged); ok is false if it is none of them.
func InteractionID(id string) (string, bool) {
	id = strings.TrimPrefix(strings.TrimPrefix(id, completionPrefix), responsePrefix)
	if len(id) != 36 || !validUUID(id) {
		return "", false
	}
	return id, true
}

func validUUID(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}

// Response shapes (OpenAI Chat Completions).
type completionOut struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	Created           int64             `json:"created"`
	Model             string            `json:"model"`
	Choices           []choiceOut       `json:"choices"`
	Usage             *Usage            `json:"usage,omitempty"`
	SystemFingerprint string            `json:"system_fingerprint,omitempty"`
	ServiceTier       string            `json:"service_tier,omitempty"`
	Metadata          map[string]string `json:"metadata,omitempty"`
}

type choiceOut struct {
	Index        int          `json:"index"`
	Message      messageOut   `json:"message"`
	Logprobs     *logprobsOut `json:"logprobs"`
	FinishReason string       `json:"finish_reason"`
}

type messageOut struct {
	Role        string        `json:"role"`
	Content     *string       `json:"content"`
	Refusal     *string       `json:"refusal"`
	ToolCalls   []toolCallOut `json:"tool_calls,omitempty"`
	Annotations []struct{}    `json:"annotations"`
}

type toolCallOut struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function fnOut  `json:"function"`
}

type fnOut struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type logprobsOut struct {
	Content []tokenOut `json:"content"`
	Refusal []tokenOut `json:"refusal"`
}

type tokenOut struct {
	Token       string   `json:"token"`
	Logprob     float32  `json:"logprob"`
	Bytes       []int    `json:"bytes"`
	TopLogprobs []topOut `json:"top_logprobs"`
}

type topOut struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

type chunkOut struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Created           int64           `json:"created"`
	Model             string          `json:"model"`
	SystemFingerprint string          `json:"system_fingerprint,omitempty"`
	Choices           []chunkChoice   `json:"choices"`
	Usage             json.RawMessage `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int          `json:"index"`
	Delta        deltaOut     `json:"delta"`
	Logprobs     *logprobsOut `json:"logprobs"`
	FinishReason *string      `json:"finish_reason"`
}

type deltaOut struct {
	Role      string        `json:"role,omitempty"`
	Content   *string       `json:"content,omitempty"`
	ToolCalls []toolCallOut `json:"tool_calls,omitempty"`
}

func tokenBytes(s string) []int {
	b := make([]int, len(s))
	for i := 0; i < len(s); i++ {
		b[i] = int(s[i])
	}
	return b
}

func tokenJSON(t Token) tokenOut {
	o := tokenOut{Token: t.Text, Logprob: t.Logprob, Bytes: tokenBytes(t.Text), TopLogprobs: []topOut{}}
	for _, a := range t.Top {
		o.TopLogprobs = append(o.TopLogprobs, topOut{Token: a.Text, Logprob: a.Logprob, Bytes: tokenBytes(a.Text)})
	}
	return o
}

func publicModel(version string) string { return ModelName + "@" + version }

// request is the state of one chat completion.
type request struct {
	s       *Server
	c       echo.Context
	key     Key
	dec     *Decoded
	iid     string
	version string
	start   time.Time
	created int64
	ttft    time.Duration
	// lessons are the lessons placed in the engine's context and
	// clientMessages the messages the client sent (placeLessons).
	lessons        []events.AppliedLesson
	clientMessages []Message
}

func (s *Server) chat(c echo.Context) error {
	start := time.Now()
	buf := s.bufs.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= 1<<20 {
			s.bufs.Put(buf)
		}
	}()
	if e := s.readBody(c, buf); e != nil {
		return s.fail(c, e)
	}
	dec, e := DecodeRequest(buf.Bytes())
	if e != nil {
		return s.fail(c, e)
	}
	key := keyOf(c)
	if dec.Gen.User == "" {
		dec.Gen.User = key.User
	}
	iid := events.NewID().String()
	version, err := s.router.Route(dec.Model, stickyKey(dec.Metadata["conversation_id"], dec.Gen.User), DeclaredType(dec.Metadata), s.versionKnown(c.Request().Context()))
	if err != nil {
		return s.fail(c, errModelNotFound(dec.Model))
	}
	dec.Gen.Version = version
	if s.deps.Admit != nil {
		if err := s.deps.Admit(); err != nil {
			return s.fail(c, errOverloaded(err.Error()))
		}
	}
	rpm, tpm := s.limitsOf(key)
	if ok, wait, what := s.limiter.admit(key.ID, rpm, tpm); !ok {
		return s.fail(c, errRateLimited("Rate limit reached for "+what+" per minute on this API key. Please try again later.", wait))
	}
	r := &request{s: s, c: c, key: key, dec: dec, iid: iid, version: version, start: start, created: start.Unix()}
	c.Response().Header().Set("X-Citizen-Model-Version", version)
	ctx, cancel := context.WithTimeout(c.Request().Context(), s.cfg.RequestTimeout)
	defer cancel()
	r.placeLessons(ctx)
	if dec.Gen.Stream {
		return r.stream(ctx)
	}
	res, err := s.engine.Generate(ctx, &dec.Gen, nil)
	if err != nil {
		return r.engineFailed(err)
	}
	if r.check(res) == nil {
		res = r.reviseWithLessons(ctx, res)
	}
	r.ttft = res.TTFT
	if r.ttft == 0 {
		r.ttft = time.Since(start)
	}
	if apiErr := r.check(res); apiErr != nil {
		r.done(apiErr.Status, Usage{})
		return s.fail(c, apiErr)
	}
	if err := r.record(ctx, res); err != nil {
		apiErr := errNotRecorded("The interaction could not be recorded; no answer is given. Please retry.")
		r.done(apiErr.Status, Usage{})
		return s.fail(c, apiErr)
	}
	ob := s.outs.Get().(*[]byte)
	out := appendCompletion((*ob)[:0], CompletionID(r.iid), r.created, publicModel(res.Version), res.Fingerprint,
		res.Choices, res.Usage, dec.Gen.Logprobs)
	out = append(out, '\n')
	w := c.Response()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
	if cap(out) <= 1<<20 {
		*ob = out[:0]
		s.outs.Put(ob)
	}
	r.done(http.StatusOK, res.Usage)
	return nil
}

func (s *Server) versionKnown(ctx context.Context) func(string) bool {
	return func(v string) bool {
		vs, err := s.engine.Versions(ctx)
		if err != nil {
			return false
		}
		for _, x := range vs {
			if x.ID == v {
				return true
			}
		}
		return false
	}
}

func (s *Server) limitsOf(k Key) (rpm, tpm int) {
	rpm, tpm = s.cfg.Limits.RequestsPerMinute, s.cfg.Limits.TokensPerMinute
	if k.RequestsPerMinute > 0 {
		rpm = k.RequestsPerMinute
	}
	if k.TokensPerMinute > 0 {
		tpm = k.TokensPerMinute
	}
	return rpm, tpm
}

// check guards against an engine that breaks its contract.
func (r *request) check(res *Result) *APIError {
	if res == nil || len(res.Choices) != r.dec.Gen.N {
		r.s.log.Error("engine returned a malformed result", "interaction", r.iid)
		return &APIError{Status: http.StatusBadGateway, Type: "api_error", Message: "The model engine returned a malformed result."}
	}
	if res.Version == "" {
		res.Version = r.version
	}
	for i := range res.Choices {
		ch := &res.Choices[i]
		ch.Index = i
		if !utf8.ValidString(ch.Content) {
			ch.Content = strings.ToValidUTF8(ch.Content, "\uFFFD")
		}
		if ch.FinishReason == "" {
			ch.FinishReason = FinishStop
		}
	}
	return nil
}

func (r *request) engineFailed(err error) error {
	if r.c.Request().Context().Err() != nil {
		// The client went away; nothing to answer.
		r.done(499, Usage{})
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) {
		e := &APIError{Status: http.StatusGatewayTimeout, Type: "api_error", Message: "The model engine timed out."}
		r.done(e.Status, Usage{})
		return r.s.fail(r.c, e)
	}
	e := engineAPIError(err)
	if errors.Is(err, ErrUnknownVersion) {
		e = errModelNotFound(r.dec.Model)
	}
	if r.dec.Model == ModelName && e.Code == "model_not_found" {
		// The client named the served model; the version it routes to is
		// missing here: a server fault, not the client's.
		e = &APIError{Status: http.StatusServiceUnavailable, Type: "api_error", Code: "model_unavailable", RetryAfter: 5 * time.Second,
			Message: fmt.Sprintf("The model %s (version %s) is not available right now. Please retry.", ModelName, r.dec.Gen.Version)}
	}
	r.s.log.Warn("engine failed", "interaction", r.iid, "status", e.Status, "err", err)
	r.done(e.Status, Usage{})
	return r.s.fail(r.c, e)
}

func (r *request) done(status int, u Usage) {
	r.s.metrics.observeGeneration(r.dec.Model, r.version, status, time.Since(r.start), r.ttft, r.dec.Gen.Stream, u)
	if status == http.StatusOK {
		_, tpm := r.s.limitsOf(r.key)
		r.s.limiter.charge(r.key.ID, tpm, u.TotalTokens)
	}
}

func choiceJSON(ch ChoiceResult, logprobs bool) choiceOut {
	co := choiceOut{Index: ch.Index, FinishReason: ch.FinishReason, Message: messageOut{Role: "assistant", Annotations: []struct{}{}}}
	if len(ch.ToolCalls) == 0 || ch.Content != "" {
		content := ch.Content
		co.Message.Content = &content
	}
	for _, tc := range ch.ToolCalls {
		co.Message.ToolCalls = append(co.Message.ToolCalls, toolCallOut{ID: tc.ID, Type: "function", Function: fnOut{Name: tc.Name, Arguments: tc.Arguments}})
	}
	if logprobs {
		lp := &logprobsOut{Content: []tokenOut{}}
		if len(ch.ToolCalls) == 0 {
			for _, t := range ch.Tokens {
				lp.Content = append(lp.Content, tokenJSON(t))
			}
		}
		co.Logprobs = lp
	}
	return co
}

// stream answers with server-sent events. The HTTP status is sent with the
// first output, so an engine that fails before producing anything still
// gets a proper error status. The interaction is recorded after the engine
// finishes and before the chunks carrying finish_reason, the usage and
// [DONE]; if recording fails the client gets an error event and no [DONE].
func (r *request) stream(ctx context.Context) error {
	w := r.c.Response()
	started := false
	roleSent := make([]bool, r.dec.Gen.N)
	var buf []byte
	head := chunkHead{id: CompletionID(r.iid), created: r.created, model: publicModel(r.version), usageNull: r.dec.IncludeUsage}
	write := func(b []byte) error {
		if _, err := w.Write(b); err != nil {
			return err
		}
		w.Flush()
		return nil
	}
	begin := func() {
		if started {
			return
		}
		started = true
		r.ttft = time.Since(r.start)
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("Connection", "keep-alive")
		w.WriteHeader(http.StatusOK)
	}
	empty := ""
	roleChunk := func(i int) error {
		if roleSent[i] {
			return nil
		}
		roleSent[i] = true
		buf = head.appendDeltaChunk(buf[:0], i, true, &empty, nil, nil, "")
		return write(buf)
	}
	emit := func(d Delta) error {
		if d.Choice < 0 || d.Choice >= len(roleSent) {
			return errors.New("gateway: engine emitted a delta for an unknown choice")
		}
		begin()
		if err := roleChunk(d.Choice); err != nil {
			return err
		}
		if d.ToolCall != nil {
			buf = head.appendDeltaChunk(buf[:0], d.Choice, false, nil, d.ToolCall, nil, "")
		} else {
			var tok *Token
			if r.dec.Gen.Logprobs {
				tok = d.Token
			}
			buf = head.appendDeltaChunk(buf[:0], d.Choice, false, &d.Text, nil, tok, "")
		}
		return write(buf)
	}
	res, err := r.s.engine.Generate(ctx, &r.dec.Gen, emit)
	if err != nil {
		if !started {
			return r.engineFailed(err)
		}
		r.s.log.Warn("engine failed mid-stream", "interaction", r.iid, "err", err)
		r.done(http.StatusBadGateway, Usage{})
		if r.c.Request().Context().Err() == nil {
			r.streamError(engineAPIError(err))
		}
		return nil
	}
	if apiErr := r.check(res); apiErr != nil {
		r.done(apiErr.Status, Usage{})
		if !started {
			return r.s.fail(r.c, apiErr)
		}
		r.streamError(apiErr)
		return nil
	}
	if res.TTFT > 0 {
		r.ttft = res.TTFT
	} else if !started {
		r.ttft = time.Since(r.start)
	}
	if err := r.record(ctx, res); err != nil {
		apiErr := errNotRecorded("The interaction could not be recorded; the answer is withdrawn. Please retry.")
		r.done(apiErr.Status, Usage{})
		if !started {
			return r.s.fail(r.c, apiErr)
		}
		r.streamError(apiErr)
		return nil
	}
	begin()
	head.model = publicModel(res.Version)
	head.fingerprint = res.Fingerprint
	for i, chr := range res.Choices {
		if err := roleChunk(i); err != nil {
			return nil
		}
		buf = head.appendDeltaChunk(buf[:0], i, false, nil, nil, nil, chr.FinishReason)
		if err := write(buf); err != nil {
			return nil
		}
	}
	if r.dec.IncludeUsage {
		if err := write(head.appendUsageChunk(buf[:0], res.Usage)); err != nil {
			return nil
		}
	}
	_ = write([]byte("data: [DONE]\n\n"))
	r.done(http.StatusOK, res.Usage)
	return nil
}

// streamError sends an error event (OpenAI's shape; the SDKs raise it) and
// ends the stream without [DONE].
func (r *request) streamError(e *APIError) {
	r.s.metrics.observeError(r.c.Path(), e.Status, e.Type)
	b, _ := json.Marshal(e.body())
	w := r.c.Response()
	if _, err := w.Write(append(append([]byte("data: "), b...), '\n', '\n')); err == nil {
		w.Flush()
	}
}
