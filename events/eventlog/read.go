package eventlog

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"

	"citizen/events"
)

// view is what a read needs from the index, copied under the lock. The
// slices' elements below their lengths never change.
type view struct {
	segs    []*segment
	streams []*streamInfo
	types   []string
}

func (s *Store) viewLocked() view {
	return view{segs: s.segs, streams: s.streamList, types: s.typeList}
}

// begin starts a read: ErrClosed after Close. end must be called.
func (s *Store) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return events.ErrClosed
	}
	return nil
}

func (s *Store) end() { s.closeMu.RUnlock() }

const maxRun = 1 << 20

var runPool = sync.Pool{New: func() any { b := make([]byte, maxRun); return &b }}

// read decodes the events at ents, which were collected for positions
// (in the same order), reading runs of adjacent records with one call.
func (s *Store) read(v view, ents []entry, positions []uint64, out []events.Event) ([]events.Event, error) {
	bp := runPool.Get().(*[]byte)
	defer runPool.Put(bp)
	for i := 0; i < len(ents); {
		// A run: records adjacent in one segment, in ascending order.
		j, n := i+1, int(ents[i].size)
		for j < len(ents) && ents[j].seg == ents[i].seg && ents[j].off == ents[j-1].off+ents[j-1].size && n+int(ents[j].size) <= maxRun {
			n += int(ents[j].size)
			j++
		}
		buf := *bp
		if n > len(buf) {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		seg := v.segs[ents[i].seg]
		if _, err := seg.f.ReadAt(buf, int64(ents[i].off)); err != nil {
			return out, fmt.Errorf("events: eventlog: reading %s at %d: %w", seg.path, ents[i].off, err)
		}
		// One allocation holds the data of the whole run; events alias it.
		slab := make([]byte, n)
		for k := i; k < j; k++ {
			e := ents[k]
			p, m, err := frame(buf)
			if err == nil && m != int(e.size) {
				err = fmt.Errorf("%w: record size %d, index says %d", events.ErrCorrupt, m, e.size)
			}
			var ev events.Event
			if err == nil {
				_, slab, err = decodeEvent(p, &ev, v.streams[e.stream].name, v.types[e.typ], slab)
			}
			if err == nil && (ev.Position != positions[k] || ev.Stream != v.streams[e.stream].name) {
				err = fmt.Errorf("%w: record at %s:%d is position %d of %q, index says %d of %q", events.ErrCorrupt,
					seg.path, e.off, ev.Position, ev.Stream, positions[k], v.streams[e.stream].name)
			}
			if err != nil {
				return out, fmt.Errorf("events: eventlog: position %d: %w", positions[k], err)
			}
			out = append(out, ev)
			buf = buf[m:]
		}
		i = j
	}
	return out, nil
}

// ReadStream implements events.Store.
func (s *Store) ReadStream(ctx context.Context, stream string, from uint64, dir events.Direction, max int) ([]events.Event, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	if max <= 0 {
		max = math.MaxInt
	}
	durable := s.durable.Load()
	s.mu.RLock()
	var ps []uint64
	if si, ok := s.streams[stream]; ok {
		ps = s.streamList[si].positions
	}
	n := len(ps)
	for n > 0 && ps[n-1] > durable {
		n--
	}
	if n == 0 {
		s.mu.RUnlock()
		return nil, fmt.Errorf("%w: %q", events.ErrStreamNotFound, stream)
	}
	var positions []uint64
	if dir == events.Backward {
		for r := min(from, uint64(n-1)); len(positions) < max; r-- {
			positions = append(positions, ps[r])
			if r == 0 {
				break
			}
		}
	} else {
		for r := from; r < uint64(n) && len(positions) < max; r++ {
			positions = append(positions, ps[r])
		}
	}
	ents := make([]entry, len(positions))
	for i, p := range positions {
		ents[i] = s.entry(p)
	}
	v := s.viewLocked()
	s.mu.RUnlock()
	return s.read(v, ents, positions, make([]events.Event, 0, len(ents)))
}

// matcher evaluates a Filter on index entries without reading records.
type matcher struct {
	f       events.Filter
	all     bool
	types   map[uint32]bool
	streams map[uint32]bool
}

func newMatcher(f events.Filter) *matcher {
	return &matcher{f: f, all: len(f.Types) == 0 && len(f.StreamPrefixes) == 0,
		types: map[uint32]bool{}, streams: map[uint32]bool{}}
}

// match is called under s.mu.
func (m *matcher) match(s *Store, e entry) bool {
	if m.all {
		return true
	}
	if len(m.f.Types) > 0 {
		ok, seen := m.types[e.typ]
		if !seen {
			for _, t := range m.f.Types {
				if t == s.typeList[e.typ] {
					ok = true
				}
			}
			m.types[e.typ] = ok
		}
		if !ok {
			return false
		}
	}
	if len(m.f.StreamPrefixes) > 0 {
		ok, seen := m.streams[e.stream]
		if !seen {
			name := s.streamList[e.stream].name
			for _, p := range m.f.StreamPrefixes {
				if strings.HasPrefix(name, p) {
					ok = true
				}
			}
			m.streams[e.stream] = ok
		}
		return ok
	}
	return true
}

// scanStep bounds how much of the index one lock hold walks.
const scanStep = 1 << 16

// scan collects up to max matching events with positions in (after,
// durable], walking at most scanStep positions, and reads them. It
// returns the events and the last position walked.
func (s *Store) scan(after uint64, m *matcher, max int) ([]events.Event, uint64, error) {
	durable := s.durable.Load()
	end := min(durable, after+scanStep)
	var ents []entry
	var positions []uint64
	s.mu.RLock()
	p := after
	for p < end && len(ents) < max {
		p++
		if e := s.entry(p); m.match(s, e) {
			ents = append(ents, e)
			positions = append(positions, p)
		}
	}
	v := s.viewLocked()
	s.mu.RUnlock()
	evs, err := s.read(v, ents, positions, make([]events.Event, 0, len(ents)))
	return evs, p, err
}

// ReadAll implements events.Store.
func (s *Store) ReadAll(ctx context.Context, after uint64, f events.Filter, max int) ([]events.Event, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	if max <= 0 {
		max = math.MaxInt
	}
	m := newMatcher(f)
	var out []events.Event
	durable := s.durable.Load()
	if err := s.checkStart(after, durable); err != nil {
		return nil, err
	}
	for after < durable && len(out) < max {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		evs, last, err := s.scan(after, m, min(max-len(out), 4096))
		if err != nil {
			return nil, err
		}
		out = append(out, evs...)
		after = last
	}
	return out, nil
}

// Subscribe implements events.Store. Catch-up reads the log in steps;
// once caught up it waits for the syncer's broadcast of a new durable
// position. The handler runs on the caller's goroutine with no lock held.
// Starting beyond the end of a log that once reached that position is
// ErrAheadOfLog (ReadAll too); starting beyond anything it ever held
// waits for the events to come.
func (s *Store) Subscribe(ctx context.Context, after uint64, f events.Filter, h events.Handler) error {
	m := newMatcher(f)
	pos := after
	for first := true; ; first = false {
		if err := s.begin(ctx); err != nil {
			return err
		}
		notify := s.notifyChan()
		durable := s.durable.Load()
		if first {
			if err := s.checkStart(after, durable); err != nil {
				s.end()
				return err
			}
		}
		caughtUp := pos >= durable
		var evs []events.Event
		var err error
		if !caughtUp {
			evs, pos, err = s.scan(pos, m, 1024)
		}
		s.end()
		if err != nil {
			return err
		}
		if err := events.DeliverThenWait(ctx, evs, h, caughtUp, notify, s.done); err != nil {
			return err
		}
	}
}

// LastPosition implements events.Store.
func (s *Store) LastPosition(ctx context.Context) (uint64, error) {
	if err := s.begin(ctx); err != nil {
		return 0, err
	}
	defer s.end()
	return s.durable.Load(), nil
}
