package esdb

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"citizen/events"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
)

// Append implements events.Store. It reads at most len(evs) events before
// writing (none for an exact revision or NoStream) and len(evs) after; the
// package doc says which retries it recognises.
func (s *Store) Append(ctx context.Context, stream string, expected events.ExpectedRevision, evs ...events.Event) (events.AppendResult, error) {
	if err := s.cfg.Check.Validate(stream, evs); err != nil {
		return events.AppendResult{}, err
	}
	if err := s.begin(ctx); err != nil {
		return events.AppendResult{}, err
	}
	defer s.end()
	kind, _ := expected.Kind()
	if kind == "any" || kind == "stream_exists" {
		// No revision says where a retried batch sits; right after a lost
		// reply it is the stream's tail. The server's own check covers
		// the rest of its idempotency window.
		tail, _, err := s.tail(ctx, stream, len(evs))
		if err != nil {
			return events.AppendResult{}, err
		}
		if res, done, err := atTail(stream, tail, evs); done {
			return res, err
		}
	}
	data := make([]esdb.EventData, len(evs))
	for i := range evs {
		d, err := toEventData(&evs[i])
		if err != nil {
			return events.AppendResult{}, err
		}
		data[i] = d
	}
	wr, err := s.client.AppendToStream(ctx, stream, esdb.AppendToStreamOptions{ExpectedRevision: toExpected(expected)}, data...)
	if errors.Is(err, errWrongVersion) {
		return s.refused(ctx, stream, expected, evs)
	}
	if err != nil {
		return events.AppendResult{}, fmt.Errorf("events: esdb: append to %q: %w", stream, err)
	}
	// The batch is stored (written now, or earlier and acknowledged again
	// by the server's idempotency check): read it back for its positions,
	// which the write result does not carry per event.
	from, ok := batchStart(expected, wr.NextExpectedVersion, len(evs))
	if !ok {
		return events.AppendResult{}, fmt.Errorf("events: esdb: append to %q acknowledged at revision %d, before a batch of %d could end", stream, wr.NextExpectedVersion, len(evs))
	}
	got, _, err := s.readStream(ctx, stream, esdb.Revision(from), esdb.Forwards, uint64(len(evs)))
	if err != nil {
		return events.AppendResult{}, err
	}
	if prefixMatch(got, evs) != len(evs) {
		return events.AppendResult{}, fmt.Errorf("events: esdb: append to %q acknowledged, but its events are not at revisions %d..%d", stream, from, from+uint64(len(evs))-1)
	}
	return stored(got), nil
}

// batchStart is the revision where an acknowledged batch of n events
// starts: right after an exact expected revision (0 for NoStream), where
// the server compares a retried batch and writes a new one; otherwise n-1
// before the acknowledged revision, which is the batch's last event.
func batchStart(expected events.ExpectedRevision, acked uint64, n int) (uint64, bool) {
	switch kind, rev := expected.Kind(); kind {
	case "exact":
		return rev + 1, true
	case "no_stream":
		return 0, true
	}
	if acked+1 < uint64(n) {
		return 0, false
	}
	return acked + 1 - uint64(n), true
}

// refused answers a write the server refused with a wrong expected
// version: the stored copies if the batch is already where a retry of this
// call would find it (ErrMalformed if only part of it is), otherwise a
// *events.WrongRevisionError with the stream's actual revision.
func (s *Store) refused(ctx context.Context, stream string, expected events.ExpectedRevision, evs []events.Event) (events.AppendResult, error) {
	kind, rev := expected.Kind()
	if kind == "exact" || kind == "no_stream" {
		from := uint64(0)
		if kind == "exact" {
			from = rev + 1
		}
		got, _, err := s.readStream(ctx, stream, esdb.Revision(from), esdb.Forwards, uint64(len(evs)))
		if err != nil {
			return events.AppendResult{}, err
		}
		switch n := prefixMatch(got, evs); {
		case n == len(evs):
			return stored(got), nil
		case n > 0:
			return events.AppendResult{}, partial(stream, evs, n, got[0].Revision)
		}
	}
	// The batch appended earlier under another expectation: the tail.
	tail, found, err := s.tail(ctx, stream, len(evs))
	if err != nil {
		return events.AppendResult{}, err
	}
	if res, done, err := atTail(stream, tail, evs); done {
		return res, err
	}
	if kind == "any" || (kind == "stream_exists" && found) {
		// Nothing but the idempotency check refuses these: the server
		// found the batch's first event but not the whole batch after it.
		return events.AppendResult{}, fmt.Errorf("%w: esdb: append to %q: the server found part of the batch already stored (first id %s); an append is atomic, so this batch is not the one stored",
			events.ErrMalformed, stream, evs[0].ID)
	}
	wr := &events.WrongRevisionError{Stream: stream, Expected: expected}
	if len(tail) > 0 {
		wr.Actual, wr.Exists = tail[len(tail)-1].Revision, true
	}
	return events.AppendResult{}, wr
}

// atTail decides a batch against the stream's last len(evs) events: done
// with the stored copies when they are the batch, done with ErrMalformed
// when the stream ends with the batch's first events but not all of them,
// not done otherwise.
func atTail(stream string, tail, evs []events.Event) (events.AppendResult, bool, error) {
	if len(tail) == len(evs) && prefixMatch(tail, evs) == len(evs) {
		return stored(tail), true, nil
	}
	for n := min(len(tail), len(evs)-1); n > 0; n-- {
		if prefixMatch(tail[len(tail)-n:], evs) == n {
			return events.AppendResult{}, true, partial(stream, evs, n, tail[len(tail)-n].Revision)
		}
	}
	return events.AppendResult{}, false, nil
}

// prefixMatch counts how many of got, from the first, carry the ids of
// evs in the same order.
func prefixMatch(got, evs []events.Event) int {
	n := 0
	for n < len(got) && n < len(evs) && got[n].ID == evs[n].ID {
		n++
	}
	return n
}

func partial(stream string, evs []events.Event, n int, at uint64) error {
	return fmt.Errorf("%w: esdb: append to %q: the batch's first %d of %d events (id %s on) are already stored at revision %d, the rest are not; an append is atomic, so this batch is not the one stored: send the stored part and the rest as separate appends",
		events.ErrMalformed, stream, n, len(evs), evs[0].ID, at)
}

// stored is the result of a batch found stored as got.
func stored(got []events.Event) events.AppendResult {
	last := got[len(got)-1]
	return events.AppendResult{FirstPosition: got[0].Position, LastPosition: last.Position, NextRevision: last.Revision}
}

// tail reads the last n events of stream in stream order; found is false
// for a stream with no events.
func (s *Store) tail(ctx context.Context, stream string, n int) ([]events.Event, bool, error) {
	evs, found, err := s.readStream(ctx, stream, esdb.End{}, esdb.Backwards, uint64(n))
	slices.Reverse(evs)
	return evs, found, err
}
