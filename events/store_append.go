package events

import (
	"fmt"

	"github.com/google/uuid"
)

// envelopeOverhead is the fixed part of an envelope's encoded size that
// limits are checked against (ids, time, schema, positions, framing).
const envelopeOverhead = 64

// EnvelopeSize is the size of ev appended to stream as every backend
// counts it against MaxEventSize and MaxBatchSize: its variable-length
// fields plus a fixed overhead. Backends use it (not their own encoding)
// so that an event accepted by one backend is accepted by all.
func EnvelopeSize(stream string, ev *Event) int {
	return envelopeOverhead + len(stream) + len(ev.Type) + len(ev.CorrelationID) +
		len(ev.CausationID) + len(ev.Tenant) + len(ev.Data)
}

// AppendCheck validates an Append's arguments the same way for every
// backend, before anything is written.
type AppendCheck struct {
	// Registry decides which event types exist (ErrUnknownType); nil means
	// Types.
	Registry *Registry
	// Lax, when true, checks only the envelope (Event.Validate: valid JSON
	// data) and that the type is registered; otherwise the data must decode
	// strictly into the type's payload (Registry.Validate).
	Lax bool
}

// Validate checks a batch: ErrEmptyBatch for no events; ErrTooLarge for
// more than MaxBatchEvents events, an event over MaxEventSize or a batch
// over MaxBatchSize (sizes by EnvelopeSize); ErrInvalidStream; for each
// event ErrMalformed or ErrUnknownType (also ErrMalformed for the same ID
// twice in one batch). Errors are wrapped with detail.
func (c AppendCheck) Validate(stream string, evs []Event) error {
	if len(evs) == 0 {
		return ErrEmptyBatch
	}
	if len(evs) > MaxBatchEvents {
		return fmt.Errorf("%w: %d events in one batch (max %d)", ErrTooLarge, len(evs), MaxBatchEvents)
	}
	if err := ValidateStream(stream); err != nil {
		return err
	}
	reg := c.Registry
	if reg == nil {
		reg = Types
	}
	total := 0
	var seen map[uuid.UUID]struct{}
	if len(evs) > 1 {
		seen = make(map[uuid.UUID]struct{}, len(evs))
	}
	for i := range evs {
		ev := &evs[i]
		size := EnvelopeSize(stream, ev)
		if size > MaxEventSize {
			return fmt.Errorf("%w: event %d (%s) is %d bytes (max %d)", ErrTooLarge, i, ev.ID, size, MaxEventSize)
		}
		total += size
		if total > MaxBatchSize {
			return fmt.Errorf("%w: batch exceeds %d bytes", ErrTooLarge, MaxBatchSize)
		}
		var err error
		if c.Lax {
			if err = ev.Validate(); err == nil && !reg.Known(ev.Type) {
				err = fmt.Errorf("%w: %q", ErrUnknownType, ev.Type)
			}
		} else {
			err = reg.Validate(ev)
		}
		if err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
		if seen != nil {
			if _, dup := seen[ev.ID]; dup {
				return fmt.Errorf("%w: id %s appears twice in one batch", ErrMalformed, ev.ID)
			}
			seen[ev.ID] = struct{}{}
		}
	}
	return nil
}
