// Package replay rebuilds citizen's projections from the event store:
// `citizen events replay` reads every event, checks that it decodes and
// that positions have no gaps, and rebuilds each projection from scratch
// (the distiller's versions and lineage, the rollout controller's state,
// the feedback re-reading); Check compares live projections with ones
// rebuilt up to the same position, which is how the tests and bench learn
// show that replay equals what ran.
package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"citizen/distill"
	"citizen/events"
	"citizen/ops/rollout"
	"citizen/reflection/feedback"
)

// Projection is a read model rebuilt from events. Apply must be
// deterministic: the same events in the same order give the same state.
type Projection interface {
	Name() string
	Apply(ev events.Event) error
	// Summary is a JSON-encodable digest of the state, compared between a
	// live instance and a replayed one.
	Summary() any
}

// Result reports a full replay of the store.
type Result struct {
	Events      uint64         `json:"events"`
	Undecodable map[string]int `json:"undecodable,omitempty"`
	Gaps        int            `json:"gaps"`
	Seconds     float64        `json:"seconds"`
	Projections map[string]any `json:"projections"`
}

func (r Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "replayed %d events in %.3fs (%.0f events/s); position gaps: %d\n", r.Events, r.Seconds, float64(r.Events)/max(r.Seconds, 1e-9), r.Gaps)
	for _, t := range slices.Sorted(maps.Keys(r.Undecodable)) {
		fmt.Fprintf(&b, "undecodable %s: %d\n", t, r.Undecodable[t])
	}
	for _, name := range slices.Sorted(maps.Keys(r.Projections)) {
		fmt.Fprintf(&b, "%s: %v\n", name, r.Projections[name])
	}
	return b.String()
}

// Run reads every event, checks that each decodes under the current
// registry and that positions have no gaps, and rebuilds every projection
// from scratch (NewProjections).
func Run(ctx context.Context, st events.Store) (Result, error) {
	start := time.Now()
	res := Result{Undecodable: map[string]int{}, Projections: map[string]any{}}
	projs := NewProjections()
	var last uint64
	err := events.Scan(ctx, st, 0, events.Filter{}, func(ev events.Event) error {
		res.Events++
		if ev.Position != last+1 {
			res.Gaps++
		}
		last = ev.Position
		if _, err := events.Decode(&ev); err != nil {
			res.Undecodable[ev.Type]++
			return nil
		}
		for _, p := range projs {
			if err := p.Apply(ev); err != nil {
				return fmt.Errorf("replay: projection %s at position %d: %w", p.Name(), ev.Position, err)
			}
		}
		return nil
	})
	for _, p := range projs {
		res.Projections[p.Name()] = p.Summary()
	}
	res.Seconds = time.Since(start).Seconds()
	return res, err
}

// NewProjections returns fresh instances of every projection citizen
// keeps; replay and the live components use the same constructors: the
// distiller's graded-chat projection (versions and lineage), the
// rollout controller's state (stable version, running rollout, history)
// and the feedback re-reading (what the current interpreter would change).
var NewProjections = func() []Projection {
	return []Projection{&Distill{P: distill.NewProjection(distill.Retention{})},
		&Rollout{S: rollout.NewState(rollout.DefaultConfig())},
		&Feedback{R: feedback.NewReinterpreter()}}
}

// Feedback re-reads every recorded feedback with the current
// embedded interpreter and reports how many interpretations were written
// by another version and how many would change (polarity sign,
// correction), with examples. Events it cannot read are counted.
type Feedback struct {
	R       *feedback.Reinterpreter
	Skipped int
}

// Name is "feedback".
func (f *Feedback) Name() string { return "feedback" }

// Apply folds ev into the reinterpreter.
func (f *Feedback) Apply(ev events.Event) error {
	if err := f.R.Apply(ev); err != nil {
		f.Skipped++
	}
	return nil
}

// Summary is the reinterpreter's summary.
func (f *Feedback) Summary() any { return f.R.Summary() }

// Distill adapts the distiller's projection to Projection. Events
// the projection refuses (already applied, undecodable) are counted, as
// the live distiller logs and skips them.
type Distill struct {
	P       *distill.Projection
	Skipped int
}

// Name is "distill".
func (d *Distill) Name() string { return "distill" }

// Apply folds ev into the projection.
func (d *Distill) Apply(ev events.Event) error {
	if err := d.P.Apply(ev); err != nil && !errors.Is(err, distill.ErrOutOfOrder) {
		d.Skipped++
	}
	return nil
}

// Summary is DistillSummaryOf the projection.
func (d *Distill) Summary() any { return DistillSummaryOf(d.P) }

// DistillSummary is the distiller's state that replay must reproduce:
// the stable version, the cycles and every version's lineage.
type DistillSummary struct {
	Stable   string           `json:"stable"`
	Cycles   int              `json:"cycles"`
	Window   uint64           `json:"window"`
	Versions []DistillVersion `json:"versions"`
}

// DistillVersion is one version's lineage as weights.trained recorded it.
type DistillVersion struct {
	Version    string         `json:"version"`
	Parent     string         `json:"parent"`
	Accepted   bool           `json:"accepted"`
	WindowFrom uint64         `json:"window_from"`
	WindowTo   uint64         `json:"window_to"`
	Examples   map[string]int `json:"examples_per_type,omitempty"`
	SHA256     string         `json:"sha256,omitempty"`
	Position   uint64         `json:"position"`
}

// DistillSummaryOf summarises p.
func DistillSummaryOf(p *distill.Projection) DistillSummary {
	n, w := p.Cycles()
	s := DistillSummary{Stable: p.Stable(), Cycles: n, Window: w, Versions: []DistillVersion{}}
	for _, vi := range p.Versions() {
		t := vi.Trained
		v := DistillVersion{Version: t.Version, Parent: t.Parent, Accepted: t.Accepted, WindowFrom: t.WindowFrom, WindowTo: t.WindowTo,
			Examples: t.ExamplesPerType, Position: vi.Position}
		if t.Artifact != nil {
			v.SHA256 = t.Artifact.SHA256
		}
		s.Versions = append(s.Versions, v)
	}
	return s
}

// Rollout adapts the rollout controller's state to Projection.
type Rollout struct {
	S       *rollout.State
	Skipped int
}

// Name is "rollout".
func (r *Rollout) Name() string { return "rollout" }

// Apply folds ev into the state.
func (r *Rollout) Apply(ev events.Event) error {
	if err := r.S.Apply(&ev); err != nil {
		r.Skipped++
	}
	return nil
}

// Summary is RolloutSummaryOf the state.
func (r *Rollout) Summary() any { return RolloutSummaryOf(r.S.Status(), r.S.Versions()) }

// RolloutSummary is the rollout state that replay must reproduce: what
// routing and lineage depend on, without the evidence (whose numbers
// depend on the controller's configuration and on how far it had read).
type RolloutSummary struct {
	Stable   string            `json:"stable"`
	Active   *RolloutActive    `json:"active,omitempty"`
	Waiting  []string          `json:"waiting"`
	History  []RolloutFinished `json:"history"`
	Versions []RolloutVersion  `json:"versions"`
}

// RolloutActive is the running rollout.
type RolloutActive struct {
	ID, Candidate, Stable string
	Step                  int
	Weight                float64
	Paused                bool
}

// RolloutFinished is a finished rollout.
type RolloutFinished struct {
	ID, Candidate, Stable, Outcome, Reason string
	Step                                   int
	Weight                                 float64
}

// RolloutVersion is a version as the controller knows it.
type RolloutVersion struct {
	Version, Parent, Status string
	Accepted                bool
}

// RolloutSummaryOf summarises a rollout status and its versions.
func RolloutSummaryOf(st rollout.Status, vs []rollout.Version) RolloutSummary {
	s := RolloutSummary{Stable: st.Stable, Waiting: append([]string{}, st.Waiting...), History: []RolloutFinished{}, Versions: []RolloutVersion{}}
	if a := st.Active; a != nil {
		s.Active = &RolloutActive{ID: a.RolloutID, Candidate: a.Candidate, Stable: a.Stable, Step: a.Step, Weight: a.Weight, Paused: a.Paused}
	}
	for _, h := range st.History {
		s.History = append(s.History, RolloutFinished{ID: h.RolloutID, Candidate: h.Candidate, Stable: h.Stable, Outcome: h.Outcome,
			Reason: h.Reason, Step: h.Step, Weight: h.Weight})
	}
	for _, v := range vs {
		s.Versions = append(s.Versions, RolloutVersion{Version: v.Version, Parent: v.Parent, Status: v.Status, Accepted: v.Accepted})
	}
	return s
}

// Check compares live projections' summaries with fresh ones
// rebuilt from the store up to the position each live one had reached
// (live maps a projection name to its summary and position). It returns
// per projection whether they match, and a description of the first
// difference.
func Check(ctx context.Context, st events.Store, live map[string]LiveSummary) (map[string]Match, error) {
	out := map[string]Match{}
	for _, p := range NewProjections() {
		l, ok := live[p.Name()]
		if !ok {
			continue
		}
		err := events.Scan(ctx, st, 0, events.Filter{}, func(ev events.Event) error {
			if ev.Position > l.Position {
				return errStopScan
			}
			return p.Apply(ev)
		})
		if err != nil && !errors.Is(err, errStopScan) {
			return nil, err
		}
		a, err := json.Marshal(l.Summary)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(p.Summary())
		if err != nil {
			return nil, err
		}
		m := Match{Equal: bytes.Equal(a, b), Position: l.Position}
		if !m.Equal {
			m.Live, m.Replayed = string(a), string(b)
		}
		out[p.Name()] = m
	}
	return out, nil
}

var errStopScan = errors.New("stop scan")

// LiveSummary is a live projection's Summary and the store position it
// had applied.
type LiveSummary struct {
	Summary  any
	Position uint64
}

// Match is Check's verdict for one projection.
type Match struct {
	Equal    bool   `json:"equal"`
	Position uint64 `json:"position"`
	Live     string `json:"live,omitempty"`
	Replayed string `json:"replayed,omitempty"`
}
