package reflection

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"citizen/events"
)

func TestDefaultRubricsCompile(t *testing.T) {
	r := DefaultRubrics()
	if r.Version != "default-2026-11-30.2" {
		t.Errorf("version %q", r.Version)
	}
	for _, typ := range []string{"arithmetic", "unit_conversion", "percent", "policy", "order_status", "json_extract", "classify"} {
		if gs, own := r.For(typ); !own || len(gs) == 0 {
			t.Errorf("type %s: own=%v graders=%d", typ, own, len(gs))
		}
	}
	if _, own := r.For("nope"); own {
		t.Error("unknown type has its own rubric")
	}
	if got := r.Infer("What is 12 * 7?"); got != "arithmetic" {
		t.Errorf("Infer = %q", got)
	}
	if got := r.Infer("hello there"); got != "" {
		t.Errorf("Infer = %q", got)
	}
}

func TestRubricStrictErrorsNameTheLine(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown key", "version: x\ntypes:\n  a:\n    graders:\n      - name: g\n        kind: regex\n        pattern: x\n        patern: y\n", "line 8"},
		{"unknown top key", "version: x\nrubrics: {}\n", "line 2"},
		{"unknown kind", "types:\n  a:\n    graders:\n      - {name: g, kind: exactish}\n", "line 4"},
		{"bad regex", "types:\n  a:\n    graders:\n      - {name: ok, kind: json_valid}\n      - {name: g, kind: regex, pattern: '('}\n", "line 5"},
		{"bad schema keyword", "types:\n  a:\n    graders:\n      - {name: g, kind: json_schema, schema: {type: object, oneOf: []}}\n", "line 4"},
		{"negative tolerance", "types:\n  a:\n    graders:\n      - {name: g, kind: numeric, tolerance: -1}\n", "line 4"},
		{"duplicate name", "types:\n  a:\n    graders:\n      - {name: g, kind: json_valid}\n      - {name: g, kind: json_valid}\n", "line 5"},
		{"bad match", "types:\n  a:\n    match: ['ok', '[']\n    graders: []\n", "line 3"},
		{"empty length", "default:\n  graders:\n    - {name: g, kind: length}\n", "line 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseRubrics([]byte(tt.yaml))
			if !errors.Is(err, ErrRubric) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want ErrRubric mentioning %q", err, tt.want)
			}
		})
	}
}

func TestRubricVersionDefaultsToHash(t *testing.T) {
	a, err := ParseRubrics([]byte("types: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ParseRubrics([]byte("types: {}\n# changed\n"))
	if !strings.HasPrefix(a.Version, "sha256:") || a.Version == b.Version {
		t.Errorf("versions %q %q", a.Version, b.Version)
	}
}

func TestRubricStoreReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rubrics.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("version: v1\ntypes:\n  a:\n    graders:\n      - {name: g, kind: json_valid}\n")
	s, err := LoadRubrics(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Current().Version != "v1" {
		t.Fatalf("version %q", s.Current().Version)
	}
	write("version: v2\ntypes:\n  a:\n    graders:\n      - {name: g, kind: json_valid, bogus: 1}\n")
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), "line 5") {
		t.Errorf("bad reload: %v", err)
	}
	if s.Current().Version != "v1" {
		t.Errorf("failed reload replaced rubrics: %q", s.Current().Version)
	}
	write("version: v3\ntypes:\n  a:\n    graders:\n      - {name: g, kind: regex, pattern: ok}\n")
	if err := s.Reload(); err != nil || s.Current().Version != "v3" {
		t.Errorf("reload: %v %q", err, s.Current().Version)
	}
}

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig([]byte("reward: {feedback: 0.5}\npolicy: {timeout: exclude}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Reward.Feedback != 0.5 || c.Reward.Graders != 1 || c.Policy.Timeout != PolicyExclude || c.Policy.Abandoned != PolicyFailure {
		t.Errorf("config %+v", c)
	}
	for _, bad := range []string{"reward: {graders: -1}\n", "policy: {timeout: maybe}\n", "rewards: {}\n", "self_eval: {floor: 1}\n", "policy: {environment_faults: sometimes}\n"} {
		if _, err := ParseConfig([]byte(bad)); !errors.Is(err, ErrConfig) {
			t.Errorf("%q: err %v", bad, err)
		}
	}
}

func TestJudge(t *testing.T) {
	r := DefaultRubrics()
	custom, err := ParseRubrics([]byte(`version: t
types:
  lookup:
    graders:
      - {name: answer, kind: exact, reference: gold}
      - {name: length, kind: length, max_chars: 5}
  free:
    graders:
      - {name: length, kind: length, max_chars: 400}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		r                     *Rubrics
		typ, answer, expected string
		right, ok             bool
	}{
		{r, "unit_conversion", "49 grams is 0.049 kilograms.", "49 grams is 0.049 kilograms.", true, true},
		{r, "unit_conversion", "49 grams is 0.0492 kilograms.", "0.049 kilograms", true, true}, // within 0.011
		{r, "unit_conversion", "49 grams is 0.07 kilograms.", "0.049 kilograms", false, true},
		{r, "unit_conversion", "33.5 pounds is 536 ounces.", "536 ounces", true, true},
		{r, "unit_conversion", "33.5 pounds is 536.5 ounces.", "536 ounces", true, true}, // within 0.1%
		{r, "unit_conversion", "33.5 pounds is 532 ounces.", "536 ounces", false, true},  // a near miss the world marks wrong
		{r, "unit_conversion", "I cannot say.", "0.049 kilograms", false, true},
		{r, "unit_conversion", "0.049", "no number here", false, false},
		{r, "policy", "Our refund window is 30 days, sadly.", "30 days", true, true},
		{r, "policy", "The refund window is 60 days.", "30 days", false, true},
		{r, "classify", "billing", "Billing", true, true},
		{r, "classify", "billing, or maybe shipping", "billing", false, true},
		// A type without a rubric of its own: the default's normalized
		// reference grader.
		{r, "no_such_type", "It is 42.", "42", true, true},
		// Reference under a key of the grader's own; constraints do not
		// decide (the 6-character answer fails max_chars 5).
		{custom, "lookup", "abcdef", "abcdef", true, true},
		{custom, "lookup", "abc", "abcdef", false, true},
		// No reference grader: cannot judge.
		{custom, "free", "anything", "anything", false, false},
	} {
		right, ok := c.r.Judge(c.typ, c.answer, c.expected)
		if right != c.right || ok != c.ok {
			t.Errorf("Judge(%s, %q, %q) = %v, %v; want %v, %v", c.typ, c.answer, c.expected, right, ok, c.right, c.ok)
		}
	}
}

// TestCheck: Rubrics.Check runs only a type's check-mode graders, says
// whether any applied, and names a failure; and the self-evaluation
// records check-mode graders beside the reward, not in it.
func TestCheck(t *testing.T) {
	r := DefaultRubrics()
	q := "I bought a desk lamp 45 days ago. Can I still return it?"
	for _, c := range []struct {
		typ, question, answer string
		pass, checked         bool
	}{
		{"policy", q, "Yes, the refund window is 60 days.", true, true},
		{"policy", q, "No, the refund window is 60 days.", false, true},
		{"policy", q, "No, the refund window is 30 days.", true, true},
		{"policy", "What is your refund window?", "The refund window is 60 days.", true, false},
		{"arithmetic", q, "No, the refund window is 60 days.", true, false}, // no check for the type
		{"policy", q, strings.Repeat("no ", 200), true, false},              // a failing length grader is no check
	} {
		pass, checked, why := r.Check(c.typ, c.question, c.answer)
		if pass != c.pass || checked != c.checked || pass == (why != "") {
			t.Errorf("Check(%q, %q, %q) = %v, %v, %q; want %v, %v", c.typ, c.question, c.answer, pass, checked, why, c.pass, c.checked)
		}
	}
	if _, err := ParseRubrics([]byte("types:\n  p:\n    graders:\n      - {name: v, kind: verdict}\n")); err == nil {
		t.Error("a verdict grader without yes_when compiled")
	}
	ev := Evaluate(r, DefaultConfig(), &events.InteractionRecorded{TaskType: "policy",
		Messages: []events.ChatMessage{{Role: "user", Content: q}},
		Choices:  []events.Choice{{Message: events.ChatMessage{Role: "assistant", Content: "No, the refund window is 60 days."}}}}, Feedback{})
	for _, g := range ev.Graders {
		if g.Name == "verdict" {
			t.Errorf("a check-mode grader is in the evaluation's graders: %+v", g)
		}
	}
	// It is recorded beside them, and the reward is what it would be
	// without it.
	if len(ev.Checks) != 1 || ev.Checks[0].Name != "verdict" || ev.Checks[0].Score != 0 {
		t.Errorf("checks %+v; want the failed verdict", ev.Checks)
	}
	ok := Evaluate(r, DefaultConfig(), &events.InteractionRecorded{TaskType: "policy",
		Messages: []events.ChatMessage{{Role: "user", Content: q}},
		Choices:  []events.Choice{{Message: events.ChatMessage{Role: "assistant", Content: "Yes, the refund window is 60 days."}}}}, Feedback{})
	if len(ok.Checks) != 1 || ok.Checks[0].Score != 1 || ok.Reward != ev.Reward {
		t.Errorf("consistent answer: checks %+v, reward %v; want the passed verdict and reward %v", ok.Checks, ok.Reward, ev.Reward)
	}
}
