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

	"github.com/labstack/echo/v4"
)

// POST /v1/responses is OpenAI's Responses API over the chat path: the
// request is translated into a Chat Completions request and served by the
// same handler (so routing, limits, lessons, recording and metrics are
// those of a chat completion), and the answer is translated back. The
// response id is "resp_<interaction id>"; every endpoint taking an id
// accepts it. Supported: input as a string or as message, function_call and
// function_call_output items; instructions; function tools and
// tool_choice; text.format (text, json_object, json_schema); temperature,
// top_p, max_output_tokens, metadata, store, user; streaming. Not
// supported (400): previous_response_id and conversation (the server keeps
// no conversation state for the Responses API), built-in tools, images and
// files.

const responsePrefix = "resp_"

// ResponseID returns the Responses API id of an interaction.
func ResponseID(interactionID string) string { return responsePrefix + interactionID }

type responsesRequest struct {
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Instructions       *string           `json:"instructions,omitempty"`
	Tools              []responseToolIn  `json:"tools,omitempty"`
	ToolChoice         json.RawMessage   `json:"tool_choice,omitempty"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls,omitempty"`
	Temperature        *float64          `json:"temperature,omitempty"`
	TopP               *float64          `json:"top_p,omitempty"`
	MaxOutputTokens    *int              `json:"max_output_tokens,omitempty"`
	Metadata           map[string]string `json:"metadata,omitempty"`
	Store              *bool             `json:"store,omitempty"`
	Stream             *bool             `json:"stream,omitempty"`
	StreamOptions      json.RawMessage   `json:"stream_options,omitempty"`
	User               *string           `json:"user,omitempty"`
	Text               *responseTextIn   `json:"text,omitempty"`
	PreviousResponseID *string           `json:"previous_response_id,omitempty"`
	Conversation       json.RawMessage   `json:"conversation,omitempty"`
	Background         *bool             `json:"background,omitempty"`
	TopLogprobs        *int              `json:"top_logprobs,omitempty"`
	Include            []string          `json:"include,omitempty"`
	Truncation         *string           `json:"truncation,omitempty"`
	Seed               *int64            `json:"seed,omitempty"`
	Reasoning          json.RawMessage   `json:"reasoning,omitempty"`
	ServiceTier        *string           `json:"service_tier,omitempty"`
	PromptCacheKey     *string           `json:"prompt_cache_key,omitempty"`
	SafetyID           *string           `json:"safety_identifier,omitempty"`
	MaxToolCalls       *int              `json:"max_tool_calls,omitempty"`
	Prompt             json.RawMessage   `json:"prompt,omitempty"`
}

type responseToolIn struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

type responseTextIn struct {
	Format    json.RawMessage `json:"format,omitempty"`
	Verbosity *string         `json:"verbosity,omitempty"`
}

type responseFormatIn2 struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// inputItem is one element of a Responses input array.
type inputItem struct {
	Type      string          `json:"type,omitempty"` // message (default), function_call, function_call_output
	ID        string          `json:"id,omitempty"`
	Status    string          `json:"status,omitempty"`
	Role      string          `json:"role,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	CallID    string          `json:"call_id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments string          `json:"arguments,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"`
}

type inputPart struct {
	Type        string          `json:"type"`
	Text        *string         `json:"text,omitempty"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
	Logprobs    json.RawMessage `json:"logprobs,omitempty"`
}

type chatToolCallOut struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function fnOut  `json:"function"`
}

type chatMessageOut struct {
	Role       string            `json:"role"`
	Content    *string           `json:"content"`
	ToolCalls  []chatToolCallOut `json:"tool_calls,omitempty"`
	ToolCallID string            `json:"tool_call_id,omitempty"`
}

// partsText joins the text of a content value: a string or an array of
// input_text/output_text (or text) parts.
func partsText(raw json.RawMessage, param string) (string, *APIError) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []inputPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", badRequest(param, fmt.Sprintf("Invalid '%s': expected a string or an array of text parts.", param))
	}
	var b strings.Builder
	for i, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			if p.Text == nil {
				return "", badRequest(fmt.Sprintf("%s[%d].text", param, i), fmt.Sprintf("Missing required parameter: '%s[%d].text'.", param, i))
			}
			b.WriteString(*p.Text)
		default:
			return "", badRequest(fmt.Sprintf("%s[%d].type", param, i), fmt.Sprintf("Invalid '%s[%d].type': content of type '%s' is not supported; only text is.", param, i, p.Type))
		}
	}
	return b.String(), nil
}

// toChat translates a Responses request into a Chat Completions body (JSON),
// which DecodeRequest then validates as any chat request.
func (r *responsesRequest) toChat() ([]byte, *APIError) {
	switch {
	case r.PreviousResponseID != nil:
		return nil, badRequest("previous_response_id", "Invalid 'previous_response_id': citizen keeps no conversation state for the Responses API; send the whole conversation in 'input'.")
	case len(r.Conversation) > 0:
		return nil, badRequest("conversation", "Invalid 'conversation': conversations are not supported; send the whole conversation in 'input'.")
	case r.Background != nil && *r.Background:
		return nil, badRequest("background", "Invalid 'background': background responses are not supported.")
	case len(r.Prompt) > 0:
		return nil, badRequest("prompt", "Invalid 'prompt': prompt templates are not supported.")
	case len(r.Input) == 0:
		return nil, badRequest("input", "Missing required parameter: 'input'.")
	}
	var msgs []chatMessageOut
	if r.Instructions != nil && *r.Instructions != "" {
		ins := *r.Instructions
		msgs = append(msgs, chatMessageOut{Role: "system", Content: &ins})
	}
	var text string
	if err := json.Unmarshal(r.Input, &text); err == nil {
		msgs = append(msgs, chatMessageOut{Role: "user", Content: &text})
	} else {
		var items []inputItem
		if err := json.Unmarshal(r.Input, &items); err != nil {
			return nil, badRequest("input", "Invalid 'input': expected a string or an array of input items.")
		}
		for i, it := range items {
			p := fmt.Sprintf("input[%d]", i)
			switch it.Type {
			case "", "message":
				switch it.Role {
				case "user", "assistant", "system", "developer":
				default:
					return nil, badRequest(p+".role", fmt.Sprintf("Invalid '%s.role': expected one of 'user', 'assistant', 'system' or 'developer', got '%s'.", p, it.Role))
				}
				if len(it.Content) == 0 {
					return nil, badRequest(p+".content", fmt.Sprintf("Missing required parameter: '%s.content'.", p))
				}
				t, e := partsText(it.Content, p+".content")
				if e != nil {
					return nil, e
				}
				msgs = append(msgs, chatMessageOut{Role: it.Role, Content: &t})
			case "function_call":
				if it.CallID == "" || it.Name == "" {
					return nil, badRequest(p, fmt.Sprintf("Invalid '%s': a function_call needs 'call_id' and 'name'.", p))
				}
				tc := chatToolCallOut{ID: it.CallID, Type: "function", Function: fnOut{Name: it.Name, Arguments: it.Arguments}}
				// Consecutive calls (and a call right after the assistant's
				// text) are one assistant turn.
				if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" {
					msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, tc)
				} else {
					msgs = append(msgs, chatMessageOut{Role: "assistant", ToolCalls: []chatToolCallOut{tc}})
				}
			case "function_call_output":
				if it.CallID == "" || len(it.Output) == 0 {
					return nil, badRequest(p, fmt.Sprintf("Invalid '%s': a function_call_output needs 'call_id' and 'output'.", p))
				}
				out, e := partsText(it.Output, p+".output")
				if e != nil {
					return nil, e
				}
				msgs = append(msgs, chatMessageOut{Role: "tool", Content: &out, ToolCallID: it.CallID})
			default:
				return nil, badRequest(p+".type", fmt.Sprintf("Invalid '%s.type': input items of type '%s' are not supported.", p, it.Type))
			}
		}
	}
	chat := map[string]any{"model": r.Model, "messages": msgs}
	if len(r.Tools) > 0 {
		tools := make([]map[string]any, len(r.Tools))
		for i, t := range r.Tools {
			if t.Type != "function" {
				return nil, badRequest(fmt.Sprintf("tools[%d].type", i), fmt.Sprintf("Invalid 'tools[%d].type': tools of type '%s' are not supported; only 'function' is.", i, t.Type))
			}
			fn := map[string]any{"name": t.Name}
			if t.Description != "" {
				fn["description"] = t.Description
			}
			if len(t.Parameters) > 0 {
				fn["parameters"] = t.Parameters
			}
			if t.Strict != nil {
				fn["strict"] = *t.Strict
			}
			tools[i] = map[string]any{"type": "function", "function": fn}
		}
		chat["tools"] = tools
	}
	if len(r.ToolChoice) > 0 {
		var mode string
		if err := json.Unmarshal(r.ToolChoice, &mode); err == nil {
			chat["tool_choice"] = mode
		} else {
			var tc struct {
				Type string `json:"type"`
				Name string `json:"name"`
			}
			if err := json.Unmarshal(r.ToolChoice, &tc); err != nil || tc.Type != "function" || tc.Name == "" {
				return nil, badRequest("tool_choice", "Invalid 'tool_choice': expected 'auto', 'none', 'required' or {\"type\": \"function\", \"name\": ...}.")
			}
			chat["tool_choice"] = map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}}
		}
	}
	if r.Text != nil && len(r.Text.Format) > 0 {
		var f responseFormatIn2
		if err := json.Unmarshal(r.Text.Format, &f); err != nil {
			return nil, badRequest("text.format", "Invalid 'text.format': expected an object.")
		}
		switch f.Type {
		case "text":
		case "json_object":
			chat["response_format"] = map[string]string{"type": "json_object"}
		case "json_schema":
			js := map[string]any{"name": f.Name}
			if f.Description != "" {
				js["description"] = f.Description
			}
			if len(f.Schema) > 0 {
				js["schema"] = f.Schema
			}
			if f.Strict != nil {
				js["strict"] = *f.Strict
			}
			chat["response_format"] = map[string]any{"type": "json_schema", "json_schema": js}
		default:
			return nil, badRequest("text.format.type", fmt.Sprintf("Invalid 'text.format.type': '%s' is not supported.", f.Type))
		}
	}
	set := func(k string, v any, ok bool) {
		if ok {
			chat[k] = v
		}
	}
	set("parallel_tool_calls", r.ParallelToolCalls, r.ParallelToolCalls != nil)
	set("temperature", r.Temperature, r.Temperature != nil)
	set("top_p", r.TopP, r.TopP != nil)
	set("max_completion_tokens", r.MaxOutputTokens, r.MaxOutputTokens != nil)
	set("metadata", r.Metadata, r.Metadata != nil)
	set("store", r.Store, r.Store != nil)
	set("user", r.User, r.User != nil)
	set("seed", r.Seed, r.Seed != nil)
	set("service_tier", r.ServiceTier, r.ServiceTier != nil)
	set("prompt_cache_key", r.PromptCacheKey, r.PromptCacheKey != nil)
	set("safety_identifier", r.SafetyID, r.SafetyID != nil)
	if r.TopLogprobs != nil {
		chat["logprobs"], chat["top_logprobs"] = true, *r.TopLogprobs
	}
	for _, inc := range r.Include {
		if inc == "message.output_text.logprobs" {
			chat["logprobs"] = true
		}
	}
	if r.Stream != nil && *r.Stream {
		chat["stream"] = true
		chat["stream_options"] = map[string]bool{"include_usage": true}
	}
	b, err := json.Marshal(chat)
	if err != nil {
		return nil, badRequest("", "The request could not be translated.")
	}
	return b, nil
}

// decodeResponses parses a Responses body strictly (as DecodeRequest does a
// chat body) and translates it.
func decodeResponses(body []byte) (*responsesRequest, []byte, *APIError) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil, badRequest("", "We could not parse the JSON body of your request: the body is empty.")
	}
	if !utf8.Valid(body) {
		return nil, nil, badRequest("", "We could not parse the JSON body of your request: it is not valid UTF-8.")
	}
	var r responsesRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, nil, jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, nil, badRequest("", "We could not parse the JSON body of your request: trailing data after the JSON object.")
	}
	chat, e := r.toChat()
	if e != nil {
		return nil, nil, e
	}
	return &r, chat, nil
}

// Response shapes (OpenAI Responses).
type responseOut struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	CreatedAt          int64             `json:"created_at"`
	Status             string            `json:"status"`
	Error              any               `json:"error"`
	IncompleteDetails  *incompleteOut    `json:"incomplete_details"`
	Instructions       *string           `json:"instructions"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Model              string            `json:"model"`
	Output             []outputItem      `json:"output"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Store              bool              `json:"store"`
	Temperature        *float64          `json:"temperature"`
	Text               map[string]any    `json:"text"`
	ToolChoice         any               `json:"tool_choice"`
	Tools              []responseToolIn  `json:"tools"`
	TopP               *float64          `json:"top_p"`
	Truncation         string            `json:"truncation"`
	Usage              *responseUsage    `json:"usage"`
	User               *string           `json:"user"`
	Metadata           map[string]string `json:"metadata"`
}

type incompleteOut struct {
	Reason string `json:"reason"`
}

type outputItem struct {
	Type    string       `json:"type"` // message, function_call
	ID      string       `json:"id"`
	Status  string       `json:"status"`
	Role    string       `json:"role,omitempty"`
	Content []outputText `json:"content,omitempty"`
	// function_call
	CallID    string  `json:"call_id,omitempty"`
	Name      string  `json:"name,omitempty"`
	Arguments *string `json:"arguments,omitempty"`
}

// MarshalJSON always writes a message's content (an empty array while a
// streamed message has none yet) and never a function call's.
func (o outputItem) MarshalJSON() ([]byte, error) {
	type plain outputItem
	if o.Type != "message" {
		return json.Marshal(plain(o))
	}
	content := o.Content
	if content == nil {
		content = []outputText{}
	}
	return json.Marshal(struct {
		plain
		Content []outputText `json:"content"`
	}{plain(o), content})
}

type outputText struct {
	Type        string     `json:"type"` // output_text
	Text        string     `json:"text"`
	Annotations []struct{} `json:"annotations"`
	Logprobs    []tokenOut `json:"logprobs,omitempty"`
}

type responseUsage struct {
	InputTokens         int            `json:"input_tokens"`
	InputTokensDetails  map[string]int `json:"input_tokens_details"`
	OutputTokens        int            `json:"output_tokens"`
	OutputTokensDetails map[string]int `json:"output_tokens_details"`
	TotalTokens         int            `json:"total_tokens"`
}

func usageOut(u Usage) *responseUsage {
	return &responseUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens,
		InputTokensDetails: map[string]int{"cached_tokens": 0}, OutputTokensDetails: map[string]int{"reasoning_tokens": 0}}
}

// skeleton is the response before any output: the request's settings.
func (r *responsesRequest) skeleton(iid, model string, created int64) *responseOut {
	out := &responseOut{ID: ResponseID(iid), Object: "response", CreatedAt: created, Status: "in_progress", Model: model,
		Instructions: r.Instructions, MaxOutputTokens: r.MaxOutputTokens, Output: []outputItem{}, ParallelToolCalls: true,
		Store: r.Store == nil || *r.Store, Temperature: r.Temperature, TopP: r.TopP, Truncation: "disabled", User: r.User,
		Text: map[string]any{"format": map[string]string{"type": "text"}}, ToolChoice: "auto", Tools: r.Tools, Metadata: r.Metadata}
	if r.ParallelToolCalls != nil {
		out.ParallelToolCalls = *r.ParallelToolCalls
	}
	if out.Tools == nil {
		out.Tools = []responseToolIn{}
	}
	if out.Metadata == nil {
		out.Metadata = map[string]string{}
	}
	if r.Text != nil && len(r.Text.Format) > 0 {
		out.Text = map[string]any{"format": r.Text.Format}
	}
	if len(r.ToolChoice) > 0 {
		out.ToolChoice = r.ToolChoice
	}
	return out
}

// finish sets the status from the chat finish reason.
func (o *responseOut) finish(reason string) {
	o.Status = "completed"
	switch reason {
	case FinishLength:
		o.Status, o.IncompleteDetails = "incomplete", &incompleteOut{Reason: "max_output_tokens"}
	case "content_filter":
		o.Status, o.IncompleteDetails = "incomplete", &incompleteOut{Reason: "content_filter"}
	}
}

func messageItem(iid string, text string, logprobs []tokenOut) outputItem {
	return outputItem{Type: "message", ID: "msg_" + iid, Status: "completed", Role: "assistant",
		Content: []outputText{{Type: "output_text", Text: text, Annotations: []struct{}{}, Logprobs: logprobs}}}
}

func callItem(iid string, i int, tc toolCallOut) outputItem {
	args := tc.Function.Arguments
	return outputItem{Type: "function_call", ID: fmt.Sprintf("fc_%s_%d", iid, i), Status: "completed", CallID: tc.ID,
		Name: tc.Function.Name, Arguments: &args}
}

// capture collects what the chat handler writes (non-streaming answers and
// errors); Unwrap lets http.ResponseController reach the connection.
type capture struct {
	w      http.ResponseWriter
	status int
	buf    bytes.Buffer
}

func (c *capture) Header() http.Header         { return c.w.Header() }
func (c *capture) WriteHeader(status int)      { c.status = status }
func (c *capture) Write(b []byte) (int, error) { return c.buf.Write(b) }
func (c *capture) Unwrap() http.ResponseWriter { return c.w }

// responses serves POST /v1/responses.
func (s *Server) responses(c echo.Context) error {
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
	rr, chat, e := decodeResponses(buf.Bytes())
	if e != nil {
		return s.fail(c, e)
	}
	req := c.Request()
	req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(chat)), int64(len(chat))
	resp := c.Response()
	orig := resp.Writer
	defer func() { resp.Writer = orig }()
	if rr.Stream != nil && *rr.Stream {
		st := &responseStream{w: orig, req: rr}
		resp.Writer = st
		err := s.chat(c)
		st.close()
		return err
	}
	cw := &capture{w: orig}
	resp.Writer = cw
	if err := s.chat(c); err != nil {
		return err
	}
	resp.Writer = orig
	if cw.status != http.StatusOK {
		orig.WriteHeader(cw.status)
		_, _ = orig.Write(cw.buf.Bytes())
		return nil
	}
	var cc completionOut
	if err := json.Unmarshal(cw.buf.Bytes(), &cc); err != nil || len(cc.Choices) == 0 {
		s.log.Error("translating a chat completion into a response failed", "err", err)
		orig.WriteHeader(http.StatusInternalServerError)
		_ = json.NewEncoder(orig).Encode(errInternal("The answer could not be translated.").body())
		return nil
	}
	iid, _ := InteractionID(cc.ID)
	out := rr.skeleton(iid, cc.Model, cc.Created)
	ch := cc.Choices[0]
	if ch.Message.Content != nil && (*ch.Message.Content != "" || len(ch.Message.ToolCalls) == 0) {
		var lp []tokenOut
		if ch.Logprobs != nil {
			lp = ch.Logprobs.Content
		}
		out.Output = append(out.Output, messageItem(iid, *ch.Message.Content, lp))
	}
	for i, tc := range ch.Message.ToolCalls {
		out.Output = append(out.Output, callItem(iid, i, tc))
	}
	out.finish(ch.FinishReason)
	if cc.Usage != nil {
		out.Usage = usageOut(*cc.Usage)
	}
	b, _ := json.Marshal(out)
	orig.Header().Set("Content-Type", "application/json")
	orig.WriteHeader(http.StatusOK)
	_, _ = orig.Write(append(b, '\n'))
	return nil
}
