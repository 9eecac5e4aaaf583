package reflection

import (
	"encoding/json"
	"testing"

	"citizen/events"
)

func mustGrader(t *testing.T, s GraderSpec) Grader {
	t.Helper()
	g, err := NewGrader(s)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestGraders(t *testing.T) {
	weatherTool := events.Tool{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","required":["city"],"properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]}}}`)}
	tests := []struct {
		name    string
		spec    GraderSpec
		in      GradeInput
		applies bool
		score   float64
	}{
		{"exact pass", GraderSpec{Name: "g", Kind: "exact"}, GradeInput{Answer: " Paris\n", Metadata: map[string]string{"expected": "Paris"}}, true, 1},
		{"exact fail on case", GraderSpec{Name: "g", Kind: "exact"}, GradeInput{Answer: "paris", Metadata: map[string]string{"expected": "Paris"}}, true, 0},
		{"exact no reference", GraderSpec{Name: "g", Kind: "exact"}, GradeInput{Answer: "Paris"}, false, 0},
		{"normalized pass", GraderSpec{Name: "g", Kind: "normalized"}, GradeInput{Answer: "The answer: PARIS!", Metadata: map[string]string{"expected": "answer paris"}}, true, 1},
		{"normalized fail", GraderSpec{Name: "g", Kind: "normalized"}, GradeInput{Answer: "It is Paris.", Metadata: map[string]string{"expected": "Paris"}}, true, 0},
		{"normalized contains", GraderSpec{Name: "g", Kind: "normalized", Contains: true}, GradeInput{Answer: "It is Paris.", Metadata: map[string]string{"expected": "Paris"}}, true, 1},
		{"normalized contains too long", GraderSpec{Name: "g", Kind: "normalized", Contains: true}, GradeInput{Answer: "Paris, Lyon, Nice, Lille, Metz, Brest, Caen", Metadata: map[string]string{"expected": "Paris"}}, true, 0},
		{"correction as reference", GraderSpec{Name: "g", Kind: "normalized", Contains: true}, GradeInput{Answer: "30 days", Correction: "60 days"}, true, 0},
		{"custom reference key", GraderSpec{Name: "g", Kind: "exact", Reference: "gold"}, GradeInput{Answer: "B", Metadata: map[string]string{"gold": "B", "expected": "A"}}, true, 1},
		{"numeric pass", GraderSpec{Name: "g", Kind: "numeric", Tolerance: 0.01}, GradeInput{Answer: "6 x 7 = 42.004", Metadata: map[string]string{"expected": "42"}}, true, 1},
		{"numeric money", GraderSpec{Name: "g", Kind: "numeric"}, GradeInput{Answer: "Total: $1,240.00", Metadata: map[string]string{"expected": "1240"}}, true, 1},
		{"numeric relative", GraderSpec{Name: "g", Kind: "numeric", RelTolerance: 0.01}, GradeInput{Answer: "about 99.5", Metadata: map[string]string{"expected": "100"}}, true, 1},
		{"numeric fail", GraderSpec{Name: "g", Kind: "numeric", Tolerance: 0.01}, GradeInput{Answer: "41", Metadata: map[string]string{"expected": "42"}}, true, 0},
		{"numeric no number", GraderSpec{Name: "g", Kind: "numeric"}, GradeInput{Answer: "forty-two", Metadata: map[string]string{"expected": "42"}}, true, 0},
		{"numeric ref not a number", GraderSpec{Name: "g", Kind: "numeric"}, GradeInput{Answer: "42", Metadata: map[string]string{"expected": "n/a"}}, false, 0},
		{"regex", GraderSpec{Name: "g", Kind: "regex", Pattern: `^\d+$`}, GradeInput{Answer: "123"}, true, 1},
		{"regex negate", GraderSpec{Name: "g", Kind: "regex", Pattern: `(?i)as an ai`, Negate: true}, GradeInput{Answer: "As an AI I cannot"}, true, 0},
		{"json valid", GraderSpec{Name: "g", Kind: "json_valid"}, GradeInput{Answer: ` {"a":1} `}, true, 1},
		{"json invalid", GraderSpec{Name: "g", Kind: "json_valid"}, GradeInput{Answer: `{"a":1`}, true, 0},
		{"json trailing", GraderSpec{Name: "g", Kind: "json_valid"}, GradeInput{Answer: `{"a":1} extra`}, true, 0},
		{"json fenced refused", GraderSpec{Name: "g", Kind: "json_valid"}, GradeInput{Answer: "```json\n{\"a\":1}\n```"}, true, 0},
		{"json fenced allowed", GraderSpec{Name: "g", Kind: "json_valid", AllowFences: true}, GradeInput{Answer: "```json\n{\"a\":1}\n```"}, true, 1},
		{"json schema pass", GraderSpec{Name: "g", Kind: "json_schema", Schema: map[string]any{"type": "object", "required": []any{"a"}}}, GradeInput{Answer: `{"a":1}`}, true, 1},
		{"json schema fail", GraderSpec{Name: "g", Kind: "json_schema", Schema: map[string]any{"type": "object", "required": []any{"b"}}}, GradeInput{Answer: `{"a":1}`}, true, 0},
		{"tool valid", GraderSpec{Name: "g", Kind: "tool_call"}, GradeInput{Tools: []events.Tool{weatherTool}, ToolCalls: []events.ToolCall{{Name: "get_weather", Arguments: `{"city":"Oslo","unit":"c"}`}}}, true, 1},
		{"tool unknown", GraderSpec{Name: "g", Kind: "tool_call"}, GradeInput{Tools: []events.Tool{weatherTool}, ToolCalls: []events.ToolCall{{Name: "rm_rf", Arguments: `{}`}}}, true, 0},
		{"tool bad args", GraderSpec{Name: "g", Kind: "tool_call"}, GradeInput{Tools: []events.Tool{weatherTool}, ToolCalls: []events.ToolCall{{Name: "get_weather", Arguments: `{"unit":"k"}`}, {Name: "get_weather", Arguments: `{"city":"Oslo"}`}}}, true, 0.5},
		{"tool args not json", GraderSpec{Name: "g", Kind: "tool_call"}, GradeInput{Tools: []events.Tool{weatherTool}, ToolCalls: []events.ToolCall{{Name: "get_weather", Arguments: `city=Oslo`}}}, true, 0},
		{"tool no calls", GraderSpec{Name: "g", Kind: "tool_call"}, GradeInput{Tools: []events.Tool{weatherTool}}, false, 0},
		{"length ok", GraderSpec{Name: "g", Kind: "length", MaxWords: 5}, GradeInput{Answer: "one two three"}, true, 1},
		{"length over", GraderSpec{Name: "g", Kind: "length", MaxWords: 4}, GradeInput{Answer: "one two three four five six"}, true, 0.5},
		{"length under", GraderSpec{Name: "g", Kind: "length", MinChars: 10}, GradeInput{Answer: "12345"}, true, 0.5},
		{"format all", GraderSpec{Name: "g", Kind: "format", Checks: []string{"single_line", "plain_number"}}, GradeInput{Answer: "42"}, true, 1},
		{"format half", GraderSpec{Name: "g", Kind: "format", Checks: []string{"single_line", "no_markdown"}}, GradeInput{Answer: "**42**"}, true, 0.5},
		{"format lists", GraderSpec{Name: "g", Kind: "format", Checks: []string{"bullet_list", "numbered_list"}}, GradeInput{Answer: "- a\n- b\n1. x\n2. y"}, true, 1},
		{"verdict consistent no", GraderSpec{Name: "g", Kind: "verdict", YesWhen: "below"}, GradeInput{Question: "I bought a mug 45 days ago. Can I still return it?", Answer: "No, the refund window is 30 days."}, true, 1},
		{"verdict inconsistent no", GraderSpec{Name: "g", Kind: "verdict", YesWhen: "below"}, GradeInput{Question: "I bought a mug 45 days ago. Can I still return it?", Answer: "No, the refund window is 60 days."}, true, 0},
		{"verdict consistent yes", GraderSpec{Name: "g", Kind: "verdict", YesWhen: "below"}, GradeInput{Question: "It's been 45 days since I got my mug.", Answer: "Yes, the refund window is 60 days."}, true, 1},
		{"verdict inconsistent yes", GraderSpec{Name: "g", Kind: "verdict", YesWhen: "below"}, GradeInput{Question: "My mug arrived 80 days ago.", Answer: "Yes, the refund window is 60 days."}, true, 0},
		{"verdict negation", GraderSpec{Name: "g", Kind: "verdict", YesWhen: "below"}, GradeInput{Question: "My mug arrived 80 days ago.", Answer: "You cannot return it: the window is 60 days."}, true, 1},
		{"verdict repeats the question's number", GraderSpec{Name: "g", Kind: "verdict", YesWhen: "below"}, GradeInput{Question: "My mug arrived 45 days ago.", Answer: "Yes: 45 days is within our 60-day window."}, true, 1},
		{"verdict above", GraderSpec{Name: "g", Kind: "verdict", YesWhen: "above"}, GradeInput{Question: "Is an order of $80 shipped free?", Answer: "Yes, shipping is free over $50."}, true, 1},
		{"verdict no verdict", GraderSpec{Name: "g", Kind: "verdict", YesWhen: "below"}, GradeInput{Question: "My mug arrived 45 days ago.", Answer: "The refund window is 60 days."}, false, 0},
		{"verdict two numbers in the question", GraderSpec{Name: "g", Kind: "verdict", YesWhen: "below"}, GradeInput{Question: "I bought 2 mugs 45 days ago.", Answer: "No, the refund window is 30 days."}, false, 0},
		{"verdict two numbers in the answer", GraderSpec{Name: "g", Kind: "verdict", YesWhen: "below"}, GradeInput{Question: "My mug arrived 45 days ago.", Answer: "No, it is 30 days, or 60 for members."}, false, 0},
		{"verdict same number", GraderSpec{Name: "g", Kind: "verdict", YesWhen: "below"}, GradeInput{Question: "My mug arrived 30 days ago.", Answer: "Yes, the refund window is 30 days."}, false, 0},
		{"verdict no question", GraderSpec{Name: "g", Kind: "verdict", YesWhen: "below"}, GradeInput{Answer: "No, the refund window is 30 days."}, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := mustGrader(t, tt.spec)
			in := tt.in
			res, ok := g.Grade(&in)
			if ok != tt.applies {
				t.Fatalf("applies=%v want %v (%+v)", ok, tt.applies, res)
			}
			if ok && res.Score != tt.score {
				t.Errorf("score %v want %v (%+v)", res.Score, tt.score, res)
			}
			if ok && (res.Name != "g" || res.Version == "" || res.Weight != 1) {
				t.Errorf("result %+v", res)
			}
		})
	}
}

func TestNewGraderRejects(t *testing.T) {
	for _, s := range []GraderSpec{
		{Kind: "exact"},
		{Name: "g", Kind: "nope"},
		{Name: "g", Kind: "regex"},
		{Name: "g", Kind: "json_schema"},
		{Name: "g", Kind: "length", MinWords: 5, MaxWords: 2},
		{Name: "g", Kind: "format", Checks: []string{"sparkly"}},
		{Name: "g", Kind: "exact", Weight: -1},
	} {
		if _, err := NewGrader(s); err == nil {
			t.Errorf("accepted %+v", s)
		}
	}
}

func TestParseNumbers(t *testing.T) {
	got := ParseNumbers("pay $1,240.50 or -3 or 2.5e3, not 1,2")
	want := []float64{1240.5, -3, 2500, 12}
	if len(got) != len(want) {
		t.Fatalf("%v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%v want %v", got, want)
		}
	}
}
