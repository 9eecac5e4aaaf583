package gateway

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestResponsesText(t *testing.T) {
	e := newEnv(t, nil)
	resp, b := e.post("/v1/responses", keyA, map[string]any{"model": "citizen", "input": "hello", "instructions": "be brief",
		"metadata": map[string]string{"topic": "t"}})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	var out responseOut
	decodeJSON(t, b, &out)
	iid, ok := InteractionID(out.ID)
	if !ok || !strings.HasPrefix(out.ID, "resp_") || out.Object != "response" || out.Status != "completed" || out.Model != "citizen@v1" {
		t.Fatalf("response: %s", b)
	}
	if len(out.Output) != 1 || out.Output[0].Type != "message" || out.Output[0].Content[0].Text != "echo: hello" {
		t.Fatalf("output: %s", b)
	}
	if out.Usage == nil || out.Usage.OutputTokens != len("echo: hello") || out.Usage.TotalTokens != out.Usage.InputTokens+out.Usage.OutputTokens {
		t.Fatalf("usage: %s", b)
	}
	// Recorded like a chat completion: instructions first, as a system message.
	_, rec := e.interaction(iid)
	if len(rec.Messages) != 2 || rec.Messages[0].Role != "system" || rec.Messages[0].Content != "be brief" ||
		rec.Messages[1].Content != "hello" || rec.Metadata["topic"] != "t" || rec.Choices[0].Message.Content != "echo: hello" {
		t.Fatalf("record: %+v", rec)
	}
	// The response id works where an interaction id does.
	if resp, b := e.post("/v1/feedback", keyA, map[string]any{"interaction_id": out.ID, "text": "good"}); resp.StatusCode != 200 {
		t.Fatalf("feedback by response id: %d %s", resp.StatusCode, b)
	}
	// max_output_tokens cuts the answer: incomplete.
	_, b = e.post("/v1/responses", keyA, map[string]any{"model": "citizen", "input": "hello", "max_output_tokens": 3})
	decodeJSON(t, b, &out)
	if out.Status != "incomplete" || out.IncompleteDetails == nil || out.IncompleteDetails.Reason != "max_output_tokens" || out.Output[0].Content[0].Text != "ech" {
		t.Fatalf("truncated: %s", b)
	}
}

func TestResponsesTools(t *testing.T) {
	e := newEnv(t, nil)
	tool := map[string]any{"type": "function", "name": "get_weather", "parameters": map[string]any{
		"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}}
	resp, b := e.post("/v1/responses", keyA, map[string]any{"model": "citizen", "input": "weather?", "tools": []any{tool}, "tool_choice": "required"})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	var out responseOut
	decodeJSON(t, b, &out)
	if len(out.Output) != 1 || out.Output[0].Type != "function_call" || out.Output[0].Name != "get_weather" || out.Output[0].CallID == "" ||
		*out.Output[0].Arguments != `{"city":"x"}` {
		t.Fatalf("call: %s", b)
	}
	call := out.Output[0]
	// The conversation goes on with the call and its output as items.
	resp, b = e.post("/v1/responses", keyA, map[string]any{"model": "citizen", "tools": []any{tool}, "input": []any{
		map[string]any{"role": "user", "content": "weather?"},
		map[string]any{"type": "function_call", "call_id": call.CallID, "name": call.Name, "arguments": *call.Arguments},
		map[string]any{"type": "function_call_output", "call_id": call.CallID, "output": "sunny"},
	}})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	decodeJSON(t, b, &out)
	if out.Output[0].Content[0].Text != "tool said: sunny" {
		t.Fatalf("after the tool: %s", b)
	}
	iid, _ := InteractionID(out.ID)
	_, rec := e.interaction(iid)
	if len(rec.Messages) != 3 || rec.Messages[1].Role != "assistant" || len(rec.Messages[1].ToolCalls) != 1 ||
		rec.Messages[2].Role != "tool" || rec.Messages[2].ToolCallID != call.CallID {
		t.Fatalf("record: %+v", rec.Messages)
	}
}

func TestResponsesStream(t *testing.T) {
	e := newEnv(t, nil)
	resp, b := e.post("/v1/responses", keyA, map[string]any{"model": "citizen", "input": "stream me", "stream": true})
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	var types []string
	var text string
	var done responseOut
	for i, d := range sse(t, b) {
		var ev struct {
			Type     string      `json:"type"`
			Seq      int         `json:"sequence_number"`
			Delta    string      `json:"delta"`
			Response responseOut `json:"response"`
		}
		decodeJSON(t, []byte(d), &ev)
		if ev.Seq != i {
			t.Fatalf("event %d has sequence_number %d", i, ev.Seq)
		}
		types = append(types, ev.Type)
		if ev.Type == "response.output_text.delta" {
			text += ev.Delta
		}
		if ev.Type == "response.completed" {
			done = ev.Response
		}
	}
	want := "response.created response.in_progress response.output_item.added response.content_part.added"
	if got := strings.Join(types, " "); !strings.HasPrefix(got, want) ||
		!strings.HasSuffix(got, "response.output_text.done response.content_part.done response.output_item.done response.completed") {
		t.Fatalf("events: %s", got)
	}
	if text != "echo: stream me" || done.Status != "completed" || done.Output[0].Content[0].Text != text || done.Usage == nil || done.Usage.OutputTokens != len(text) {
		t.Fatalf("text %q, final %+v", text, done)
	}
	iid, _ := InteractionID(done.ID)
	if _, rec := e.interaction(iid); !rec.Stream || rec.Choices[0].Message.Content != text {
		t.Fatalf("record: %+v", rec)
	}
}

func TestResponsesRefusals(t *testing.T) {
	e := newEnv(t, nil)
	for _, c := range []struct {
		body   string
		status int
		param  string
	}{
		{`{"model":"citizen"}`, 400, "input"},
		{`{"model":"citizen","input":"x","previous_response_id":"resp_1"}`, 400, "previous_response_id"},
		{`{"model":"citizen","input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}`, 400, "input[0].content[0].type"},
		{`{"model":"citizen","input":"x","tools":[{"type":"web_search"}]}`, 400, "tools[0].type"},
		{`{"model":"citizen","input":"x","bogus":1}`, 400, ""},
		{`{"model":"citizen","input":[{"role":"robot","content":"x"}]}`, 400, "input[0].role"},
		{`{"model":"gpt-nope","input":"x"}`, 404, "model"},
		{`{"model":"citizen","input":"x"}{}`, 400, ""},
		{`{"model":"citizen","input":7}`, 400, "input"},
	} {
		resp, b := e.post("/v1/responses", keyA, c.body)
		if resp.StatusCode != c.status {
			t.Errorf("%s: %d %s", c.body, resp.StatusCode, b)
			continue
		}
		if got := apiErrOf(t, b); c.param != "" && (got.Param == nil || *got.Param != c.param) {
			t.Errorf("%s: param %v, want %s", c.body, got.Param, c.param)
		}
	}
	if n := len(e.interactions()); n != 0 {
		t.Fatalf("refused requests recorded %d interactions", n)
	}
}

func FuzzDecodeResponses(f *testing.F) {
	for _, s := range []string{`{"model":"citizen","input":"hi"}`, `{"model":"citizen","input":[{"role":"user","content":[{"type":"input_text","text":"a"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"o"}],"tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"f"},"text":{"format":{"type":"json_schema","name":"s","schema":{"type":"object"}}}}`, `{"input":[]}`, `[]`, `{"model":"citizen","input":"x","stream":true}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, chat, err := decodeResponses(b)
		if err != nil {
			if err.Status != 400 || err.Message == "" {
				t.Fatalf("%q: %+v", b, err)
			}
			return
		}
		if !json.Valid(chat) {
			t.Fatalf("%q: invalid chat body %q", b, chat)
		}
		// The translation is a chat request; decoding it never panics.
		_, _ = DecodeRequest(chat)
	})
}
