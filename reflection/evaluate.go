package reflection

import (
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"citizen/events"
)

// EvaluatorVersion identifies the evaluation code (faults, self-eval,
// reward); rubric and grader versions are recorded separately.
const EvaluatorVersion = "reflection-1"

// Feedback is what is known from feedback when an interaction is
// evaluated.
type Feedback struct {
	// Polarity is the confidence-weighted mean polarity of the interpreted
	// feedback (nil when none passed the confidence bar), Confidence the
	// highest confidence among them.
	Polarity   *float64
	Confidence float64
	// Outcome is the latest outcome reported (success, failure, timeout,
	// abandoned) or "".
	Outcome string
	// Correction is the latest right answer stated in feedback, used as
	// the graders' reference when the interaction carries none.
	Correction string
	// CorrectionSource, when Correction comes from outside the feedback
	// (EvaluatorConfig.References), names where: it is recorded as the
	// "reference" check.
	CorrectionSource string
	// Type and TypeConfidence are a type inferred outside (the memory's
	// nearest labelled neighbours) for an interaction the client did not
	// label; when set it is used before the rubrics' prompt patterns.
	Type           string
	TypeConfidence float64
}

// Behaviour labels recorded by the zero-weight "behaviour" grader result,
// read by the refusal/clarifying-question detector.
const (
	BehaviourAnswer     = "answer"
	BehaviourRefusal    = "refusal"
	BehaviourClarifying = "clarifying"
	behaviourGrader     = "behaviour"
)

var (
	reRefusal  = regexp.MustCompile(`(?i)^\W*(?:i'?m sorry,? but|sorry,? (?:but )?i can(?:'|no)t|i can(?:'|no)t (?:help|assist|do|provide|answer)|i am unable|i'?m unable|i (?:will|won'?t) not|as an ai)`)
	reTimeout  = regexp.MustCompile(`(?i)\b(?:timed?\s*out|timeout|deadline exceeded)\b`)
	reModelErr = regexp.MustCompile(`(?i)(?:invalid (?:argument|parameter|input|arguments|parameters)|missing (?:required|argument|parameter)|unknown (?:tool|function|parameter|argument)|validation (?:error|failed)|bad request|\b400\b|unprocessable|\b422\b|malformed|no such (?:tool|function))`)
	reEnvErr   = regexp.MustCompile(`(?i)(?:\berror\b|exception|\bfailed\b|\bfailure\b|unavailable|\b50[0-9]\b|connection (?:refused|reset)|econnrefused|internal server|rate limit|\b429\b|not responding)`)
)

// Evaluate judges one interaction given what is known from feedback. It is
// a pure function of its inputs (the rubrics and config included), so
// replaying history gives the same evaluations. Seq is left to the caller.
func Evaluate(r *Rubrics, cfg Config, rec *events.InteractionRecorded, fb Feedback) events.InteractionEvaluated {
	out := events.InteractionEvaluated{
		InteractionID:    rec.InteractionID,
		ModelVersion:     rec.ModelVersion,
		RubricVersion:    r.Version,
		EvaluatorVersion: EvaluatorVersion,
		Outcome:          fb.Outcome,
		User:             rec.User,
	}
	for _, l := range rec.Lessons {
		out.Lessons = append(out.Lessons, l.ID)
	}
	var choice events.Choice
	if len(rec.Choices) > 0 {
		choice = rec.Choices[0]
	}
	answer := choice.Message.Content
	out.AnswerLength = utf8.RuneCountInString(answer)
	out.ToolCalls = len(choice.Message.ToolCalls)
	out.TurnToolCalls = turnToolCalls(rec.Messages)

	// type: given, inferred from the prompt, or unknown
	out.TaskType, out.TypeSource, out.TypeConfidence = rec.TaskType, "given", 1
	if out.TaskType == "" {
		out.TaskType = firstNonEmpty(rec.Metadata["task_type"], rec.Metadata["type"])
	}
	if out.TaskType == "" && fb.Type != "" {
		out.TaskType, out.TypeSource, out.TypeConfidence = fb.Type, "inferred", fb.TypeConfidence
	}
	question := lastUser(rec.Messages)
	matched, inferred := "", false // the rubrics' patterns' type for question, once asked
	if out.TaskType == "" {
		matched, inferred = r.Infer(question), true
		if matched != "" {
			out.TaskType, out.TypeSource, out.TypeConfidence = matched, "inferred", 0.6
		} else {
			out.TaskType, out.TypeSource, out.TypeConfidence = "unknown", "unknown", 0
		}
	}

	// graders
	gi := &GradeInput{Answer: answer, ToolCalls: choice.Message.ToolCalls, Tools: rec.Tools, Metadata: rec.Metadata, Correction: fb.Correction, Question: question}
	graders, ok := r.For(out.TaskType)
	if !ok {
		// A type the rubrics do not name (a new task family) is graded by
		// the rubric its question matches, if any, not only the default.
		if !inferred {
			matched = r.Infer(question)
		}
		if t := matched; t != "" && t != out.TaskType {
			graders, _ = r.For(t)
			out.GradedAs = t
		}
	}
	var penalty []bool // parallel to out.Graders
	for _, g := range graders {
		res, ok := g.Grade(gi)
		switch {
		case !ok:
		case g.Mode() == ModeCheck:
			out.Checks = append(out.Checks, res) // recorded, not part of the reward (GraderSpec.Mode)
		default:
			out.Graders = append(out.Graders, res)
			penalty = append(penalty, g.Mode() == ModePenalty)
		}
	}
	if fb.CorrectionSource != "" {
		out.Checks = append(out.Checks, events.GraderResult{Name: "reference", Version: "lesson-1", Score: 1, Label: fb.CorrectionSource,
			Explanation: "reference answer " + strconv.Quote(fb.Correction) + " from a promoted lesson"})
	}
	beh := behaviour(answer, out.ToolCalls)
	bs := 0.0
	if beh == BehaviourAnswer {
		bs = 1
	}
	out.Graders = append(out.Graders, events.GraderResult{Name: behaviourGrader, Version: "behaviour-1", Score: bs, Weight: 0, Label: beh})

	out.Self = selfEvaluate(choice.Logprobs, cfg.SelfEval)
	out.Faults = findFaults(rec, gi, choice)

	// outcome policy
	outcomePolicy := ""
	switch fb.Outcome {
	case "timeout":
		outcomePolicy = cfg.Policy.Timeout
	case "abandoned":
		outcomePolicy = cfg.Policy.Abandoned
	}
	if outcomePolicy == PolicyFailure || outcomePolicy == PolicyExclude {
		attr := "model"
		if outcomePolicy == PolicyExclude {
			attr = "environment"
		}
		out.Faults = append(out.Faults, events.Fault{Kind: fb.Outcome, Attribution: attr, Detail: "outcome reported by feedback; policy " + outcomePolicy})
	}

	// reward
	terms := map[string]float64{}
	var num, den float64
	add := func(name string, t, w float64) {
		if w <= 0 {
			return
		}
		t = clamp(t, -1, 1)
		terms[name] = round6(t)
		terms["w_"+name] = round6(w)
		num += w * t
		den += w
	}
	// reward graders score in [-1, 1]; penalty graders only count when
	// they fail, in [-1, 0): passing a length or format check earns nothing
	var gnum, gden float64
	for i, g := range out.Graders {
		switch {
		case g.Weight <= 0 || i >= len(penalty):
		case penalty[i] && g.Score < 1:
			gnum += g.Weight * (g.Score - 1)
			gden += g.Weight
		case !penalty[i]:
			gnum += g.Weight * (2*g.Score - 1)
			gden += g.Weight
		}
	}
	if gden > 0 {
		add("graders", gnum/gden, cfg.Reward.Graders)
	}
	if out.Self != nil {
		add("self", 2*out.Self.Score-1, cfg.Reward.Self)
	}
	if fb.Polarity != nil && fb.Confidence >= cfg.Reward.MinFeedbackConfidence {
		p := clamp(*fb.Polarity, -1, 1)
		out.FeedbackPolarity = &p
		add("feedback", p, cfg.Reward.Feedback*fb.Confidence)
	}
	switch {
	case fb.Outcome == "success":
		add("outcome", 1, cfg.Reward.Outcome)
	case fb.Outcome == "failure" || outcomePolicy == PolicyFailure:
		add("outcome", -1, cfg.Reward.Outcome)
	}
	if den > 0 {
		out.Reward = round6(clamp(num/den, -1, 1))
		out.RewardTerms = terms
	}

	// trainability
	out.Trainable = den > 0
	switch {
	case den == 0:
		out.Policy = "no signal: no reference, failed check, feedback or outcome"
	case cfg.Policy.EnvironmentFaults == PolicyExclude && hasEnvFault(out.Faults):
		out.Trainable = false
		out.Policy = "environment fault (" + envKinds(out.Faults) + "): no training credit either way"
	case outcomePolicy == PolicyExclude:
		out.Trainable = false
		out.Policy = fb.Outcome + " excluded by policy"
	case outcomePolicy == PolicyFailure:
		out.Policy = fb.Outcome + " counted as failure"
	}
	return out
}

func firstNonEmpty(xs ...string) string {
	for _, x := range xs {
		if x != "" {
			return x
		}
	}
	return ""
}

func lastUser(msgs []events.ChatMessage) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return msgs[i].Content
		}
	}
	return ""
}

// behaviour labels an answer as a refusal, a clarifying question or an
// answer.
func behaviour(answer string, toolCalls int) string {
	a := strings.TrimSpace(answer)
	switch {
	case toolCalls > 0:
		return BehaviourAnswer
	case reRefusal.MatchString(a):
		return BehaviourRefusal
	case strings.HasSuffix(a, "?") && utf8.RuneCountInString(a) < 400:
		return BehaviourClarifying
	}
	return BehaviourAnswer
}

// selfEvaluate summarises the behaviour policy's logprobs: mean and min of
// the sampled tokens' logprobs and, when top alternatives were recorded,
// the mean entropy of the (renormalised) top-k distribution. Score maps
// the mean linearly from floor (0) to 0 (1). Nil without logprobs.
func selfEvaluate(lps []events.TokenLogprob, cfg SelfEvalConfig) *events.SelfEvaluation {
	if len(lps) == 0 {
		return nil
	}
	floor := cfg.Floor
	if floor >= 0 {
		floor = -3
	}
	var sum, ent float64
	min := math.Inf(1)
	nEnt := 0
	for _, t := range lps {
		lp := float64(t.Logprob)
		if math.IsNaN(lp) || lp > 0 {
			lp = 0
		}
		if math.IsInf(lp, -1) {
			lp = -100
		}
		sum += lp
		if lp < min {
			min = lp
		}
		if len(t.Top) > 0 {
			// The entropy of the renormalised distribution q = p/z is
			// log z - Σ p·log p / z, and log p is the recorded logprob:
			// one Log per token instead of one per alternative.
			var z, plp float64
			sampledIn := false
			for _, a := range t.Top {
				alp := float64(a.Logprob)
				p := math.Exp(alp)
				if math.IsNaN(p) {
					continue
				}
				z += p
				if p > 0 {
					plp += p * alp
				}
				if a.Token == t.Token {
					sampledIn = true
				}
			}
			if !sampledIn {
				if p := math.Exp(lp); p > 0 {
					z += p
					plp += p * lp
				}
			}
			if z > 0 && !math.IsInf(z, 0) {
				ent += math.Log(z) - plp/z
				nEnt++
			}
		}
	}
	mean := sum / float64(len(lps))
	se := &events.SelfEvaluation{MeanLogprob: round6(mean), MinLogprob: round6(min), Score: round6(clamp(1-mean/floor, 0, 1))}
	if nEnt > 0 {
		se.Entropy = round6(ent / float64(nEnt))
	}
	return se
}

// findFaults attributes faults found in the conversation and the answer:
// tool messages that report errors or timeouts are the environment's
// unless the error says the call itself was invalid; tool calls to unknown
// tools or with invalid arguments (earlier turns and this answer) are the
// model's.
func findFaults(rec *events.InteractionRecorded, gi *GradeInput, choice events.Choice) []events.Fault {
	var out []events.Fault
	for _, m := range rec.Messages {
		switch m.Role {
		case "tool":
			if f, ok := classifyToolMessage(m.Content); ok {
				if m.ToolCallID != "" {
					f.Detail = m.ToolCallID + ": " + f.Detail
				}
				out = append(out, f)
			}
		case "assistant":
			for _, tc := range m.ToolCalls {
				if err := gi.checkToolCall(tc); err != nil {
					out = append(out, modelFault(err, "earlier turn"))
				}
			}
		}
	}
	for _, tc := range choice.Message.ToolCalls {
		if err := gi.checkToolCall(tc); err != nil {
			out = append(out, modelFault(err, "this answer"))
		}
	}
	return out
}

func modelFault(err error, where string) events.Fault {
	kind := "invalid_tool_args"
	if te, ok := err.(*toolCallError); ok {
		kind = te.kind
	}
	return events.Fault{Kind: kind, Attribution: "model", Detail: truncate(where+": "+err.Error(), 200)}
}

// classifyToolMessage decides whether a tool result reports a fault.
func classifyToolMessage(content string) (events.Fault, bool) {
	c := strings.TrimSpace(content)
	text := c
	// JSON results: an "error" member (string or object) is the signal
	var obj map[string]any
	if strings.HasPrefix(c, "{") && json.Unmarshal([]byte(c), &obj) == nil {
		e, has := obj["error"]
		if !has || e == nil || e == false || e == "" {
			if st, ok := obj["status"].(string); !ok || !reEnvErr.MatchString(st) && !reTimeout.MatchString(st) {
				return events.Fault{}, false
			}
		}
		b, _ := json.Marshal(obj)
		text = string(b)
	} else if len(c) > 300 {
		// long plain-text results are data, not error reports; look only at the start
		text = c[:300]
	}
	detail := truncate(strings.ReplaceAll(text, "\n", " "), 160)
	switch {
	case reModelErr.MatchString(text):
		return events.Fault{Kind: "invalid_tool_args", Attribution: "model", Detail: detail}, true
	case reTimeout.MatchString(text):
		return events.Fault{Kind: "tool_timeout", Attribution: "environment", Detail: detail}, true
	case reEnvErr.MatchString(text) || obj != nil:
		return events.Fault{Kind: "tool_error", Attribution: "environment", Detail: detail}, true
	}
	return events.Fault{}, false
}

func hasEnvFault(fs []events.Fault) bool {
	for _, f := range fs {
		if f.Attribution == "environment" {
			return true
		}
	}
	return false
}

func envKinds(fs []events.Fault) string {
	var ks []string
	seen := map[string]bool{}
	for _, f := range fs {
		if f.Attribution == "environment" && !seen[f.Kind] {
			seen[f.Kind] = true
			ks = append(ks, f.Kind)
		}
	}
	return strings.Join(ks, ",")
}

func clamp(v, lo, hi float64) float64 {
	if v != v || v < lo {
		return lo
	}
	if v > hi {
		return hi
	}
	return v
}

// round6 keeps recorded numbers short and stable.
func round6(v float64) float64 { return math.Round(v*1e6) / 1e6 }

// turnToolCalls counts the assistant tool calls after the last user
// message: the tool rounds of the current turn before this interaction.
func turnToolCalls(msgs []events.ChatMessage) int {
	n := 0
	for i := len(msgs) - 1; i >= 0 && msgs[i].Role != "user"; i-- {
		if msgs[i].Role == "assistant" {
			n += len(msgs[i].ToolCalls)
		}
	}
	return n
}
