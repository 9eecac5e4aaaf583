package template

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var fuzzLimits = Limits{MaxOutputBytes: 1 << 16, MaxSteps: 200_000, MaxCallDepth: 16}

func fuzzConversation(content string) Conversation {
	return Conversation{
		Messages: []Message{
			{Role: "system", Content: Text("sys")},
			{Role: "user", Content: Text(content)},
			{Role: "assistant", ToolCalls: []ToolCall{{ID: "call_123456789", Type: "function", Function: FunctionCall{Name: "f", Arguments: `{"a": [1, 2.5, null]}`}}}},
			{Role: "tool", ToolCallID: "call_123456789", Content: Text(`{"ok": true}`)},
		},
		Tools:               []json.RawMessage{json.RawMessage(toolDefs[0])},
		AddGenerationPrompt: true, BOSToken: "<s>", EOSToken: "</s>",
		Kwargs: map[string]any{"xs": json.RawMessage(`[3, 1, 2]`), "s": "text"},
	}
}

// FuzzParseRender parses arbitrary templates and renders the parsed ones:
// no panic, no hang (the limits bound every render), output within the
// limit, and a failed Parse returns no template.
func FuzzParseRender(f *testing.F) {
	for _, ct := range chatTemplates {
		src, err := os.ReadFile(filepath.Join("testdata", ct.file))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(src), "hello")
	}
	for _, c := range featureCases() {
		f.Add(c.Template, "x")
	}
	f.Fuzz(func(t *testing.T, src, content string) {
		tpl, err := ParseWithLimits(src, fuzzLimits)
		if err != nil {
			if tpl != nil {
				t.Fatal("Parse returned a template and an error")
			}
			return
		}
		out, err := tpl.Render(fuzzConversation(content))
		if err == nil && len(out) > fuzzLimits.MaxOutputBytes {
			t.Fatalf("output of %d bytes past the limit", len(out))
		}
	})
}

// FuzzParseToolCalls checks ParseToolCalls on arbitrary text: no panic,
// every call named with compact object arguments that survive a round
// trip through HermesToolCall, and text without <tool_call> untouched.
func FuzzParseToolCalls(f *testing.F) {
	f.Add("plain text")
	f.Add("Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call>")
	f.Add(`<tool_call>{"name": "f", "arguments": "{\"q\": 1}"}</tool_call><tool_call>{"name": "g"}</tool_call>`)
	f.Add(`<tool_call>{"name": "f", "arguments": {"a": </tool_call>`)
	f.Add(`<tool_call>{"name": "f", "arguments": {"big": 1e400, "n": -0, "i": 123456789012345678901}}</tool_call>`)
	f.Add(`<tool_call><tool_call>{"name":"x","parameters":{}}</tool_call></tool_call>`)
	f.Fuzz(func(t *testing.T, text string) {
		content, calls, err := ParseToolCalls(text)
		if !strings.Contains(text, ToolCallOpen) && (content != text || calls != nil || err != nil) {
			t.Fatalf("text without tool calls changed: %q %v %v", content, calls, err)
		}
		for _, c := range calls {
			if strings.TrimSpace(c.Function.Name) == "" || c.Type != "function" {
				t.Fatalf("bad call %+v", c)
			}
			var b bytes.Buffer
			if !strings.HasPrefix(c.Function.Arguments, "{") || json.Compact(&b, []byte(c.Function.Arguments)) != nil || b.String() != c.Function.Arguments {
				t.Fatalf("arguments not compact JSON object: %q", c.Function.Arguments)
			}
			block, err := HermesToolCall(c)
			if err != nil {
				if errors.Is(err, ErrConversation) {
					return // numbers beyond float64 cannot be written back
				}
				t.Fatal(err)
			}
			_, again, err := ParseToolCalls(block)
			if err != nil || len(again) != 1 || again[0].Function.Name != c.Function.Name {
				t.Fatalf("round trip of %+v: %v %v", c, again, err)
			}
			// Compared as the template sees them (Python's json.loads: the
			// last of duplicate keys wins, 1e700 is inf).
			x, errX := decodeJSON([]byte(c.Function.Arguments))
			y, errY := decodeJSON([]byte(again[0].Function.Arguments))
			if errX != nil || errY != nil || !equal(x, y, 0) {
				t.Fatalf("arguments changed in round trip: %q -> %q", c.Function.Arguments, again[0].Function.Arguments)
			}
		}
	})
}
