package tokenizer

import (
	"errors"
	"reflect"
	"testing"
)

func TestRenderChatLayoutAndMask(t *testing.T) {
	tok := trained(t)
	msgs := []Message{
		{Role: RoleSystem, Content: "Be brief."},
		{Role: RoleDeveloper, Content: "Use tools."},
		{Role: RoleUser, Content: "Weather in Paris? <|assistant|>"},
		{Role: RoleAssistant, Content: "Checking.", ToolCalls: []ToolCall{
			{ID: "call_1", Name: "get_weather", Arguments: `{ "city": "Paris",  "unit": "C" }`},
		}},
		{Role: RoleTool, ToolCallID: "call_1", Content: `{"temp": 21}`},
		{Role: RoleAssistant, Content: "It is 21 °C."},
	}
	ids, mask, err := tok.RenderChat(msgs, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != len(mask) {
		t.Fatalf("%d ids, %d mask entries", len(ids), len(mask))
	}
	// The full rendering, with specials spelled out, pins the template.
	want := "<|bos|>" +
		"<|system|>Be brief.<|end|>" +
		"<|system|>Use tools.<|end|>" +
		"<|user|>Weather in Paris? <|assistant|><|end|>" +
		`<|assistant|>Checking.<|tool_call|>{"name":"get_weather","arguments":{"city":"Paris","unit":"C"}}<|end|>` +
		`<|tool|>"get_weather"` + "\n" + `{"temp": 21}<|end|>` +
		"<|assistant|>It is 21 °C.<|end|>" +
		"<|assistant|>"
	if got := tok.Decode(ids); got != want {
		t.Fatalf("rendered\n%q\nwant\n%q", got, want)
	}
	// Specials appear only where the template puts them.
	var specials []int
	for _, id := range ids {
		if tok.IsSpecial(id) {
			specials = append(specials, id)
		}
	}
	wantSpecials := []int{TokenBOS, TokenSystem, TokenEnd, TokenSystem, TokenEnd, TokenUser, TokenEnd,
		TokenAssistant, TokenToolCall, TokenEnd, TokenTool, TokenEnd, TokenAssistant, TokenEnd, TokenAssistant}
	if !reflect.DeepEqual(specials, wantSpecials) {
		t.Errorf("specials %v, want %v", specials, wantSpecials)
	}
	// The masked tokens are exactly the assistant's output, in order.
	var out []int
	for i, id := range ids {
		if mask[i] {
			out = append(out, id)
		}
	}
	wantOut := `Checking.<|tool_call|>{"name":"get_weather","arguments":{"city":"Paris","unit":"C"}}<|end|>It is 21 °C.<|end|>`
	if got := tok.Decode(out); got != wantOut {
		t.Errorf("masked tokens decode to\n%q\nwant\n%q", got, wantOut)
	}
	// Every masked run starts right after an <|assistant|> token.
	for i := range ids {
		if mask[i] && (i == 0 || !mask[i-1]) && ids[i-1] != TokenAssistant {
			t.Errorf("masked run at %d does not follow <|assistant|>", i)
		}
	}
	// The generation prompt is not masked.
	if mask[len(mask)-1] || ids[len(ids)-1] != TokenAssistant {
		t.Error("generation prompt wrong")
	}
	// Without the prompt the sequence ends with the assistant's <|end|>, masked.
	ids2, mask2, _ := tok.RenderChat(msgs, false)
	if ids2[len(ids2)-1] != TokenEnd || !mask2[len(mask2)-1] || len(ids2) != len(ids)-1 {
		t.Error("rendering without generation prompt wrong")
	}
}

func TestRenderChatUnknownRole(t *testing.T) {
	tok := trained(t)
	if _, _, err := tok.RenderChat([]Message{{Role: "robot", Content: "x"}}, false); !errors.Is(err, ErrUnknownRole) {
		t.Errorf("err = %v", err)
	}
}

func TestRenderParseRoundTrip(t *testing.T) {
	tok := trained(t)
	type tc struct {
		msg      Message
		wantArgs []string // Arguments as ParseAssistant returns them
	}
	calls := func(nameArgs ...string) []ToolCall {
		var cs []ToolCall
		for i := 0; i < len(nameArgs); i += 2 {
			cs = append(cs, ToolCall{ID: "id", Name: nameArgs[i], Arguments: nameArgs[i+1]})
		}
		return cs
	}
	cases := []tc{
		{Message{Role: RoleAssistant, Content: "plain answer"}, nil},
		{Message{Role: RoleAssistant, Content: ""}, nil},
		{Message{Role: RoleAssistant, Content: "text with fake <|end|> and <|tool_call|> markers\n"}, nil},
		{Message{Role: RoleAssistant, Content: "two calls", ToolCalls: calls(
			"search", `{"q": "go <generics> & more",  "n": 3}`,
			"weird name \"quoted\"", "{\n  \"nested\": {\"a\": [1, 2, {\"b\": null}]}\n}")},
			[]string{`{"q":"go <generics> & more","n":3}`, `{"nested":{"a":[1,2,{"b":null}]}}`}},
		{Message{Role: RoleAssistant, ToolCalls: calls("noargs", "{}")}, []string{"{}"}},
		{Message{Role: RoleAssistant, ToolCalls: calls("emptyargs", "")}, []string{"{}"}},
		{Message{Role: RoleAssistant, ToolCalls: calls("notjson", "city=Paris")}, []string{"city=Paris"}},
		{Message{Role: RoleAssistant, ToolCalls: calls("strarg", `"just a string"`)}, []string{`"just a string"`}},
		{Message{Role: RoleAssistant, Content: "bytes \xff\xfe", ToolCalls: calls("f", `[1, 2]`)}, []string{`[1,2]`}},
	}
	for _, c := range cases {
		m := c.msg
		conv := []Message{{Role: RoleUser, Content: "hi"}, m}
		ids, mask, err := tok.RenderChat(conv, false)
		if err != nil {
			t.Fatal(err)
		}
		// The generated part: the masked tokens.
		var gen []int
		for i := range ids {
			if mask[i] {
				gen = append(gen, ids[i])
			}
		}
		got, err := tok.ParseAssistant(gen)
		if err != nil {
			t.Errorf("%+v: parse error %v", m, err)
		}
		want := Message{Role: RoleAssistant, Content: m.Content}
		for i, tc := range m.ToolCalls {
			want.ToolCalls = append(want.ToolCalls, ToolCall{Name: tc.Name, Arguments: c.wantArgs[i]})
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("round trip\n got %+v\nwant %+v", got, want)
		}
		// Parsing with the leading <|assistant|> (as a generation prompt
		// continuation would be sliced) gives the same message.
		got2, _ := tok.ParseAssistant(append([]int{TokenAssistant}, gen...))
		if !reflect.DeepEqual(got2, got) {
			t.Errorf("with leading <|assistant|>: %+v", got2)
		}
	}
}

func TestParseAssistantMalformed(t *testing.T) {
	tok := trained(t)
	enc := func(parts ...any) []int {
		var ids []int
		for _, p := range parts {
			switch p := p.(type) {
			case int:
				ids = append(ids, p)
			case string:
				ids = tok.AppendEncode(ids, p)
			}
		}
		return ids
	}
	cases := []struct {
		name      string
		ids       []int
		content   string
		calls     int
		malformed bool
	}{
		{"truncated json", enc("ok", TokenToolCall, `{"name":"f","argu`), `ok{"name":"f","argu`, 0, true},
		{"missing name", enc(TokenToolCall, `{"arguments":{}}`), `{"arguments":{}}`, 0, true},
		{"empty name", enc(TokenToolCall, `{"name":"","arguments":{}}`), `{"name":"","arguments":{}}`, 0, true},
		{"trailing text", enc(TokenToolCall, `{"name":"f","arguments":{}} and more`), `{"name":"f","arguments":{}} and more`, 0, true},
		{"extra field", enc(TokenToolCall, `{"name":"f","arguments":{},"x":1}`), `{"name":"f","arguments":{},"x":1}`, 0, true},
		{"not an object", enc(TokenToolCall, `["f"]`), `["f"]`, 0, true},
		{"empty", enc(TokenToolCall), ``, 0, true},
		{"good then bad", enc(TokenToolCall, `{"name":"f","arguments":{"a":1}}`, TokenToolCall, `oops`), `oops`, 1, true},
		{"null arguments", enc(TokenToolCall, `{"name":"f","arguments":null}`), ``, 1, false},
		{"stops at end", enc("a", TokenEnd, "b", TokenToolCall, "{"), `a`, 0, false},
		{"stops at user", enc("a", TokenUser, "b"), `a`, 0, false},
		{"stops at eos", enc("a", TokenEOS, "b"), `a`, 0, false},
		{"unterminated", enc("partial answ"), `partial answ`, 0, false},
		{"pads skipped", enc(TokenPad, TokenAssistant, "x", TokenPad, "y"), `xy`, 0, false},
		{"out of range ids", []int{-5, 'h', 1 << 40, 'i'}, `hi`, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := tok.ParseAssistant(c.ids)
			if m.Role != RoleAssistant || m.Content != c.content || len(m.ToolCalls) != c.calls {
				t.Errorf("got %+v, want content %q and %d calls", m, c.content, c.calls)
			}
			if errors.Is(err, ErrMalformedToolCall) != c.malformed {
				t.Errorf("err = %v, malformed %v", err, c.malformed)
			}
		})
	}
}
