package rollout

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"citizen/events"
)

// Errors of the operator actions.
var (
	// ErrNoRollout: no rollout is running.
	ErrNoRollout = errors.New("rollout: no rollout is running")
	// ErrPaused: pause on a paused rollout.
	ErrPaused = errors.New("rollout: the rollout is already paused")
	// ErrNotPaused: resume on a rollout that is not paused.
	ErrNotPaused = errors.New("rollout: the rollout is not paused")
	// ErrConflict: the rollout stream kept changing under the action
	// (another writer decided); the action was not applied.
	ErrConflict = errors.New("rollout: conflicting concurrent decision")
	// ErrRunning: Start while a rollout is running.
	ErrRunning = errors.New("rollout: a rollout is already running")
	// ErrUnknownVersion: Start of a version no weights.trained records.
	ErrUnknownVersion = errors.New("rollout: no such trained version")
	// ErrNotServable: Start of a version that cannot be a canary: its
	// cycle left no weights, it is the stable version, or there is no
	// stable version to compare it with.
	ErrNotServable = errors.New("rollout: the version cannot be started")
)

// Operator actions. Each reads the running rollout from the store's
// rollout.* events, appends one event to its stream with Actor "operator"
// and the expected revision of the stream's last event, and returns the
// appended event. If the controller (or another operator) appended in
// between, the action is re-read and retried a few times, then fails with
// ErrConflict; an action that no longer applies fails with ErrNoRollout,
// ErrPaused or ErrNotPaused.
//
//   - Pause: rollout.paused; the candidate keeps its current share, the
//     controller makes no step decision until Resume, but guardrails,
//     anomalies and a reward regression still roll back.
//   - Resume: rollout.resumed with the current step and weight.
//   - Promote: rollout.promoted; the candidate becomes stable at once.
//   - Abort: rollout.rolled_back; stable serves everything again.
//
// Start begins a rollout itself; see Start.
func Pause(ctx context.Context, store events.Store, reason string) (events.Event, error) {
	return operate(ctx, store, events.TypeRolloutPaused, reason)
}

// Resume continues a paused rollout; see Pause.
func Resume(ctx context.Context, store events.Store, reason string) (events.Event, error) {
	return operate(ctx, store, events.TypeRolloutResumed, reason)
}

// Promote makes the candidate stable now; see Pause.
func Promote(ctx context.Context, store events.Store, reason string) (events.Event, error) {
	return operate(ctx, store, events.TypeRolloutPromoted, reason)
}

// Abort rolls the candidate back now; see Pause.
func Abort(ctx context.Context, store events.Store, reason string) (events.Event, error) {
	return operate(ctx, store, events.TypeRolloutRolledBack, reason)
}

// current is the running rollout as its own stream tells it.
type current struct {
	change events.RolloutChange
	stream string
	rev    uint64
	paused bool
}

// runningRollout finds the running rollout from the rollout.* events only
// (the same rules as State: one at a time, a terminal event ends it).
func runningRollout(ctx context.Context, store events.Store) (*current, error) {
	f := events.Filter{StreamPrefixes: []string{events.RolloutStream("")}}
	var cur *current
	var after uint64
	for {
		evs, err := store.ReadAll(ctx, after, f, 1024)
		if err != nil {
			return nil, err
		}
		for i := range evs {
			ev := &evs[i]
			after = ev.Position
			if !isRollout(ev.Type) {
				continue
			}
			p, err := events.Decode(ev)
			if err != nil {
				continue
			}
			ch, ok := events.RolloutChangeOf(p)
			if !ok {
				continue
			}
			if _, started := p.(*events.RolloutStarted); started {
				if cur == nil {
					cur = &current{change: ch, stream: ev.Stream, rev: ev.Revision}
				}
				continue
			}
			if cur == nil || cur.stream != ev.Stream || cur.change.RolloutID != ch.RolloutID {
				continue
			}
			cur.rev = ev.Revision
			switch ev.Type {
			case events.TypeRolloutAdvanced:
				cur.change.Step, cur.change.Weight = ch.Step, ch.Weight
			case events.TypeRolloutPaused:
				cur.paused = true
			case events.TypeRolloutResumed:
				cur.paused = false
			default:
				cur = nil
			}
		}
		if len(evs) < 1024 {
			return cur, nil
		}
	}
}

func operate(ctx context.Context, store events.Store, typ, reason string) (events.Event, error) {
	for attempt := 0; attempt < 5; attempt++ {
		cur, err := runningRollout(ctx, store)
		if err != nil {
			return events.Event{}, fmt.Errorf("rollout: reading the rollout: %w", err)
		}
		if cur == nil {
			return events.Event{}, ErrNoRollout
		}
		if typ == events.TypeRolloutPaused && cur.paused {
			return events.Event{}, ErrPaused
		}
		if typ == events.TypeRolloutResumed && !cur.paused {
			return events.Event{}, ErrNotPaused
		}
		ch := cur.change
		ch.Actor, ch.Reason, ch.Evidence = ActorOperator, reason, nil
		if ch.Reason == "" {
			ch.Reason = "operator " + typ[len("rollout."):]
		}
		var p events.Payload
		switch typ {
		case events.TypeRolloutPaused:
			p = &events.RolloutPaused{RolloutChange: ch}
		case events.TypeRolloutResumed:
			p = &events.RolloutResumed{RolloutChange: ch}
		case events.TypeRolloutPromoted:
			ch.Weight = 1
			p = &events.RolloutPromoted{RolloutChange: ch}
		case events.TypeRolloutRolledBack:
			p = &events.RolloutRolledBack{RolloutChange: ch}
		}
		ev, err := events.Encode(p, events.Meta{Stream: cur.stream, CorrelationID: ch.RolloutID})
		if err != nil {
			return events.Event{}, err
		}
		res, err := store.Append(ctx, cur.stream, events.Exact(cur.rev), ev)
		if errors.Is(err, events.ErrWrongExpectedRevision) {
			continue
		}
		if err != nil {
			return events.Event{}, fmt.Errorf("rollout: appending %s: %w", typ, err)
		}
		ev.Stream, ev.Revision, ev.Position = cur.stream, res.NextRevision, res.LastPosition
		return ev, nil
	}
	return events.Event{}, ErrConflict
}

// Start begins the canary of candidate, a trained version, as an operator:
// it appends rollout.started (Actor "operator", reason, step 0 at the
// first step's weight, stable the version that serves now) and returns
// it. Any version whose cycle left weights may be started, a waiting one
// ahead of its turn or one the offline gate rejected (weights.trained
// accepted false): an operator's way to see on live traffic what the gate
// saw offline. The controller then decides on it as on any rollout, except
// that a candidate the gate rejected never leaves its first step on its
// own (Config.HoldMargin: held on any evidence until the tests roll it
// back, MaxHold runs out, or an operator promotes it).
//
// Errors: ErrRunning when a rollout runs, ErrUnknownVersion,
// ErrNotServable (no weights, already stable, nothing to compare with),
// ErrConflict when another start won. A start is one event on a new
// stream, so it is not serialised with the controller's start of a
// candidate that became waiting at the same moment: the projections take
// the first in store order, and Start reports ErrConflict when that was
// not its own. cfg is the controller's configuration (its steps and
// stable version).
func Start(ctx context.Context, store events.Store, cfg Config, candidate, reason string) (events.Event, error) {
	cfg = cfg.WithDefaults()
	for attempt := 0; attempt < 5; attempt++ {
		st, err := lineageState(ctx, store, cfg)
		if err != nil {
			return events.Event{}, fmt.Errorf("rollout: reading the rollouts: %w", err)
		}
		if st.active != nil {
			return events.Event{}, fmt.Errorf("%w (%s of %s)", ErrRunning, st.active.id, st.active.candidate)
		}
		v, p := st.versions[candidate], st.lineage[candidate]
		if v == nil || p.version == "" {
			return events.Event{}, fmt.Errorf("%w: %q", ErrUnknownVersion, candidate)
		}
		stable := st.stable
		if stable == "" {
			stable = v.Parent
		}
		switch {
		case v.Artifact == nil:
			return events.Event{}, fmt.Errorf("%w: %s left no weights (%s)", ErrNotServable, candidate, v.Reason)
		case candidate == stable:
			return events.Event{}, fmt.Errorf("%w: %s is the stable version", ErrNotServable, candidate)
		case stable == "":
			return events.Event{}, fmt.Errorf("%w: no stable version to compare %s with", ErrNotServable, candidate)
		}
		detail := "weights.trained " + candidate + " accepted by the offline gate"
		if p.rejected {
			detail = "weights.trained " + candidate + " rejected by the offline gate: " + v.Reason
		}
		if len(p.lessons) > 0 {
			detail += "; " + checkText(p.lessons)
		}
		// The same state gives the same id, so two operators starting at
		// once conflict on the stream instead of both appending.
		id := events.DeterministicID("rollout", ActorOperator, p.eventID, strconv.FormatUint(st.pos, 10)).String()
		if reason == "" {
			reason = "operator start"
		}
		ch := events.RolloutChange{RolloutID: id, Candidate: candidate, Stable: stable, Step: 0, Weight: cfg.Steps[0],
			Actor: ActorOperator, Reason: reason, Evidence: &events.RolloutEvidence{Detail: detail}}
		stream := events.RolloutStream(id)
		ev, err := events.Encode(&events.RolloutStarted{RolloutChange: ch}, events.Meta{Stream: stream, CorrelationID: id,
			ID: events.DeterministicID(id, events.TypeRolloutStarted)})
		if err != nil {
			return events.Event{}, err
		}
		res, err := store.Append(ctx, stream, events.NoStream, ev)
		if errors.Is(err, events.ErrWrongExpectedRevision) {
			continue
		}
		if err != nil {
			return events.Event{}, fmt.Errorf("rollout: appending rollout.started: %w", err)
		}
		ev.Stream, ev.Revision, ev.Position = stream, res.NextRevision, res.LastPosition
		cur, err := runningRollout(ctx, store)
		if err != nil {
			return events.Event{}, fmt.Errorf("rollout: reading the rollout: %w", err)
		}
		if cur == nil || cur.change.RolloutID != id {
			return events.Event{}, ErrConflict
		}
		return ev, nil
	}
	return events.Event{}, ErrConflict
}

// lineageState is the State of the rollouts and trained versions alone
// (no evaluations: the evidence is empty), read from the store.
func lineageState(ctx context.Context, store events.Store, cfg Config) (*State, error) {
	st := NewState(cfg)
	var types []string
	for _, t := range Types {
		if t == events.TypeWeightsTrained || isRollout(t) {
			types = append(types, t)
		}
	}
	f := events.Filter{Types: types}
	for {
		evs, err := store.ReadAll(ctx, st.pos, f, 1024)
		if err != nil {
			return nil, err
		}
		for i := range evs {
			_ = st.Apply(&evs[i]) // undecodable events are skipped, as the controller does
		}
		if len(evs) < 1024 {
			return st, nil
		}
	}
}
