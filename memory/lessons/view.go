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
	v.mu.RLock()
	list := v.active[q.Tenant]
	v.mu.RUnlock()
	if len(list) == 0 {
		return nil, nil
	}
	var facts, guidance []*viewLesson
	for _, l := range list {
		switch l.Kind {
		case events.LessonGuidance:
			if l.Scope.User != "" && l.Scope.User == q.User {
				guidance = append(guidance, l)
			}
		case events.LessonFact:
			if q.TaskType == "" || l.Scope.TaskType == "" || q.TaskType == l.Scope.TaskType {
				facts = append(facts, l)
			}
		}
	}
	type scored struct {
		l   *viewLesson
		sim float64
	}
	var hits []scored
	if len(facts) > 0 {
		question := q.Question
		if question != "" {
			vecs, err := v.emb.Embed(ctx, []string{question})
			if err != nil {
				return nil, err
			}
			qn := numbers(question)
			for _, l := range facts {
				best := -1.0
				for _, a := range l.anchors {
					if !numbersCovered(a.nums, qn) {
						continue
					}
					if s := cosine(a.vec, vecs[0]); s > best {
						best = s
					}
				}
				if best >= v.cfg.Similarity {
					hits = append(hits, scored{l, best})
				}
			}
		}
	}
	sort.Slice(hits, func(i, j int) bool {
		if hits[i].sim != hits[j].sim {
			return hits[i].sim > hits[j].sim
		}
		return hits[i].l.LessonID < hits[j].l.LessonID
	})
	sort.Slice(guidance, func(i, j int) bool { return guidance[i].LessonID < guidance[j].LessonID })
	var out []events.AppliedLesson
	for _, h := range hits {
		if len(out) == v.cfg.MaxPerRequest {
			return out, nil
		}
		out = append(out, events.AppliedLesson{ID: h.l.LessonID, Statement: h.l.Statement})
	}
	for _, g := range guidance {
		if len(out) == v.cfg.MaxPerRequest {
			break
		}
		out = append(out, events.AppliedLesson{ID: g.LessonID, Statement: g.Statement})
	}
	return out, nil
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
