package rollout

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"citizen/events"
)

// Types are the event types the projection reads (Filter).
var Types = []string{
	events.TypeWeightsTrained, events.TypeInteractionEvaluated, events.TypeInteractionRecorded,
	events.TypeAnomalyDetected,
	events.TypeRolloutStarted, events.TypeRolloutAdvanced, events.TypeRolloutPaused,
	events.TypeRolloutResumed, events.TypeRolloutPromoted, events.TypeRolloutRolledBack,
}

// Filter selects the events State applies.
func Filter() events.Filter { return events.Filter{Types: slices.Clone(Types)} }

// Arms of a rollout.
const (
	armStable = iota
	armCandidate
)

// arm is the evidence on one version within a period.
type arm struct {
	reward, length, tools, errs, drops, latency moments
	types                                       map[string]int
	typeReward                                  map[string]*moments
}

func newArms() [2]arm {
	return [2]arm{{types: map[string]int{}, typeReward: map[string]*moments{}}, {types: map[string]int{}, typeReward: map[string]*moments{}}}
}

// obs is what one evaluation contributes.
type obs struct {
	arm, step                    int
	taskType                     string
	reward, length, tools, e, dr float64
}

func (a *arm) add(o obs, sign float64) {
	if sign < 0 {
		a.reward.remove(o.reward)
		a.length.remove(o.length)
		a.tools.remove(o.tools)
		a.errs.remove(o.e)
		a.drops.remove(o.dr)
		a.types[o.taskType]--
		if m := a.typeReward[o.taskType]; m != nil {
			m.remove(o.reward)
		}
		return
	}
	a.reward.add(o.reward)
	a.length.add(o.length)
	a.tools.add(o.tools)
	a.errs.add(o.e)
	a.drops.add(o.dr)
	a.types[o.taskType]++
	m := a.typeReward[o.taskType]
	if m == nil {
		m = &moments{}
		a.typeReward[o.taskType] = m
	}
	m.add(o.reward)
}

// active is the running rollout.
type active struct {
	id, candidate, stable string
	stream                string
	rev                   uint64
	step                  int
	weight                float64
	paused                bool
	startedAt             time.Time
	startPos, stepPos     uint64
	all, cur              [2]arm // whole rollout; current step
	evals                 map[string]obs
	anomaly               *events.AnomalyDetected
	// trained is what the candidate's weights.trained said (the offline
	// gate rejected it, so only an operator could start it:
	// Config.HoldMargin; its lesson check: Config.Supersede).
	trained pending
}

// Finished is a rollout that ended.
type Finished struct {
	RolloutID string    `json:"rollout_id"`
	Candidate string    `json:"candidate"`
	Stable    string    `json:"stable"`
	Outcome   string    `json:"outcome"` // promoted, rolled_back
	Step      int       `json:"step"`
	Weight    float64   `json:"weight"`
	Actor     string    `json:"actor"`
	Reason    string    `json:"reason"`
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at"`
	Position  uint64    `json:"position"`
}

// Version is one trained version and what became of it.
type Version struct {
	Version     string             `json:"version"`
	Parent      string             `json:"parent"`
	Cycle       string             `json:"cycle,omitempty"`
	Accepted    bool               `json:"accepted"`
	Reason      string             `json:"reason,omitempty"`
	Objective   string             `json:"objective,omitempty"`
	OfflineEval map[string]float64 `json:"offline_eval,omitempty"`
	KLToParent  float64            `json:"kl_to_parent"`
	Artifact    *events.Artifact   `json:"artifact,omitempty"`
	TrainedAt   time.Time          `json:"trained_at"`
	Position    uint64             `json:"position"`
	// Status: rejected (offline gate), waiting, canary, stable, retired,
	// superseded (a newer candidate started first)
	// (was stable, replaced by a promotion), rolled_back, skipped.
	Status    string `json:"status"`
	RolloutID string `json:"rollout_id,omitempty"`
}

type pending struct {
	version, parent, eventID string
	// lessons is the lesson check of its weights.trained and lessonTypes
	// the task types of those lessons; rejected, that the offline gate
	// rejected it (weights.trained accepted false).
	lessons     []events.LessonCarry
	lessonTypes []string
	rejected    bool
}

// State is the controller's projection: everything it decides on, built
// only by Apply from events in store order, so replaying the store gives
// the same State. Not safe for concurrent use (Projection and Controller
// guard it).
type State struct {
	cfg      Config
	pos      uint64
	stable   string
	active   *active
	waiting  []pending
	versions map[string]*Version
	order    []string
	history  []Finished
	started  map[string]bool // candidates that had a rollout
	// lineage is what each version's weights.trained said, for a rollout
	// that starts a version no longer waiting (an operator's Start).
	lineage map[string]pending
}

// NewState returns the empty projection for cfg (defaults applied).
func NewState(cfg Config) *State {
	cfg = cfg.WithDefaults()
	return &State{cfg: cfg, stable: cfg.Stable, versions: map[string]*Version{}, started: map[string]bool{}, lineage: map[string]pending{}}
}

// Position is the store position of the last applied event.
func (s *State) Position() uint64 { return s.pos }

// recordedLite is the part of interaction.recorded the projection needs;
// decoding only it skips the token ids and logprobs.
type recordedLite struct {
	InteractionID string  `json:"interaction_id"`
	ModelVersion  string  `json:"model_version"`
	LatencyMS     float64 `json:"latency_ms"`
}

// Apply folds ev into the state. Events at or before the current position
// are ignored (a replayed or re-delivered event), so Apply is idempotent
// in store order. An event that does not decode is skipped (and its
// position still counts); the error is returned for logging.
func (s *State) Apply(ev *events.Event) error {
	if ev.Position != 0 && ev.Position <= s.pos {
		return nil
	}
	if ev.Position != 0 {
		s.pos = ev.Position
	}
	if ev.Type == events.TypeInteractionRecorded && ev.Schema == 1 {
		if s.active == nil {
			return nil
		}
		var r recordedLite
		if err := json.Unmarshal(ev.Data, &r); err != nil {
			return err
		}
		s.served(r.ModelVersion, r.LatencyMS)
		return nil
	}
	if !slices.Contains(Types, ev.Type) {
		return nil
	}
	if s.active == nil && (ev.Type == events.TypeInteractionEvaluated || ev.Type == events.TypeAnomalyDetected) {
		return nil
	}
	p, err := events.Decode(ev)
	if err != nil {
		return err
	}
	switch x := p.(type) {
	case *events.InteractionRecorded:
		s.served(x.ModelVersion, x.LatencyMS)
	case *events.InteractionEvaluated:
		s.evaluated(x)
	case *events.AnomalyDetected:
		if s.active != nil && x.Version == s.active.candidate && s.active.anomaly == nil && s.anomalyCounts(x.Kind) {
			s.active.anomaly = x
		}
	case *events.WeightsTrained:
		s.trained(ev, x)
	case *events.RolloutStarted:
		s.rolloutStarted(ev, &x.RolloutChange)
	case *events.RolloutAdvanced:
		if a := s.activeFor(ev, &x.RolloutChange); a != nil {
			a.step, a.weight, a.stepPos, a.cur = x.Step, x.Weight, ev.Position, newArms()
		}
	case *events.RolloutPaused:
		if a := s.activeFor(ev, &x.RolloutChange); a != nil {
			a.paused = true
		}
	case *events.RolloutResumed:
		if a := s.activeFor(ev, &x.RolloutChange); a != nil {
			a.paused = false
		}
	case *events.RolloutPromoted:
		if a := s.activeFor(ev, &x.RolloutChange); a != nil {
			s.finish(ev, &x.RolloutChange, "promoted")
			if v := s.versions[a.stable]; v != nil {
				v.Status = "retired"
			}
			s.stable = a.candidate
			s.setStatus(a.candidate, "stable", a.id)
		}
	case *events.RolloutRolledBack:
		if a := s.activeFor(ev, &x.RolloutChange); a != nil {
			s.finish(ev, &x.RolloutChange, "rolled_back")
			s.setStatus(a.candidate, "rolled_back", a.id)
		}
	}
	return nil
}

func (s *State) anomalyCounts(kind string) bool {
	return len(s.cfg.Guardrails.AnomalyKinds) == 0 || slices.Contains(s.cfg.Guardrails.AnomalyKinds, kind)
}

func (s *State) armOf(version string) int {
	switch version {
	case s.active.candidate:
		return armCandidate
	case s.active.stable:
		return armStable
	}
	return -1
}

func (s *State) served(version string, latency float64) {
	if s.active == nil {
		return
	}
	i := s.armOf(version)
	if i < 0 {
		return
	}
	s.active.all[i].latency.add(latency)
	s.active.cur[i].latency.add(latency)
}

func (s *State) evaluated(x *events.InteractionEvaluated) {
	a := s.active
	i := s.armOf(x.ModelVersion)
	if i < 0 {
		return
	}
	o := obs{arm: i, step: a.step, taskType: x.TaskType, reward: x.Reward,
		length: float64(x.AnswerLength), tools: float64(x.ToolCalls)}
	for _, f := range x.Faults {
		if f.Attribution == "model" {
			o.e = 1
			break
		}
	}
	if x.Outcome == "timeout" || x.Outcome == "abandoned" {
		o.dr = 1
	}
	if old, ok := a.evals[x.InteractionID]; ok {
		// A later evaluation supersedes the earlier one; it stays in the
		// step it was first counted in.
		a.all[old.arm].add(old, -1)
		if old.step == a.step {
			a.cur[old.arm].add(old, -1)
		}
		o.step = old.step
	}
	a.evals[x.InteractionID] = o
	a.all[i].add(o, 1)
	if o.step == a.step {
		a.cur[i].add(o, 1)
	}
}

func (s *State) trained(ev *events.Event, x *events.WeightsTrained) {
	if x.Version == "" || s.versions[x.Version] != nil {
		return
	}
	v := &Version{Version: x.Version, Parent: x.Parent, Cycle: x.Cycle, Accepted: x.Accepted, Reason: x.Reason,
		Objective: x.Objective, OfflineEval: x.OfflineEval, KLToParent: x.KLToParent, Artifact: x.Artifact,
		TrainedAt: ev.Time, Position: ev.Position, Status: "rejected"}
	s.versions[x.Version] = v
	s.order = append(s.order, x.Version)
	p := pending{version: x.Version, parent: x.Parent, eventID: ev.ID.String(), lessons: x.Lessons, lessonTypes: x.LessonTypes, rejected: !x.Accepted}
	s.lineage[x.Version] = p
	if !x.Accepted {
		return
	}
	if x.Version == s.stable || s.started[x.Version] || (s.stable == "" && x.Parent == "") {
		// Already served, or nothing to compare it with.
		v.Status = "skipped"
		return
	}
	v.Status = "waiting"
	s.waiting = append(s.waiting, p)
}

func (s *State) rolloutStarted(ev *events.Event, c *events.RolloutChange) {
	if s.active != nil {
		// Only one rollout at a time: a start while one runs cannot come
		// from a controller (expected revisions) and is ignored.
		return
	}
	s.active = &active{id: c.RolloutID, candidate: c.Candidate, stable: c.Stable, stream: ev.Stream, rev: ev.Revision,
		step: c.Step, weight: c.Weight, startedAt: ev.Time, startPos: ev.Position, stepPos: ev.Position,
		all: newArms(), cur: newArms(), evals: map[string]obs{}}
	s.started[c.Candidate] = true
	// Candidates trained before the one that starts will not start any
	// more: superseded.
	if i := slices.IndexFunc(s.waiting, func(p pending) bool { return p.version == c.Candidate }); i >= 0 {
		s.active.trained = s.waiting[i]
		for _, p := range s.waiting[:i] {
			s.setStatus(p.version, "superseded", "")
		}
		s.waiting = slices.Delete(s.waiting, 0, i+1)
	} else if p, ok := s.lineage[c.Candidate]; ok {
		// Not waiting: an operator started it (Start), perhaps against
		// the offline gate's verdict (p.rejected).
		s.active.trained = p
	}
	if s.stable == "" {
		s.stable = c.Stable
	}
	s.setStatus(c.Candidate, "canary", c.RolloutID)
}

// activeFor returns the active rollout if ev belongs to it (and records
// the stream revision), nil otherwise.
func (s *State) activeFor(ev *events.Event, c *events.RolloutChange) *active {
	a := s.active
	if a == nil || a.stream != ev.Stream || a.id != c.RolloutID {
		return nil
	}
	a.rev = ev.Revision
	return a
}

func (s *State) finish(ev *events.Event, c *events.RolloutChange, outcome string) {
	a := s.active
	s.history = append(s.history, Finished{RolloutID: a.id, Candidate: a.candidate, Stable: a.stable, Outcome: outcome,
		Step: c.Step, Weight: c.Weight, Actor: c.Actor, Reason: c.Reason, StartedAt: a.startedAt, EndedAt: ev.Time,
		Position: ev.Position})
	s.active = nil
}

func (s *State) setStatus(version, status, rolloutID string) {
	v := s.versions[version]
	if v == nil {
		v = &Version{Version: version, Accepted: true}
		s.versions[version] = v
		s.order = append(s.order, version)
	}
	v.Status = status
	if rolloutID != "" {
		v.RolloutID = rolloutID
	}
}

// Status is the operator's view of the rollout state (GET
// /v1/ops/rollout).
type Status struct {
	// Position of the last event the state includes.
	Position uint64 `json:"position"`
	// Stable is the version that serves outside the canary share.
	Stable string `json:"stable"`
	// Active is the running rollout, if any.
	Active *ActiveStatus `json:"active,omitempty"`
	// Waiting candidates, in the order they will start.
	Waiting []string `json:"waiting"`
	// History of finished rollouts, most recent first.
	History []Finished `json:"history"`
	// Steps configured.
	Steps []float64 `json:"steps"`
}

// ActiveStatus describes the running rollout with its current evidence.
type ActiveStatus struct {
	RolloutID string    `json:"rollout_id"`
	Candidate string    `json:"candidate"`
	Stable    string    `json:"stable"`
	Step      int       `json:"step"`
	Weight    float64   `json:"weight"`
	Paused    bool      `json:"paused"`
	StartedAt time.Time `json:"started_at"`
	// Revision of the rollout stream's last event (the expected revision
	// of the next decision).
	Revision uint64                  `json:"revision"`
	Evidence *events.RolloutEvidence `json:"evidence"`
}

// Status returns a snapshot (copied; safe to keep).
func (s *State) Status() Status {
	st := Status{Position: s.pos, Stable: s.stable, Steps: slices.Clone(s.cfg.Steps), Waiting: []string{}, History: []Finished{}}
	for _, p := range s.waiting {
		st.Waiting = append(st.Waiting, p.version)
	}
	for i := len(s.history) - 1; i >= 0 && len(st.History) < 50; i-- {
		st.History = append(st.History, s.history[i])
	}
	if a := s.active; a != nil {
		st.Active = &ActiveStatus{RolloutID: a.id, Candidate: a.candidate, Stable: a.stable, Step: a.step, Weight: a.weight,
			Paused: a.paused, StartedAt: a.startedAt, Revision: a.rev, Evidence: s.evidence(true).RolloutEvidence}
	}
	return st
}

// Versions returns the lineage of trained versions in training order.
func (s *State) Versions() []Version {
	out := make([]Version, 0, len(s.order))
	for _, name := range s.order {
		v := *s.versions[name]
		v.OfflineEval = cloneMap(v.OfflineEval)
		out = append(out, v)
	}
	return out
}

func cloneMap(m map[string]float64) map[string]float64 {
	if m == nil {
		return nil
	}
	out := make(map[string]float64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// isRollout reports whether typ is a rollout.* type.
func isRollout(typ string) bool { return strings.HasPrefix(typ, "rollout.") }
