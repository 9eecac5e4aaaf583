package rollout

import (
	"context"
	"errors"
	"fmt"

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
