package reflection

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"citizen/events"
)

func rec(answer string, md map[string]string) *events.InteractionRecorded {
	return &events.InteractionRecorded{InteractionID: "i1", Tenant: "acme", ModelVersion: "v1", Metadata: md,
		Messages: []events.ChatMessage{{Role: "user", Content: "What is 6 * 7?"}},
		Choices:  []events.Choice{{Message: events.ChatMessage{Role: "assistant", Content: answer}, FinishReason: "stop"}}}
}

func pf(f float64) *float64 { return &f }

func TestEvaluateReward(t *testing.T) {
	r, cfg := DefaultRubrics(), DefaultConfig()
	// inferred type, reference in metadata, correct answer
	ev := Evaluate(r, cfg, rec("42", map[string]string{"expected": "42"}), Feedback{})
	if ev.TaskType != "arithmetic" || ev.TypeSource != "inferred" || ev.Reward != 1 || !ev.Trainable || ev.RewardTerms["graders"] != 1 {
		t.Errorf("correct: %+v", ev)
	}
	// wrong answer
	ev = Evaluate(r, cfg, rec("41", map[string]string{"expected": "42", "type": "arithmetic"}), Feedback{})
	if ev.TypeSource != "given" || ev.Reward >= 0 {
		t.Errorf("wrong: %+v", ev)
	}
	// no reference, no feedback: only the length grader applies
	ev = Evaluate(r, cfg, rec("42", nil), Feedback{})
	for _, g := range ev.Graders {
		if g.Name == "answer" {
			t.Errorf("numeric grader applied without a reference: %+v", g)
		}
	}
	// correction from feedback becomes the reference; polarity and outcome weigh in
	ev = Evaluate(r, cfg, rec("41", nil), Feedback{Correction: "42", Polarity: pf(-0.8), Confidence: 0.9, Outcome: "failure"})
	var answer *events.GraderResult
	for i := range ev.Graders {
		if ev.Graders[i].Name == "answer" {
			answer = &ev.Graders[i]
		}
	}
	if answer == nil || answer.Score != 0 || !strings.Contains(answer.Explanation, "feedback") {
		t.Errorf("answer grader %+v", answer)
	}
	if ev.FeedbackPolarity == nil || *ev.FeedbackPolarity != -0.8 || ev.RewardTerms["outcome"] != -1 || ev.RewardTerms["w_feedback"] != 0.63 {
		t.Errorf("terms %+v", ev.RewardTerms)
	}
	// the recorded formula reproduces the reward
	var num, den float64
	for k, v := range ev.RewardTerms {
		if !strings.HasPrefix(k, "w_") {
			num += ev.RewardTerms["w_"+k] * v
			den += ev.RewardTerms["w_"+k]
		}
	}
	if math.Abs(num/den-ev.Reward) > 1e-5 || ev.Reward < -1 || ev.Reward > 1 {
		t.Errorf("reward %v, formula gives %v", ev.Reward, num/den)
	}
	// low-confidence feedback is ignored
	ev = Evaluate(r, cfg, rec("x", nil), Feedback{Polarity: pf(-1), Confidence: 0.05})
	if ev.FeedbackPolarity != nil {
		t.Errorf("low-confidence feedback used: %+v", ev)
	}
}

func TestEvaluateOutcomePolicy(t *testing.T) {
	r := DefaultRubrics()
	cfg := DefaultConfig()
	ev := Evaluate(r, cfg, rec("x", nil), Feedback{Outcome: "timeout"})
	if ev.RewardTerms["outcome"] != -1 || !ev.Trainable || !strings.Contains(ev.Policy, "failure") || len(ev.Faults) == 0 || ev.Faults[len(ev.Faults)-1].Attribution != "model" {
		t.Errorf("timeout as failure: %+v", ev)
	}
	cfg.Policy.Timeout = PolicyExclude
	ev = Evaluate(r, cfg, rec("x", nil), Feedback{Outcome: "timeout"})
	if ev.Trainable || ev.Faults[len(ev.Faults)-1].Attribution != "environment" {
		t.Errorf("timeout excluded: %+v", ev)
	}
	cfg.Policy.Abandoned = PolicyIgnore
	ev = Evaluate(r, cfg, rec("x", nil), Feedback{Outcome: "abandoned"})
	if _, has := ev.RewardTerms["outcome"]; has || len(ev.Faults) != 0 {
		t.Errorf("abandoned ignored: %+v", ev)
	}
	ev = Evaluate(r, DefaultConfig(), rec("x", nil), Feedback{Outcome: "success"})
	if ev.RewardTerms["outcome"] != 1 {
		t.Errorf("success: %+v", ev)
	}
}

func TestEvaluateFaultAttribution(t *testing.T) {
	tool := events.Tool{Name: "get_order_status", Parameters: json.RawMessage(`{"type":"object","required":["order_id"],"properties":{"order_id":{"type":"string"}}}`)}
	base := func(toolResult string, call events.ToolCall) *events.InteractionRecorded {
		return &events.InteractionRecorded{InteractionID: "i", ModelVersion: "v1", TaskType: "order_status", Tools: []events.Tool{tool},
			Metadata: map[string]string{"expected": "shipped"},
			Messages: []events.ChatMessage{
				{Role: "user", Content: "where is my order K1?"},
				{Role: "assistant", ToolCalls: []events.ToolCall{call}},
				{Role: "tool", ToolCallID: "c1", Content: toolResult},
			},
			Choices: []events.Choice{{Message: events.ChatMessage{Role: "assistant", Content: "It has shipped."}}}}
	}
	good := events.ToolCall{ID: "c1", Name: "get_order_status", Arguments: `{"order_id":"K1"}`}
	tests := []struct {
		name, result string
		call         events.ToolCall
		kind, attr   string
		trainable    bool
	}{
		{"clean", `{"status":"shipped"}`, good, "", "", true},
		{"timeout", `{"error":"upstream timed out after 30s"}`, good, "tool_timeout", "environment", false},
		{"5xx", "Error: 503 Service Unavailable", good, "tool_error", "environment", false},
		{"json error object", `{"error":{"code":"E_DB"}}`, good, "tool_error", "environment", false},
		{"invalid args reported", `{"error":"invalid argument: order_id must be a string"}`, good, "invalid_tool_args", "model", true},
		{"invalid args by schema", `{"status":"shipped"}`, events.ToolCall{ID: "c1", Name: "get_order_status", Arguments: `{"id":"K1"}`}, "invalid_tool_args", "model", true},
		{"unknown tool", `{"status":"shipped"}`, events.ToolCall{ID: "c1", Name: "cancel_order", Arguments: `{}`}, "unknown_tool", "model", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := Evaluate(DefaultRubrics(), DefaultConfig(), base(tt.result, tt.call), Feedback{})
			if tt.kind == "" {
				if len(ev.Faults) != 0 {
					t.Errorf("faults %+v", ev.Faults)
				}
			} else if len(ev.Faults) == 0 || ev.Faults[0].Kind != tt.kind || ev.Faults[0].Attribution != tt.attr {
				t.Errorf("faults %+v, want %s/%s", ev.Faults, tt.kind, tt.attr)
			}
			if ev.Trainable != tt.trainable {
				t.Errorf("trainable %v (policy %q)", ev.Trainable, ev.Policy)
			}
		})
	}
	// policy "learn" keeps environment faults trainable
	cfg := DefaultConfig()
	cfg.Policy.EnvironmentFaults = PolicyLearn
	if ev := Evaluate(DefaultRubrics(), cfg, base("Error: 503", good), Feedback{}); !ev.Trainable {
		t.Errorf("learn policy: %+v", ev)
	}
	// the answer's own invalid call is the model's
	r := base(`{"status":"shipped"}`, good)
	r.Choices[0].Message.ToolCalls = []events.ToolCall{{ID: "c2", Name: "get_order_status", Arguments: `nope`}}
	ev := Evaluate(DefaultRubrics(), DefaultConfig(), r, Feedback{})
	if len(ev.Faults) != 1 || ev.Faults[0].Kind != "invalid_tool_args" || ev.Faults[0].Attribution != "model" || ev.ToolCalls != 1 {
		t.Errorf("answer call: %+v", ev)
	}
}

func TestSelfEvaluate(t *testing.T) {
	lps := []events.TokenLogprob{
		{Token: 1, Logprob: -0.1, Top: []events.TopLogprob{{Token: 1, Logprob: -0.1}, {Token: 2, Logprob: -2.4}}},
		{Token: 3, Logprob: -1.9, Top: []events.TopLogprob{{Token: 4, Logprob: -0.2}}},
	}
	se := selfEvaluate(lps, SelfEvalConfig{Floor: -3})
	if se == nil || math.Abs(se.MeanLogprob+1.0) > 1e-6 || se.MinLogprob != -1.9 || math.Abs(se.Score-(1-1.0/3)) > 1e-6 {
		t.Fatalf("%+v", se)
	}
	// token 1: p = e^-0.1, e^-2.4 renormalised; token 3 not in top: added
	h := func(ps ...float64) float64 {
		z, out := 0.0, 0.0
		for _, p := range ps {
			z += p
		}
		for _, p := range ps {
			out -= p / z * math.Log(p/z)
		}
		return out
	}
	want := (h(math.Exp(-0.1), math.Exp(-2.4)) + h(math.Exp(-0.2), math.Exp(-1.9))) / 2
	if math.Abs(se.Entropy-want) > 1e-5 {
		t.Errorf("entropy %v want %v", se.Entropy, want)
	}
	if selfEvaluate(nil, SelfEvalConfig{Floor: -3}) != nil {
		t.Error("self-eval without logprobs")
	}
}

func TestBehaviour(t *testing.T) {
	for answer, want := range map[string]string{
		"I'm sorry, but I can't help with that.": BehaviourRefusal,
		"As an AI, I cannot browse.":             BehaviourRefusal,
		"Which order do you mean?":               BehaviourClarifying,
		"It is 42.":                              BehaviourAnswer,
	} {
		if got := behaviour(answer, 0); got != want {
			t.Errorf("%q: %s want %s", answer, got, want)
		}
	}
}

func TestEvaluatePenaltyGraders(t *testing.T) {
	r, err := ParseRubrics([]byte(`types:
  t:
    graders:
      - {name: len, kind: length, max_words: 3}
      - {name: fmt, kind: format, checks: [single_line], mode: reward}
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	md := map[string]string{"type": "t"}
	// the penalty grader passes: it earns nothing; the reward-mode format check earns +1
	ev := Evaluate(r, cfg, rec("short answer", md), Feedback{})
	if ev.RewardTerms["graders"] != 1 || ev.RewardTerms["w_graders"] != 1 {
		t.Errorf("terms %+v", ev.RewardTerms)
	}
	// the penalty grader fails (6 words > 3: score 0): (1*(0-1) + 1*(+1)) / 2 = 0
	ev = Evaluate(r, cfg, rec("one two three four five six", md), Feedback{})
	if ev.RewardTerms["graders"] != 0 {
		t.Errorf("terms %+v", ev.RewardTerms)
	}
	// only passing constraints: no graders term, no signal, not trainable
	ev = Evaluate(DefaultRubrics(), cfg, rec("42", nil), Feedback{})
	if _, has := ev.RewardTerms["graders"]; has || ev.Trainable || !strings.Contains(ev.Policy, "no signal") {
		t.Errorf("only constraints passed: %+v", ev)
	}
	if _, err := NewGrader(GraderSpec{Name: "g", Kind: "regex", Pattern: "x", Mode: "sometimes"}); err == nil {
		t.Error("bad mode accepted")
	}
}

// A declared type the rubrics do not name is graded by the rubric its
// question matches (recorded as graded_as), keeping its own label; a
// lesson's value given as the reference (References) grades like a
// correction and is recorded as the reference check.
func TestEvaluateUnknownTypeAndLessonReference(t *testing.T) {
	r, cfg := DefaultRubrics(), DefaultConfig()
	x := rec("The answer is 41.", map[string]string{"type": "multiplication"})
	ev := Evaluate(r, cfg, x, Feedback{Correction: "42", CorrectionSource: "lesson-1"})
	if ev.TaskType != "multiplication" || ev.GradedAs != "arithmetic" {
		t.Fatalf("type %q graded as %q", ev.TaskType, ev.GradedAs)
	}
	numeric := false
	for _, g := range ev.Graders {
		numeric = numeric || g.Name == "answer" && g.Score == 0
	}
	if !numeric || ev.Reward >= 0 {
		t.Fatalf("not graded by the arithmetic rubric against 42: %+v", ev)
	}
	ref := false
	for _, c := range ev.Checks {
		ref = ref || c.Name == "reference" && c.Label == "lesson-1"
	}
	if !ref {
		t.Fatalf("no reference check: %+v", ev.Checks)
	}
	if ev := Evaluate(r, cfg, rec("42", map[string]string{"type": "arithmetic"}), Feedback{}); ev.GradedAs != "" {
		t.Fatalf("a named type graded as %q", ev.GradedAs)
	}
}
