package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Engine produces completions. It is declared here, by its consumer; the
// stub engine (NewStubEngine), the upstream engine (NewUpstream) and the
// embedded model's adapter implement it.
//
// Generate runs one request. When req.Stream is true the engine calls emit
// for every piece of output as it is produced (one sampled token at a time
// suits it well), in order, from the calling goroutine or one goroutine at a
// time; a non-nil error from emit (the client went away, the store failed)
// means stop: the engine returns promptly, with that error or ctx.Err().
// When req.Stream is false the engine may call emit or not. The returned
// Result is authoritative: it is what the gateway records and answers, so it
// must agree with what was emitted. Generate honours ctx cancellation.
//
// Errors: an *EngineError tells the gateway which status to give the client
// (429 and 503 with RetryAfter, 400 for a request the engine refuses);
// any other error is answered 502.
//
// Versions lists the model versions the engine can serve (a version is a
// set of weights or an adapter; GenerateRequest.Version selects one).
// Implementations must be safe for concurrent use.
type Engine interface {
	Generate(ctx context.Context, req *GenerateRequest, emit func(Delta) error) (*Result, error)
	Versions(ctx context.Context) ([]VersionInfo, error)
	// Name identifies the engine kind in the record ("stub", "upstream",
	// "embedded").
	Name() string
}

// VersionInfo describes one servable model version.
type VersionInfo struct {
	ID      string    // e.g. "base" or "v3"; served as "citizen@<ID>"
	Parent  string    // the version it was trained from; empty for a base
	Created time.Time // zero if unknown
	// ServedBy, when set, is the version whose weights answer for this
	// one: its own could not be loaded (results then report ServedBy).
	ServedBy string
}

// Message is a chat message handed to the engine. Content is the text (an
// array of text parts is joined).
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// ToolCall is a function call by the assistant.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is a function offered to the model.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      bool            `json:"strict,omitempty"`
}

// ResponseFormat constrains the output; the engine enforces it.
type ResponseFormat struct {
	Type   string          `json:"type"` // text, json_object, json_schema
	Name   string          `json:"name,omitempty"`
	Schema json.RawMessage `json:"schema,omitempty"`
	Strict bool            `json:"strict,omitempty"`
}

// GenerateRequest is a validated request in engine terms.
type GenerateRequest struct {
	// Version is the model version chosen by the router.
	Version  string
	Messages []Message
	Tools    []Tool
	// ToolChoice is "none", "auto", "required" or "function"; for
	// "function", ToolName names the function that must be called.
	ToolChoice        string
	ToolName          string
	ParallelToolCalls bool
	ResponseFormat    ResponseFormat
	Temperature       *float64
	TopP              *float64
	Seed              *int64
	// MaxTokens bounds the completion tokens per choice; 0 means the
	// engine's default.
	MaxTokens        int
	Stop             []string
	N                int // >= 1
	Logprobs         bool
	TopLogprobs      int // 0..20, only with Logprobs
	FrequencyPenalty *float64
	PresencePenalty  *float64
	LogitBias        map[string]int
	User             string
	Stream           bool
}

// Token is one sampled token with its logprob (the behaviour policy's) and,
// when asked, the top alternatives.
type Token struct {
	ID      int        // token id in the engine's tokenizer; -1 if unknown
	Text    string     // its text
	Logprob float32    // logprob of the sampled token
	Top     []TopToken // alternatives, most likely first
}

// TopToken is an alternative token.
type TopToken struct {
	ID      int
	Text    string
	Logprob float32
}

// Delta is a piece of streamed output for one choice.
type Delta struct {
	Choice int
	// Text is content appended to the choice's message.
	Text string
	// Token, if non-nil, is the sampled token that produced Text (with its
	// logprob); engines that sample token by token set it.
	Token *Token
	// ToolCall, if non-nil, is a fragment of a tool call: the first fragment
	// of call Index carries ID and Name, later ones only Arguments.
	ToolCall *ToolCallDelta
}

// ToolCallDelta is a fragment of a streamed tool call.
type ToolCallDelta struct {
	Index     int
	ID        string
	Name      string
	Arguments string
}

// Finish reasons.
const (
	FinishStop      = "stop"
	FinishLength    = "length"
	FinishToolCalls = "tool_calls"
	FinishFilter    = "content_filter"
)

// ChoiceResult is one finished choice.
type ChoiceResult struct {
	Index        int
	Content      string
	ToolCalls    []ToolCall
	FinishReason string
	// Tokens are the sampled completion tokens with logprobs, in order.
	// Engines that cannot report ids set ID -1.
	Tokens []Token
}

// Result is a finished generation: everything the gateway records.
type Result struct {
	// Version is the version that actually served the request.
	Version string
	// Tokenizer names the tokenizer and its version (e.g. "bpe-8k@1").
	Tokenizer string
	// Constraint names the grammar the tokens were sampled under
	// (json_object, json_schema, tool_call; "" for none): the logprobs
	// are then those of the constrained distribution.
	Constraint string
	// PromptTokens are the exact prompt token ids fed to the model
	// (template applied); nil when the engine cannot tell.
	PromptTokens []int
	Choices      []ChoiceResult
	Usage        Usage
	// Fingerprint is the system_fingerprint answered to clients.
	Fingerprint string
	// TTFT is the time to the first token as measured by the engine (zero
	// if unknown; the gateway then uses its own measure).
	TTFT time.Duration
}

// Usage counts tokens.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// EngineError is an engine failure with the status the client should get.
type EngineError struct {
	Status     int // HTTP status: 400, 429, 500, 502, 503, 504
	Message    string
	RetryAfter time.Duration // for 429 and 503; zero if unknown
	Err        error         // underlying cause, if any
}

func (e *EngineError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("gateway: engine: %d %s: %v", e.Status, e.Message, e.Err)
	}
	return fmt.Sprintf("gateway: engine: %d %s", e.Status, e.Message)
}

func (e *EngineError) Unwrap() error { return e.Err }

// ErrUnknownVersion is returned (wrapped) by an engine asked for a version
// it does not serve.
var ErrUnknownVersion = errors.New("gateway: unknown model version")
