package template

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseToolCalls(t *testing.T) {
	call := func(name, args string) ToolCall {
		return ToolCall{Type: "function", Function: FunctionCall{Name: name, Arguments: args}}
	}
	tests := []struct {
		name, text, content string
		calls               []ToolCall
		malformed           int
	}{
		{name: "no calls", text: "  plain answer\n", content: "  plain answer\n"},
		{name: "one", text: "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>",
			calls: []ToolCall{call("get_weather", `{"location":"Paris","unit":"celsius"}`)}},
		{name: "content before and after", text: "Let me check.\n<tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call>\nDone.",
			content: "Let me check.\n\nDone.", calls: []ToolCall{call("f", `{}`)}},
		{name: "several with whitespace", text: "<tool_call>\n  {\"name\": \"a\", \"arguments\": {\"x\": 1}}  \n</tool_call>\n\n<tool_call>\r\n{\"name\": \"b\", \"arguments\": {\"y\": [1, 2.5, null], \"z\": {\"k\": \"日本\"}}}\n</tool_call>\n",
			calls: []ToolCall{call("a", `{"x":1}`), call("b", `{"y":[1,2.5,null],"z":{"k":"日本"}}`)}},
		{name: "arguments as JSON string", text: `<tool_call>{"name": "f", "arguments": "{\"q\": \"<b>&\"}"}</tool_call>`,
			calls: []ToolCall{call("f", `{"q":"<b>&"}`)}},
		{name: "parameters alias, key order kept", text: `<tool_call>{"name": "f", "parameters": {"z": 1, "a": 2}}</tool_call>`,
			calls: []ToolCall{call("f", `{"z":1,"a":2}`)}},
		{name: "missing and null arguments", text: `<tool_call>{"name": "f"}</tool_call><tool_call>{"name": "g", "arguments": null}</tool_call>`,
			calls: []ToolCall{call("f", `{}`), call("g", `{}`)}},
		{name: "unterminated", text: "ok <tool_call>{\"name\": \"f\", \"arguments\": {\"a\"", content: "ok <tool_call>{\"name\": \"f\", \"arguments\": {\"a\"", malformed: 1},
		{name: "unterminated then good", text: "<tool_call>{\"name\": \"f\"<tool_call>{\"name\": \"g\"}</tool_call>",
			content: "<tool_call>{\"name\": \"f\"", calls: []ToolCall{call("g", `{}`)}, malformed: 1},
		{name: "bad JSON kept in content", text: "<tool_call>not json</tool_call> <tool_call>{\"name\": \"g\"}</tool_call>",
			content: "<tool_call>not json</tool_call>", calls: []ToolCall{call("g", `{}`)}, malformed: 1},
		{name: "no name", text: `<tool_call>{"arguments": {}}</tool_call>`, content: `<tool_call>{"arguments": {}}</tool_call>`, malformed: 1},
		{name: "array arguments", text: `<tool_call>{"name": "f", "arguments": [1]}</tool_call>`, content: `<tool_call>{"name": "f", "arguments": [1]}</tool_call>`, malformed: 1},
		{name: "string arguments not JSON", text: `<tool_call>{"name": "f", "arguments": "x"}</tool_call>`, content: `<tool_call>{"name": "f", "arguments": "x"}</tool_call>`, malformed: 1},
		{name: "extra brace", text: `<tool_call>{"name": "f", "arguments": {}}}</tool_call>`, content: `<tool_call>{"name": "f", "arguments": {}}}</tool_call>`, malformed: 1},
		{name: "two objects", text: `<tool_call>{"name": "f"} {"name": "g"}</tool_call>`, content: `<tool_call>{"name": "f"} {"name": "g"}</tool_call>`, malformed: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			content, calls, err := ParseToolCalls(tc.text)
			if content != tc.content {
				t.Errorf("content %q, want %q", content, tc.content)
			}
			if !reflect.DeepEqual(calls, tc.calls) {
				t.Errorf("calls %+v, want %+v", calls, tc.calls)
			}
			n := 0
			if err != nil {
				n = strings.Count(err.Error(), ErrMalformedToolCall.Error())
				if !errors.Is(err, ErrMalformedToolCall) {
					t.Errorf("error %v does not wrap ErrMalformedToolCall", err)
				}
			}
			if n != tc.malformed {
				t.Errorf("%d malformed blocks reported (%v), want %d", n, err, tc.malformed)
			}
		})
	}
}

func TestHermesToolCallRoundTrip(t *testing.T) {
	for name, args := range toolArgs {
		for _, a := range args {
			in := ToolCall{ID: "call_1", Type: "function", Function: FunctionCall{Name: name, Arguments: a}}
			block, err := HermesToolCall(in)
			if err != nil {
				t.Fatal(err)
			}
			content, calls, err := ParseToolCalls("Sure.\n" + block)
			if argumentsValue(a).k != kDict {
				// Non-object arguments are written as a JSON string, which
				// ParseToolCalls rejects unless it holds an object.
				if err == nil {
					t.Errorf("%q: no error for non-object arguments", a)
				}
				continue
			}
			if err != nil || content != "Sure." || len(calls) != 1 {
				t.Fatalf("%q: content %q calls %v err %v", block, content, calls, err)
			}
			var want, got any
			_ = json.Unmarshal([]byte(a), &want)
			_ = json.Unmarshal([]byte(calls[0].Function.Arguments), &got)
			if calls[0].Function.Name != name || !reflect.DeepEqual(got, want) {
				t.Errorf("round trip of %s %s gave %+v", name, a, calls[0])
			}
		}
	}
}

// TestApplyHermesToolsMatchesQwen renders every generated conversation that
// offers tools twice: with Qwen2.5's tools-aware template, and with
// SmolLM2's plain ChatML template after ApplyHermesTools (given Qwen's
// default system prompt). Both prompts must be identical.
func TestApplyHermesToolsMatchesQwen(t *testing.T) {
	load := func(name string) *Template {
		src, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		tpl, err := Parse(string(src))
		if err != nil {
			t.Fatal(err)
		}
		return tpl
	}
	qwen, chatml := load("qwen2.5-instruct.jinja"), load("smollm2-135m-instruct.jinja")
	if !qwen.UsesTools() || !qwen.HandlesToolCalls() || chatml.UsesTools() || chatml.HandlesToolCalls() {
		t.Fatalf("tools detection: qwen %v/%v, smollm2 %v/%v", qwen.UsesTools(), qwen.HandlesToolCalls(), chatml.UsesTools(), chatml.HandlesToolCalls())
	}
	qwenDefault, ok := qwen.DefaultSystemPrompt()
	if !ok || qwenDefault != "You are Qwen, created by Alibaba Cloud. You are a helpful assistant." {
		t.Fatalf("Qwen's default system prompt: %q %v", qwenDefault, ok)
	}
	checked := 0
	for _, c := range conversations(99, 64) {
		if len(c.Tools) == 0 || !knownRoles(c.Messages) {
			continue
		}
		conv, err := c.conversation()
		if err != nil {
			t.Fatal(err)
		}
		want, err := qwen.Render(conv)
		if err != nil {
			t.Fatal(err)
		}
		applied, err := ApplyHermesTools(conv, qwenDefault)
		if err != nil {
			t.Fatal(err)
		}
		got, err := chatml.Render(applied)
		if err != nil {
			t.Fatal(err)
		}
		// SmolLM2's template writes no system default once a system message
		// exists, so the two differ only if the rewrite is wrong.
		if got != want {
			t.Fatalf("conversation differs\n got: %q\nwant: %q", got, want)
		}
		checked++
	}
	if checked < 20 {
		t.Fatalf("only %d conversations checked", checked)
	}
	t.Logf("%d conversations render identically", checked)
}

func knownRoles(ms []Message) bool {
	for _, m := range ms {
		switch m.Role {
		case "system", "user", "assistant", "tool":
		default:
			return false
		}
	}
	return true
}

func TestApplyHermesToolsWithoutSystem(t *testing.T) {
	tools := []json.RawMessage{json.RawMessage(`{"type": "function", "function": {"name": "f"}}`)}
	c := Conversation{Messages: []Message{{Role: "user", Content: Text("hi")}}, Tools: tools}
	for _, def := range []string{"", "Default."} {
		out, err := ApplyHermesTools(c, def)
		if err != nil {
			t.Fatal(err)
		}
		if out.Tools != nil || len(out.Messages) != 2 || out.Messages[0].Role != "system" {
			t.Fatalf("%+v", out)
		}
		sys := *out.Messages[0].Content
		if !strings.HasPrefix(sys, def) || !strings.Contains(sys, "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"f\"}}\n</tools>") {
			t.Errorf("system prompt %q", sys)
		}
		if def != "" && !strings.HasPrefix(sys, def+"\n\n# Tools") {
			t.Errorf("default system prompt not kept: %q", sys)
		}
	}
	if _, err := ApplyHermesTools(Conversation{Tools: []json.RawMessage{json.RawMessage(`{bad`)}}, ""); !errors.Is(err, ErrConversation) {
		t.Errorf("bad tool JSON: %v", err)
	}
}

func TestDefaultSystemPrompt(t *testing.T) {
	want := map[string]string{
		"smollm2-135m-instruct.jinja": "You are a helpful AI assistant named SmolLM, trained by Hugging Face",
		"qwen2.5-instruct.jinja":      "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",
		"llama3-style.jinja":          "",
		"mistral-style.jinja":         "",
	}
	for file, w := range want {
		src, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		tpl, err := Parse(string(src))
		if err != nil {
			t.Fatal(err)
		}
		got, ok := tpl.DefaultSystemPrompt()
		if got != w || ok != (w != "") {
			t.Errorf("%s: %q %v, want %q", file, got, ok, w)
		}
	}
}
