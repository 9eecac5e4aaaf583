// Package embedded adapts the embedded chat model (citizen/model/chat) to
// the gateway's Engine interface: versions are the base weights plus the
// LoRA adapters registered on the engine, each served as
// "citizen@<version>"; every sampled token is reported with its id and
// the behaviour policy's logprob, so the gateway records exactly what the
// model did.
//
// Decisions, documented for clients:
//   - A request without temperature decodes greedily (DefaultTemperature
//     0): the embedded model is small, and greedy answers are what its
//     offline evaluation measures. Set temperature to sample.
//   - Tools: a checkpoint with a Hugging Face chat template sees the
//     offered tools (its template's own rendering, or the Hermes system
//     prompt) and calls them in the Hermes convention; the tiny model is
//     not shown tool schemas (it learned its tools in training).
//     tool_choice "none" hides the tools and never returns a call; a call
//     naming an undeclared function is returned as text, never as a call.
//   - Stop strings are matched on the decoded text; the answer is cut
//     before the stop string, and every sampled token is still recorded.
//   - response_format json_object / json_schema and tool_choice "required"
//     or a named function are enforced by grammar-constrained decoding
//     (constrain.go): the answer is always valid, and its logprobs are
//     those of the constrained distribution.
package embedded

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"citizen/gateway"
	"citizen/model"
	"citizen/model/chat"
	"citizen/model/tokenizer"

	"github.com/prometheus/client_golang/prometheus"
)

// BaseVersion is the version id of the base weights.
const BaseVersion = "base"

// Config tunes the adapter.
type Config struct {
	// DefaultTemperature applies when a request omits temperature (0 =
	// greedy).
	DefaultTemperature float64
	// DefaultMaxTokens applies when a request omits max tokens (default 256).
	DefaultMaxTokens int
}

// Engine is a gateway.Engine over a chat model. Safe for concurrent use.
type Engine struct {
	cm  *chat.Model
	cfg Config

	mu       sync.RWMutex
	versions map[string]gateway.VersionInfo
	// fallbacks maps a version that could not be loaded to the version
	// whose weights serve it (AddFallback).
	fallbacks map[string]string
	// Fallbacks counts requests served by a fallback, by the version asked
	// for and the one that served (read with FallbackCount).
	fallbackN map[[2]string]int64

	gram grammars // compiled constraints and the grammar vocabulary
}

// New returns an engine serving the base version of cm.
func New(cm *chat.Model, cfg Config) *Engine {
	if cfg.DefaultMaxTokens <= 0 {
		cfg.DefaultMaxTokens = 256
	}
	return &Engine{cm: cm, cfg: cfg, versions: map[string]gateway.VersionInfo{
		BaseVersion: {ID: BaseVersion, Created: time.Now().UTC()},
	}, fallbacks: map[string]string{}, fallbackN: map[[2]string]int64{}}
}

// Chat returns the underlying chat model.
func (e *Engine) Chat() *chat.Model { return e.cm }

// AddVersion registers a LoRA adapter as a servable version. Requests in
// flight keep the weights they started with.
func (e *Engine) AddVersion(id, parent string, a *model.Adapter) error {
	if id == "" || id == BaseVersion {
		return fmt.Errorf("embedded: invalid version id %q", id)
	}
	if err := e.cm.Engine.RegisterAdapter(id, a); err != nil {
		return err
	}
	e.mu.Lock()
	e.versions[id] = gateway.VersionInfo{ID: id, Parent: parent, Created: time.Now().UTC()}
	delete(e.fallbacks, id)
	e.mu.Unlock()
	return nil
}

// AddFallback serves version id, whose weights could not be loaded, with
// servedBy's weights (its parent, or the base): requests for id then run
// servedBy and report servedBy as the version that answered, so what is
// recorded is what ran. servedBy must be served (or itself a fallback).
// A later AddVersion of id replaces the fallback.
func (e *Engine) AddFallback(id, servedBy, reason string) error {
	if id == "" || id == BaseVersion || id == servedBy {
		return fmt.Errorf("embedded: invalid fallback %q -> %q", id, servedBy)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.resolveLocked(servedBy); !ok {
		return fmt.Errorf("embedded: fallback for %s: version %q is not served", id, servedBy)
	}
	if _, loaded := e.versions[id]; loaded {
		return nil // loaded after all
	}
	e.fallbacks[id] = servedBy
	return nil
}

// resolveLocked follows fallbacks from v to a loaded version.
func (e *Engine) resolveLocked(v string) (string, bool) {
	for range 64 {
		if _, ok := e.versions[v]; ok {
			return v, true
		}
		next, ok := e.fallbacks[v]
		if !ok {
			return "", false
		}
		v = next
	}
	return "", false
}

// FallbackCount returns how many requests for version asked were served by
// servedBy's weights in its place.
func (e *Engine) FallbackCount(asked, servedBy string) int64 {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.fallbackN[[2]string{asked, servedBy}]
}

// fallbackDesc describes the fallback counter Collect reports.
var fallbackDesc = prometheus.NewDesc("citizen_engine_fallback_requests_total",
	"Requests for a version whose weights could not be loaded, served by another version's weights.",
	[]string{"version", "served_by"}, nil)

// Describe implements prometheus.Collector.
func (e *Engine) Describe(ch chan<- *prometheus.Desc) { ch <- fallbackDesc }

// Collect implements prometheus.Collector: the fallback counts.
func (e *Engine) Collect(ch chan<- prometheus.Metric) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	for k, n := range e.fallbackN {
		ch <- prometheus.MustNewConstMetric(fallbackDesc, prometheus.CounterValue, float64(n), k[0], k[1])
	}
}

// RemoveVersion stops serving a version (in-flight requests finish).
func (e *Engine) RemoveVersion(id string) {
	if id == BaseVersion {
		return
	}
	e.mu.Lock()
	delete(e.versions, id)
	e.mu.Unlock()
	e.cm.Engine.RemoveAdapter(id)
}

// Name implements gateway.Engine.
func (e *Engine) Name() string { return "embedded" }

// Versions implements gateway.Engine, base first then by creation.
func (e *Engine) Versions(context.Context) ([]gateway.VersionInfo, error) {
	e.mu.RLock()
	out := make([]gateway.VersionInfo, 0, len(e.versions)+len(e.fallbacks))
	for _, v := range e.versions {
		out = append(out, v)
	}
	for id := range e.fallbacks {
		if by, ok := e.resolveLocked(id); ok {
			out = append(out, gateway.VersionInfo{ID: id, Parent: e.fallbacks[id], ServedBy: by})
		}
	}
	e.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if (out[i].ID == BaseVersion) != (out[j].ID == BaseVersion) {
			return out[i].ID == BaseVersion
		}
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.Before(out[j].Created)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// serving returns the loaded version that answers requests for v (v
// itself, or its fallback), counting fallback use.
func (e *Engine) serving(v string) (string, bool) {
	e.mu.RLock()
	got, ok := e.resolveLocked(v)
	e.mu.RUnlock()
	if ok && got != v { // only a fallback takes the write lock
		e.mu.Lock()
		e.fallbackN[[2]string{v, got}]++
		e.mu.Unlock()
	}
	return got, ok
}

// Generate implements gateway.Engine.
func (e *Engine) Generate(ctx context.Context, req *gateway.GenerateRequest, emit func(gateway.Delta) error) (*gateway.Result, error) {
	version := req.Version
	if version == "" {
		version = BaseVersion
	}
	version, ok := e.serving(version)
	if !ok {
		return nil, &gateway.EngineError{Status: 404, Message: fmt.Sprintf("model version %q is not loaded", req.Version)}
	}
	adapter := ""
	if version != BaseVersion {
		adapter = version
	}
	msgs := make([]tokenizer.Message, len(req.Messages))
	for i, m := range req.Messages {
		tm := tokenizer.Message{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, Name: m.Name}
		for _, tc := range m.ToolCalls {
			tm.ToolCalls = append(tm.ToolCalls, tokenizer.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
		}
		msgs[i] = tm
	}
	temp := e.cfg.DefaultTemperature
	if req.Temperature != nil {
		temp = *req.Temperature
	}
	var topP float32
	if req.TopP != nil {
		topP = float32(*req.TopP)
	}
	maxTok := req.MaxTokens
	if maxTok <= 0 {
		maxTok = e.cfg.DefaultMaxTokens
	}
	var seed uint64
	if req.Seed != nil {
		seed = uint64(*req.Seed)
	} else {
		seed = uint64(time.Now().UnixNano())
	}
	n := max(req.N, 1)
	cons, err := e.constraintFor(req)
	if err != nil {
		return nil, err
	}
	res := &gateway.Result{Version: version, Tokenizer: e.cm.Tok.Name(),
		Fingerprint: "fp_" + version, Choices: make([]gateway.ChoiceResult, n)}
	if cons != nil {
		res.Constraint = cons.name
	}
	var emitMu sync.Mutex
	safeEmit := func(d gateway.Delta) error {
		if emit == nil || !req.Stream {
			return nil
		}
		emitMu.Lock()
		defer emitMu.Unlock()
		return emit(d)
	}
	start := time.Now()
	var ttftOnce sync.Once
	errs := make([]error, n)
	var wg sync.WaitGroup
	for c := 0; c < n; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			ch, prompt, err := e.one(ctx, msgs, req, cons, adapter, float32(temp), topP, maxTok, seed+uint64(c), c, safeEmit, func() {
				ttftOnce.Do(func() { res.TTFT = time.Since(start) })
			})
			errs[c] = err
			if err == nil {
				res.Choices[c] = ch
				if c == 0 {
					res.PromptTokens = prompt
				}
			}
		}(c)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		if errors.Is(err, chat.ErrPromptTooLong) {
			return nil, &gateway.EngineError{Status: 400, Message: err.Error(), Err: err}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	res.Usage.PromptTokens = len(res.PromptTokens)
	for _, ch := range res.Choices {
		res.Usage.CompletionTokens += len(ch.Tokens)
	}
	res.Usage.TotalTokens = res.Usage.PromptTokens + res.Usage.CompletionTokens
	return res, nil
}

// one runs one choice.
func (e *Engine) one(ctx context.Context, msgs []tokenizer.Message, req *gateway.GenerateRequest, cons *constraint, adapter string,
	temp, topP float32, maxTok int, seed uint64, choice int, emit func(gateway.Delta) error, first func()) (gateway.ChoiceResult, []int, error) {
	tok := e.cm.Tok
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		pending []byte          // bytes not yet emitted (an incomplete UTF-8 rune)
		text    strings.Builder // content emitted so far
		inCall  bool
		stopped bool
		stopAt  = -1
		emitErr error
		toks    []gateway.Token
		errStop = errors.New("stop sequence")
	)
	var mask func([]int, []float32)
	callID := tok.ToolCallID()
	if req.ToolChoice == "none" && callID >= 0 {
		mask = func(_ []int, logits []float32) { logits[callID] = float32(math.Inf(-1)) }
	}
	if cons != nil {
		var err error
		if mask, err = e.mask(cons, maxTok, mask); err != nil {
			return gateway.ChoiceResult{}, nil, err
		}
	}
	// Stop strings do not apply under a grammar: they could cut the value.
	stops := req.Stop
	if cons != nil {
		stops = nil
	}
	// Hermes tool calls are text: hold back what may open one.
	textCalls := callID < 0 && len(req.Tools) > 0 && req.ToolChoice != "none"
	const callOpen = "<tool_call>"
	onToken := func(t model.Token) {
		first()
		gt := gateway.Token{ID: t.ID, Text: string(tok.TokenBytes(t.ID)), Logprob: t.Logprob}
		for _, alt := range t.TopLogprobs {
			gt.Top = append(gt.Top, gateway.TopToken{ID: alt.ID, Text: string(tok.TokenBytes(alt.ID)), Logprob: alt.Logprob})
		}
		toks = append(toks, gt)
		if stopped || emitErr != nil {
			return
		}
		d := gateway.Delta{Choice: choice, Token: &toks[len(toks)-1]}
		switch {
		case callID >= 0 && t.ID == callID:
			inCall = true
		case tok.IsSpecial(t.ID) || inCall:
		default:
			pending = append(pending, tok.TokenBytes(t.ID)...)
			n := validPrefix(pending)
			if textCalls {
				if i := strings.Index(string(pending[:n]), callOpen); i >= 0 {
					n, inCall = i, true
				} else {
					n -= partialSuffix(pending[:n], callOpen)
				}
			}
			chunk := string(pending[:n])
			pending = pending[n:]
			before := text.Len()
			text.WriteString(chunk)
			if i := firstStop(text.String(), stops); i >= 0 {
				stopped, stopAt = true, i
				if i > before {
					d.Text = text.String()[before:i]
				}
				cancel(errStop)
			} else {
				d.Text = chunk
			}
		}
		if err := emit(d); err != nil {
			emitErr = err
			cancel(err)
		}
	}
	var tools []json.RawMessage
	if req.ToolChoice != "none" {
		for _, t := range req.Tools {
			b, _ := json.Marshal(map[string]any{"type": "function", "function": t})
			tools = append(tools, b)
		}
	}
	c, err := e.cm.Complete(ctx, chat.Request{Messages: msgs, Tools: tools, MaxTokens: maxTok, Temperature: temp, TopP: topP,
		Seed: seed, TopLogprobs: req.TopLogprobs, Adapter: adapter, LogitMask: mask, OnToken: onToken})
	if emitErr != nil {
		return gateway.ChoiceResult{}, nil, emitErr
	}
	ch := gateway.ChoiceResult{Index: choice, Tokens: toks}
	var prompt []int
	switch {
	case stopped:
		// Cancelled by our stop sequence: the answer is the text before it.
		ch.Content, ch.FinishReason = text.String()[:stopAt], gateway.FinishStop
		prompt, _, _ = tok.RenderChat(msgs, true)
	case err != nil:
		return gateway.ChoiceResult{}, nil, err
	default:
		prompt = c.PromptIDs
		ch.Content = c.Message.Content
		for i, tc := range c.Message.ToolCalls {
			ch.ToolCalls = append(ch.ToolCalls, gateway.ToolCall{ID: fmt.Sprintf("call_%s_%d", shortID(seed), i), Name: tc.Name, Arguments: tc.Arguments})
		}
		var undeclared []string
		ch.ToolCalls, undeclared = declared(req, ch.ToolCalls)
		for _, u := range undeclared {
			ch.Content += u
		}
		switch {
		case len(ch.ToolCalls) > 0:
			ch.FinishReason = gateway.FinishToolCalls
		case c.FinishReason == model.FinishLength:
			ch.FinishReason = gateway.FinishLength
		default:
			ch.FinishReason = gateway.FinishStop
		}
		// The parsed content is authoritative; stream what was not yet
		// streamed (an incomplete rune, or a malformed call kept as text).
		if rest, ok := strings.CutPrefix(ch.Content, text.String()); ok && rest != "" {
			if err := emit(gateway.Delta{Choice: choice, Text: rest}); err != nil {
				return gateway.ChoiceResult{}, nil, err
			}
		}
		for i, tc := range ch.ToolCalls {
			if err := emit(gateway.Delta{Choice: choice, ToolCall: &gateway.ToolCallDelta{Index: i, ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments}}); err != nil {
				return gateway.ChoiceResult{}, nil, err
			}
		}
	}
	return ch, prompt, nil
}

// validPrefix returns the length of the longest prefix of b that does not
// end inside a UTF-8 rune (invalid bytes are passed through).
func validPrefix(b []byte) int {
	for back := 0; back < utf8.UTFMax && back < len(b); back++ {
		i := len(b) - 1 - back
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			return len(b)
		}
	}
	return len(b)
}

// partialSuffix returns the length of the longest suffix of b that is a
// proper prefix of open (text that may still become it).
func partialSuffix(b []byte, open string) int {
	for n := min(len(open)-1, len(b)); n > 0; n-- {
		if string(b[len(b)-n:]) == open[:n] {
			return n
		}
	}
	return 0
}

func firstStop(s string, stops []string) int {
	best := -1
	for _, st := range stops {
		if st == "" {
			continue
		}
		if i := strings.Index(s, st); i >= 0 && (best < 0 || i < best) {
			best = i
		}
	}
	return best
}

func shortID(seed uint64) string { return fmt.Sprintf("%012x", seed&0xffffffffffff) }
