package template

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrMalformedToolCall marks a <tool_call> block that ParseToolCalls could
// not turn into a call: unterminated, not one JSON object, no name, or
// arguments that are neither an object nor a string holding one.
var ErrMalformedToolCall = errors.New("template: malformed tool call")

// Hermes tool-call markup.
const (
	ToolCallOpen      = "<tool_call>"
	ToolCallClose     = "</tool_call>"
	toolResponseOpen  = "<tool_response>"
	toolResponseClose = "</tool_response>"
)

// ParseToolCalls extracts the Hermes-style tool calls of a model's answer:
// each <tool_call>{"name": ..., "arguments": {...}}</tool_call> block (with
// any whitespace around the JSON; "parameters" is accepted for
// "arguments"; arguments may be an object or a string holding one; absent
// or null arguments are {}). Each call has Type "function", no ID (the
// caller assigns ids) and Arguments re-serialised as compact JSON with the
// keys in their original order. content is the text outside the
// well-formed blocks, trimmed of surrounding whitespace; a text without
// any <tool_call> is returned unchanged. Malformed blocks stay in content
// verbatim and are reported together in err (each wraps
// ErrMalformedToolCall); the well-formed calls are returned regardless.
func ParseToolCalls(text string) (content string, calls []ToolCall, err error) {
	if !strings.Contains(text, ToolCallOpen) {
		return text, nil, nil
	}
	var rest strings.Builder
	var errs []error
	pos, block := 0, 0
	for {
		i := strings.Index(text[pos:], ToolCallOpen)
		if i < 0 {
			rest.WriteString(text[pos:])
			break
		}
		i += pos
		rest.WriteString(text[pos:i])
		bodyStart := i + len(ToolCallOpen)
		end := strings.Index(text[bodyStart:], ToolCallClose)
		next := strings.Index(text[bodyStart:], ToolCallOpen)
		if end < 0 || (next >= 0 && next < end) {
			stop := len(text)
			if next >= 0 {
				stop = bodyStart + next
			}
			errs = append(errs, fmt.Errorf("%w: block %d: no %s", ErrMalformedToolCall, block, ToolCallClose))
			rest.WriteString(text[i:stop])
			pos = stop
			block++
			continue
		}
		end += bodyStart
		call, perr := parseToolCallBody(text[bodyStart:end])
		if perr != nil {
			errs = append(errs, fmt.Errorf("%w: block %d: %v", ErrMalformedToolCall, block, perr))
			rest.WriteString(text[i : end+len(ToolCallClose)])
		} else {
			calls = append(calls, call)
		}
		pos = end + len(ToolCallClose)
		block++
	}
	return strings.TrimSpace(rest.String()), calls, errors.Join(errs...)
}

func parseToolCallBody(body string) (ToolCall, error) {
	var obj map[string]json.RawMessage
	dec := json.NewDecoder(strings.NewReader(body))
	if err := dec.Decode(&obj); err != nil {
		return ToolCall{}, fmt.Errorf("not a JSON object: %v", err)
	}
	if strings.TrimSpace(body[dec.InputOffset():]) != "" {
		return ToolCall{}, fmt.Errorf("text after the JSON object")
	}
	if obj == nil {
		return ToolCall{}, fmt.Errorf("not a JSON object")
	}
	var name string
	if err := json.Unmarshal(obj["name"], &name); err != nil || strings.TrimSpace(name) == "" {
		return ToolCall{}, fmt.Errorf("no function name")
	}
	args, ok := obj["arguments"]
	if !ok {
		args = obj["parameters"]
	}
	compact, err := compactArguments(args)
	if err != nil {
		return ToolCall{}, err
	}
	return ToolCall{Type: "function", Function: FunctionCall{Name: name, Arguments: compact}}, nil
}

// compactArguments returns the arguments object as compact JSON.
func compactArguments(raw json.RawMessage) (string, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return "{}", nil
	}
	if t[0] == '"' {
		var s string
		if err := json.Unmarshal(t, &s); err != nil {
			return "", fmt.Errorf("arguments: %v", err)
		}
		t = bytes.TrimSpace([]byte(s))
		if len(t) == 0 {
			return "{}", nil
		}
	}
	if t[0] != '{' || !json.Valid(t) {
		return "", fmt.Errorf("arguments are not a JSON object")
	}
	var b bytes.Buffer
	if err := json.Compact(&b, t); err != nil {
		return "", fmt.Errorf("arguments: %v", err)
	}
	return b.String(), nil
}

// HermesToolsPrompt renders offered tools the Hermes way, for the system
// prompt of a ChatML model whose template ignores tools: the instruction,
// each tool as JSON (Python json.dumps layout) on its own line inside
// <tools></tools>, and the <tool_call> answer format. It is the text
// Qwen2.5's template writes after the system prompt.
func HermesToolsPrompt(tools []json.RawMessage) (string, error) {
	var b strings.Builder
	b.WriteString("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
		"You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
	for i, raw := range tools {
		v, err := decodeJSON(raw)
		if err != nil {
			return "", fmt.Errorf("%w: tool %d: %v", ErrConversation, i, err)
		}
		s, err := jsonDumps(v, jsonOpts{itemSep: ", ", keySep: ": ", finiteOnly: true})
		if err != nil {
			return "", fmt.Errorf("%w: tool %d: %v", ErrConversation, i, err)
		}
		b.WriteString("\n")
		b.WriteString(s)
	}
	b.WriteString("\n</tools>\n\nFor each function call, return a json object with function name and arguments " +
		"within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>")
	return b.String(), nil
}

// HermesToolCall renders one call as a <tool_call> block, the form
// ParseToolCalls reads back: arguments that are a JSON object are written
// as Python's json.dumps would, other text as a JSON string. Numbers
// beyond float64 (1e400) are refused rather than written as Infinity.
func HermesToolCall(c ToolCall) (string, error) {
	name, err := jsonDumps(strV(c.Function.Name), jsonOpts{})
	if err != nil {
		return "", err
	}
	args, err := jsonDumps(argumentsValue(c.Function.Arguments), jsonOpts{itemSep: ", ", keySep: ": ", finiteOnly: true})
	if err != nil {
		return "", fmt.Errorf("%w: arguments: %v", ErrConversation, err)
	}
	return ToolCallOpen + "\n{\"name\": " + name + ", \"arguments\": " + args + "}\n" + ToolCallClose, nil
}

// ApplyHermesTools rewrites a conversation for a template that ignores
// tools (see Template.UsesTools): the tools prompt (HermesToolsPrompt) is
// appended to the system message after a blank line, or becomes the
// system message (after defaultSystem and a blank line, when given; pass
// the template's DefaultSystemPrompt to keep it); assistant tool
// calls become <tool_call> blocks after the content; tool results become
// user messages of <tool_response> blocks, consecutive results merged.
// The result has no Tools. With a ChatML template this yields the same
// prompt as Qwen2.5's tools-aware template.
func ApplyHermesTools(c Conversation, defaultSystem string) (Conversation, error) {
	out := c
	out.Tools = nil
	msgs := make([]Message, 0, len(c.Messages)+1)
	start := 0
	if len(c.Tools) > 0 {
		prompt, err := HermesToolsPrompt(c.Tools)
		if err != nil {
			return Conversation{}, err
		}
		switch {
		case len(c.Messages) > 0 && c.Messages[0].Role == "system":
			sys := c.Messages[0]
			text := ""
			if sys.Content != nil {
				text = *sys.Content
			}
			sys.Content = Text(text + "\n\n" + prompt)
			msgs = append(msgs, sys)
			start = 1
		case defaultSystem != "":
			msgs = append(msgs, Message{Role: "system", Content: Text(defaultSystem + "\n\n" + prompt)})
		default:
			msgs = append(msgs, Message{Role: "system", Content: Text(prompt)})
		}
	}
	mergeable := false // the last message is a user turn of tool responses
	for _, m := range c.Messages[start:] {
		switch {
		case m.Role == "assistant" && len(m.ToolCalls) > 0:
			var parts []string
			if m.Content != nil && *m.Content != "" {
				parts = append(parts, *m.Content)
			}
			for _, call := range m.ToolCalls {
				s, err := HermesToolCall(call)
				if err != nil {
					return Conversation{}, err
				}
				parts = append(parts, s)
			}
			msgs = append(msgs, Message{Role: "assistant", Content: Text(strings.Join(parts, "\n"))})
			mergeable = false
		case m.Role == "tool":
			text := ""
			if m.Content != nil {
				text = *m.Content
			}
			block := toolResponseOpen + "\n" + text + "\n" + toolResponseClose
			if mergeable {
				last := &msgs[len(msgs)-1]
				last.Content = Text(*last.Content + "\n" + block)
			} else {
				msgs = append(msgs, Message{Role: "user", Content: Text(block)})
			}
			mergeable = true
		default:
			msgs = append(msgs, m)
			mergeable = false
		}
	}
	out.Messages = msgs
	return out, nil
}

// DefaultSystemPrompt returns the system prompt the template writes when a
// conversation has none (SmolLM2's and Qwen2.5's templates inject one),
// found by rendering a one-turn conversation with and without a system
// message. ok is false when the template writes none or it cannot be told
// apart. Pass it to ApplyHermesTools to keep it once tools add a system
// message.
func (t *Template) DefaultSystemPrompt() (prompt string, ok bool) {
	user := Message{Role: "user", Content: Text("\uE000user\uE001")}
	without, err := t.Render(Conversation{Messages: []Message{user}})
	if err != nil {
		return "", false
	}
	const mark = "\uE000system\uE001"
	with, err := t.Render(Conversation{Messages: []Message{{Role: "system", Content: Text(mark)}, user}})
	if err != nil {
		return "", false
	}
	i := strings.Index(with, mark)
	if i < 0 {
		return "", false
	}
	pre, post := with[:i], with[i+len(mark):]
	if len(without) < len(pre)+len(post) || !strings.HasPrefix(without, pre) || !strings.HasSuffix(without, post) {
		return "", false
	}
	d := without[len(pre) : len(without)-len(post)]
	if d == "" {
		return "", false
	}
	check, err := t.Render(Conversation{Messages: []Message{{Role: "system", Content: Text(d)}, user}})
	if err != nil || check != without {
		return "", false
	}
	return d, true
}
