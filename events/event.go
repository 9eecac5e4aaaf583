package events

import (
	"crypto/sha1"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Event is the envelope of everything citizen records. Attribute names
// follow CloudEvents where they fit (id, type, time, dataschema ~ schema)
// so that the envelope maps onto EventStoreDB metadata and Kafka headers.
//
// Stream, Revision and Position are assigned by the store on Append.
type Event struct {
	ID            uuid.UUID       `json:"id"`
	Type          string          `json:"type"`
	Stream        string          `json:"stream"`
	Time          time.Time       `json:"time"`
	Schema        int             `json:"schema"`
	CorrelationID string          `json:"correlation_id,omitempty"`
	CausationID   string          `json:"causation_id,omitempty"`
	Tenant        string          `json:"tenant,omitempty"`
	Data          json.RawMessage `json:"data"`

	Revision uint64 `json:"revision"`
	Position uint64 `json:"position"`
}

// Validate checks what every stored event must satisfy: a non-zero ID, a
// non-empty type, a positive schema, a set time, valid UTF-8 strings and
// Data that is a valid JSON value. It does not consult the registry; use
// Registry.Validate for that.
func (e *Event) Validate() error {
	if err := e.validateEnvelope(); err != nil {
		return err
	}
	if !ValidJSON(e.Data) {
		return fmt.Errorf("%w: data of %s is not valid JSON", ErrMalformed, e.Type)
	}
	return nil
}

// validateEnvelope is Validate without the check that Data is valid JSON:
// for readers whose JSON decoder checks it anyway (Registry.Decode and
// DecodeView), which would otherwise scan the data twice.
func (e *Event) validateEnvelope() error {
	switch {
	case e.ID == uuid.Nil:
		return fmt.Errorf("%w: missing id", ErrMalformed)
	case e.Type == "" || len(e.Type) > 128 || !utf8.ValidString(e.Type):
		return fmt.Errorf("%w: bad type %q", ErrMalformed, truncate(e.Type, 64))
	case e.Schema <= 0:
		return fmt.Errorf("%w: schema must be positive, got %d", ErrMalformed, e.Schema)
	case e.Time.IsZero():
		return fmt.Errorf("%w: missing time", ErrMalformed)
	case !utf8.ValidString(e.CorrelationID) || !utf8.ValidString(e.CausationID) || !utf8.ValidString(e.Tenant):
		return fmt.Errorf("%w: invalid UTF-8 in metadata", ErrMalformed)
	case len(e.Data) == 0:
		return fmt.Errorf("%w: data of %s is not valid JSON", ErrMalformed, e.Type)
	}
	return nil
}

// NewID returns a fresh UUIDv7 (time-ordered).
func NewID() uuid.UUID {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.New()
	}
	return id
}

// namespace for deterministic ids.
var idNamespace = uuid.MustParse("6f1c3b0e-2a51-4e7c-9d55-1f0c2b8a7e10")

// DeterministicID derives a stable event ID from the given parts (for
// example the causing event's ID and the derived event's type), so a
// handler that runs twice for the same input appends the same ID and the
// store keeps one copy. It is a name-based (version 5, SHA-1) UUID.
func DeterministicID(parts ...string) uuid.UUID {
	h := sha1.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s;", len(p), p)
	}
	return uuid.NewHash(sha1.New(), idNamespace, h.Sum(nil), 5)
}
