package services

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"citizen/events"
)

// StoreStats summarises an event store.
type StoreStats struct {
	LastPosition uint64         `json:"last_position"`
	Events       uint64         `json:"events"`
	Streams      int            `json:"streams"`
	ByType       map[string]int `json:"by_type"`
	FirstTime    time.Time      `json:"first_time,omitzero"`
	LastTime     time.Time      `json:"last_time,omitzero"`
}

func (s StoreStats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "events:        %d\nlast position: %d\nstreams:       %d\n", s.Events, s.LastPosition, s.Streams)
	if !s.FirstTime.IsZero() {
		fmt.Fprintf(&b, "first:         %s\nlast:          %s\n", s.FirstTime.Format(time.RFC3339), s.LastTime.Format(time.RFC3339))
	}
	for _, t := range sortedKeys(s.ByType) {
		fmt.Fprintf(&b, "  %-28s %d\n", t, s.ByType[t])
	}
	return b.String()
}

// Stats reads the whole store once.
func Stats(ctx context.Context, st events.Store) (StoreStats, error) {
	s := StoreStats{ByType: map[string]int{}}
	streams := map[string]struct{}{}
	err := scan(ctx, st, func(ev events.Event) error {
		s.Events++
		s.ByType[ev.Type]++
		streams[ev.Stream] = struct{}{}
		if s.FirstTime.IsZero() {
			s.FirstTime = ev.Time
		}
		s.LastTime = ev.Time
		s.LastPosition = ev.Position
		return nil
	})
	s.Streams = len(streams)
	return s, err
}

// scan calls fn for every event in position order.
func scan(ctx context.Context, st events.Store, fn func(events.Event) error) error {
	var after uint64
	for {
		batch, err := st.ReadAll(ctx, after, events.Filter{}, 4096)
		if err != nil {
			return err
		}
		if len(batch) == 0 {
			return nil
		}
		for _, ev := range batch {
			if err := fn(ev); err != nil {
				return err
			}
		}
		after = batch[len(batch)-1].Position
	}
}

// Projection is a read model rebuilt from events. Apply must be
// deterministic: the same events in the same order give the same state.
type Projection interface {
	Name() string
	Apply(ev events.Event) error
	// Summary is a JSON-encodable digest of the state, compared between a
	// live instance and a replayed one.
	Summary() any
}

// ReplayResult reports a full replay of the store.
type ReplayResult struct {
	Events      uint64         `json:"events"`
	Undecodable map[string]int `json:"undecodable,omitempty"`
	Gaps        int            `json:"gaps"`
	Seconds     float64        `json:"seconds"`
	Projections map[string]any `json:"projections"`
}

func (r ReplayResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "replayed %d events in %.3fs (%.0f events/s); position gaps: %d\n", r.Events, r.Seconds, float64(r.Events)/max(r.Seconds, 1e-9), r.Gaps)
	for _, t := range sortedKeys(r.Undecodable) {
		fmt.Fprintf(&b, "undecodable %s: %d\n", t, r.Undecodable[t])
	}
	for _, name := range sortedKeys(r.Projections) {
		fmt.Fprintf(&b, "%s: %v\n", name, r.Projections[name])
	}
	return b.String()
}

// Replay reads every event, checks that each decodes under the current
// registry and that positions have no gaps, and rebuilds every projection
// from scratch (NewProjections).
func Replay(ctx context.Context, st events.Store) (ReplayResult, error) {
	start := time.Now()
	res := ReplayResult{Undecodable: map[string]int{}, Projections: map[string]any{}}
	projs := NewProjections()
	var last uint64
	err := scan(ctx, st, func(ev events.Event) error {
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
// keeps; replay and the live components use the same constructors.
var NewProjections = func() []Projection { return nil }

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
