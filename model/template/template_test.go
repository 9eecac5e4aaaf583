package template

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func render(t *testing.T, src string, c Conversation) (string, error) {
	t.Helper()
	tpl, err := Parse(src)
	if err != nil {
		return "", err
	}
	return tpl.Render(c)
}

func TestConversationVariables(t *testing.T) {
	tests := []struct {
		name, src, want string
		conv            Conversation
	}{
		{"tools nil is none", `{{ tools is none }}|{{ tools is defined }}`, "True|True", Conversation{}},
		{"tools empty is falsy list", `{{ tools is none }}|{{ tools | length }}|{{ 'y' if tools else 'n' }}`, "False|0|n", Conversation{Tools: []json.RawMessage{}}},
		{"tool key order kept", `{{ tools[0] | tojson }}`, `{"z": 1, "a": {"y": [1.0, 2]}}`, Conversation{Tools: []json.RawMessage{json.RawMessage(`{"z":1,"a":{"y":[1.0,2]}}`)}}},
		{"special tokens", `[{{ bos_token }}][{{ eos_token is defined }}]`, "[<s>][False]", Conversation{BOSToken: "<s>"}},
		{"generation prompt", `{{ add_generation_prompt }}`, "True", Conversation{AddGenerationPrompt: true}},
		{"null content", `{{ messages[0].content is none }}|{{ messages[0].name is defined }}`, "True|False", Conversation{Messages: []Message{{Role: "assistant"}}}},
		{"arguments object becomes mapping", `{{ messages[0].tool_calls[0].function.arguments.city }}|{{ messages[0].tool_calls[0].id }}`, "Oslo|c1",
			Conversation{Messages: []Message{{Role: "assistant", ToolCalls: []ToolCall{{ID: "c1", Type: "function", Function: FunctionCall{Name: "w", Arguments: `{"city": "Oslo"}`}}}}}}},
		{"arguments non-object stay text", `{{ messages[0].tool_calls[0].function.arguments | tojson }}`, `"[1, 2]"`,
			Conversation{Messages: []Message{{Role: "assistant", ToolCalls: []ToolCall{{Function: FunctionCall{Name: "w", Arguments: `[1, 2]`}}}}}}},
		{"kwargs", `{{ flag }}|{{ obj.b }}|{{ obj | tojson }}|{{ n + 1 }}`, `True|2|{"b": 2, "a": 1}|4`,
			Conversation{Kwargs: map[string]any{"flag": true, "obj": json.RawMessage(`{"b": 2, "a": 1}`), "n": 3}}},
		{"strftime_now uses Now", `{{ strftime_now('%d %b %Y') }}`, "05 Jan 2025", Conversation{Now: time.Date(2025, 1, 5, 0, 0, 0, 0, time.UTC)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := render(t, tc.src, tc.conv)
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := render(t, `x`, Conversation{Kwargs: map[string]any{"messages": 1}}); !errors.Is(err, ErrConversation) {
		t.Errorf("reserved kwarg: %v", err)
	}
	if _, err := render(t, `x`, Conversation{Tools: []json.RawMessage{json.RawMessage(`{`)}}); !errors.Is(err, ErrConversation) {
		t.Errorf("bad tool JSON: %v", err)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		src  string
		want error
	}{
		{`{% if %}`, ErrSyntax},
		{`{{ x | nosuchfilter }}`, ErrSyntax},
		{`{{ x is nosuchtest }}`, ErrSyntax},
		{`{% for x in y %}`, ErrSyntax},
		{`{% break %}`, ErrSyntax},
		{`{{ 'unterminated }}`, ErrSyntax},
		{`{# open comment`, ErrSyntax},
		{`{{ (1 }}`, ErrSyntax},
		{`{% include 'x' %}`, ErrUnsupported},
		{`{% for x in y recursive %}{% endfor %}`, ErrUnsupported},
		{`{{ u.attr }}`, ErrUndefined},
		{`{{ u + 1 }}`, ErrUndefined},
		{`{{ u() }}`, ErrUndefined},
		{`{{ [].append(1) }}`, ErrSecurity},
		{`{{ {}.update({}) }}`, ErrSecurity},
		{`{{ namespace(_x=1) }}`, ErrSecurity},
		{`{{ 'a' + 1 }}`, ErrRender},
		{`{{ 1 / 0 }}`, ErrRender},
		{`{{ range(100001) }}`, ErrRender},
		{`{{ 9223372036854775807 + 1 }}`, ErrUnsupported},
	}
	for _, tc := range tests {
		_, err := render(t, tc.src, Conversation{})
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: error %v, want %v", tc.src, err, tc.want)
		}
	}
	_, err := render(t, `{{ raise_exception('Roles must alternate: ' ~ 3) }}`, Conversation{})
	var raised *RaisedError
	if !errors.As(err, &raised) || raised.Message != "Roles must alternate: 3" {
		t.Errorf("raise_exception: %v", err)
	}
}

// TestLimits runs hostile templates: each must stop with ErrLimit (or a
// clear error) quickly instead of hanging, exhausting memory or the stack.
func TestLimits(t *testing.T) {
	lim := Limits{MaxOutputBytes: 1 << 20, MaxSteps: 2_000_000, MaxCallDepth: 32}
	tests := []struct {
		name, src string
		want      error
	}{
		{"nested loops", `{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}`, ErrLimit},
		{"output", `{% for a in range(100000) %}{{ 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' }}{% endfor %}`, ErrLimit},
		{"string doubling", `{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}`, ErrLimit},
		{"list doubling", `{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}`, ErrLimit},
		{"repeat", `{{ 'x' * 9223372036854775807 }}`, ErrLimit},
		{"list repeat", `{{ [1, 2] * 4611686018427387904 }}`, ErrLimit},
		{"recursion", `{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}`, ErrLimit},
		{"deep value", `{% set ns = namespace(x=[]) %}{% for i in range(5000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}`, nil},
		{"deep tojson", `{% set ns = namespace(x=[]) %}{% for i in range(5000) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x | tojson }}`, nil},
		{"pad", `{{ 'a'.center(9223372036854775807) }}`, ErrLimit},
		{"huge slice step", `{{ [1, 2, 3][::9223372036854775807] }}|{{ [1, 2, 3][::-9223372036854775807 - 1] }}`, nil},
		{"huge range", `{{ range(-9223372036854775807 - 1, 9223372036854775807, 9223372036854775807) | length }}`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tpl, err := ParseWithLimits(tc.src, lim)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = tpl.Render(Conversation{})
			if time.Since(start) > 10*time.Second {
				t.Errorf("took %v", time.Since(start))
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
		})
	}
	deep := strings.Repeat("(", 5000) + "1" + strings.Repeat(")", 5000)
	for _, src := range []string{"{{ " + deep + " }}", "{{ " + strings.Repeat("[", 5000) + " }}", "{{ " + strings.Repeat("not ", 5000) + "x }}",
		"{{ " + strings.Repeat("-", 5000) + "1 }}", strings.Repeat("{% if x %}", 5000)} {
		if _, err := Parse(src); !errors.Is(err, ErrSyntax) {
			t.Errorf("deep nesting: %v", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tpl, err := Parse(`{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tpl.RenderContext(ctx, Conversation{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled render: %v", err)
	}
}

func TestConcurrentRender(t *testing.T) {
	tpl, err := Parse(`{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{{ m.content }}{% endfor %}{{ ns.n }}`)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			c := Conversation{Messages: []Message{{Role: "user", Content: Text(strings.Repeat("a", i))}}}
			got, err := tpl.Render(c)
			if want := strings.Repeat("a", i) + "1"; err != nil || got != want {
				t.Errorf("got %q, %v; want %q", got, err, want)
			}
		})
	}
	wg.Wait()
}

func TestReferences(t *testing.T) {
	tpl, err := Parse(`{{ bos_token }}{% for m in messages %}{{ m['tool_calls'] }}{% endfor %}`)
	if err != nil {
		t.Fatal(err)
	}
	if !tpl.References("bos_token") || tpl.References("eos_token") || tpl.UsesTools() || !tpl.HandlesToolCalls() {
		t.Errorf("references: bos %v eos %v tools %v tool_calls %v", tpl.References("bos_token"), tpl.References("eos_token"), tpl.UsesTools(), tpl.HandlesToolCalls())
	}
}

func TestPyFloatRepr(t *testing.T) {
	for f, want := range map[float64]string{1: "1.0", 0.1: "0.1", 1e16: "1e+16", 1e15: "1000000000000000.0", 1e-5: "1e-05",
		0.0001: "0.0001", 123456789.125: "123456789.125", 1.5e300: "1.5e+300", -2.5e-7: "-2.5e-07", 1e22: "1e+22"} {
		if got := pyFloatRepr(f); got != want {
			t.Errorf("pyFloatRepr(%v) = %q, want %q", f, got, want)
		}
	}
}
