package template

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// refCase is one render given to both this package and the Python
// reference (testdata/render_reference.py); the JSON field names are the
// script's.
type refCase struct {
	Name                string                     `json:"name"`
	TemplateFile        string                     `json:"template_file,omitempty"` // under testdata; Template holds its text
	Template            string                     `json:"template"`
	Messages            []Message                  `json:"messages"`
	Tools               []json.RawMessage          `json:"tools"`
	AddGenerationPrompt bool                       `json:"add_generation_prompt"`
	BOSToken            string                     `json:"bos_token,omitempty"`
	EOSToken            string                     `json:"eos_token,omitempty"`
	Kwargs              map[string]json.RawMessage `json:"kwargs,omitempty"`
	Now                 string                     `json:"now"`
}

// refResult is the reference's answer for one case.
type refResult struct {
	OK    bool   `json:"ok"`
	Text  string `json:"text"`
	Error string `json:"error"`
}

const refNow = "2026-03-07T09:05:02"

func (c refCase) conversation() (Conversation, error) {
	now, err := time.ParseInLocation("2006-01-02T15:04:05", c.Now, time.Local)
	if err != nil {
		return Conversation{}, err
	}
	conv := Conversation{
		Messages: c.Messages, Tools: c.Tools, AddGenerationPrompt: c.AddGenerationPrompt,
		BOSToken: c.BOSToken, EOSToken: c.EOSToken, Now: now,
	}
	if len(c.Kwargs) > 0 {
		conv.Kwargs = map[string]any{}
		for k, v := range c.Kwargs {
			conv.Kwargs[k] = v
		}
	}
	return conv, nil
}

// renderGo renders c with this package, as a refResult.
func renderGo(c refCase) refResult {
	t, err := Parse(c.Template)
	if err != nil {
		return refResult{Error: err.Error()}
	}
	conv, err := c.conversation()
	if err != nil {
		return refResult{Error: err.Error()}
	}
	out, err := t.Render(conv)
	if err != nil {
		return refResult{Error: err.Error()}
	}
	return refResult{OK: true, Text: out}
}

// chatTemplates are the templates under testdata with the special tokens
// their checkpoints declare.
var chatTemplates = []struct{ file, bos, eos string }{
	{"smollm2-135m-instruct.jinja", "<|im_start|>", "<|im_end|>"},
	{"qwen2.5-instruct.jinja", "<|endoftext|>", "<|im_end|>"},
	{"llama3-style.jinja", "<|begin_of_text|>", "<|eot_id|>"},
	{"mistral-style.jinja", "<s>", "</s>"},
}

var (
	texts = []string{
		"Hello!", "What's the weather in Paris today?", "  leading and trailing spaces  ",
		"multi\nline\n\ntext\n", "unicode: héllo wörld — 日本語 😀 ½", `quotes "double" and 'single' and \backslash`,
		"", "<b>tags</b> & ampersands", "tab\tseparated\tvalues", `json-like {"a": 1, "b": [true, null]}`,
		"Thanks, that helps.", "Can you compute 2*(3+4)?", "\u2028line separator and \x7f delete",
	}
	toolDefs = []string{
		`{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city.", "parameters": {"type": "object", "properties": {"location": {"type": "string", "description": "City name, e.g. \"Paris\""}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["location"]}}}`,
		`{"type": "function", "function": {"name": "search", "description": "Search the web — returns snippets.", "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "max_results": {"type": "integer", "default": 5, "minimum": 1, "maximum": 50}}, "required": ["query"]}}}`,
		`{"type": "function", "function": {"name": "calculator", "description": "Evaluate an arithmetic expression <safely> & exactly.", "parameters": {"type": "object", "properties": {"expression": {"type": "string"}, "precision": {"type": "number", "minimum": 0.5, "maximum": 1e10}}, "required": ["expression"]}, "return": {"type": "number"}}}`,
		`{"type": "function", "function": {"name": "now", "description": "Current time; no arguments.", "parameters": {"type": "object", "properties": {}}}}`,
	}
	toolArgs = map[string][]string{
		"get_weather": {`{"location": "Paris", "unit": "celsius"}`, `{"location": "São Paulo"}`, ` {"location":"Zürich","unit":"fahrenheit"} `},
		"search":      {`{"query": "日本 news", "max_results": 3}`, `{"query": "quotes \" and \\ backslashes"}`},
		"calculator":  {`{"expression": "2*(3+4)", "precision": 0.1, "exact": true, "extra": null}`, `{"expression": "1/3", "nested": {"a": [1, 2.5, -0.0, 1e300]}}`},
		"now":         {`{}`, `not json at all`},
	}
	toolResults = []string{
		`{"temperature": 21.5, "condition": "sunny"}`, "42", "No results found.",
		`{"items": ["a", "b"], "total": 2}`, "Error: timeout after 30s", "  padded result  ", "日本語の結果",
	}
)

// conversations returns n varied conversations for the parity test: system
// prompt present or absent, one to four turns, tools offered or not, tool
// calls with arguments, tool results, empty content and unicode.
func conversations(seed uint64, n int) []refCase {
	r := rand.New(rand.NewPCG(seed, 7))
	pick := func(xs []string) string { return xs[r.IntN(len(xs))] }
	var out []refCase
	for i := range n {
		var c refCase
		c.Now = refNow
		var offered []string
		if i%3 != 0 {
			k := 1 + r.IntN(len(toolDefs))
			perm := r.Perm(len(toolDefs))[:k]
			sort.Ints(perm)
			for _, j := range perm {
				c.Tools = append(c.Tools, json.RawMessage(toolDefs[j]))
				var d struct {
					Function struct{ Name string } `json:"function"`
				}
				_ = json.Unmarshal([]byte(toolDefs[j]), &d)
				offered = append(offered, d.Function.Name)
			}
		}
		if i%4 == 1 {
			c.Tools = []json.RawMessage{}
		}
		if i%2 == 0 {
			c.Messages = append(c.Messages, Message{Role: "system", Content: Text(pick([]string{
				"You are a helpful assistant.", "Answer briefly.\nUse metric units.", "  Sei un assistente. ✓  ", ""}))})
		}
		turns := 1 + r.IntN(4)
		callN := 0
		for t := range turns {
			c.Messages = append(c.Messages, Message{Role: "user", Content: Text(pick(texts))})
			last := t == turns-1
			if last && i%5 != 4 {
				c.AddGenerationPrompt = true
				break
			}
			if len(offered) > 0 && r.IntN(2) == 0 {
				k := 1
				if r.IntN(3) == 0 {
					k = 2
				}
				am := Message{Role: "assistant"}
				switch r.IntN(3) {
				case 0:
					am.Content = Text("Let me check that.")
				case 1:
					am.Content = Text("")
				}
				var ids []string
				for range k {
					name := offered[r.IntN(len(offered))]
					callN++
					id := fmt.Sprintf("call%06dx%d", i, callN)
					ids = append(ids, id)
					am.ToolCalls = append(am.ToolCalls, ToolCall{ID: id, Type: "function",
						Function: FunctionCall{Name: name, Arguments: pick(toolArgs[name])}})
				}
				c.Messages = append(c.Messages, am)
				for _, id := range ids {
					c.Messages = append(c.Messages, Message{Role: "tool", ToolCallID: id, Content: Text(pick(toolResults))})
				}
			}
			c.Messages = append(c.Messages, Message{Role: "assistant", Content: Text(pick(texts))})
		}
		switch i % 16 {
		case 11:
			// Two user turns in a row: templates that check alternation raise.
			c.Messages = append(c.Messages, Message{Role: "user", Content: Text("And one more thing.")})
			c.AddGenerationPrompt = true
		case 13:
			// A role most templates do not know.
			c.Messages = append(c.Messages[:len(c.Messages):len(c.Messages)], Message{Role: "developer", Content: Text("Be terse.")})
		}
		out = append(out, c)
	}
	return out
}

// parityCases is every template × the generated conversations.
func parityCases(perTemplate int) ([]refCase, error) {
	var out []refCase
	for ti, ct := range chatTemplates {
		src, err := os.ReadFile(filepath.Join("testdata", ct.file))
		if err != nil {
			return nil, err
		}
		for i, c := range conversations(uint64(ti+1), perTemplate) {
			c.Name = fmt.Sprintf("%s/%02d", strings.TrimSuffix(ct.file, ".jinja"), i)
			c.Template = string(src)
			c.TemplateFile = ct.file
			c.BOSToken, c.EOSToken = ct.bos, ct.eos
			if ct.file == "llama3-style.jinja" && i%2 == 1 {
				c.Kwargs = map[string]json.RawMessage{"date_string": json.RawMessage(`"26 Jul 2024"`)}
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// featureCases exercise the Jinja semantics chat templates lean on, one
// small template each, rendered with the variables in kwargs.
func featureCases() []refCase {
	kw := `{"s": "  Hello, World  ", "n": 7, "f": 2.5, "xs": [3, 1, 2], "d": {"b": 1, "a": [1, 2.0, null], "c": {"x": "é"}},
	       "m": {"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "f", "arguments": {"k": "v"}}}]},
	       "u8": "日本語😀", "empty": "", "none": null, "big": 1e16, "tiny": 1e-05, "neg": -3, "t": true,
	       "people": [{"name": "bo", "age": 30}, {"name": "Al", "age": 25}, {"name": "cy", "age": 30}]}`
	templates := []string{
		// output and printing
		`{{ s }}|{{ n }}|{{ f }}|{{ none }}|{{ t }}|{{ undefined_var }}|{{ big }}|{{ tiny }}|{{ 1.0 }}|{{ 3/2 }}|{{ 4/2 }}`,
		`{{ xs }}|{{ d }}|{{ (1,) }}|{{ (1, 'a') }}|{{ ['it\'s', "q\"", 'both\'"'] }}|{{ [none, true, 1.5] }}`,
		`{{ m }}`,
		`{{ u8 }}|{{ u8|length }}|{{ u8[1] }}|{{ u8[::-1] }}|{{ u8[1:3] }}`,
		// whitespace control, trim_blocks, lstrip_blocks
		"  {% if true %}\n  x\n  {% endif %}\n  y{# c #}\n  z\n",
		"a\n  {%- if true %}\n  b  \n  {%+ if true %}c{% endif %}\n{% endif -%}\n  d {{- ' e ' -}} f\n",
		"{% for i in xs %}\n  {{ i }}\n{% endfor %}\n{%- raw %}{{ not rendered }}{% endraw %}\n  {#- comment -#}  end",
		"{{ 'a' }}\n{{ 'b' }}\r\n{%- if true %}\r\n c\r\n{%- endif %}\n\n",
		"line\n    {% set x = 1 %}\n    {{ x }}\n\t{% if x %}tab{% endif %}\n",
		// loops
		`{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}{{ loop.length }}:{{ loop.previtem }}/{{ loop.nextitem }};{% endfor %}`,
		`{% for x in xs if x > 1 %}{{ x }}{{ loop.length }}{% else %}none{% endfor %}|{% for x in [] %}x{% else %}empty{% endfor %}`,
		`{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|{% for k in d %}{{ k }}{% endfor %}|{% for c in 'abc' %}{{ c }}-{% endfor %}`,
		`{% for x in xs %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}`,
		`{% for x in xs %}{{ loop.cycle('a', 'b') }}{% endfor %}|{% for p in people %}{% if loop.changed(p.age) %}{{ p.age }}{% endif %}{% endfor %}`,
		`{% for i in range(3) %}{% for j in range(i) %}{{ i }}{{ j }}{{ loop.index }} {% endfor %}{% endfor %}`,
		// scoping and namespace
		`{% for i in [1,2] %}{% set y = i %}{{ y }}{% endfor %}[{{ y }}]{% if true %}{% set z = 5 %}{% endif %}{{ z }}`,
		`{% set ns = namespace(total=0, names=[]) %}{% for p in people %}{% set ns.total = ns.total + p.age %}{% set ns.names = ns.names + [p.name] %}{% endfor %}{{ ns.total }}{{ ns.names }}{{ ns }}`,
		`{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c = 1, 2 %}{{ c }}{% set block %}x{{ n }}y{% endset %}{{ block }}{% set up | upper %}abc{% endset %}{{ up }}`,
		`{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('bo') }}{{ greet('al', punct='?') }}{{ greet(name='cy') }}{{ greet() }}`,
		`{% with a = 1, b = n %}{{ a + b }}{% endwith %}{{ a }}|{% filter upper %}loud {{ s }}{% endfilter %}`,
		// expressions and operators
		`{{ 1 + 2 * 3 }}{{ (1 + 2) * 3 }}{{ -2 ** 2 }}{{ 2 ** 3 ** 2 }}{{ 7 // 2 }}{{ -7 // 2 }}{{ -7 % 3 }}{{ 7.5 // 2 }}{{ 2 ** -1 }}{{ 10 / 4 }}`,
		`{{ 'ab' * 3 }}{{ [1] * 3 }}{{ 'a' ~ 1 ~ none ~ undefined_var ~ 2.0 }}{{ [1, 2] + [3] }}{{ 'x' + 'y' }}{{ n - neg }}{{ f * 2 }}`,
		`{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}{{ 1 == 1.0 }}{{ true == 1 }}{{ 'a' != 'b' }}{{ xs == [3, 1, 2] }}{{ (1, 2) == [1, 2] }}{{ d == d }}{{ none == none }}`,
		`{{ 'a' in 'cat' }}{{ 2 in xs }}{{ 'b' in d }}{{ 'z' not in d }}{{ 5 not in xs }}{{ 'x' in undefined_var }}`,
		`{{ true and 'yes' }}|{{ false or 'fallback' }}|{{ none or 0 or '' }}|{{ not none }}|{{ 'a' if n > 5 else 'b' }}|{{ 'c' if n > 50 }}|`,
		`{{ xs[0] }}{{ xs[-1] }}{{ xs[5] }}|{{ xs[1:] }}{{ xs[:-1] }}{{ xs[::-1] }}{{ xs[::2] }}{{ xs[5:] }}|{{ d.a[1] }}{{ d['c']['x'] }}{{ d.c.x }}{{ d.missing }}{{ none.attr }}`,
		`{{ m.tool_calls[0].function.arguments }}{{ m.content is none }}{{ m.name is defined }}{{ m['role'] }}{{ m.get('content', 'dflt') }}{{ m.get('nope', 'dflt') }}{{ m.get('nope') }}`,
		`{{ {'a': 1, 'b': [1, 2]} }}{{ {'k': 'v'}.k }}{{ [1, 2,] }}{{ {'a': 1,} }}{{ ('x', 'y')[1] }}{{ "abc" "def" }}{{ 0x1f }}{{ 1_000 }}{{ 1e3 }}{{ .5 if false else 0.5 }}`,
		// tests
		`{{ n is number }}{{ f is float }}{{ n is integer }}{{ t is boolean }}{{ s is string }}{{ d is mapping }}{{ xs is iterable }}{{ xs is sequence }}{{ none is none }}{{ undefined_var is undefined }}{{ n is defined }}`,
		`{{ n is odd }}{{ n is even }}{{ 9 is divisibleby 3 }}{{ n is gt 5 }}{{ n is lessthan 5 }}{{ n is eq 7 }}{{ 'a' is in 'abc' }}{{ 'ABC' is upper }}{{ 'abc' is lower }}{{ n is not string }}{{ t is true }}{{ none is false }}`,
		// filters
		`{{ s|trim }}|{{ s|upper }}|{{ s|lower }}|{{ s|title }}|{{ 'hello wORLD-x (ab) [cd'|title }}|{{ s|capitalize }}|{{ 'a-b_c'|replace('-', '+') }}|{{ 'aaa'|replace('a', 'b', 2) }}|{{ 'xyx'|trim('x') }}`,
		`{{ xs|length }}{{ d|length }}{{ s|length }}{{ xs|count }}{{ xs|first }}{{ xs|last }}{{ xs|sort }}{{ xs|sort(reverse=true) }}{{ xs|sum }}{{ xs|max }}{{ xs|min }}{{ xs|join(', ') }}{{ xs|join }}`,
		`{{ people|map(attribute='name')|join(',') }}|{{ people|sort(attribute='age')|map(attribute='name')|list }}|{{ people|selectattr('age', 'equalto', 30)|map(attribute='name')|list }}|{{ people|rejectattr('age', 'gt', 26)|list }}|{{ ['b', 'A', 'a', 'B']|unique|list }}|{{ ['b', 'A', 'c']|sort }}`,
		`{{ xs|map('string')|join('-') }}|{{ [0, 1, '', 'x', none]|select|list }}|{{ [1, 2, 3, 4]|select('odd')|list }}|{{ [1, 2, 3, 4]|reject('even')|list }}|{{ xs|list }}|{{ 'ab'|list }}|{{ d|list }}`,
		`{{ d|items|list }}|{{ d|dictsort }}|{{ {'b': 2, 'A': 1, 'c': 0}|dictsort(by='value') }}|{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ xs|tojson(indent=0) }}|{{ d|tojson(sort_keys=true) }}`,
		`{{ u8|tojson }}|{{ u8|tojson(ensure_ascii=true) }}|{{ "q\"\\\n\t\u0001\u2028/<>&"|tojson }}|{{ [1.0, 1e16, 1e-5, -0.0, 123456789.125, 0.1]|tojson }}|{{ d|tojson(separators=(',', ':')) }}|{{ none|tojson }}|{{ 'x'|tojson }}`,
		`{{ '42'|int }}{{ '4.7'|int }}{{ 'x'|int }}{{ 'x'|int(5) }}{{ 3.9|int }}{{ '0x1A'|int(0, 16) }}{{ '2.5'|float }}{{ 'x'|float }}{{ n|float }}{{ -3|abs }}{{ 2.5|round }}{{ 3.5|round }}{{ 2.675|round(2) }}{{ 2.1|round(0, 'ceil') }}{{ 7|round }}`,
		`{{ undefined_var|default('dflt') }}|{{ none|default('dflt') }}|{{ ''|default('dflt', true) }}|{{ empty|d('d2', boolean=true) }}|{{ n|string }}{{ none|string }}|{{ xs|reverse|list }}|{{ 'abc'|reverse }}`,
		"{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb\\n\\nc'|indent(2, true) }}|{{ 'a\\nb\\n\\nc'|indent(2, first=true, blank=true) }}|{{ 'a\\nb'|indent('> ') }}|{{ 'one two  three'|wordcount }}|{{ '<a href=\"x\">&'|e }}|{{ 'ab'|center(6) }}|",
		`{{ '%s-%d-%5.2f-%x-%r-%%' % ('a', 3, 3.14159, 255, 'q') }}|{{ '%(a)s+%(b)s' % {'a': 1, 'b': 'two'} }}|{{ '%s and %s'|format('x', 'y') }}|{{ '%03d'|format(7) }}|{{ '{} {}'.format(1, 'a') }}{{ '{0}{0}'.format('z') }}{{ '{x}'.format(x=1) }}`,
		// string methods
		`{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ 'xxhixx'.strip('x') }}|{{ s.split() }}|{{ 'a,b,,c'.split(',') }}|{{ 'a,b,,c'.split(',', 1) }}|{{ 'a b c'.rsplit(' ', 1) }}|{{ 'l1\nl2\r\nl3'.splitlines() }}`,
		`{{ s.startswith('  He') }}{{ s.endswith(('x', '  ')) }}{{ s.upper() }}{{ s.lower() }}{{ "they're bill's".title() }}{{ 'hELLO'.capitalize() }}{{ 'abc'.replace('b', '') }}{{ 'abcabc'.find('c') }}{{ 'abcabc'.rfind('c') }}{{ 'abc'.find('z') }}{{ 'banana'.count('a') }}`,
		`{{ ', '.join(['a', 'b']) }}{{ '12'.isdigit() }}{{ 'ab'.isalpha() }}{{ '  '.isspace() }}{{ 'AB'.isupper() }}{{ 'ab'.islower() }}{{ 'ab'.center(6, '*') }}{{ 'ab'.ljust(4, '.') }}{{ 'ab'.rjust(4) }}{{ 'prefix_x'.removeprefix('prefix_') }}{{ u8.upper() }}`,
		// dict and list methods
		`{{ d.keys()|list }}{{ d.values()|list }}{{ d.items()|list }}{{ d.get('b') }}{{ d.get('zz', 9) }}{{ xs.index(1) }}{{ xs.count(3) }}{{ d.copy() }}`,
		// globals
		`{{ range(5)|list }}{{ range(2, 10, 3)|list }}{{ range(5, 0, -2)|list }}{{ dict(a=1, b='x') }}{{ dict({'z': 1}, y=2) }}{% set j = joiner('; ') %}{% for x in xs %}{{ j() }}{{ x }}{% endfor %}{% set c = cycler('a', 'b') %}{{ c.next() }}{{ c.next() }}{{ c.next() }}{{ c.current }}`,
		`{{ strftime_now('%Y-%m-%d %H:%M:%S %b %B %a %A %d %-d %y %j %p %I') }}`,
		`{%- if messages is defined and tools is none and not add_generation_prompt %}{{ documents }}ok{% endif %}`,
		// scoping, precedence and printing corner cases
		`{% set outer = 'o' %}{% macro m() %}{{ outer }}{{ n }}{% for i in [1] %}{{ loop.index }}{% endfor %}{% endmacro %}{{ m() }}{% for i in xs %}{% if i > 1 %}{% set inner = i %}{% endif %}{{ inner }}{% endfor %}`,
		`{% set ns = namespace(v=[]) %}{% macro add(x) %}{% set ns.v = ns.v + [x] %}{% endmacro %}{{ add(1) }}{{ add('b') }}{{ ns.v }}`,
		`{{ not 1 in [1] }}{{ not 1 == 2 }}{{ 1 == 1 == 1 }}{{ - 1 | abs }}{{ -xs|length }}{{ 'ab' | first }}{{ 2 * 3 ~ 4 }}{{ 1 + 2 ~ 3 }}{{ true ~ none }}{{ 1 if 0 else 2 if 0 else 3 }}`,
		`{{ {1: 'a', 2.5: none, true: 'x'} }}{{ {'k': [1, {'z': (2,)}]} }}{{ 'é' < 'z' }}{{ 'Z' < 'a' }}{{ [1, 2] < [1, 3] }}{{ '%s' % none }}{{ '%s|%s' % ('a', [1]) }}{{ 'a' ~ 1.0 }}`,
		`{% if n > 10 %}a{% elif n > 5 %}b{% elif n > 1 %}c{% else %}d{% endif %}{% if undefined_var is not defined and n %}e{% endif %}{% if m.tool_calls %}f{% endif %}{% if empty %}g{% endif %}`,
		"{%- for x in xs -%}\n   {{ x }}\n{%- endfor %}\n\t\t{% if true %}\n\t\tTAB\n\t\t{% endif %}\n  {{- 'v' -}}  \n{{ 'multi\\nline' }}{%\n  if true\n%}M{% endif\n%}",
		"{% for m in [1, 2] %}\n{% if m == 1 %}\n    one\n{% else %}\n    two\n{% endif %}\n{% endfor %}\ntail   \n",
		"<s>{%- if true %} x {% endif -%} </s>\n  {%- set y = 1 +%}\n{{ y }}{#- note +#}\n end",
		`{% set ns = namespace() %}{% set ns.a = 1 %}{{ ns.a }}{{ ns.b }}{% set d2 = dict(x=1) %}{{ d2.x }}{{ d2['x'] }}{{ (d2.items() | list)[0][1] }}{{ d | attr('b') }}`,
		`{{ people | selectattr('name', 'in', ['bo', 'cy']) | map(attribute='age') | sum }}{{ people | map(attribute='missing', default='dflt') | list }}{{ people | sort(attribute='age,name') | map(attribute='name') | join }}{{ people | max(attribute='age') }}`,
		`{{ xs | map('int') | map('string') | list }}{{ ['a', 'b'] | map('upper') | join }}{{ [[1, 2], [3]] | map('length') | list }}{{ s | replace(' ', '') | lower | trim }}{{ (xs | list)[1:] }}{{ xs | tojson(indent='\t') }}`,
		`{{ "It's" }}{{ 'say "hi"' }}{{ ['\\', '\x41\u00e9\U0001F600', '\101\7'] }}{{ 'a\qb' }}`,
		// errors that must match
		`{{ raise_exception('boom: ' ~ n) }}`,
		`{{ 'a' + 1 }}`,
		`{{ m.content + 'x' }}`,
		`{{ undefined_var.attr }}`,
		`{{ undefined_var + 1 }}`,
		`{{ xs.append(4) }}`,
		`{{ d.update({'z': 1}) }}`,
		`{{ 1 / 0 }}`,
		`{{ 'a' < 1 }}`,
		`{{ none|length }}`,
		`{{ range(100001)|length }}`,
		`{% for x in 5 %}{% endfor %}`,
		`{{ undefined_var|tojson }}`,
		`{% set ns = namespace(_private=1) %}`,
		`{% if %}`,
		`{{ 1 + }}`,
		`{% for x in xs %}`,
		`{{ x|nosuchfilter }}`,
		`{% endif %}`,
		`{{ 'abc'.index('z') }}`,
		`{% set x = 5 %}{% set x.y = 1 %}`,
		`{{ [1, 2][1.5] }}|{{ none[0] }}|{{ 'abc'['x'] }}`,
		`{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}`,
	}
	var out []refCase
	for i, src := range templates {
		kwargs := map[string]json.RawMessage{}
		var all map[string]json.RawMessage
		if err := json.Unmarshal([]byte(kw), &all); err != nil {
			panic(err)
		}
		for k, v := range all {
			kwargs[k] = v
		}
		out = append(out, refCase{Name: fmt.Sprintf("feature/%02d", i), Template: src, Messages: []Message{}, Kwargs: kwargs, Now: refNow})
	}
	return out
}
