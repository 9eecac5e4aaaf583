package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// StubEngine is a scriptable engine that answers at once, for tests and
// benchmarks. Its tokenizer maps each Unicode code point to one token (id =
// code point), so token ids and texts are exact and checkable. By default it
// answers:
//   - after a tool message: "tool said: <its content>";
//   - with a tool call when tools are offered and tool_choice is "required",
//     a named function, or "auto" and the last user message contains the
//     word "tool" (arguments: a minimal value of the parameters schema);
//   - json_object: {"echo": <last user text>}; json_schema: a minimal value
//     of the schema;
//   - otherwise "echo: <last user text>" (choice i>0 appends " #i").
//
// Stop sequences and MaxTokens truncate the answer (finish "stop" and
// "length"). Logprobs are deterministic: token i has logprob -(i%7)/8 - 0.01
// and top alternatives are the next code points. Safe for concurrent use.
type StubEngine struct {
	// Reply, if set, replaces the default answer text for a choice.
	Reply func(req *GenerateRequest, choice int) string

	versions []VersionInfo
	calls    atomic.Int64

	mu    sync.Mutex
	fails []error // returned by the next calls, in order
}

// StubTokenizer is the stub's tokenizer version string.
const StubTokenizer = "stub-codepoint@1"

// NewStubEngine returns a stub serving the given versions ("base" if none).
func NewStubEngine(versions ...VersionInfo) *StubEngine {
	if len(versions) == 0 {
		versions = []VersionInfo{{ID: "base", Created: time.Unix(1767225600, 0).UTC()}}
	}
	return &StubEngine{versions: versions}
}

// FailNext makes the next k calls fail with err (for example an
// *EngineError with status 503 and a RetryAfter).
func (s *StubEngine) FailNext(k int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := 0; i < k; i++ {
		s.fails = append(s.fails, err)
	}
}

// Calls returns how many times Generate was called.
func (s *StubEngine) Calls() int64 { return s.calls.Load() }

// Name implements Engine.
func (s *StubEngine) Name() string { return "stub" }

// Versions implements Engine.
func (s *StubEngine) Versions(context.Context) ([]VersionInfo, error) { return s.versions, nil }

// StubPromptTokens renders messages with the stub's chat template and
// tokenizes them; it is what the stub records as prompt tokens.
func StubPromptTokens(msgs []Message) []int {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString("<|")
		b.WriteString(m.Role)
		b.WriteString("|>")
		b.WriteString(m.Content)
		for _, tc := range m.ToolCalls {
			b.WriteString("<|call|>")
			b.WriteString(tc.Name)
			b.WriteString(tc.Arguments)
		}
		b.WriteString("\n")
	}
	b.WriteString("<|assistant|>")
	return codepoints(b.String())
}

func codepoints(s string) []int {
	out := make([]int, 0, len(s))
	for _, r := range s {
		out = append(out, int(r))
	}
	return out
}

// StubLogprob is the stub's logprob of the i-th completion token.
func StubLogprob(i int) float32 { return -float32(i%7)/8 - 0.01 }

// Generate implements Engine.
func (s *StubEngine) Generate(ctx context.Context, req *GenerateRequest, emit func(Delta) error) (*Result, error) {
	s.calls.Add(1)
	s.mu.Lock()
	if len(s.fails) > 0 {
		err := s.fails[0]
		s.fails = s.fails[1:]
		s.mu.Unlock()
		return nil, err
	}
	s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	known := false
	for _, v := range s.versions {
		known = known || v.ID == req.Version
	}
	if !known {
		return nil, fmt.Errorf("%w: %q", ErrUnknownVersion, req.Version)
	}
	res := &Result{Version: req.Version, Tokenizer: StubTokenizer, PromptTokens: StubPromptTokens(req.Messages),
		Fingerprint: "fp_stub_" + req.Version}
	res.Usage.PromptTokens = len(res.PromptTokens)
	for c := 0; c < req.N; c++ {
		ch := ChoiceResult{Index: c, FinishReason: FinishStop}
		if call, ok := stubToolCall(req, c); ok {
			ch.ToolCalls = []ToolCall{call}
			ch.FinishReason = FinishToolCalls
			// The call's text counts as completion tokens.
			for i, id := range codepoints(call.Name + call.Arguments) {
				ch.Tokens = append(ch.Tokens, stubToken(i, id, req.TopLogprobs))
			}
			if req.Stream && emit != nil {
				if err := emit(Delta{Choice: c, ToolCall: &ToolCallDelta{Index: 0, ID: call.ID, Name: call.Name}}); err != nil {
					return nil, err
				}
				if err := emit(Delta{Choice: c, ToolCall: &ToolCallDelta{Index: 0, Arguments: call.Arguments}}); err != nil {
					return nil, err
				}
			}
		} else {
			text := s.replyText(req, c)
			if cut, ok := cutAtStop(text, req.Stop); ok {
				text = cut
			}
			runes := []rune(text)
			if req.MaxTokens > 0 && len(runes) > req.MaxTokens {
				runes = runes[:req.MaxTokens]
				ch.FinishReason = FinishLength
				text = string(runes)
			}
			ch.Content = text
			ch.Tokens = make([]Token, 0, len(runes))
			for i, r := range runes {
				tok := stubToken(i, int(r), req.TopLogprobs)
				ch.Tokens = append(ch.Tokens, tok)
				if req.Stream && emit != nil {
					if err := emit(Delta{Choice: c, Text: tok.Text, Token: &ch.Tokens[i]}); err != nil {
						return nil, err
					}
				}
			}
		}
		res.Usage.CompletionTokens += len(ch.Tokens)
		res.Choices = append(res.Choices, ch)
	}
	res.Usage.TotalTokens = res.Usage.PromptTokens + res.Usage.CompletionTokens
	return res, nil
}

// asciiText holds the text of every ASCII code point, so the stub does not
// allocate a string per token.
var asciiText = func() (t [128]string) {
	for i := range t {
		t[i] = string(rune(i))
	}
	return t
}()

func runeText(id int) string {
	if id >= 0 && id < len(asciiText) {
		return asciiText[id]
	}
	return string(rune(id))
}

func stubToken(i, id, top int) Token {
	t := Token{ID: id, Text: runeText(id), Logprob: StubLogprob(i)}
	if top > 0 {
		t.Top = make([]TopToken, top)
		for k := range t.Top {
			t.Top[k] = TopToken{ID: id + k, Text: runeText(id + k), Logprob: t.Logprob - float32(k)*0.5}
		}
	}
	return t
}

func cutAtStop(text string, stops []string) (string, bool) {
	best := -1
	for _, s := range stops {
		if i := strings.Index(text, s); i >= 0 && (best < 0 || i < best) {
			best = i
		}
	}
	if best < 0 {
		return text, false
	}
	return text[:best], true
}

func lastOf(msgs []Message, role string) (Message, bool) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == role {
			return msgs[i], true
		}
	}
	return Message{}, false
}

func (s *StubEngine) replyText(req *GenerateRequest, c int) string {
	if s.Reply != nil {
		return s.Reply(req, c)
	}
	user, _ := lastOf(req.Messages, "user")
	switch req.ResponseFormat.Type {
	case "json_object":
		b, _ := json.Marshal(map[string]string{"echo": user.Content})
		return string(b)
	case "json_schema":
		return string(minimalJSON(req.ResponseFormat.Schema, 0))
	}
	last := req.Messages[len(req.Messages)-1]
	if last.Role == "tool" {
		return "tool said: " + last.Content
	}
	text := "echo: " + user.Content
	if c > 0 {
		text += fmt.Sprintf(" #%d", c)
	}
	return text
}

func stubToolCall(req *GenerateRequest, c int) (ToolCall, bool) {
	if len(req.Tools) == 0 || req.ToolChoice == "none" {
		return ToolCall{}, false
	}
	last := req.Messages[len(req.Messages)-1]
	tool := req.Tools[0]
	switch req.ToolChoice {
	case "function":
		for _, t := range req.Tools {
			if t.Name == req.ToolName {
				tool = t
			}
		}
	case "required":
	default: // auto
		if last.Role != "user" || !strings.Contains(strings.ToLower(last.Content), "tool") {
			return ToolCall{}, false
		}
	}
	return ToolCall{ID: fmt.Sprintf("call_stub_%d_%d", len(req.Messages), c), Name: tool.Name,
		Arguments: string(minimalJSON(tool.Parameters, 0))}, true
}

// minimalJSON returns a small value that satisfies a (simple) JSON schema:
// objects with their required properties (all properties if none are
// listed), the first enum or const value, "x" for strings, 0 for numbers,
// false for booleans, [] for arrays.
func minimalJSON(schema json.RawMessage, depth int) json.RawMessage {
	var sc struct {
		Type       any                        `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
		Enum       []json.RawMessage          `json:"enum"`
		Const      json.RawMessage            `json:"const"`
		Items      json.RawMessage            `json:"items"`
		MinItems   int                        `json:"minItems"`
	}
	if len(schema) == 0 || json.Unmarshal(schema, &sc) != nil || depth > 8 {
		return json.RawMessage(`{}`)
	}
	if len(sc.Const) > 0 {
		return sc.Const
	}
	if len(sc.Enum) > 0 {
		return sc.Enum[0]
	}
	typ, _ := sc.Type.(string)
	if arr, ok := sc.Type.([]any); ok && len(arr) > 0 {
		typ, _ = arr[0].(string)
	}
	if typ == "" && sc.Properties != nil {
		typ = "object"
	}
	switch typ {
	case "string":
		return json.RawMessage(`"x"`)
	case "number", "integer":
		return json.RawMessage(`0`)
	case "boolean":
		return json.RawMessage(`false`)
	case "null":
		return json.RawMessage(`null`)
	case "array":
		if sc.MinItems <= 0 {
			return json.RawMessage(`[]`)
		}
		item := minimalJSON(sc.Items, depth+1)
		parts := make([]string, sc.MinItems)
		for i := range parts {
			parts[i] = string(item)
		}
		return json.RawMessage("[" + strings.Join(parts, ",") + "]")
	}
	names := sc.Required
	if len(names) == 0 {
		for k := range sc.Properties {
			names = append(names, k)
		}
		sort.Strings(names)
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(minimalJSON(sc.Properties[k], depth+1))
	}
	b.WriteByte('}')
	return json.RawMessage(b.String())
}
