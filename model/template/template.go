package template

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Errors. Every error from Parse and Render wraps one of these (or is a
// *RaisedError).
var (
	// ErrSyntax: the source is not a valid template (jinja2's
	// TemplateSyntaxError, or an unknown filter or test).
	ErrSyntax = errors.New("template: syntax error")
	// ErrUnsupported: valid Jinja that this package does not implement
	// (see the package documentation for the list).
	ErrUnsupported = errors.New("template: unsupported")
	// ErrRender: the template failed at render time where Python would
	// raise TypeError, ValueError and the like.
	ErrRender = errors.New("template: render error")
	// ErrUndefined: an undefined value was used where jinja2 raises
	// UndefinedError (attribute of, call of, arithmetic on Undefined).
	ErrUndefined = errors.New("template: undefined")
	// ErrSecurity: what jinja2's ImmutableSandboxedEnvironment refuses
	// (mutating methods such as list.append, underscore namespace names).
	ErrSecurity = errors.New("template: sandbox")
	// ErrLimit: a Limits bound was reached (steps, output size, call depth).
	ErrLimit = errors.New("template: limit exceeded")
	// ErrConversation: the Conversation cannot be given to a template
	// (invalid tool JSON, a reserved kwarg name).
	ErrConversation = errors.New("template: bad conversation")
)

// RaisedError is returned when the template calls raise_exception(msg);
// chat templates use it to reject conversations they cannot format.
type RaisedError struct{ Message string }

func (e *RaisedError) Error() string { return "template: raise_exception: " + e.Message }

// Limits bound one render. A template is untrusted input (it comes with
// the checkpoint), so every render is bounded in time and memory.
type Limits struct {
	// MaxOutputBytes bounds the rendered text and any single string or
	// list built while rendering.
	MaxOutputBytes int
	// MaxSteps bounds the work: one step per node, expression, loop
	// iteration, and per item or (about) byte of values built.
	MaxSteps int64
	// MaxCallDepth bounds macro call nesting (recursion).
	MaxCallDepth int
}

// DefaultLimits are generous for chat prompts (a 16 MiB prompt is far past
// any context window) and stop a hostile template within a few CPU-seconds.
var DefaultLimits = Limits{MaxOutputBytes: 16 << 20, MaxSteps: 10_000_000, MaxCallDepth: 64}

// Template is a parsed chat template. It is immutable and safe for
// concurrent Render calls.
type Template struct {
	nodes  []node
	names  map[string]bool
	attrs  map[string]bool
	limits Limits
}

// Parse parses a Jinja chat template (the checkpoint's
// tokenizer.chat_template) with transformers' environment settings
// (trim_blocks, lstrip_blocks, loop controls, the generation tag) and
// DefaultLimits.
func Parse(src string) (*Template, error) { return ParseWithLimits(src, DefaultLimits) }

// ParseWithLimits is Parse with explicit render limits; zero fields take
// the DefaultLimits value.
func ParseWithLimits(src string, lim Limits) (*Template, error) {
	if lim.MaxOutputBytes <= 0 {
		lim.MaxOutputBytes = DefaultLimits.MaxOutputBytes
	}
	if lim.MaxSteps <= 0 {
		lim.MaxSteps = DefaultLimits.MaxSteps
	}
	if lim.MaxCallDepth <= 0 {
		lim.MaxCallDepth = DefaultLimits.MaxCallDepth
	}
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks, names: map[string]bool{}, attrs: map[string]bool{}}
	nodes, err := p.parseBody()
	if err != nil {
		return nil, err
	}
	return &Template{nodes: nodes, names: p.names, attrs: p.attrs, limits: lim}, nil
}

// References reports whether the template reads the top-level variable
// name anywhere (for example "tools", "bos_token", "strftime_now").
func (t *Template) References(name string) bool { return t.names[name] }

// UsesTools reports whether the template reads the tools variable: when it
// does not, offered tools must be placed in the prompt some other way
// (see ApplyHermesTools).
func (t *Template) UsesTools() bool { return t.names["tools"] }

// HandlesToolCalls reports whether the template reads a tool_calls field
// (message.tool_calls or message['tool_calls']): when it does not, assistant
// tool calls vanish from the prompt unless rewritten (see
// ApplyHermesTools).
func (t *Template) HandlesToolCalls() bool { return t.attrs["tool_calls"] }

// FunctionCall is the function an assistant message calls. Arguments is
// JSON text, as in the OpenAI API.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ToolCall is one OpenAI tool call.
type ToolCall struct {
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function FunctionCall `json:"function"`
}

// Message is one chat message as the OpenAI API carries it. Content nil is
// JSON null (an assistant message that only calls tools).
type Message struct {
	Role       string     `json:"role"`
	Content    *string    `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// Text returns a pointer to s, for Message.Content.
func Text(s string) *string { return &s }

// Conversation is everything a chat template sees.
type Conversation struct {
	Messages []Message
	// Tools are OpenAI tool definitions ({"type":"function","function":
	// {...}}), each a JSON object. Nil renders with tools=None, as
	// transformers does when no tools are passed.
	Tools []json.RawMessage
	// AddGenerationPrompt ends the prompt with the assistant header.
	AddGenerationPrompt bool
	// BOSToken and EOSToken are the bos_token and eos_token variables;
	// empty leaves the variable undefined.
	BOSToken, EOSToken string
	// Kwargs are extra template variables (transformers' chat_template
	// kwargs, e.g. "enable_thinking", "date_string"). Values are nil,
	// bool, string, numbers, []any, map[string]any (keys sorted) or
	// json.RawMessage (order kept).
	Kwargs map[string]any
	// Now is what strftime_now formats; zero means time.Now().
	Now time.Time
}

// Render renders the conversation. See RenderContext.
func (t *Template) Render(c Conversation) (string, error) {
	return t.RenderContext(context.Background(), c)
}

// RenderContext renders the conversation as transformers'
// apply_chat_template(messages, tools=..., add_generation_prompt=...,
// tokenize=False, **kwargs) does, with each tool call's arguments given to
// the template as a mapping when they are a JSON object (vLLM's
// convention, which chat templates expect), else as the string. It stops
// when ctx is done or a limit is reached.
func (t *Template) RenderContext(ctx context.Context, c Conversation) (string, error) {
	vars, err := c.vars()
	if err != nil {
		return "", err
	}
	e := &evaluator{ctx: ctx, lim: t.limits, out: &strings.Builder{}, now: c.Now}
	if e.now.IsZero() {
		e.now = time.Now()
	}
	g := &scope{vars: globals(e)}
	top := newScope(g)
	for k, v := range vars {
		top.vars[k] = v
	}
	err = e.execAll(t.nodes, top)
	if errors.Is(err, errBreak) || errors.Is(err, errContinue) {
		err = fmt.Errorf("%w: loop control outside a loop", ErrSyntax)
	}
	if err != nil {
		return "", err
	}
	return e.out.String(), nil
}

// reservedKwargs are the names transformers passes itself.
var reservedKwargs = map[string]bool{"messages": true, "tools": true, "documents": true, "add_generation_prompt": true}

func (c Conversation) vars() (map[string]Value, error) {
	msgs := make([]Value, len(c.Messages))
	for i, m := range c.Messages {
		v, err := messageValue(m)
		if err != nil {
			return nil, fmt.Errorf("%w: message %d: %v", ErrConversation, i, err)
		}
		msgs[i] = v
	}
	vars := map[string]Value{
		"messages":              listV(msgs),
		"tools":                 none,
		"documents":             none,
		"add_generation_prompt": boolV(c.AddGenerationPrompt),
	}
	if c.Tools != nil {
		tools := make([]Value, len(c.Tools))
		for i, raw := range c.Tools {
			v, err := decodeJSON(raw)
			if err != nil {
				return nil, fmt.Errorf("%w: tool %d: %v", ErrConversation, i, err)
			}
			tools[i] = v
		}
		vars["tools"] = listV(tools)
	}
	if c.BOSToken != "" {
		vars["bos_token"] = strV(c.BOSToken)
	}
	if c.EOSToken != "" {
		vars["eos_token"] = strV(c.EOSToken)
	}
	for k, x := range c.Kwargs {
		if reservedKwargs[k] {
			return nil, fmt.Errorf("%w: kwarg %q is set by the conversation itself", ErrConversation, k)
		}
		v, err := goValue(x, 0)
		if err != nil {
			return nil, fmt.Errorf("%w: kwarg %q: %v", ErrConversation, k, err)
		}
		vars[k] = v
	}
	return vars, nil
}

func messageValue(m Message) (Value, error) {
	d := newDict()
	d.setStr("role", strV(m.Role))
	if m.Content == nil {
		d.setStr("content", none)
	} else {
		d.setStr("content", strV(*m.Content))
	}
	if m.Name != "" {
		d.setStr("name", strV(m.Name))
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]Value, len(m.ToolCalls))
		for i, tc := range m.ToolCalls {
			cd := newDict()
			if tc.ID != "" {
				cd.setStr("id", strV(tc.ID))
			}
			if tc.Type != "" {
				cd.setStr("type", strV(tc.Type))
			}
			fd := newDict()
			fd.setStr("name", strV(tc.Function.Name))
			fd.setStr("arguments", argumentsValue(tc.Function.Arguments))
			cd.setStr("function", dictV(fd))
			calls[i] = dictV(cd)
		}
		d.setStr("tool_calls", listV(calls))
	}
	if m.ToolCallID != "" {
		d.setStr("tool_call_id", strV(m.ToolCallID))
	}
	return dictV(d), nil
}

// argumentsValue is the template's view of a tool call's arguments: the
// mapping when the text is a JSON object, else the text itself.
func argumentsValue(s string) Value {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "{") {
		if v, err := decodeJSON([]byte(t)); err == nil && v.k == kDict {
			return v
		}
	}
	return strV(s)
}

// decodeJSON decodes one JSON value into template values, keeping object
// key order as Python's json.loads does. Integers that fit in int64 stay
// integers; other numbers are floats.
func decodeJSON(raw []byte) (Value, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return undefined, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return undefined, fmt.Errorf("trailing data after JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder, depth int) (Value, error) {
	if depth > maxValueDepth {
		return undefined, fmt.Errorf("JSON nests deeper than %d", maxValueDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return undefined, err
	}
	switch t := tok.(type) {
	case nil:
		return none, nil
	case bool:
		return boolV(t), nil
	case string:
		return strV(t), nil
	case json.Number:
		return numberValue(string(t))
	case json.Delim:
		switch t {
		case '[':
			var items []Value
			for dec.More() {
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return undefined, err
				}
				items = append(items, v)
			}
			if _, err := dec.Token(); err != nil {
				return undefined, err
			}
			return listV(items), nil
		case '{':
			d := newDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return undefined, err
				}
				k, ok := kt.(string)
				if !ok {
					return undefined, fmt.Errorf("object key is not a string")
				}
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return undefined, err
				}
				d.setStr(k, v)
			}
			if _, err := dec.Token(); err != nil {
				return undefined, err
			}
			return dictV(d), nil
		}
	}
	return undefined, fmt.Errorf("unexpected JSON token %v", tok)
}

func numberValue(s string) (Value, error) {
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return intV(i), nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !math.IsInf(f, 0) {
		return undefined, err
	}
	return floatV(f), nil
}

// goValue converts a plain Go value (as Conversation.Kwargs holds) to a
// template value.
func goValue(x any, depth int) (Value, error) {
	if depth > maxValueDepth {
		return undefined, fmt.Errorf("value nests deeper than %d", maxValueDepth)
	}
	switch t := x.(type) {
	case nil:
		return none, nil
	case json.RawMessage:
		return decodeJSON(t)
	case bool:
		return boolV(t), nil
	case string:
		return strV(t), nil
	case int:
		return intV(int64(t)), nil
	case int64:
		return intV(t), nil
	case int32:
		return intV(int64(t)), nil
	case float64:
		return floatV(t), nil
	case float32:
		return floatV(float64(t)), nil
	case json.Number:
		return numberValue(string(t))
	case []any:
		out := make([]Value, len(t))
		for i, it := range t {
			v, err := goValue(it, depth+1)
			if err != nil {
				return undefined, err
			}
			out[i] = v
		}
		return listV(out), nil
	case []string:
		out := make([]Value, len(t))
		for i, it := range t {
			out[i] = strV(it)
		}
		return listV(out), nil
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		d := newDict()
		for _, k := range keys {
			v, err := goValue(t[k], depth+1)
			if err != nil {
				return undefined, err
			}
			d.setStr(k, v)
		}
		return dictV(d), nil
	}
	return undefined, fmt.Errorf("unsupported kwarg type %v", reflect.TypeOf(x))
}
