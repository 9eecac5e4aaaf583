package lessons

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"citizen/events"
)

// Config holds the evidence rules (see the package doc) and the cluster
// geometry. The zero value means the defaults.
type Config struct {
	// Off: no lessons are placed in requests' contexts (the learner still
	// records them).
	Off           bool    `yaml:"off" help:"place no lessons in requests' contexts (fast memory off; lessons are still learnt and recorded)"`
	MinUsers      int     `yaml:"min_users" help:"distinct users who must agree before a fact lesson is promoted (default 2)"`
	Majority      float64 `yaml:"majority" help:"agreeing users must be at least this many times those who disagree (default 2)"`
	MinRepeats    int     `yaml:"min_repeats" help:"interactions on which a user must give the same hint before it becomes their guidance lesson (default 2)"`
	Similarity    float64 `yaml:"similarity" help:"cosine similarity a question needs to a lesson's anchor to be in its scope (default 0.75)"`
	MaxAnchors    int     `yaml:"max_anchors" help:"questions kept per lesson cluster (default 16)"`
	MaxPerRequest int     `yaml:"max_per_request" help:"lessons placed in one request's context (default 3)"`
	// TrialInteractions: evaluated interactions a promoted lesson is
	// placed in before its effect is judged (default 20); TrialMargin: it
	// is retired when their mean reward is below its baseline by more
	// than this (default 0.1).
	TrialInteractions int     `yaml:"trial_interactions" help:"evaluated interactions with a promoted lesson in context before its effect on rewards is judged (default 20)"`
	TrialMargin       float64 `yaml:"trial_margin" help:"a promoted lesson whose interactions' mean reward falls this far below its baseline is retired (default 0.1)"`
}

func (c Config) withDefaults() Config {
	if c.MinUsers <= 0 {
		c.MinUsers = 2
	}
	if c.Majority <= 0 {
		c.Majority = 2
	}
	if c.MinRepeats <= 0 {
		c.MinRepeats = 2
	}
	if c.Similarity <= 0 || c.Similarity > 1 {
		c.Similarity = 0.75
	}
	if c.MaxAnchors <= 0 {
		c.MaxAnchors = 16
	}
	if c.MaxPerRequest <= 0 {
		c.MaxPerRequest = 3
	}
	if c.TrialInteractions <= 0 {
		c.TrialInteractions = 20
	}
	if c.TrialMargin <= 0 {
		c.TrialMargin = 0.1
	}
	return c
}

// Embedder turns texts into vectors (memory.Embedder satisfies it).
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// StreamReader reads one interaction's events.
type StreamReader interface {
	ReadStream(ctx context.Context, stream string, from uint64, dir events.Direction, max int) ([]events.Event, error)
}

// LearnerActor is the actor of the lesson events the learner appends.
const LearnerActor = "learner"

// Learner turns interpreted feedback into lesson.* events under the
// evidence rules. Handle is its bus handler; it is safe for concurrent use.
type Learner struct {
	cfg   Config
	store StreamReader
	emb   Embedder
	log   *slog.Logger

	mu       sync.Mutex
	seen     map[string]bool // feedback ids handled
	clusters map[string][]*cluster
	lessons  map[string]*lesson
	// baselines: the recent rewards of each user's interactions without
	// lessons ("u", tenant, user).
	baselines map[string]*ring
	// carries: per trained version, its lesson check (weights.trained
	// lessons), until it is promoted.
	carries map[string][]events.LessonCarry
}

type anchor struct {
	text string
	vec  []float32
	nums map[string]bool
}

type lesson struct {
	change events.LessonChange
	state  string // proposed, promoted, superseded, retired
	cl     *cluster
	// repeats: a guidance lesson's evidence per interaction.
	repeats map[string]events.LessonEvidence
	// trial: the latest reward of each interaction the promoted lesson
	// was placed in, until its effect is judged.
	trial  map[string]float64
	judged bool
}

// NewLearner returns a learner reading interactions from store and
// embedding questions with emb.
func NewLearner(cfg Config, store StreamReader, emb Embedder, log *slog.Logger) *Learner {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Learner{cfg: cfg.withDefaults(), store: store, emb: emb, log: log,
		seen: map[string]bool{}, clusters: map[string][]*cluster{}, lessons: map[string]*lesson{}, baselines: map[string]*ring{}, carries: map[string][]events.LessonCarry{}}
}

// Topics are the event types the learner handles.
var Topics = append([]string{events.TypeFeedbackInterpreted, events.TypeInteractionEvaluated, events.TypeWeightsTrained, events.TypeRolloutPromoted}, events.LessonTypes...)

// Handle is the bus handler: feedback.interpreted may propose, promote or
// supersede lessons; lesson.* events from others (an operator, the
// distiller's retirement) update the lifecycle.
func (l *Learner) Handle(ctx context.Context, ev events.Event) ([]events.Event, error) {
	switch {
	case ev.Type == events.TypeFeedbackInterpreted:
		return l.feedback(ctx, ev)
	case ev.Type == events.TypeInteractionEvaluated:
		return l.evaluated(ev)
	case ev.Type == events.TypeWeightsTrained || ev.Type == events.TypeRolloutPromoted:
		return l.weights(ev)
	case strings.HasPrefix(ev.Type, "lesson."):
		return nil, l.applyLesson(ev)
	}
	return nil, nil
}

// Scanner replays the store (events.Store satisfies it).
type Scanner interface {
	ReadAll(ctx context.Context, after uint64, f events.Filter, max int) ([]events.Event, error)
}

// Rebuild replays feedback.interpreted and lesson.* events from the store
// in order, so the learner's votes and lifecycle are as they were; the
// events it would append are already stored. It returns the position of
// the last event it read.
func (l *Learner) Rebuild(ctx context.Context, s Scanner) (uint64, error) {
	f := events.Filter{Types: Topics}
	var pos uint64
	for {
		evs, err := s.ReadAll(ctx, pos, f, 1000)
		if err != nil {
			return pos, err
		}
		if len(evs) == 0 {
			return pos, nil
		}
		for _, ev := range evs {
			pos = ev.Position
			switch ev.Type {
			case events.TypeFeedbackInterpreted:
				if _, err := l.feedback(ctx, ev); err != nil {
					l.log.Warn("lessons: feedback skipped in rebuild", "position", ev.Position, "err", err)
				}
				continue
			case events.TypeWeightsTrained, events.TypeRolloutPromoted:
				if _, err := l.weights(ev); err != nil {
					l.log.Warn("lessons: event skipped in rebuild", "position", ev.Position, "err", err)
				}
				continue
			case events.TypeInteractionEvaluated:
				if _, err := l.evaluated(ev); err != nil {
					l.log.Warn("lessons: evaluation skipped in rebuild", "position", ev.Position, "err", err)
				}
				continue
			}
			if err := l.applyLesson(ev); err != nil {
				l.log.Warn("lessons: event skipped in rebuild", "position", ev.Position, "err", err)
			}
		}
	}
}

// applyLesson applies a lesson event that the learner did not derive
// itself (its own are derived again from the feedback they came from).
func (l *Learner) applyLesson(ev events.Event) error {
	p, err := events.Decode(&ev)
	if err != nil {
		return err
	}
	c, ok := events.LessonChangeOf(p)
	if !ok || c.Actor == LearnerActor {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ls := l.lessons[c.LessonID]
	if ls == nil {
		return nil
	}
	switch ev.Type {
	case events.TypeLessonRetired:
		ls.state, ls.trial = "retired", nil
	case events.TypeLessonPromoted:
		ls.state = "promoted"
	case events.TypeLessonSuperseded:
		ls.state = "superseded"
	}
	return nil
}

func (l *Learner) feedback(ctx context.Context, ev events.Event) ([]events.Event, error) {
	p, err := events.Decode(&ev)
	if err != nil {
		return nil, err
	}
	fi, ok := p.(*events.FeedbackInterpreted)
	if !ok || fi.Uncertain {
		return nil, nil
	}
	praise := fi.Correction == "" && fi.Polarity > 0
	guidance := fi.Correction == "" && fi.Hint != "" && fi.Polarity < 0 && aboutHow(fi.Aspects)
	if fi.Correction == "" && !praise && !guidance {
		return nil, nil
	}
	l.mu.Lock()
	seen := l.seen[fi.FeedbackID]
	l.mu.Unlock()
	if seen {
		return nil, nil
	}
	rec, user, text, err := l.interaction(ctx, ev.Stream, fi.FeedbackID)
	if err != nil {
		return nil, err
	}
	tenant := rec.Tenant
	if tenant == "" {
		tenant = ev.Tenant
	}
	evidence := events.LessonEvidence{Feedback: fi.FeedbackID, Interaction: rec.InteractionID, User: user}
	if fi.Correction != "" || praise {
		q, a := Question(rec.Messages), Answer(rec)
		if q == "" || a == "" {
			return nil, nil
		}
		vecs, err := l.emb.Embed(ctx, []string{q, a})
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.seen[fi.FeedbackID] {
			return nil, nil
		}
		l.seen[fi.FeedbackID] = true
		c := claim{tenant: tenant, typ: rec.TaskType, question: anchor{text: q, vec: vecs[0], nums: numbers(q)},
			answer: anchor{text: a, vec: vecs[1], nums: numbers(a)}, value: fi.Correction, comment: text, praise: praise, ev: evidence}
		return l.factClaim(ev, c)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen[fi.FeedbackID] {
		return nil, nil
	}
	l.seen[fi.FeedbackID] = true
	return l.guidanceClaim(ev, tenant, fi.Hint, evidence)
}

// interaction reads the recorded interaction of stream and the user who
// gave feedback id (the interaction's user when the feedback names none).
func (l *Learner) interaction(ctx context.Context, stream, feedbackID string) (*events.InteractionRecorded, string, string, error) {
	evs, err := l.store.ReadStream(ctx, stream, 0, events.Forward, 10000)
	if err != nil {
		return nil, "", "", fmt.Errorf("lessons: reading %s: %w", stream, err)
	}
	var rec *events.InteractionRecorded
	user, text := "", ""
	for i := range evs {
		switch evs[i].Type {
		case events.TypeInteractionRecorded:
			p, err := events.Decode(&evs[i])
			if err != nil {
				return nil, "", "", err
			}
			rec = p.(*events.InteractionRecorded)
		case events.TypeFeedbackReceived:
			p, err := events.Decode(&evs[i])
			if err != nil {
				continue
			}
			if fr := p.(*events.FeedbackReceived); fr.FeedbackID == feedbackID {
				user, text = fr.User, fr.Text
			}
		}
	}
	if rec == nil {
		return nil, "", "", errors.New("lessons: " + stream + " has no interaction.recorded")
	}
	if user == "" {
		user = rec.User
	}
	return rec, user, text, nil
}

func (l *Learner) guidanceClaim(src events.Event, tenant, hint string, ev events.LessonEvidence) ([]events.Event, error) {
	if ev.User == "" {
		return nil, nil // a guidance lesson is one user's; without a user it has no scope
	}
	statement := strings.TrimSpace(hint)
	id := lessonID("guidance", tenant, ev.User, normValue(statement))
	var out []events.Event
	ls := l.lessons[id]
	if ls == nil {
		ls = &lesson{state: "proposed", repeats: map[string]events.LessonEvidence{}, change: events.LessonChange{
			LessonID: id, Kind: events.LessonGuidance, Statement: statement,
			Scope: events.LessonScope{Tenant: tenant, User: ev.User},
		}}
		l.lessons[id] = ls
		ls.repeats[ev.Interaction] = ev
		ch := l.snapshot(ls)
		ch.Rule = "one hint"
		e, err := encode(&events.LessonProposed{LessonChange: ch}, src, events.DeterministicID(events.TypeLessonProposed, id))
		if err != nil {
			return nil, err
		}
		return append(out, e), nil
	}
	ls.repeats[ev.Interaction] = ev
	if ls.state != "proposed" || len(ls.repeats) < l.cfg.MinRepeats {
		return nil, nil
	}
	ls.state = "promoted"
	ch := l.snapshot(ls)
	ch.Rule = fmt.Sprintf("the user gave it on %d interactions (need %d)", len(ls.repeats), l.cfg.MinRepeats)
	e, err := encode(&events.LessonPromoted{LessonChange: ch}, src, events.DeterministicID(events.TypeLessonPromoted, id+"/"+ev.Feedback))
	if err != nil {
		return nil, err
	}
	return append(out, e), nil
}

func encode(p events.Payload, src events.Event, id [16]byte) (events.Event, error) {
	c, _ := events.LessonChangeOf(p)
	return events.Encode(p, events.Meta{
		Stream:        events.LessonStream(c.LessonID),
		CorrelationID: c.LessonID,
		CausationID:   src.ID.String(),
		Tenant:        c.Scope.Tenant,
		ID:            id,
	})
}

// aboutHow reports whether feedback names an aspect of how to answer
// (length, tone, format, completeness, tool use): only such a hint is
// guidance. A complaint that the answer was wrong, without the right
// answer, says nothing to do differently.
func aboutHow(aspects []string) bool {
	for _, a := range aspects {
		switch a {
		case "length", "tone", "format", "completeness", "tool_use":
			return true
		}
	}
	return false
}

// ring holds the latest rewards of a baseline.
type ring struct {
	xs   [200]float64
	n, i int
}

func (r *ring) add(x float64) {
	r.xs[r.i] = x
	r.i = (r.i + 1) % len(r.xs)
	r.n = min(r.n+1, len(r.xs))
}

func (r *ring) mean() float64 {
	s := 0.0
	for _, x := range r.xs[:r.n] {
		s += x
	}
	return s / float64(r.n)
}

// minBaseline is the evaluations a baseline needs before a lesson is
// judged against it.
const minBaseline = 10

// evaluated follows rewards: of interactions without lessons into the
// baselines, of those with promoted guidance lessons into the lessons'
// trials. A guidance lesson whose trial's mean reward is below its user's
// baseline by more than Config.TrialMargin is retired: it did not help.
// A fact lesson is not on trial: its baseline would be the answers it
// corrects, and customers' corrections already judge it (a contradicting
// lesson supersedes it).
func (l *Learner) evaluated(ev events.Event) ([]events.Event, error) {
	p, err := events.Decode(&ev)
	if err != nil {
		return nil, err
	}
	x, ok := p.(*events.InteractionEvaluated)
	if !ok || len(x.RewardTerms) == 0 {
		return nil, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	userKey := "u\x00" + ev.Tenant + "\x00" + x.User
	if len(x.Lessons) == 0 {
		b := l.baselines[userKey]
		if b == nil {
			b = &ring{}
			l.baselines[userKey] = b
		}
		b.add(x.Reward)
		return nil, nil
	}
	var out []events.Event
	for _, id := range x.Lessons {
		ls := l.lessons[id]
		if ls == nil || ls.state != "promoted" || ls.judged || ls.change.Kind != events.LessonGuidance {
			continue
		}
		if ls.trial == nil {
			ls.trial = map[string]float64{}
		}
		ls.trial[x.InteractionID] = x.Reward
		if len(ls.trial) < l.cfg.TrialInteractions {
			continue
		}
		b := l.baselines[userKey]
		if b == nil || b.n < minBaseline {
			continue
		}
		sum := 0.0
		for _, r := range ls.trial {
			sum += r
		}
		with, base := sum/float64(len(ls.trial)), b.mean()
		ls.judged, ls.trial = true, nil
		if with >= base-l.cfg.TrialMargin {
			continue
		}
		ls.state = "retired"
		ch := l.snapshot(ls)
		ch.Reason = fmt.Sprintf("did not help: placed in %d evaluated interactions, mean reward %.3f against %.3f without lessons (margin %g)",
			l.cfg.TrialInteractions, with, base, l.cfg.TrialMargin)
		e, err := encode(&events.LessonRetired{LessonChange: ch}, ev, events.DeterministicID(events.TypeLessonRetired, id+"/trial"))
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// weights retires the lessons a promoted version carries: its lesson
// check (weights.trained lessons) found it answers their questions as
// well without them in the context as with them (LessonCarry.Carried).
func (l *Learner) weights(ev events.Event) ([]events.Event, error) {
	p, err := events.Decode(&ev)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch x := p.(type) {
	case *events.WeightsTrained:
		if x.Accepted && len(x.Lessons) > 0 {
			l.carries[x.Version] = x.Lessons
		}
		return nil, nil
	case *events.RolloutPromoted:
		carries := l.carries[x.Candidate]
		delete(l.carries, x.Candidate)
		var out []events.Event
		for _, c := range carries {
			ls := l.lessons[c.Lesson]
			if ls == nil || ls.state != "promoted" || !c.Carried() {
				continue
			}
			ls.state = "retired"
			ch := l.snapshot(ls)
			ch.Retirement = &events.LessonRetirement{Version: x.Candidate, Asked: c.Asked, Without: c.Without, WithLesson: c.With,
				Explanation: "the promoted weights answer the lesson's questions as well without it in the context as with it"}
			ch.Reason = "carried by " + x.Candidate
			e, err := encode(&events.LessonRetired{LessonChange: ch}, ev, events.DeterministicID(events.TypeLessonRetired, c.Lesson+"/"+x.Candidate))
			if err != nil {
				return nil, err
			}
			out = append(out, e)
		}
		return out, nil
	}
	return nil, nil
}
