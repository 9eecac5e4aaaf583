// Package memstore is an in-memory events.Store for tests and
// single-process development: a mutex, a slice of events in position order
// and maps for streams, event IDs and checkpoints. Nothing survives the
// process; "durable" means "committed in memory".
package memstore

import (
	"context"
	"fmt"
	"math"
	"sync"

	"citizen/events"

	"github.com/google/uuid"
)

// Config configures a Store. The zero value is usable.
type Config struct {
	// Check validates appends; its zero value checks types strictly
	// against events.Types.
	Check events.AppendCheck
}

// Store is an in-memory events.Store. Safe for concurrent use.
type Store struct {
	check events.AppendCheck

	mu          sync.RWMutex
	log         []events.Event      // log[p-1] has position p
	streams     map[string][]uint64 // stream -> positions by revision
	ids         map[uuid.UUID]uint64
	checkpoints map[string]uint64
	closed      bool
	// notify is closed and replaced on every commit (broadcast).
	notify chan struct{}
	done   chan struct{}
}

var _ events.Store = (*Store)(nil)

// New returns an empty store.
func New(cfg Config) *Store {
	return &Store{
		check:       cfg.Check,
		streams:     map[string][]uint64{},
		ids:         map[uuid.UUID]uint64{},
		checkpoints: map[string]uint64{},
		notify:      make(chan struct{}),
		done:        make(chan struct{}),
	}
}

func clone(ev events.Event) events.Event {
	ev.Data = append([]byte(nil), ev.Data...)
	return ev
}

// Append implements events.Store.
func (s *Store) Append(ctx context.Context, stream string, expected events.ExpectedRevision, evs ...events.Event) (events.AppendResult, error) {
	if err := ctx.Err(); err != nil {
		return events.AppendResult{}, err
	}
	if err := s.check.Validate(stream, evs); err != nil {
		return events.AppendResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return events.AppendResult{}, events.ErrClosed
	}
	positions := s.streams[stream]
	fresh := 0
	for i := range evs {
		p, ok := s.ids[evs[i].ID]
		if !ok {
			fresh++
			continue
		}
		if got := s.log[p-1].Stream; got != stream {
			return events.AppendResult{}, fmt.Errorf("%w: id %s is already stored in stream %q", events.ErrMalformed, evs[i].ID, got)
		}
	}
	if fresh == 0 {
		first, last := s.ids[evs[0].ID], s.ids[evs[len(evs)-1].ID]
		return events.AppendResult{FirstPosition: first, LastPosition: last, NextRevision: s.log[last-1].Revision}, nil
	}
	cur, exists := uint64(0), len(positions) > 0
	if exists {
		cur = uint64(len(positions) - 1)
	}
	if !expected.Check(cur, exists) {
		return events.AppendResult{}, &events.WrongRevisionError{Stream: stream, Expected: expected, Actual: cur, Exists: exists}
	}
	var res events.AppendResult
	for i := range evs {
		if p, ok := s.ids[evs[i].ID]; ok {
			if i == 0 {
				res.FirstPosition = p
			}
			res.LastPosition = p
			continue
		}
		ev := clone(evs[i])
		ev.Stream = stream
		ev.Time = ev.Time.Round(0).UTC()
		ev.Position = uint64(len(s.log)) + 1
		ev.Revision = uint64(len(positions))
		positions = append(positions, ev.Position)
		s.log = append(s.log, ev)
		s.ids[ev.ID] = ev.Position
		if i == 0 {
			res.FirstPosition = ev.Position
		}
		res.LastPosition = ev.Position
	}
	s.streams[stream] = positions
	res.NextRevision = uint64(len(positions) - 1)
	close(s.notify)
	s.notify = make(chan struct{})
	return res, nil
}

// ReadStream implements events.Store.
func (s *Store) ReadStream(ctx context.Context, stream string, from uint64, dir events.Direction, max int) ([]events.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if max <= 0 {
		max = math.MaxInt
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, events.ErrClosed
	}
	positions := s.streams[stream]
	if len(positions) == 0 {
		return nil, fmt.Errorf("%w: %q", events.ErrStreamNotFound, stream)
	}
	var out []events.Event
	if dir == events.Backward {
		last := uint64(len(positions) - 1)
		if from > last {
			from = last
		}
		for r := int64(from); r >= 0 && len(out) < max; r-- {
			out = append(out, clone(s.log[positions[r]-1]))
		}
		return out, nil
	}
	for r := from; r < uint64(len(positions)) && len(out) < max; r++ {
		out = append(out, clone(s.log[positions[r]-1]))
	}
	return out, nil
}

// ReadAll implements events.Store.
func (s *Store) ReadAll(ctx context.Context, after uint64, f events.Filter, max int) ([]events.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, events.ErrClosed
	}
	return s.readAllLocked(after, f, max), nil
}

func (s *Store) readAllLocked(after uint64, f events.Filter, max int) []events.Event {
	if max <= 0 {
		max = math.MaxInt
	}
	var out []events.Event
	for p := after + 1; p <= uint64(len(s.log)) && len(out) < max; p++ {
		if ev := &s.log[p-1]; f.Match(ev) {
			out = append(out, clone(*ev))
		}
	}
	return out
}

// subscribeBatch bounds how many events a subscriber copies per lock.
const subscribeBatch = 256

// Subscribe implements events.Store. Handlers run on the caller's
// goroutine without the store's lock held, so they may call the store.
func (s *Store) Subscribe(ctx context.Context, after uint64, f events.Filter, h events.Handler) error {
	pos := after
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.mu.RLock()
		if s.closed {
			s.mu.RUnlock()
			return events.ErrClosed
		}
		// Scan a bounded window so a selective filter does not hold the
		// lock over the whole log.
		end := min(pos+subscribeBatch*16, uint64(len(s.log)))
		var batch []events.Event
		for p := pos + 1; p <= end && len(batch) < subscribeBatch; p++ {
			if ev := &s.log[p-1]; f.Match(ev) {
				batch = append(batch, clone(*ev))
			}
			pos = p
		}
		notify := s.notify
		caughtUp := pos >= uint64(len(s.log))
		s.mu.RUnlock()
		if err := events.DeliverThenWait(ctx, batch, h, caughtUp, notify, s.done); err != nil {
			return err
		}
	}
}

// LastPosition implements events.Store.
func (s *Store) LastPosition(ctx context.Context) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, events.ErrClosed
	}
	return uint64(len(s.log)), nil
}

// Checkpoint implements events.Store.
func (s *Store) Checkpoint(ctx context.Context, name string) (uint64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0, false, events.ErrClosed
	}
	p, ok := s.checkpoints[name]
	return p, ok, nil
}

// SaveCheckpoint implements events.Store.
func (s *Store) SaveCheckpoint(ctx context.Context, name string, pos uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return events.ErrClosed
	}
	s.checkpoints[name] = pos
	return nil
}

// Close implements events.Store. Subscribers return ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return events.ErrClosed
	}
	s.closed = true
	close(s.done)
	return nil
}
