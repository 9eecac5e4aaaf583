package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/google/uuid"

	"citizen/internal/jsondec"
)

// Upcaster rewrites the data of one event type from schema version v to
// v+1. It must be pure.
type Upcaster func(data json.RawMessage) (json.RawMessage, error)

type typeInfo struct {
	schema   int
	newValue func() Payload
	upcast   map[int]Upcaster // from version -> to version+1
	// cache, if set, holds recent decoded payloads of the type (see
	// CacheDecoded).
	cache *decodeCache
}

// Registry maps event types to their Go payloads and current schema
// versions. It encodes payloads into envelopes and decodes envelopes back,
// upcasting older schema versions. Safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	types map[string]*typeInfo
}

// CacheDecoded makes Decode remember the latest decoded payloads of typ
// (at most entries of them, holding at most dataBytes of data), so that
// decoding the same event again returns a deep copy instead of parsing it
// again: for a type several consumers of one process read. The type must
// be registered; call it before the registry is used concurrently.
func (r *Registry) CacheDecoded(typ string, entries, dataBytes int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ti, ok := r.types[typ]; ok && entries > 0 && dataBytes > 0 {
		ti.cache = newDecodeCache(entries, dataBytes)
	}
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{types: map[string]*typeInfo{}} }

// Register adds an event type at its current schema version. newValue
// returns a pointer to a zero payload to decode into.
func (r *Registry) Register(typ string, schema int, newValue func() Payload) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.types[typ] = &typeInfo{schema: schema, newValue: newValue, upcast: map[int]Upcaster{}}
}

// RegisterUpcaster adds the step from schema version from to from+1 for typ.
func (r *Registry) RegisterUpcaster(typ string, from int, up Upcaster) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ti, ok := r.types[typ]; ok {
		ti.upcast[from] = up
	}
}

// Known reports whether typ is registered.
func (r *Registry) Known(typ string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.types[typ]
	return ok
}

// Meta carries the envelope attributes of a new event.
type Meta struct {
	Stream        string
	CorrelationID string
	CausationID   string
	Tenant        string
	// ID, if non-zero, is used instead of a fresh UUIDv7 (see
	// DeterministicID).
	ID uuid.UUID
	// Time, if non-zero, is used instead of time.Now().
	Time time.Time
}

// Encode builds an envelope for p at its type's current schema version.
// The payload type must be registered.
func (r *Registry) Encode(p Payload, m Meta) (Event, error) {
	typ := p.EventType()
	r.mu.RLock()
	ti, ok := r.types[typ]
	r.mu.RUnlock()
	if !ok {
		return Event{}, fmt.Errorf("%w: %q", ErrUnknownType, typ)
	}
	data, err := json.Marshal(p)
	if err != nil {
		return Event{}, fmt.Errorf("%w: encoding %s: %v", ErrMalformed, typ, err)
	}
	ev := Event{ID: m.ID, Type: typ, Stream: m.Stream, Time: m.Time, Schema: ti.schema,
		CorrelationID: m.CorrelationID, CausationID: m.CausationID, Tenant: m.Tenant, Data: data}
	if ev.ID == uuid.Nil {
		ev.ID = NewID()
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now().UTC()
	}
	return ev, nil
}

// Validate checks that ev is well formed and decodes under its type
// (known type, known schema, data matching the payload strictly).
func (r *Registry) Validate(ev *Event) error {
	_, err := r.Decode(ev)
	return err
}

// Decode returns the typed payload of ev (a pointer, e.g.
// *InteractionRecorded), upcasting older schema versions first. Errors:
// ErrMalformed (envelope or data invalid, unknown fields, trailing data),
// ErrUnknownType, ErrUnknownSchema.
func (r *Registry) Decode(ev *Event) (Payload, error) {
	ti, data, err := r.current(ev)
	if err != nil {
		return nil, err
	}
	if ti.cache != nil {
		if p, ok := ti.cache.get(ev, data); ok {
			return p, nil
		}
	}
	p := ti.newValue()
	if fd, ok := p.(fastDecoder); ok {
		if r := jsondec.NewReader(data); fd.decode(r) && r.AtEnd() {
			if ti.cache != nil {
				ti.cache.put(ev, data, p)
			}
			return p, nil
		}
		p = ti.newValue()
	}
	if err := decodeStrict(data, p); err != nil {
		return nil, fmt.Errorf("%w: %s data: %v", ErrMalformed, ev.Type, err)
	}
	if ti.cache != nil {
		ti.cache.put(ev, data, p)
	}
	return p, nil
}

// decodeStrict is Decode's general path: encoding/json, refusing unknown
// fields and trailing data.
func decodeStrict(data []byte, p Payload) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(p); err != nil {
		return err
	}
	if !onlySpace(data[dec.InputOffset():]) {
		return errors.New("trailing data")
	}
	return nil
}

// DecodeView decodes ev's data, upcast to the current schema, into view: a
// struct holding the few of the payload's fields a reader needs, under
// the payload's JSON names. The fields it leaves out are skipped without
// being built (a recorded interaction's token ids and logprobs), which
// makes it several times cheaper than Decode for such readers. It checks
// the envelope and the type as Decode does, not the payload's fields.
//
// A view that implements ViewReader reads the data itself where it can.
func (r *Registry) DecodeView(ev *Event, view any) error {
	_, data, err := r.current(ev)
	if err != nil {
		return err
	}
	if vr, ok := view.(ViewReader); ok {
		if rd := jsondec.NewReader(data); vr.ReadView(rd) && rd.AtEnd() {
			return nil
		}
		reflect.ValueOf(view).Elem().SetZero()
	}
	if err := json.Unmarshal(data, view); err != nil {
		return fmt.Errorf("%w: %s data: %v", ErrMalformed, ev.Type, err)
	}
	return nil
}

// ViewReader is a view (a pointer to a struct, see DecodeView) that reads
// the data without reflection. DecodeView calls ReadView on a zero view
// with a Reader at the start of the data; ReadView reports false for
// anything it does not read exactly as json.Unmarshal would read it into
// the view (a key that matches a field in other case, a repeated key, a
// value of another type), and DecodeView then zeroes the view and uses
// json.Unmarshal.
type ViewReader interface {
	ReadView(r *jsondec.Reader) bool
}

// onlySpace reports whether b holds JSON whitespace only.
func onlySpace(b []byte) bool {
	return skipSpace(b, 0) == len(b)
}

// current validates ev's envelope and returns its type and its data upcast
// to the type's current schema. Whether the data is valid JSON is left to
// the caller's decoder (encoding/json checks it, with the same answer as
// ValidJSON), so the data is scanned once, not twice.
func (r *Registry) current(ev *Event) (*typeInfo, json.RawMessage, error) {
	if err := ev.validateEnvelope(); err != nil {
		return nil, nil, err
	}
	r.mu.RLock()
	ti, ok := r.types[ev.Type]
	r.mu.RUnlock()
	if !ok {
		return nil, nil, fmt.Errorf("%w: %q", ErrUnknownType, ev.Type)
	}
	data := ev.Data
	if ev.Schema > ti.schema {
		return nil, nil, fmt.Errorf("%w: %s schema %d (this build knows up to %d)", ErrUnknownSchema, ev.Type, ev.Schema, ti.schema)
	}
	for v := ev.Schema; v < ti.schema; v++ {
		up, ok := ti.upcast[v]
		if !ok {
			return nil, nil, fmt.Errorf("%w: %s schema %d has no upcaster to %d", ErrUnknownSchema, ev.Type, v, v+1)
		}
		var err error
		if data, err = up(data); err != nil {
			return nil, nil, fmt.Errorf("%w: upcasting %s from schema %d: %v", ErrMalformed, ev.Type, v, err)
		}
	}
	return ti, data, nil
}

// Types is the registry of citizen's events (docs/architecture.md section 2) at their
// current schema versions.
var Types = func() *Registry {
	r := NewRegistry()
	r.Register(TypeInteractionRecorded, 1, func() Payload { return &InteractionRecorded{} })
	r.Register(TypeFeedbackReceived, 1, func() Payload { return &FeedbackReceived{} })
	r.Register(TypeInteractionMetadataUpdated, 1, func() Payload { return &InteractionMetadataUpdated{} })
	r.Register(TypeInteractionDeleted, 1, func() Payload { return &InteractionDeleted{} })
	r.Register(TypeInteractionEvaluated, 1, func() Payload { return &InteractionEvaluated{} })
	r.Register(TypeFeedbackInterpreted, 1, func() Payload { return &FeedbackInterpreted{} })
	r.Register(TypeAnomalyDetected, 1, func() Payload { return &AnomalyDetected{} })
	r.Register(TypeWeightsTrained, 3, func() Payload { return &WeightsTrained{} })
	r.RegisterUpcaster(TypeWeightsTrained, 1, upcastWeightsTrained1)
	r.RegisterUpcaster(TypeWeightsTrained, 2, upcastWeightsTrained2)
	r.Register(TypeVersionUnavailable, 1, func() Payload { return &VersionUnavailable{} })
	r.Register(TypeRolloutStarted, 1, func() Payload { return &RolloutStarted{} })
	r.Register(TypeRolloutAdvanced, 1, func() Payload { return &RolloutAdvanced{} })
	r.Register(TypeRolloutPaused, 1, func() Payload { return &RolloutPaused{} })
	r.Register(TypeRolloutResumed, 1, func() Payload { return &RolloutResumed{} })
	r.Register(TypeRolloutPromoted, 1, func() Payload { return &RolloutPromoted{} })
	r.Register(TypeRolloutRolledBack, 1, func() Payload { return &RolloutRolledBack{} })
	// Read by several workers of one process, close together: the
	// anomaly detectors, the lessons learner, the scoreboard and the
	// memory indexer. (An interaction.recorded has one full reader, the
	// evaluator, which may lag the others by a backlog.)
	r.CacheDecoded(TypeInteractionEvaluated, 4096, 4<<20)
	return r
}()

// Encode encodes p with the default registry.
func Encode(p Payload, m Meta) (Event, error) { return Types.Encode(p, m) }

// Decode decodes ev with the default registry.
func Decode(ev *Event) (Payload, error) { return Types.Decode(ev) }

// DecodeView decodes ev into view with the default registry.
func DecodeView(ev *Event, view any) error { return Types.DecodeView(ev, view) }
