package reflection

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"math"

	"citizen/events"
)

// StreamReader reads one stream's events in order; events.Store satisfies
// it. The evaluator reads an interaction's stream when feedback arrives.
type StreamReader interface {
	ReadStream(ctx context.Context, stream string, from uint64, dir events.Direction, max int) ([]events.Event, error)
}

//go:embed rubrics.default.yaml
var defaultRubricsYAML []byte

// DefaultRubrics compiles the rubrics shipped with citizen
// (rubrics.default.yaml: the workplace's task types).
func DefaultRubrics() *Rubrics {
	r, err := ParseRubrics(defaultRubricsYAML)
	if err != nil {
		panic("reflection: shipped rubrics do not compile: " + err.Error())
	}
	return r
}

// TypeInferrer guesses the type of an interaction its client did not
// label (citizen wires the memory's k-NN vote over labelled
// interactions). An empty type means no confident guess.
type TypeInferrer interface {
	InferType(ctx context.Context, rec *events.InteractionRecorded) (typ string, confidence float64, err error)
}

// EvaluatorConfig configures an Evaluator.
type EvaluatorConfig struct {
	// Types, if set, infers the type of unlabelled interactions before the
	// rubrics' prompt patterns are tried. Its guesses are recorded in the
	// evaluation (type_source "inferred", type_confidence), so replay reads
	// them instead of asking again.
	Types TypeInferrer
	// Rubrics in force (default: StaticRubrics(DefaultRubrics())).
	Rubrics *RubricStore
	// Config: reward weights and policy (zero value: DefaultConfig()).
	Config *Config
	// Reader is required to evaluate feedback events (it reads the
	// interaction and its earlier feedback).
	Reader StreamReader
	// References, if set, gives the graders a reference answer for an
	// interaction that carries none and whose feedback states none: the
	// promoted lesson that applies to its question.
	References References
}

// References finds a reference answer for an interaction outside it (the
// promoted lesson whose scope holds its question). source names it (the
// lesson's id) for the evaluation's record.
type References interface {
	Reference(ctx context.Context, rec *events.InteractionRecorded) (value, source string, ok bool)
}

// Evaluator turns interaction.recorded, feedback.received and
// feedback.interpreted events into interaction.evaluated events. It holds
// no state of its own; safe for concurrent use.
type Evaluator struct {
	rubrics *RubricStore
	cfg     Config
	reader  StreamReader
	types   TypeInferrer
	refs    References
	log     *slog.Logger
}

// NewEvaluator fills defaults, validates and returns an Evaluator. logger
// may be nil.
func NewEvaluator(cfg EvaluatorConfig, logger *slog.Logger) (*Evaluator, error) {
	if cfg.Rubrics == nil {
		cfg.Rubrics = StaticRubrics(DefaultRubrics())
	}
	c := DefaultConfig()
	if cfg.Config != nil {
		c = *cfg.Config
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Evaluator{rubrics: cfg.Rubrics, cfg: c, reader: cfg.Reader, types: cfg.Types, refs: cfg.References, log: logger.With("component", "reflection")}, nil
}

// Handle is a router handler. For interaction.recorded it returns the first
// evaluation (Seq 1). For feedback.received and feedback.interpreted it
// reads the interaction's stream up to the event and returns a new
// evaluation whose Seq is 1 + the number of evaluation triggers before the
// event in the stream (late feedback gives Seq 2, 3, ...), taking into
// account all feedback up to and including it. The evaluation's ID is
// events.DeterministicID(ev.ID, "interaction.evaluated"), its stream,
// tenant and time those of ev, its causation ev and its correlation the
// interaction id: a retry or a replay produces the same event. Other types
// give nothing.
//
// Errors: an undecodable trigger wraps events.ErrMalformed (dead-letter
// it); a stream read failure is returned for retry. Feedback on an
// interaction whose recording is not in its stream is logged and gives no
// evaluation.
func (e *Evaluator) Handle(ctx context.Context, ev events.Event) ([]events.Event, error) {
	switch ev.Type {
	case events.TypeInteractionRecorded:
		p, err := events.Decode(&ev)
		if err != nil {
			return nil, fmt.Errorf("reflection: event %s: %w", ev.ID, err)
		}
		rec := p.(*events.InteractionRecorded)
		var fb Feedback
		e.inferType(ctx, rec, &fb)
		e.reference(ctx, rec, &fb)
		out := Evaluate(e.rubrics.Current(), e.cfg, rec, fb)
		out.Seq = 1
		return e.emit(ev, out)
	case events.TypeFeedbackReceived, events.TypeFeedbackInterpreted:
		if _, err := events.Decode(&ev); err != nil {
			return nil, fmt.Errorf("reflection: event %s: %w", ev.ID, err)
		}
		if e.reader == nil {
			return nil, errors.New("reflection: evaluating feedback needs a StreamReader")
		}
		rec, fb, seq, err := e.history(ctx, ev)
		if err != nil {
			return nil, err
		}
		if rec == nil {
			e.log.WarnContext(ctx, "feedback for an interaction that is not recorded", "stream", ev.Stream, "event", ev.ID)
			return nil, nil
		}
		e.inferType(ctx, rec, &fb)
		e.reference(ctx, rec, &fb)
		out := Evaluate(e.rubrics.Current(), e.cfg, rec, fb)
		out.Seq = seq
		return e.emit(ev, out)
	}
	return nil, nil
}

// reference asks References for a reference answer when the feedback
// states none; the graders use it as they use a correction.
func (e *Evaluator) reference(ctx context.Context, rec *events.InteractionRecorded, fb *Feedback) {
	if e.refs == nil || fb.Correction != "" {
		return
	}
	if v, src, ok := e.refs.Reference(ctx, rec); ok {
		fb.Correction, fb.CorrectionSource = v, src
	}
}

// inferType asks the TypeInferrer about an unlabelled interaction; a
// failure is logged and the rubrics' patterns decide instead.
func (e *Evaluator) inferType(ctx context.Context, rec *events.InteractionRecorded, fb *Feedback) {
	if e.types == nil || rec.TaskType != "" || rec.Metadata["task_type"] != "" || rec.Metadata["type"] != "" {
		return
	}
	t, conf, err := e.types.InferType(ctx, rec)
	if err != nil {
		e.log.WarnContext(ctx, "type inference failed", "interaction", rec.InteractionID, "err", err)
		return
	}
	fb.Type, fb.TypeConfidence = t, conf
}

func (e *Evaluator) emit(cause events.Event, out events.InteractionEvaluated) ([]events.Event, error) {
	ev, err := events.Encode(&out, events.Meta{
		Stream:        cause.Stream,
		ID:            events.DeterministicID(cause.ID.String(), events.TypeInteractionEvaluated),
		CausationID:   cause.ID.String(),
		CorrelationID: out.InteractionID,
		Tenant:        cause.Tenant,
		Time:          cause.Time,
	})
	if err != nil {
		return nil, fmt.Errorf("reflection: encoding evaluation: %w", err)
	}
	return []events.Event{ev}, nil
}

// history reads the stream of ev up to and including ev and returns the
// recording, the aggregated feedback and the evaluation's Seq.
func (e *Evaluator) history(ctx context.Context, ev events.Event) (*events.InteractionRecorded, Feedback, int, error) {
	var rec *events.InteractionRecorded
	type fbState struct {
		polarity, confidence float64
		interpreted          bool
		rating               *float64
	}
	byID := map[string]*fbState{}
	var order []string
	var fb Feedback
	triggers := 0
	found := false
	apply := func(x *events.Event) {
		switch x.Type {
		case events.TypeInteractionRecorded:
			if p, err := events.Decode(x); err == nil && rec == nil {
				rec = p.(*events.InteractionRecorded)
			}
		case events.TypeFeedbackReceived:
			p, err := events.Decode(x)
			if err != nil {
				return
			}
			fr := p.(*events.FeedbackReceived)
			if fr.Outcome != "" {
				fb.Outcome = fr.Outcome
			}
			if fr.Correction != "" {
				fb.Correction = fr.Correction
			}
			st := byID[fr.FeedbackID]
			if st == nil {
				st = &fbState{}
				byID[fr.FeedbackID] = st
				order = append(order, fr.FeedbackID)
			}
			if fr.Rating != nil && !math.IsNaN(*fr.Rating) {
				r := *fr.Rating
				st.rating = &r
			}
		case events.TypeFeedbackInterpreted:
			p, err := events.Decode(x)
			if err != nil {
				return
			}
			fi := p.(*events.FeedbackInterpreted)
			st := byID[fi.FeedbackID]
			if st == nil {
				st = &fbState{}
				byID[fi.FeedbackID] = st
				order = append(order, fi.FeedbackID)
			}
			st.polarity, st.confidence, st.interpreted = fi.Polarity, fi.Confidence, true
			if fi.Correction != "" && !fi.Uncertain { // an uncertain correction is recorded, never graded on
				fb.Correction = fi.Correction
			}
		}
	}
	isTrigger := func(t string) bool {
		return t == events.TypeInteractionRecorded || t == events.TypeFeedbackReceived || t == events.TypeFeedbackInterpreted
	}
	var from uint64
	const page = 256
	for !found {
		evs, err := e.reader.ReadStream(ctx, ev.Stream, from, events.Forward, page)
		if errors.Is(err, events.ErrStreamNotFound) {
			break
		}
		if err != nil {
			return nil, Feedback{}, 0, fmt.Errorf("reflection: reading %s: %w", ev.Stream, err)
		}
		for i := range evs {
			if evs[i].ID == ev.ID {
				found = true
				break
			}
			if isTrigger(evs[i].Type) {
				triggers++
			}
			apply(&evs[i])
		}
		if len(evs) < page {
			break
		}
		from = evs[len(evs)-1].Revision + 1
	}
	apply(&ev)
	// combine feedback: interpreted polarity, else the rating
	var num, den, maxC float64
	for _, id := range order {
		st := byID[id]
		p, c := st.polarity, st.confidence
		if !st.interpreted {
			if st.rating == nil {
				continue
			}
			p, c = clamp((*st.rating-3)/2, -1, 1), 0.9
		}
		if c < e.cfg.Reward.MinFeedbackConfidence {
			continue
		}
		num += p * c
		den += c
		maxC = math.Max(maxC, c)
	}
	if den > 0 {
		p := round6(num / den)
		fb.Polarity, fb.Confidence = &p, maxC
	}
	return rec, fb, triggers + 1, nil
}
