package feedback

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"citizen/events"
)

// StreamReader reads one stream's events; events.Store satisfies it. The
// ingester uses it only to find the interaction's question and answer.
type StreamReader interface {
	ReadStream(ctx context.Context, stream string, from uint64, dir events.Direction, max int) ([]events.Event, error)
}

// IngesterConfig configures an Ingester.
type IngesterConfig struct {
	// Interpreter turns text into signals (default: NewEmbedded()).
	Interpreter Interpreter
	// Reader, if set, is read for the interaction.recorded event of the
	// feedback's stream, whose last user message and first answer are
	// given to the interpreter as context. Optional.
	Reader StreamReader
}

// Ingester turns feedback.received events into feedback.interpreted events.
// It is stateless and safe for concurrent use.
type Ingester struct {
	interp Interpreter
	reader StreamReader
	log    *slog.Logger
}

// NewIngester fills defaults and returns an Ingester. logger may be nil.
func NewIngester(cfg IngesterConfig, logger *slog.Logger) *Ingester {
	if cfg.Interpreter == nil {
		cfg.Interpreter = NewEmbedded()
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Ingester{interp: cfg.Interpreter, reader: cfg.Reader, log: logger.With("component", "feedback")}
}

// Handle is a router handler: for a feedback.received event it returns one
// feedback.interpreted event for the same stream, whose ID is
// events.DeterministicID(ev.ID, "feedback.interpreted") so that a retry
// appends nothing new; its causation is ev, its correlation the
// interaction id, its tenant ev's tenant and its time ev's time (so the
// output is a pure function of the input). Other event types give no
// events and no error.
//
// Errors: a feedback.received that does not decode gives an error wrapping
// events.ErrMalformed (retrying will not help: a router should dead-letter
// it); an interpreter or stream-read failure gives its error (a retry may
// help). Bad text is not an error: it is interpreted as neutral with low
// confidence.
func (in *Ingester) Handle(ctx context.Context, ev events.Event) ([]events.Event, error) {
	if ev.Type != events.TypeFeedbackReceived {
		return nil, nil
	}
	p, err := events.Decode(&ev)
	if err != nil {
		return nil, fmt.Errorf("feedback: event %s: %w", ev.ID, err)
	}
	fr, ok := p.(*events.FeedbackReceived)
	if !ok {
		return nil, fmt.Errorf("feedback: event %s: %w: unexpected payload %T", ev.ID, events.ErrMalformed, p)
	}
	interaction := fr.InteractionID
	if interaction == "" {
		interaction = strings.TrimPrefix(ev.Stream, "interaction-")
	}
	input := Input{Text: fr.Text, Rating: fr.Rating, Outcome: fr.Outcome, Correction: fr.Correction}
	if in.reader != nil && ev.Stream != "" {
		prompt, answer, err := in.context(ctx, ev.Stream)
		if err != nil {
			return nil, err
		}
		input.PromptText, input.AnswerText = prompt, answer
	}
	got, err := in.interp.Interpret(ctx, input)
	if err != nil {
		return nil, fmt.Errorf("feedback: interpreting %s: %w", ev.ID, err)
	}
	version := got.Version
	if got.Note != "" {
		version += ";" + got.Note
	}
	var agreement *events.InterpreterAgreement
	if a := got.Agreement; a != nil {
		agreement = &events.InterpreterAgreement{Votes: a.Votes, Valid: a.Valid, Share: a.Share, Reference: a.Reference,
			ReferencePolarity: a.ReferencePolarity, ReferenceCorrection: a.ReferenceCorrection, Polarity: a.Polarity, Correction: a.Correction}
	}
	out, err := events.Encode(&events.FeedbackInterpreted{
		InteractionID:      interaction,
		FeedbackID:         fr.FeedbackID,
		Polarity:           clamp(got.Polarity, -1, 1),
		Strength:           clamp(got.Strength, 0, 1),
		Aspects:            got.Aspects,
		Correction:         got.Correction,
		Hint:               got.Hint,
		Uncertain:          got.Uncertain,
		Confidence:         clamp(got.Confidence, 0, 1),
		InterpreterVersion: version,
		Agreement:          agreement,
	}, events.Meta{
		Stream:        ev.Stream,
		ID:            events.DeterministicID(ev.ID.String(), events.TypeFeedbackInterpreted),
		CausationID:   ev.ID.String(),
		CorrelationID: interaction,
		Tenant:        ev.Tenant,
		Time:          ev.Time,
	})
	if err != nil {
		return nil, fmt.Errorf("feedback: encoding interpretation of %s: %w", ev.ID, err)
	}
	in.log.DebugContext(ctx, "feedback interpreted", "interaction", interaction, "polarity", got.Polarity, "confidence", got.Confidence, "note", got.Note)
	return []events.Event{out}, nil
}

// context returns the last user message and the first answer of the
// interaction recorded in stream ("" if none is recorded yet).
func (in *Ingester) context(ctx context.Context, stream string) (prompt, answer string, err error) {
	evs, err := in.reader.ReadStream(ctx, stream, 0, events.Forward, 64)
	if errors.Is(err, events.ErrStreamNotFound) {
		return "", "", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("feedback: reading %s: %w", stream, err)
	}
	for i := range evs {
		if evs[i].Type != events.TypeInteractionRecorded {
			continue
		}
		p, err := events.Decode(&evs[i])
		if err != nil {
			in.log.WarnContext(ctx, "undecodable interaction", "stream", stream, "err", err)
			return "", "", nil
		}
		rec := p.(*events.InteractionRecorded)
		for j := len(rec.Messages) - 1; j >= 0; j-- {
			if rec.Messages[j].Role == "user" {
				prompt = rec.Messages[j].Content
				break
			}
		}
		if len(rec.Choices) > 0 {
			answer = rec.Choices[0].Message.Content
		}
		return prompt, answer, nil
	}
	return "", "", nil
}
