package distill

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"citizen/events"
)

// Interaction is one graded chat: an interaction.recorded joined with its
// latest interaction.evaluated and its interpreted feedback.
type Interaction struct {
	ID           string               `json:"id"`
	Tenant       string               `json:"tenant,omitempty"`
	GivenType    string               `json:"given_type,omitempty"`
	ModelVersion string               `json:"model_version"`
	Messages     []events.ChatMessage `json:"messages"`
	Answer       events.ChatMessage   `json:"answer"`
	// PromptTokens and CompletionTokens are the exact recorded ids;
	// BehaviourLogprobs[j] is the serving policy's logprob of
	// CompletionTokens[j] (nil when the engine did not report them).
	PromptTokens      []int     `json:"prompt_tokens"`
	CompletionTokens  []int     `json:"completion_tokens"`
	BehaviourLogprobs []float32 `json:"behaviour_logprobs,omitempty"`
	RecordedAt        time.Time `json:"recorded_at"`

	// Eval is the latest evaluation (highest Seq; a later position wins a
	// tie), nil until graded.
	Eval *events.InteractionEvaluated `json:"eval,omitempty"`
	// Correction and Hint are the latest non-empty ones interpreted.
	Correction string `json:"correction,omitempty"`
	Hint       string `json:"hint,omitempty"`
	// Lessons are the ids of the lessons its context held.
	Lessons []string `json:"lessons,omitempty"`

	// Sources are the store positions this view was built from, in order.
	Sources []Source `json:"sources"`
}

// Source is one event an Interaction (and so an example) came from.
type Source struct {
	Position uint64 `json:"position"`
	EventID  string `json:"event_id"`
	Type     string `json:"type"`
}

// Type is the interaction's task type: the evaluation's (given or
// inferred), else the label given at record time, else "unknown".
func (it *Interaction) Type() string {
	if it.Eval != nil && it.Eval.TaskType != "" {
		return it.Eval.TaskType
	}
	if it.GivenType != "" {
		return it.GivenType
	}
	return "unknown"
}

// Graded reports whether the interaction has been evaluated.
func (it *Interaction) Graded() bool { return it.Eval != nil }

// EvalPosition is the position of the evaluation in use (0 when none).
func (it *Interaction) EvalPosition() uint64 {
	for i := len(it.Sources) - 1; i >= 0; i-- {
		if it.Sources[i].Type == events.TypeInteractionEvaluated {
			return it.Sources[i].Position
		}
	}
	return 0
}

// LastPosition is the position of the newest event folded in.
func (it *Interaction) LastPosition() uint64 {
	if len(it.Sources) == 0 {
		return 0
	}
	return it.Sources[len(it.Sources)-1].Position
}

// Retention bounds the training buffer. Age is measured against the
// newest recorded interaction seen (not the wall clock), so replay and
// live application agree.
type Retention struct {
	MaxPerType int           // newest interactions kept per type (default 2000)
	MaxAge     time.Duration // 0: no age limit
}

func (r *Retention) defaults() {
	if r.MaxPerType <= 0 {
		r.MaxPerType = 2000
	}
}

// VersionInfo is what the projection knows about a trained version.
type VersionInfo struct {
	Trained  events.WeightsTrained `json:"trained"`
	Position uint64                `json:"position"`
}

// Projection is the graded-chat projection and training buffer. Apply is
// deterministic: applying the same events in the same order gives the same
// state, whether they come live or by replay. Safe for concurrent use.
type Projection struct {
	ret Retention

	mu        sync.RWMutex
	items     map[string]*Interaction
	newest    time.Time
	last      uint64
	highWater int
	versions  map[string]VersionInfo
	cycles    int    // weights.trained events seen
	window    uint64 // highest WindowTo of any weights.trained
	stable    string // last promoted version ("" = base)
}

// NewProjection returns an empty projection with the given retention.
func NewProjection(ret Retention) *Projection {
	ret.defaults()
	return &Projection{ret: ret, items: map[string]*Interaction{}, versions: map[string]VersionInfo{}}
}

// Filter is the store filter of the events the projection folds.
func (p *Projection) Filter() events.Filter {
	return events.Filter{Types: []string{events.TypeInteractionRecorded, events.TypeInteractionEvaluated,
		events.TypeFeedbackInterpreted, events.TypeWeightsTrained, events.TypeRolloutPromoted, events.TypeInteractionDeleted,
		events.TypeLessonPromoted}}
}

// ErrOutOfOrder is returned by Apply for an event at or before a position
// already applied (it is ignored, which makes redelivery harmless).
var ErrOutOfOrder = errors.New("distill: event position already applied")

// Apply folds one event. Events of other types are ignored. Events must
// come in position order; an already applied position returns
// ErrOutOfOrder and changes nothing. A payload that does not decode is an
// error and changes nothing.
func (p *Projection) Apply(ev events.Event) error {
	if !p.Filter().Match(&ev) {
		return nil
	}
	pl, err := events.Decode(&ev)
	if err != nil {
		return fmt.Errorf("distill: %s at %d: %w", ev.Type, ev.Position, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if ev.Position != 0 && ev.Position <= p.last {
		return ErrOutOfOrder
	}
	if ev.Position != 0 {
		p.last = ev.Position
	}
	src := Source{Position: ev.Position, EventID: ev.ID.String(), Type: ev.Type}
	switch x := pl.(type) {
	case *events.InteractionRecorded:
		if _, ok := p.items[x.InteractionID]; ok {
			return nil
		}
		it := &Interaction{ID: x.InteractionID, Tenant: x.Tenant, GivenType: x.TaskType, ModelVersion: x.ModelVersion,
			Messages: x.Messages, PromptTokens: x.PromptTokens, RecordedAt: ev.Time, Sources: []Source{src}}
		for _, l := range x.Lessons {
			it.Lessons = append(it.Lessons, l.ID)
		}
		if len(x.Choices) > 0 {
			c := x.Choices[0]
			it.Answer, it.CompletionTokens = c.Message, c.CompletionTokens
			if len(c.Logprobs) == len(c.CompletionTokens) && len(c.Logprobs) > 0 {
				it.BehaviourLogprobs = make([]float32, len(c.Logprobs))
				for j, lp := range c.Logprobs {
					if lp.Token != c.CompletionTokens[j] {
						it.BehaviourLogprobs = nil
						break
					}
					it.BehaviourLogprobs[j] = lp.Logprob
				}
			}
		}
		p.items[it.ID] = it
		if ev.Time.After(p.newest) {
			p.newest = ev.Time
		}
		if len(p.items) > p.highWater {
			p.pruneLocked()
			p.highWater = len(p.items) + p.ret.MaxPerType
		}
	case *events.InteractionEvaluated:
		it := p.items[x.InteractionID]
		if it == nil {
			return nil // evicted, or never recorded
		}
		if it.Eval != nil && x.Seq < it.Eval.Seq {
			return nil
		}
		e := *x
		it.Eval = &e
		it.Sources = append(it.Sources, src)
	case *events.FeedbackInterpreted:
		it := p.items[x.InteractionID]
		if it == nil || x.Uncertain {
			return nil // an uncertain correction or hint is recorded, never learnt from
		}
		if x.Correction != "" {
			it.Correction = x.Correction
		}
		if x.Hint != "" {
			it.Hint = x.Hint
		}
		it.Sources = append(it.Sources, src)
	case *events.InteractionDeleted:
		// A deleted interaction is never trained on
		// (docs/adr/0012-stored-completions.md).
		delete(p.items, x.InteractionID)
	case *events.WeightsTrained:
		p.versions[x.Version] = VersionInfo{Trained: *x, Position: ev.Position}
		p.cycles++
		if x.WindowTo > p.window {
			p.window = x.WindowTo
		}
	case *events.RolloutPromoted:
		p.stable = x.Candidate
	}
	return nil
}

// pruneLocked drops what retention does not keep.
func (p *Projection) pruneLocked() {
	for _, id := range p.evictedLocked() {
		delete(p.items, id)
	}
}

// evictedLocked lists the interactions outside the retention limits.
func (p *Projection) evictedLocked() []string {
	byType := map[string][]*Interaction{}
	var out []string
	for _, it := range p.items {
		if p.ret.MaxAge > 0 && p.newest.Sub(it.RecordedAt) > p.ret.MaxAge {
			out = append(out, it.ID)
			continue
		}
		byType[it.Type()] = append(byType[it.Type()], it)
	}
	for _, list := range byType {
		if len(list) <= p.ret.MaxPerType {
			continue
		}
		sortByPosition(list)
		for _, it := range list[:len(list)-p.ret.MaxPerType] {
			out = append(out, it.ID)
		}
	}
	return out
}

func sortByPosition(list []*Interaction) {
	sort.Slice(list, func(i, j int) bool {
		a, b := list[i].Sources[0].Position, list[j].Sources[0].Position
		if a != b {
			return a < b
		}
		return list[i].ID < list[j].ID
	})
}

// Snapshot returns deep copies of the retained interactions in record
// order (the training buffer), retention applied exactly.
func (p *Projection) Snapshot() []Interaction {
	p.mu.RLock()
	defer p.mu.RUnlock()
	list := p.bufferLocked()
	out := make([]Interaction, len(list))
	for i, it := range list {
		out[i] = cloneInteraction(it)
	}
	return out
}

// bufferLocked lists the retained interactions in record order, as
// Snapshot returns them but in place: the caller holds mu and only reads.
func (p *Projection) bufferLocked() []*Interaction {
	drop := map[string]bool{}
	for _, id := range p.evictedLocked() {
		drop[id] = true
	}
	list := make([]*Interaction, 0, len(p.items))
	for _, it := range p.items {
		if !drop[it.ID] {
			list = append(list, it)
		}
	}
	sortByPosition(list)
	return list
}

func cloneInteraction(it *Interaction) Interaction {
	c := *it
	c.Messages = slices.Clone(it.Messages)
	c.PromptTokens = slices.Clone(it.PromptTokens)
	c.CompletionTokens = slices.Clone(it.CompletionTokens)
	c.BehaviourLogprobs = slices.Clone(it.BehaviourLogprobs)
	c.Sources = slices.Clone(it.Sources)
	c.Lessons = slices.Clone(it.Lessons)
	if it.Eval != nil {
		e := *it.Eval
		c.Eval = &e
	}
	return c
}

// Position is the position of the last event applied.
func (p *Projection) Position() uint64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.last
}

// Stable is the last promoted version ("" when none: the base).
func (p *Projection) Stable() string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.stable
}

// Version returns what weights.trained said about version v.
func (p *Projection) Version(v string) (VersionInfo, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	vi, ok := p.versions[v]
	return vi, ok
}

// Versions returns what weights.trained said about every version, in
// store order (the lineage).
func (p *Projection) Versions() []VersionInfo {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]VersionInfo, 0, len(p.versions))
	for _, vi := range p.versions {
		out = append(out, vi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Position < out[j].Position })
	return out
}

// Cycles is the number of weights.trained events applied, and Window the
// highest data-window end they recorded (where the next cycle starts).
func (p *Projection) Cycles() (n int, window uint64) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.cycles, p.window
}

// NewGraded counts the retained, graded, trainable interactions whose
// latest evaluation is after position after.
func (p *Projection) NewGraded(after uint64) int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	n := 0
	for _, it := range p.items {
		if it.Eval != nil && it.Eval.Trainable && it.EvalPosition() > after {
			n++
		}
	}
	return n
}
