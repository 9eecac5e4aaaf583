package feedback

import (
	"fmt"
	"sort"
	"strings"

	"citizen/events"
)

// Reinterpreter re-reads recorded feedback with an interpreter (the
// current embedded one by default) while the store is replayed in
// position order, and compares each feedback.interpreted with what the
// interpreter says now: how many were written by another version, and
// how many would change polarity sign or correction. It keeps the
// question and answer of each interaction (bounded by maxContextBytes)
// and each feedback until its interpretation is seen. Apply is
// deterministic; not safe for concurrent use.
type Reinterpreter struct {
	interp  *Embedded
	context map[string][2]string      // stream -> prompt, answer (the first interaction.recorded)
	pending map[string]pendingReading // feedback.received id -> what the interpreter says now
	s       ReinterpretSummary
}

type pendingReading struct {
	text string
	now  Interpretation
}

// ReinterpretSummary is what a Reinterpreter found.
type ReinterpretSummary struct {
	// Current is the interpreter version the feedback was re-read with.
	Current string `json:"current"`
	// Compared counts the feedback.interpreted events matched with their
	// feedback.received; ByVersion counts them by recorded version
	// (without the ";note" suffix).
	Compared  int            `json:"compared"`
	ByVersion map[string]int `json:"by_version"`
	// Older counts those recorded by another version than Current.
	Older int `json:"older"`
	// PolarityChanged and CorrectionChanged count the interpretations
	// whose polarity sign or correction (normal form) differ now;
	// Examples are the first few of them.
	PolarityChanged   int               `json:"polarity_changed"`
	CorrectionChanged int               `json:"correction_changed"`
	Examples          []ReinterpretDiff `json:"examples,omitempty"`
	Unmatched         int               `json:"unmatched,omitempty"` // interpretations whose feedback was not seen
}

// ReinterpretDiff is one changed interpretation.
type ReinterpretDiff struct {
	Stream        string  `json:"stream"`
	Text          string  `json:"text"`
	Version       string  `json:"version"`
	Polarity      float64 `json:"polarity"`
	Correction    string  `json:"correction,omitempty"`
	NowPolarity   float64 `json:"now_polarity"`
	NowCorrection string  `json:"now_correction,omitempty"`
}

// maxReinterpretExamples bounds ReinterpretSummary.Examples.
const maxReinterpretExamples = 5

// NewReinterpreter returns a Reinterpreter with the embedded interpreter.
func NewReinterpreter() *Reinterpreter {
	return &Reinterpreter{interp: NewEmbedded(), context: map[string][2]string{}, pending: map[string]pendingReading{},
		s: ReinterpretSummary{Current: EmbeddedVersion, ByVersion: map[string]int{}}}
}

// Apply folds one event in. Events of other types are ignored; an event
// that does not decode is an error (the caller decides whether to skip
// it).
func (r *Reinterpreter) Apply(ev events.Event) error {
	switch ev.Type {
	case events.TypeInteractionRecorded, events.TypeFeedbackReceived, events.TypeFeedbackInterpreted:
	default:
		return nil
	}
	p, err := events.Decode(&ev)
	if err != nil {
		return fmt.Errorf("feedback: reinterpret %s: %w", ev.ID, err)
	}
	switch x := p.(type) {
	case *events.InteractionRecorded:
		if _, ok := r.context[ev.Stream]; ok {
			return nil
		}
		var prompt, answer string
		for j := len(x.Messages) - 1; j >= 0; j-- {
			if x.Messages[j].Role == "user" {
				prompt = x.Messages[j].Content
				break
			}
		}
		if len(x.Choices) > 0 {
			answer = x.Choices[0].Message.Content
		}
		r.context[ev.Stream] = [2]string{truncateText(prompt, maxContextBytes), truncateText(answer, maxContextBytes)}
	case *events.FeedbackReceived:
		qa := r.context[ev.Stream]
		in := Input{Text: x.Text, Rating: x.Rating, Outcome: x.Outcome, Correction: x.Correction, PromptText: qa[0], AnswerText: qa[1]}
		now := r.interp.interpret(in)
		r.pending[ev.ID.String()] = pendingReading{text: x.Text, now: now}
	case *events.FeedbackInterpreted:
		pr, ok := r.pending[ev.CausationID]
		if !ok {
			r.s.Unmatched++
			return nil
		}
		delete(r.pending, ev.CausationID)
		version, _, _ := strings.Cut(x.InterpreterVersion, ";")
		r.s.Compared++
		r.s.ByVersion[version]++
		if version != r.s.Current {
			r.s.Older++
		}
		polChanged := polaritySign(x.Polarity) != polaritySign(pr.now.Polarity)
		corrChanged := NormalizeCorrection(x.Correction) != NormalizeCorrection(pr.now.Correction)
		if polChanged {
			r.s.PolarityChanged++
		}
		if corrChanged {
			r.s.CorrectionChanged++
		}
		if (polChanged || corrChanged) && len(r.s.Examples) < maxReinterpretExamples {
			r.s.Examples = append(r.s.Examples, ReinterpretDiff{Stream: ev.Stream, Text: truncateRunes(pr.text, 120), Version: version,
				Polarity: x.Polarity, Correction: x.Correction, NowPolarity: pr.now.Polarity, NowCorrection: pr.now.Correction})
		}
	}
	return nil
}

// Summary returns a copy of what was found so far.
func (r *Reinterpreter) Summary() ReinterpretSummary {
	s := r.s
	s.ByVersion = make(map[string]int, len(r.s.ByVersion))
	for k, v := range r.s.ByVersion {
		s.ByVersion[k] = v
	}
	s.Examples = append([]ReinterpretDiff(nil), r.s.Examples...)
	return s
}

// String is a short report: counts, then the examples.
func (s ReinterpretSummary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "re-read with %s: %d interpretations (%d by other versions", s.Current, s.Compared, s.Older)
	vs := make([]string, 0, len(s.ByVersion))
	for v := range s.ByVersion {
		vs = append(vs, v)
	}
	sort.Strings(vs)
	for _, v := range vs {
		fmt.Fprintf(&b, "; %s %d", v, s.ByVersion[v])
	}
	fmt.Fprintf(&b, "), polarity changed %d, correction changed %d", s.PolarityChanged, s.CorrectionChanged)
	if s.Unmatched > 0 {
		fmt.Fprintf(&b, ", unmatched %d", s.Unmatched)
	}
	for _, e := range s.Examples {
		fmt.Fprintf(&b, "\n    %s %q: %s %+.2f %q -> %+.2f %q", e.Stream, e.Text, e.Version, e.Polarity, e.Correction, e.NowPolarity, e.NowCorrection)
	}
	return b.String()
}
