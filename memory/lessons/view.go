package lessons

import (
	"context"
	"sort"
	"sync"
	"time"

	"citizen/events"
	"citizen/internal/statement"
)

// Lesson is a lesson as the View knows it.
type Lesson struct {
	events.LessonChange
	State     string    `json:"state"` // proposed, promoted, superseded, retired
	UpdatedAt time.Time `json:"updated_at"`
	Position  uint64    `json:"position"`
}

// View is the projection of lesson.* events: every lesson's latest state,
// and, for the gateway, the promoted lessons that apply to a request
// (Applicable). Each process that serves requests rebuilds its own from the
// store (Follow). Safe for concurrent use.
type View struct {
	cfg Config
	emb Embedder

	mu      sync.RWMutex
	lessons map[string]*viewLesson
	// active: promoted lessons by tenant.
	active map[string][]*viewLesson
}

type viewLesson struct {
	Lesson
	anchors, answers []anchor
}

// NewView returns an empty view embedding questions with emb.
func NewView(cfg Config, emb Embedder) *View {
	return &View{cfg: cfg.withDefaults(), emb: emb, lessons: map[string]*viewLesson{}, active: map[string][]*viewLesson{}}
}

// Apply folds one event into the view; other events are ignored.
func (v *View) Apply(ctx context.Context, ev events.Event) error {
	var state string
	switch ev.Type {
	case events.TypeLessonProposed:
		state = "proposed"
	case events.TypeLessonPromoted:
		state = "promoted"
	case events.TypeLessonSuperseded:
		state = "superseded"
	case events.TypeLessonRetired:
		state = "retired"
	default:
		return nil
	}
	p, err := events.Decode(&ev)
	if err != nil {
		return err
	}
	c, _ := events.LessonChangeOf(p)
	var anchors, answers []anchor
	if state == "promoted" && c.Kind == events.LessonFact {
		var err error
		if anchors, err = v.embedAll(ctx, c.Scope.Anchors); err != nil {
			return err
		}
		if answers, err = v.embedAll(ctx, c.Scope.Answers); err != nil {
			return err
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	old := v.lessons[c.LessonID]
	if old != nil && old.Position > ev.Position && ev.Position != 0 {
		return nil
	}
	if state == "proposed" && old != nil {
		return nil // a late proposal does not undo a later decision
	}
	nl := &viewLesson{Lesson: Lesson{LessonChange: c, State: state, UpdatedAt: ev.Time, Position: ev.Position}, anchors: anchors, answers: answers}
	v.lessons[c.LessonID] = nl
	t := c.Scope.Tenant
	list := v.active[t][:0:0]
	for _, x := range v.active[t] {
		if x.LessonID != c.LessonID {
			list = append(list, x)
		}
	}
	if state == "promoted" {
		list = append(list, nl)
	}
	v.active[t] = list
	return nil
}

func (v *View) embedAll(ctx context.Context, texts []string) ([]anchor, error) {
	if len(texts) == 0 {
		return nil, nil
	}
	vecs, err := v.emb.Embed(ctx, texts)
	if err != nil {
		return nil, err
	}
	out := make([]anchor, len(texts))
	for i, t := range texts {
		out[i] = anchor{text: t, vec: vecs[i], nums: numbers(t)}
	}
	return out, nil
}

// Store is what Follow reads.
type Store interface {
	Subscribe(ctx context.Context, after uint64, f events.Filter, h events.Handler) error
}

// Follow replays and then follows the store's lesson.* events into the
// view until ctx is cancelled. Events that do not decode are skipped.
func (v *View) Follow(ctx context.Context, s Store) error {
	return s.Subscribe(ctx, 0, events.Filter{Types: events.LessonTypes}, func(ctx context.Context, ev events.Event) error {
		_ = v.Apply(ctx, ev)
		return nil
	})
}

// Query is what a request offers to find its lessons.
type Query struct {
	Tenant   string
	User     string
	TaskType string // declared; empty when the request names none
	Question string // the request's last user message (Question)
}

// Applicable returns the promoted lessons that apply to q, the closest
// facts first and then the user's guidance, at most Config.MaxPerRequest.
func (v *View) Applicable(ctx context.Context, q Query) ([]events.AppliedLesson, error) {
	facts, guidance, err := v.matches(ctx, q)
	if err != nil {
		return nil, err
	}
	var out []events.AppliedLesson
	for _, l := range append(facts, guidance...) {
		if len(out) == v.cfg.MaxPerRequest {
			break
		}
		out = append(out, events.AppliedLesson{ID: l.LessonID, Statement: l.Statement})
	}
	return out, nil
}

// Revise returns the promoted fact lessons that an answer to q shows
// apply: answer is close to one of their corrected answers (stating the
// same numbers) and does not state their value. The gateway answers again
// with them in the context.
func (v *View) Revise(ctx context.Context, q Query, answer string) ([]events.AppliedLesson, error) {
	ls, err := v.byAnswer(ctx, q, answer)
	if err != nil {
		return nil, err
	}
	var out []events.AppliedLesson
	for _, l := range ls {
		if len(out) == v.cfg.MaxPerRequest {
			break
		}
		out = append(out, events.AppliedLesson{ID: l.LessonID, Statement: l.Statement})
	}
	return out, nil
}

// Reference returns the promoted fact lesson that applies to q (by its
// question, or by answer, when given, as Revise finds them), if any: its
// value is a reference answer for graders. An empty q.Tenant looks at
// every tenant's lessons (the operator's regression suite belongs to no
// tenant).
func (v *View) Reference(ctx context.Context, q Query, answer string) (Lesson, bool, error) {
	facts, _, err := v.matches(ctx, q)
	if err != nil {
		return Lesson{}, false, err
	}
	if len(facts) > 0 {
		return facts[0].Lesson, true, nil
	}
	if answer == "" {
		return Lesson{}, false, nil
	}
	ls, err := v.byAnswer(ctx, q, answer)
	if err != nil || len(ls) == 0 {
		return Lesson{}, false, err
	}
	return ls[0].Lesson, true, nil
}

// byAnswer returns the promoted fact lessons of q's tenant and type whose
// corrected answers answer is close to (stating the same numbers), the
// closest first, leaving out those whose value answer states.
func (v *View) byAnswer(ctx context.Context, q Query, answer string) ([]*viewLesson, error) {
	cands := v.facts(q)
	if len(cands) == 0 || answer == "" {
		return nil, nil
	}
	vecs, err := v.emb.Embed(ctx, []string{answer})
	if err != nil {
		return nil, err
	}
	an := numbers(answer)
	norm := statement.Normalize(answer)
	sims := map[*viewLesson]float64{}
	var out []*viewLesson
	for _, l := range cands {
		if statement.Contains(norm, statement.Normalize(l.Value)) {
			continue
		}
		best := -1.0
		for _, a := range l.answers {
			if sameNumbers(a.nums, an) {
				best = max(best, cosine(a.vec, vecs[0]))
			}
		}
		if best >= v.cfg.Similarity {
			out = append(out, l)
			sims[l] = best
		}
	}
	byCloseness(out, sims)
	return out, nil
}

// facts are the promoted fact lessons of q's tenant (every tenant's for
// an empty one) and task type.
func (v *View) facts(q Query) []*viewLesson {
	var out []*viewLesson
	for _, l := range v.promoted(q.Tenant) {
		if isFactFor(l, q) {
			out = append(out, l)
		}
	}
	return out
}

// promoted are the promoted lessons of tenant (every tenant's for "").
func (v *View) promoted(tenant string) []*viewLesson {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if tenant != "" {
		return v.active[tenant]
	}
	var out []*viewLesson
	for _, l := range v.active {
		out = append(out, l...)
	}
	return out
}

// isFactFor reports whether l is a fact lesson of q's task type (either
// may name none).
func isFactFor(l *viewLesson, q Query) bool {
	return l.Kind == events.LessonFact && (q.TaskType == "" || l.Scope.TaskType == "" || q.TaskType == l.Scope.TaskType)
}

// byCloseness sorts ls by similarity, the closest first (lesson id breaks
// ties).
func byCloseness(ls []*viewLesson, sims map[*viewLesson]float64) {
	sort.Slice(ls, func(i, j int) bool {
		if sims[ls[i]] != sims[ls[j]] {
			return sims[ls[i]] > sims[ls[j]]
		}
		return ls[i].LessonID < ls[j].LessonID
	})
}

// matches returns the promoted fact lessons whose scope holds q's
// question, closest first, and the user's guidance lessons.
func (v *View) matches(ctx context.Context, q Query) (facts, guidance []*viewLesson, err error) {
	list := v.promoted(q.Tenant)
	var cands []*viewLesson
	for _, l := range list {
		switch {
		case l.Kind == events.LessonGuidance && l.Scope.User != "" && l.Scope.User == q.User:
			guidance = append(guidance, l)
		case isFactFor(l, q):
			cands = append(cands, l)
		}
	}
	sort.Slice(guidance, func(i, j int) bool { return guidance[i].LessonID < guidance[j].LessonID })
	if len(cands) == 0 || q.Question == "" {
		return nil, guidance, nil
	}
	vecs, err := v.emb.Embed(ctx, []string{q.Question})
	if err != nil {
		return nil, nil, err
	}
	qn := numbers(q.Question)
	sims := map[*viewLesson]float64{}
	for _, l := range cands {
		best := -1.0
		for _, a := range l.anchors {
			if !numbersCovered(a.nums, qn) {
				continue
			}
			best = max(best, cosine(a.vec, vecs[0]))
		}
		if best >= v.cfg.Similarity {
			facts = append(facts, l)
			sims[l] = best
		}
	}
	byCloseness(facts, sims)
	return facts, guidance, nil
}

// List returns the lessons of tenant ("" for every tenant) in state
// ("" for any), the most recently changed first.
func (v *View) List(tenant, state string) []Lesson {
	v.mu.RLock()
	defer v.mu.RUnlock()
	var out []Lesson
	for _, l := range v.lessons {
		if (tenant == "" || l.Scope.Tenant == tenant) && (state == "" || l.State == state) {
			out = append(out, l.Lesson)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Position != out[j].Position {
			return out[i].Position > out[j].Position
		}
		return out[i].LessonID < out[j].LessonID
	})
	return out
}

// Get returns one lesson.
func (v *View) Get(id string) (Lesson, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	l, ok := v.lessons[id]
	if !ok {
		return Lesson{}, false
	}
	return l.Lesson, true
}
