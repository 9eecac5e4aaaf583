package events

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Stats summarises an event store.
type Stats struct {
	LastPosition uint64         `json:"last_position"`
	Events       uint64         `json:"events"`
	Streams      int            `json:"streams"`
	ByType       map[string]int `json:"by_type"`
	FirstTime    time.Time      `json:"first_time,omitzero"`
	LastTime     time.Time      `json:"last_time,omitzero"`
}

func (s Stats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "events:        %d\nlast position: %d\nstreams:       %d\n", s.Events, s.LastPosition, s.Streams)
	if !s.FirstTime.IsZero() {
		fmt.Fprintf(&b, "first:         %s\nlast:          %s\n", s.FirstTime.Format(time.RFC3339), s.LastTime.Format(time.RFC3339))
	}
	for _, t := range slices.Sorted(maps.Keys(s.ByType)) {
		fmt.Fprintf(&b, "  %-28s %d\n", t, s.ByType[t])
	}
	return b.String()
}

// ReadStats reads the whole store once.
func ReadStats(ctx context.Context, st Store) (Stats, error) {
	s := Stats{ByType: map[string]int{}}
	streams := map[string]struct{}{}
	err := Scan(ctx, st, 0, Filter{}, func(ev Event) error {
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
