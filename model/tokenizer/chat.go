package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Roles of chat messages.
const (
	RoleSystem    = "system"
	RoleDeveloper = "developer"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// ToolCall is one function call made by the assistant. Arguments is a JSON
// text (normally an object).
type ToolCall struct {
	ID        string `json:"id,omitempty"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Message is one chat turn. ToolCalls is used by assistant messages;
// ToolCallID and Name by tool messages.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
}

// RenderChat renders msgs with the chat template (see the package
// documentation) and returns the token ids and, for each id, whether the
// assistant produced it (the tokens to train on). With addGenerationPrompt
// the result ends with ⟨assistant⟩, ready for the model to continue. It fails
// with ErrUnknownRole for a role other than system, developer, user,
// assistant or tool.
func (t *Tokenizer) RenderChat(msgs []Message, addGenerationPrompt bool) ([]int, []bool, error) {
	ids := make([]int, 0, 64)
	mask := make([]bool, 0, 64)
	add := func(assistant bool, toks ...int) {
		ids = append(ids, toks...)
		for range toks {
			mask = append(mask, assistant)
		}
	}
	addText := func(assistant bool, s string) {
		n := len(ids)
		ids = t.AppendEncode(ids, s)
		for range ids[n:] {
			mask = append(mask, assistant)
		}
	}
	callNames := make(map[string]string)
	add(false, TokenBOS)
	for i, m := range msgs {
		switch m.Role {
		case RoleSystem, RoleDeveloper:
			add(false, TokenSystem)
			addText(false, m.Content)
			add(false, TokenEnd)
		case RoleUser:
			add(false, TokenUser)
			addText(false, m.Content)
			add(false, TokenEnd)
		case RoleAssistant:
			add(false, TokenAssistant)
			addText(true, m.Content)
			for _, c := range m.ToolCalls {
				if c.ID != "" {
					callNames[c.ID] = c.Name
				}
				add(true, TokenToolCall)
				addText(true, renderCall(c))
			}
			add(true, TokenEnd)
		case RoleTool:
			add(false, TokenTool)
			name := m.Name
			if name == "" {
				name = callNames[m.ToolCallID]
			}
			if name != "" {
				addText(false, jsonString(name)+"\n")
			}
			addText(false, m.Content)
			add(false, TokenEnd)
		default:
			return nil, nil, fmt.Errorf("%w: %q (message %d)", ErrUnknownRole, m.Role, i)
		}
	}
	if addGenerationPrompt {
		add(false, TokenAssistant)
	}
	return ids, mask, nil
}

// renderCall returns {"name":NAME,"arguments":ARGS} as the template defines.
func renderCall(c ToolCall) string {
	return `{"name":` + jsonString(c.Name) + `,"arguments":` + canonicalArgs(c.Arguments) + `}`
}

func canonicalArgs(s string) string {
	trimmed := strings.TrimSpace(s)
	if trimmed == "" {
		return "{}"
	}
	if trimmed[0] != '"' && json.Valid([]byte(trimmed)) {
		var b bytes.Buffer
		if json.Compact(&b, []byte(trimmed)) == nil {
			return b.String()
		}
	}
	return jsonString(s)
}

func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // cannot fail for a string
	return strings.TrimSuffix(b.String(), "\n")
}

// ParseAssistant turns generated tokens back into an assistant message. ids
// may start with ⟨assistant⟩ (and ⟨bos⟩/⟨pad⟩, which are skipped); parsing
// stops at the first ⟨end⟩, ⟨eos⟩ or turn-starting token (⟨bos⟩, ⟨system⟩,
// ⟨user⟩, ⟨assistant⟩, ⟨tool⟩), or at the end of ids. Text before the first
// ⟨tool_call⟩ is the content; the text after each ⟨tool_call⟩ must be
// {"name":NAME,"arguments":ARGS} with a non-empty name and nothing else
// (white space aside). Arguments come back compacted (a JSON string ARGS
// comes back as its value, undoing RenderChat). Tool-call IDs are left
// empty for the caller to assign.
//
// It never fails to return a message: a malformed tool call is appended to
// the content as its text (without the ⟨tool_call⟩ marker) and the error,
// wrapping ErrMalformedToolCall, says so; the message is still usable.
func (t *Tokenizer) ParseAssistant(ids []int) (Message, error) {
	i := 0
	for i < len(ids) && (ids[i] == TokenBOS || ids[i] == TokenPad) {
		i++
	}
	if i < len(ids) && ids[i] == TokenAssistant {
		i++
	}
	var segs [][]int
	cur := []int{}
loop:
	for ; i < len(ids); i++ {
		switch ids[i] {
		case TokenEnd, TokenEOS, TokenBOS, TokenSystem, TokenUser, TokenAssistant, TokenTool:
			break loop
		case TokenPad:
		case TokenToolCall:
			segs = append(segs, cur)
			cur = []int{}
		default:
			cur = append(cur, ids[i])
		}
	}
	segs = append(segs, cur)

	msg := Message{Role: RoleAssistant}
	var content strings.Builder
	content.WriteString(t.Decode(segs[0]))
	var bad []string
	for _, seg := range segs[1:] {
		text := t.Decode(seg)
		c, ok := parseCall(text)
		if !ok {
			content.WriteString(text)
			bad = append(bad, text)
			continue
		}
		msg.ToolCalls = append(msg.ToolCalls, c)
	}
	msg.Content = content.String()
	if len(bad) > 0 {
		return msg, fmt.Errorf("%w: %d kept as text, first %q", ErrMalformedToolCall, len(bad), truncate(bad[0], 80))
	}
	return msg, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func parseCall(text string) (ToolCall, bool) {
	var raw struct {
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil || raw.Name == nil || *raw.Name == "" {
		return ToolCall{}, false
	}
	if strings.TrimSpace(text[dec.InputOffset():]) != "" {
		return ToolCall{}, false
	}
	if !strings.HasPrefix(strings.TrimSpace(text), "{") {
		return ToolCall{}, false
	}
	args := strings.TrimSpace(string(raw.Arguments))
	switch {
	case args == "" || args == "null":
		args = "{}"
	case args[0] == '"':
		var s string
		if json.Unmarshal(raw.Arguments, &s) != nil {
			return ToolCall{}, false
		}
		args = s
	default:
		var b bytes.Buffer
		if json.Compact(&b, raw.Arguments) != nil {
			return ToolCall{}, false
		}
		args = b.String()
	}
	return ToolCall{Name: *raw.Name, Arguments: args}, true
}

// StopIDs are the ids that end an assistant turn: ⟨end⟩ and ⟨eos⟩.
func (t *Tokenizer) StopIDs() []int { return []int{TokenEnd, TokenEOS} }

// ToolCallID is the id that opens a tool call in an assistant turn.
func (t *Tokenizer) ToolCallID() int { return TokenToolCall }

// BOS is the id that starts a sequence.
func (t *Tokenizer) BOS() int { return TokenBOS }

// Name is the tokenizer's kind and version, as recorded with each
// interaction.
func (t *Tokenizer) Name() string { return "citizen-bpe@" + t.Fingerprint() }
