package lessons

import (
	"context"
	"sort"
	"sync"
	"time"

	"citizen/events"
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
	anchors []anchor
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
	var anchors []anchor
	if state == "promoted" && c.Kind == events.LessonFact && len(c.Scope.Anchors) > 0 {
		vecs, err := v.emb.Embed(ctx, c.Scope.Anchors)
		if err != nil {
			return err
		}
		for i, t := range c.Scope.Anchors {
			anchors = append(anchors, anchor{text: t, vec: vecs[i], nums: numbers(t)})
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
	nl := &viewLesson{Lesson: Lesson{LessonChange: c, State: state, UpdatedAt: ev.Time, Position: ev.Position}, anchors: anchors}
	if state != "promoted" && old != nil {
		nl.anchors = nil
	}
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

// Reference returns the promoted fact lesson closest to q's question, if
// any applies: its value is a reference answer for graders.
func (v *View) Reference(ctx context.Context, q Query) (Lesson, bool, error) {
	facts, _, err := v.matches(ctx, q)
	if err != nil || len(facts) == 0 {
		return Lesson{}, false, err
	}
	return facts[0].Lesson, true, nil
}

// matches returns the promoted fact lessons whose scope holds q's
// question, closest first, and the user's guidance lessons.
func (v *View) matches(ctx context.Context, q Query) (facts, guidance []*viewLesson, err error) {
	v.mu.RLock()
	list := v.active[q.Tenant]
	v.mu.RUnlock()
	if len(list) == 0 {
		return nil, nil, nil
	}
	var cands []*viewLesson
	for _, l := range list {
		switch l.Kind {
		case events.LessonGuidance:
			if l.Scope.User != "" && l.Scope.User == q.User {
				guidance = append(guidance, l)
			}
		case events.LessonFact:
			if q.TaskType == "" || l.Scope.TaskType == "" || q.TaskType == l.Scope.TaskType {
				cands = append(cands, l)
			}
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
	sort.Slice(facts, func(i, j int) bool {
		if sims[facts[i]] != sims[facts[j]] {
			return sims[facts[i]] > sims[facts[j]]
		}
		return facts[i].LessonID < facts[j].LessonID
	})
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
