package feedback

import (
	"context"
	"math"
	"strings"
)

// Aspects an interpretation can name. The set is closed: interpreters only
// report these names, in this order.
const (
	AspectCorrectness  = "correctness"
	AspectCompleteness = "completeness"
	AspectLength       = "length"
	AspectTone         = "tone"
	AspectFormat       = "format"
	AspectSpeed        = "speed"
	AspectToolUse      = "tool_use"
)

// AllAspects lists the aspect names in their canonical order.
var AllAspects = []string{AspectCorrectness, AspectCompleteness, AspectLength, AspectTone, AspectFormat, AspectSpeed, AspectToolUse}

// Outcomes a harness or client can report with feedback (events.FeedbackReceived.Outcome).
const (
	OutcomeSuccess   = "success"
	OutcomeFailure   = "failure"
	OutcomeTimeout   = "timeout"
	OutcomeAbandoned = "abandoned"
)

// Input is one piece of feedback to interpret. Only Text, Rating, Outcome and
// Correction come from the feedback itself; AnswerText and PromptText are the
// interaction's answer and last user message when the caller knows them
// (they are optional context, used to avoid mistaking a confirmation for a
// correction and to phrase hints).
type Input struct {
	Text string
	// Rating, when present, is on the 1..5 scale (1 worst, 5 best; 3
	// neutral). Values outside the scale are clamped.
	Rating     *float64
	Outcome    string
	Correction string
	AnswerText string
	PromptText string
}

// Interpretation is what an interpreter made of one Input.
type Interpretation struct {
	// Polarity in [-1, 1]: negative is dissatisfaction, 0 neutral or unknown.
	Polarity float64
	// Strength in [0, 1]: how strongly the verdict is expressed.
	Strength float64
	// Aspects named by the feedback, a subset of AllAspects in canonical order.
	Aspects []string
	// Correction is the right answer when the feedback states it ("45 minutes").
	Correction string
	// Hint is a short instruction usable as teacher context
	// ("The correct answer is 45 minutes." / "Be more concise.").
	Hint string
	// Confidence in [0, 1] of the interpreter in this interpretation. Bad
	// input (empty, huge, binary, not English) gives a low confidence.
	Confidence float64
	// Version identifies the interpreter ("embedded-4", "llm-3(model)",
	// "llm-3(model)+embedded-4" for a Judge). The ingester records it,
	// followed by ";"+Note when Note is set ("llm-3(model);unparsable").
	Version string
	// Note says why the confidence is low, if it is ("empty", "too-large",
	// "binary", "unsupported-language", "unparsable"); empty otherwise.
	Note string
	// Uncertain marks an interpretation whose Confidence is below the
	// interpreter's calibrated threshold (UncertainBelow for the embedded
	// one). Consumers that turn feedback into rewards or lessons should
	// skip uncertain interpretations; they are recorded, never dropped.
	Uncertain bool
	// Agreement is set by a Judge: how its votes and its reference
	// interpreter agreed.
	Agreement *Agreement
}

// Interpreter turns free-text feedback into signals. Implementations must be
// safe for concurrent use. An error means the interpreter could not run at
// all (e.g. an upstream is unreachable) and a retry may succeed; bad input
// is never an error: it yields a low-confidence neutral Interpretation.
type Interpreter interface {
	Interpret(ctx context.Context, in Input) (Interpretation, error)
}

// clamp limits v to [lo, hi]; NaN becomes lo.
func clamp(v, lo, hi float64) float64 {
	if math.IsNaN(v) || v < lo {
		return lo
	}
	if v > hi {
		return hi
	}
	return v
}

// ratingPolarity maps a 1..5 rating onto [-1, 1].
func ratingPolarity(r float64) float64 {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return 0
	}
	return clamp((clamp(r, 1, 5)-3)/2, -1, 1)
}

// outcomePolarity maps a harness outcome to a polarity and a weight (0 for
// an unknown outcome).
func outcomePolarity(o string) (pol, weight float64) {
	switch strings.ToLower(strings.TrimSpace(o)) {
	case OutcomeSuccess:
		return 0.7, 0.7
	case OutcomeFailure:
		return -0.7, 0.7
	case OutcomeTimeout:
		return -0.5, 0.6
	case OutcomeAbandoned:
		return -0.4, 0.5
	}
	return 0, 0
}

// sortAspects returns the members of set in canonical order.
func sortAspects(set map[string]bool) []string {
	var out []string
	for _, a := range AllAspects {
		if set[a] {
			out = append(out, a)
		}
	}
	return out
}

// NormalizeCorrection is the comparison form of a correction: lower case,
// surrounding quotes, punctuation and a leading article removed, inner
// spaces collapsed. Two corrections match when their normal forms are equal.
func NormalizeCorrection(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.Trim(s, " \t\r\n\"'`‘’“”.,;:!?")
	s = strings.Join(strings.Fields(s), " ")
	for _, art := range []string{"the ", "a ", "an "} {
		if strings.HasPrefix(s, art) && len(s) > len(art) {
			s = s[len(art):]
			break
		}
	}
	return s
}

// PolaritySignThreshold: a polarity whose magnitude is below it counts as
// neutral when a sign is needed (evaluation, scoreboards).
const PolaritySignThreshold = 0.1
