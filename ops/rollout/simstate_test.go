package rollout

import (
	"fmt"
	"testing"
	"time"

	"citizen/events"
)

// simState drives a State directly, without a store (the simulations
// need hundreds of rollouts): it applies events at increasing positions
// and the controller's own decisions as the controller would append them.
type simState struct {
	t   testing.TB
	st  *State
	pos uint64
}

func newSimState(t testing.TB, cfg Config) *simState {
	return &simState{t: t, st: NewState(cfg)}
}

// apply applies p as the event at the next position.
func (s *simState) apply(p events.Payload, stream string, rev uint64) {
	s.t.Helper()
	s.pos++
	ev, err := events.Encode(p, events.Meta{Stream: stream, Time: time.Unix(0, 0).UTC(), ID: events.DeterministicID(fmt.Sprint(s.pos))})
	if err != nil {
		s.t.Fatal(err)
	}
	ev.Position, ev.Revision = s.pos, rev
	if err := s.st.Apply(&ev); err != nil {
		s.t.Fatal(err)
	}
}

// train applies an accepted weights.trained for version.
func (s *simState) train(version, parent string) {
	s.apply(&events.WeightsTrained{Version: version, Parent: parent, Accepted: true}, events.VersionStream(version), 0)
}

// decide takes the controller's next decision, if any, and applies it.
func (s *simState) decide() *decision {
	d := s.st.decide()
	if d != nil {
		rev := uint64(0)
		if s.st.active != nil {
			rev = s.st.active.rev + 1
		}
		s.apply(d.payload, d.stream, rev)
	}
	return d
}

// evaluated feeds one evaluation at the next position.
func (s *simState) evaluated(x *events.InteractionEvaluated) {
	s.pos++
	s.st.pos = s.pos
	s.st.evaluated(x)
}

// terminal reports whether d ends the rollout.
func terminal(d *decision) bool {
	return d != nil && (d.payload.EventType() == events.TypeRolloutPromoted || d.payload.EventType() == events.TypeRolloutRolledBack)
}

// feedAlternating feeds evaluations from to to-1 for stable A and
// candidate B on task type t: rewards alternate +1, -1 (mean 0, variance
// 1), the candidate's shifted by shift.
func (s *simState) feedAlternating(from, to int, shift float64) {
	for i := from; i < to; i++ {
		for _, v := range []string{"A", "B"} {
			r := 1.0
			if i%2 == 1 {
				r = -1
			}
			if v == "B" {
				r += shift
			}
			s.evaluated(&events.InteractionEvaluated{InteractionID: fmt.Sprint(v, i), ModelVersion: v, TaskType: "t", Reward: r, AnswerLength: 40})
		}
	}
}
