package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"citizen/internal/jsondec"
)

// ChatRequest is the decoded body of POST /v1/chat/completions, before
// validation. Union-typed fields stay raw and are checked by Validate.
type ChatRequest struct {
	Model               string            `json:"model"`
	Messages            []chatMessageIn   `json:"messages"`
	Tools               []toolIn          `json:"tools,omitempty"`
	ToolChoice          json.RawMessage   `json:"tool_choice,omitempty"`
	ParallelToolCalls   *bool             `json:"parallel_tool_calls,omitempty"`
	ResponseFormat      *responseFormatIn `json:"response_format,omitempty"`
	Temperature         *float64          `json:"temperature,omitempty"`
	TopP                *float64          `json:"top_p,omitempty"`
	Seed                *int64            `json:"seed,omitempty"`
	MaxCompletionTokens *int              `json:"max_completion_tokens,omitempty"`
	MaxTokens           *int              `json:"max_tokens,omitempty"`
	Stop                json.RawMessage   `json:"stop,omitempty"`
	N                   *int              `json:"n,omitempty"`
	Logprobs            *bool             `json:"logprobs,omitempty"`
	TopLogprobs         *int              `json:"top_logprobs,omitempty"`
	User                *string           `json:"user,omitempty"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	Store               *bool             `json:"store,omitempty"`
	Stream              *bool             `json:"stream,omitempty"`
	StreamOptions       *streamOptionsIn  `json:"stream_options,omitempty"`
	FrequencyPenalty    *float64          `json:"frequency_penalty,omitempty"`
	PresencePenalty     *float64          `json:"presence_penalty,omitempty"`
	LogitBias           map[string]int    `json:"logit_bias,omitempty"`
	// Accepted for compatibility and recorded; the engine may ignore them.
	ServiceTier     *string `json:"service_tier,omitempty"`
	ReasoningEffort *string `json:"reasoning_effort,omitempty"`
	PromptCacheKey  *string `json:"prompt_cache_key,omitempty"`
	SafetyID        *string `json:"safety_identifier,omitempty"`
	Verbosity       *string `json:"verbosity,omitempty"`
}

type chatMessageIn struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       *string         `json:"name,omitempty"`
	ToolCalls  []toolCallIn    `json:"tool_calls,omitempty"`
	ToolCallID *string         `json:"tool_call_id,omitempty"`
	Refusal    *string         `json:"refusal,omitempty"`
	// Fields of a response message that clients echo back when they append
	// the assistant's message to the conversation; accepted and ignored.
	Annotations  json.RawMessage `json:"annotations,omitempty"`
	Audio        json.RawMessage `json:"audio,omitempty"`
	FunctionCall json.RawMessage `json:"function_call,omitempty"`
}

type contentPartIn struct {
	Type    string  `json:"type"`
	Text    *string `json:"text,omitempty"`
	Refusal *string `json:"refusal,omitempty"`
}

type toolCallIn struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type toolIn struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
		Strict      *bool           `json:"strict,omitempty"`
	} `json:"function"`
}

type responseFormatIn struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Schema      json.RawMessage `json:"schema,omitempty"`
		Strict      *bool           `json:"strict,omitempty"`
	} `json:"json_schema,omitempty"`
}

type streamOptionsIn struct {
	IncludeUsage       *bool `json:"include_usage,omitempty"`
	IncludeObfuscation *bool `json:"include_obfuscation,omitempty"`
}

// Request limits (OpenAI's where it states them).
const (
	maxMessages      = 4096
	maxN             = 16
	maxTopLogprobs   = 20
	maxStop          = 4
	maxMetadataPairs = 16
	maxMetadataKey   = 64
	maxMetadataValue = 512
	maxTools         = 128
	maxUserLen       = 256
	maxToolNameLen   = 64
	maxModelNameLen  = 256
	maxCompletionCap = 1 << 20
)

// Decoded is a validated chat request.
type Decoded struct {
	Model        string
	Gen          GenerateRequest
	Metadata     map[string]string
	IncludeUsage bool
	Store        bool
	// Params is the request without messages and tools, as recorded.
	Params json.RawMessage
}

// DecodeRequest parses and validates a chat completion body strictly:
// valid UTF-8 JSON, one object, no unknown fields, correct types, and the
// constraints of the OpenAI API. A refusal is an *APIError with status 400.
func DecodeRequest(body []byte) (*Decoded, *APIError) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, badRequest("", "We could not parse the JSON body of your request: the body is empty.")
	}
	if !utf8.Valid(body) {
		return nil, badRequest("", "We could not parse the JSON body of your request: it is not valid UTF-8.")
	}
	var r ChatRequest
	if rd := jsondec.NewReader(body); decodeChat(rd, &r) && rd.AtEnd() {
		return r.validate()
	}
	r = ChatRequest{}
	if err := decodeChatStrict(body, &r); err != nil {
		return nil, err
	}
	return r.validate()
}

// decodeChatStrict is DecodeRequest's general path: encoding/json, no
// unknown fields, one object.
func decodeChatStrict(body []byte, r *ChatRequest) *APIError {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(r); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err == nil || !errors.Is(err, io.EOF) {
		return badRequest("", "We could not parse the JSON body of your request: trailing data after the JSON object.")
	}
	return nil
}

func jsonError(err error) *APIError {
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) {
		field := ute.Field
		return badRequest(field, fmt.Sprintf("Invalid type for '%s': expected %s, got %s.", field, ute.Type.String(), ute.Value))
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "json: unknown field ") {
		name := strings.Trim(strings.TrimPrefix(msg, "json: unknown field "), `"`)
		return badRequest(name, fmt.Sprintf("Unrecognized request argument supplied: %s", name))
	}
	return badRequest("", "We could not parse the JSON body of your request: "+strings.TrimPrefix(msg, "json: "))
}

func (r *ChatRequest) validate() (*Decoded, *APIError) {
	d := &Decoded{Model: r.Model, Metadata: r.Metadata}
	g := &d.Gen
	if r.Model == "" {
		return nil, badRequest("model", "you must provide a model parameter")
	}
	if len(r.Model) > maxModelNameLen {
		return nil, badRequest("model", "model name is too long")
	}
	if len(r.Messages) == 0 {
		return nil, badRequest("messages", "'messages' must contain at least one message.")
	}
	if len(r.Messages) > maxMessages {
		return nil, badRequest("messages", fmt.Sprintf("'messages' has more than %d items.", maxMessages))
	}
	// Tools first: messages and tool_choice refer to them.
	if len(r.Tools) > maxTools {
		return nil, badRequest("tools", fmt.Sprintf("'tools' has more than %d items.", maxTools))
	}
	names := map[string]bool{}
	for i, t := range r.Tools {
		p := fmt.Sprintf("tools[%d]", i)
		if t.Type != "function" {
			return nil, badRequest(p+".type", fmt.Sprintf("Invalid value for '%s.type': expected 'function'.", p))
		}
		if !validName(t.Function.Name) {
			return nil, badRequest(p+".function.name", fmt.Sprintf("Invalid '%s.function.name': must match ^[a-zA-Z0-9_-]{1,64}$.", p))
		}
		if names[t.Function.Name] {
			return nil, badRequest(p+".function.name", fmt.Sprintf("Duplicate function name %q.", t.Function.Name))
		}
		names[t.Function.Name] = true
		if len(t.Function.Parameters) > 0 && !isJSONObject(t.Function.Parameters) {
			return nil, badRequest(p+".function.parameters", fmt.Sprintf("Invalid '%s.function.parameters': expected an object.", p))
		}
		g.Tools = append(g.Tools, Tool{Name: t.Function.Name, Description: t.Function.Description,
			Parameters: t.Function.Parameters, Strict: t.Function.Strict != nil && *t.Function.Strict})
	}
	for i := range r.Messages {
		m, apiErr := r.Messages[i].toMessage(i)
		if apiErr != nil {
			return nil, apiErr
		}
		g.Messages = append(g.Messages, m)
	}
	g.ToolChoice = "none"
	if len(r.Tools) > 0 {
		g.ToolChoice = "auto"
	}
	if len(r.ToolChoice) > 0 && string(r.ToolChoice) != "null" {
		var s string
		if json.Unmarshal(r.ToolChoice, &s) == nil {
			switch s {
			case "none", "auto", "required":
				g.ToolChoice = s
			default:
				return nil, badRequest("tool_choice", fmt.Sprintf("Invalid value for 'tool_choice': %q. Supported values are: 'none', 'auto' and 'required'.", s))
			}
		} else {
			var tc struct {
				Type     string `json:"type"`
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			}
			dec := json.NewDecoder(bytes.NewReader(r.ToolChoice))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&tc); err != nil || tc.Type != "function" {
				return nil, badRequest("tool_choice", "Invalid 'tool_choice': expected 'none', 'auto', 'required' or {\"type\": \"function\", \"function\": {\"name\": ...}}.")
			}
			if !names[tc.Function.Name] {
				return nil, badRequest("tool_choice", fmt.Sprintf("Invalid 'tool_choice': function %q is not in 'tools'.", tc.Function.Name))
			}
			g.ToolChoice, g.ToolName = "function", tc.Function.Name
		}
		if g.ToolChoice != "none" && len(r.Tools) == 0 {
			return nil, badRequest("tool_choice", "'tool_choice' is only allowed when 'tools' are specified.")
		}
	}
	g.ParallelToolCalls = true
	if r.ParallelToolCalls != nil {
		if len(r.Tools) == 0 {
			return nil, badRequest("parallel_tool_calls", "'parallel_tool_calls' is only allowed when 'tools' are specified.")
		}
		g.ParallelToolCalls = *r.ParallelToolCalls
	}
	g.ResponseFormat = ResponseFormat{Type: "text"}
	if rf := r.ResponseFormat; rf != nil {
		switch rf.Type {
		case "text", "json_object":
			if rf.JSONSchema != nil {
				return nil, badRequest("response_format.json_schema", "'json_schema' is only allowed with type 'json_schema'.")
			}
			g.ResponseFormat.Type = rf.Type
		case "json_schema":
			js := rf.JSONSchema
			if js == nil {
				return nil, badRequest("response_format.json_schema", "Missing required parameter: 'response_format.json_schema'.")
			}
			if !validName(js.Name) {
				return nil, badRequest("response_format.json_schema.name", "Invalid 'response_format.json_schema.name': must match ^[a-zA-Z0-9_-]{1,64}$.")
			}
			if len(js.Schema) > 0 && !isJSONObject(js.Schema) {
				return nil, badRequest("response_format.json_schema.schema", "Invalid 'response_format.json_schema.schema': expected an object.")
			}
			g.ResponseFormat = ResponseFormat{Type: "json_schema", Name: js.Name, Schema: js.Schema, Strict: js.Strict != nil && *js.Strict}
		default:
			return nil, badRequest("response_format.type", fmt.Sprintf("Invalid value for 'response_format.type': %q. Supported values are: 'text', 'json_object' and 'json_schema'.", rf.Type))
		}
	}
	if v := r.Temperature; v != nil {
		if !(*v >= 0 && *v <= 2) {
			return nil, badRequest("temperature", fmt.Sprintf("Invalid 'temperature': decimal above maximum value. Expected a value <= 2 and >= 0, but got %v instead.", *v))
		}
		g.Temperature = v
	}
	if v := r.TopP; v != nil {
		if !(*v >= 0 && *v <= 1) {
			return nil, badRequest("top_p", fmt.Sprintf("Invalid 'top_p': expected a value <= 1 and >= 0, but got %v instead.", *v))
		}
		g.TopP = v
	}
	for _, pen := range []struct {
		name string
		v    *float64
		dst  **float64
	}{{"frequency_penalty", r.FrequencyPenalty, &g.FrequencyPenalty}, {"presence_penalty", r.PresencePenalty, &g.PresencePenalty}} {
		if pen.v != nil {
			if !(*pen.v >= -2 && *pen.v <= 2) {
				return nil, badRequest(pen.name, fmt.Sprintf("Invalid '%s': expected a value <= 2 and >= -2.", pen.name))
			}
			*pen.dst = pen.v
		}
	}
	for k, v := range r.LogitBias {
		if !isDigits(k) || v < -100 || v > 100 {
			return nil, badRequest("logit_bias", "Invalid 'logit_bias': keys must be token ids and values in [-100, 100].")
		}
	}
	g.LogitBias = r.LogitBias
	g.Seed = r.Seed
	if r.MaxCompletionTokens != nil && r.MaxTokens != nil {
		return nil, badRequest("max_tokens", "Set only one of 'max_tokens' and 'max_completion_tokens'.")
	}
	for _, mt := range []struct {
		name string
		v    *int
	}{{"max_completion_tokens", r.MaxCompletionTokens}, {"max_tokens", r.MaxTokens}} {
		if mt.v != nil {
			if *mt.v < 1 || *mt.v > maxCompletionCap {
				return nil, badRequest(mt.name, fmt.Sprintf("Invalid '%s': expected an integer >= 1 and <= %d, got %d.", mt.name, maxCompletionCap, *mt.v))
			}
			g.MaxTokens = *mt.v
		}
	}
	if len(r.Stop) > 0 && string(r.Stop) != "null" {
		var one string
		if json.Unmarshal(r.Stop, &one) == nil {
			g.Stop = []string{one}
		} else if err := json.Unmarshal(r.Stop, &g.Stop); err != nil {
			return nil, badRequest("stop", "Invalid type for 'stop': expected a string or an array of strings.")
		}
		if len(g.Stop) > maxStop {
			return nil, badRequest("stop", fmt.Sprintf("Invalid 'stop': expected an array with maximum length %d.", maxStop))
		}
		for _, s := range g.Stop {
			if s == "" {
				return nil, badRequest("stop", "Invalid 'stop': empty stop sequence.")
			}
		}
	}
	g.N = 1
	if r.N != nil {
		if *r.N < 1 || *r.N > maxN {
			return nil, badRequest("n", fmt.Sprintf("Invalid 'n': expected an integer >= 1 and <= %d, got %d.", maxN, *r.N))
		}
		g.N = *r.N
	}
	g.Logprobs = r.Logprobs != nil && *r.Logprobs
	if r.TopLogprobs != nil {
		if !g.Logprobs {
			return nil, badRequest("top_logprobs", "Invalid 'top_logprobs': 'logprobs' must be set to true when 'top_logprobs' is specified.")
		}
		if *r.TopLogprobs < 0 || *r.TopLogprobs > maxTopLogprobs {
			return nil, badRequest("top_logprobs", fmt.Sprintf("Invalid 'top_logprobs': expected an integer >= 0 and <= %d.", maxTopLogprobs))
		}
		g.TopLogprobs = *r.TopLogprobs
	}
	if r.User != nil {
		if len(*r.User) > maxUserLen {
			return nil, badRequest("user", fmt.Sprintf("Invalid 'user': string too long, at most %d characters.", maxUserLen))
		}
		g.User = *r.User
	}
	if len(r.Metadata) > maxMetadataPairs {
		return nil, badRequest("metadata", fmt.Sprintf("Invalid 'metadata': too many properties. Expected an object with at most %d properties, but got %d instead.", maxMetadataPairs, len(r.Metadata)))
	}
	for k, v := range r.Metadata {
		if len(k) > maxMetadataKey {
			return nil, badRequest("metadata", fmt.Sprintf("Invalid 'metadata': key too long, at most %d characters.", maxMetadataKey))
		}
		if len(v) > maxMetadataValue {
			return nil, badRequest("metadata", fmt.Sprintf("Invalid 'metadata': value of %q too long, at most %d characters.", k, maxMetadataValue))
		}
	}
	g.Stream = r.Stream != nil && *r.Stream
	if r.StreamOptions != nil {
		if !g.Stream {
			return nil, badRequest("stream_options", "The 'stream_options' parameter is only allowed when 'stream' is enabled.")
		}
		d.IncludeUsage = r.StreamOptions.IncludeUsage != nil && *r.StreamOptions.IncludeUsage
	}
	d.Store = r.Store != nil && *r.Store
	d.Params = r.params()
	return d, nil
}

// params is the request minus messages and tools, for the record.
func (r *ChatRequest) params() json.RawMessage {
	cp := *r
	cp.Messages, cp.Tools = nil, nil
	b, err := json.Marshal(&cp)
	if err != nil {
		return nil
	}
	return b
}

func (m *chatMessageIn) toMessage(i int) (Message, *APIError) {
	p := fmt.Sprintf("messages[%d]", i)
	out := Message{Role: m.Role}
	if m.Name != nil {
		if len(*m.Name) > maxToolNameLen*4 {
			return out, badRequest(p+".name", "Invalid 'name': too long.")
		}
		out.Name = *m.Name
	}
	text, hasContent, apiErr := contentText(m.Content, p, m.Role)
	if apiErr != nil {
		return out, apiErr
	}
	out.Content = text
	switch m.Role {
	case "system", "developer", "user":
		if !hasContent {
			return out, badRequest(p+".content", fmt.Sprintf("Missing required parameter: '%s.content'.", p))
		}
		if len(m.ToolCalls) > 0 || m.ToolCallID != nil {
			return out, badRequest(p, fmt.Sprintf("Invalid '%s': 'tool_calls' and 'tool_call_id' are not allowed for role '%s'.", p, m.Role))
		}
	case "assistant":
		if m.ToolCallID != nil {
			return out, badRequest(p+".tool_call_id", fmt.Sprintf("Invalid '%s': 'tool_call_id' is not allowed for role 'assistant'.", p))
		}
		if !hasContent && len(m.ToolCalls) == 0 && m.Refusal == nil {
			return out, badRequest(p+".content", fmt.Sprintf("Invalid '%s': an assistant message needs 'content' or 'tool_calls'.", p))
		}
		for j, tc := range m.ToolCalls {
			q := fmt.Sprintf("%s.tool_calls[%d]", p, j)
			if tc.ID == "" || tc.Type != "function" || !validName(tc.Function.Name) {
				return out, badRequest(q, fmt.Sprintf("Invalid '%s': expected an id, type 'function' and a function name.", q))
			}
			out.ToolCalls = append(out.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
	case "tool":
		if m.ToolCallID == nil || *m.ToolCallID == "" {
			return out, badRequest(p+".tool_call_id", fmt.Sprintf("Missing required parameter: '%s.tool_call_id'.", p))
		}
		if !hasContent {
			return out, badRequest(p+".content", fmt.Sprintf("Missing required parameter: '%s.content'.", p))
		}
		if len(m.ToolCalls) > 0 {
			return out, badRequest(p+".tool_calls", fmt.Sprintf("Invalid '%s': 'tool_calls' is not allowed for role 'tool'.", p))
		}
		out.ToolCallID = *m.ToolCallID
	case "":
		return out, badRequest(p+".role", fmt.Sprintf("Missing required parameter: '%s.role'.", p))
	default:
		return out, badRequest(p+".role", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'system', 'developer', 'user', 'assistant', and 'tool'.", m.Role))
	}
	return out, nil
}

// contentText accepts a string, null, or an array of text parts (and
// refusal parts for the assistant) and returns the joined text.
func contentText(raw json.RawMessage, p, role string) (string, bool, *APIError) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", false, nil
	}
	switch raw[0] {
	case '"':
		if s, ok := stringContent(raw); ok {
			return s, true, nil
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", false, badRequest(p+".content", fmt.Sprintf("Invalid '%s.content'.", p))
		}
		return s, true, nil
	case '[':
		var parts []contentPartIn
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&parts); err != nil {
			return "", false, badRequest(p+".content", fmt.Sprintf("Invalid '%s.content': expected an array of content parts.", p))
		}
		var b strings.Builder
		for j, part := range parts {
			q := fmt.Sprintf("%s.content[%d]", p, j)
			switch {
			case part.Type == "text" && part.Text != nil && part.Refusal == nil:
				b.WriteString(*part.Text)
			case part.Type == "refusal" && role == "assistant" && part.Refusal != nil && part.Text == nil:
				b.WriteString(*part.Refusal)
			case part.Type == "image_url" || part.Type == "input_audio" || part.Type == "file":
				return "", false, badRequest(q+".type", fmt.Sprintf("Invalid '%s.type': content of type '%s' is not supported by this model.", q, part.Type))
			default:
				return "", false, badRequest(q, fmt.Sprintf("Invalid '%s': expected a text part {\"type\": \"text\", \"text\": ...}.", q))
			}
		}
		return b.String(), true, nil
	default:
		return "", false, badRequest(p+".content", fmt.Sprintf("Invalid type for '%s.content': expected one of a string or array of objects.", p))
	}
}

func validName(s string) bool {
	if s == "" || len(s) > maxToolNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func isDigits(s string) bool {
	if s == "" || len(s) > 10 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isJSONObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// badRequest is a 400 invalid_request_error.
func badRequest(param, msg string) *APIError {
	return &APIError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Message: msg}
}
