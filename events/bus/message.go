package bus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/ThreeDotsLabs/watermill/message"

	"citizen/events"
)

// TopicPrefix starts every topic name citizen uses on the bus.
const TopicPrefix = "citizen."

// PoisonTopic receives messages that a handler failed on too often (or
// could never handle). The message keeps its payload and metadata and gets
// the reason under the metadata key "reason_poisoned" (plus
// "topic_poisoned" and "handler_poisoned").
const PoisonTopic = TopicPrefix + "poison"

// Topic returns the topic that carries events of the given type:
// "citizen." + type, for example "citizen.interaction.recorded". There is
// one topic per event type; see the package documentation for why.
func Topic(eventType string) string { return TopicPrefix + eventType }

// Metadata keys of a message that carries an event. They mirror the
// envelope (CloudEvents-style names) so that consumers and brokers can
// route and partition without decoding the payload. The payload stays the
// source of truth; FromMessage checks that both agree.
const (
	MetaType          = "type"
	MetaStream        = "stream"
	MetaPosition      = "position"
	MetaRevision      = "revision"
	MetaSchema        = "schema"
	MetaCorrelationID = "correlation_id" // same key as watermill's CorrelationID middleware
	MetaCausationID   = "causation_id"
	MetaTenant        = "tenant"
)

// Errors of FromMessage. Both also match events.ErrMalformed, and the
// router treats them as permanent (the message goes to the poison topic
// without retries).
var (
	// ErrBadPayload: the payload is not exactly one valid event envelope
	// (bad JSON, unknown fields, trailing data, or an envelope that fails
	// events.Event.Validate).
	ErrBadPayload = errors.New("bus: message payload is not a valid event envelope")
	// ErrMetadataMismatch: the message UUID or a metadata value disagrees
	// with the envelope. The concrete error is a *MismatchError.
	ErrMetadataMismatch = errors.New("bus: message metadata does not match its event")
)

// MismatchError reports which attribute of a message disagrees with the
// event in its payload. It matches ErrMetadataMismatch and
// events.ErrMalformed with errors.Is.
type MismatchError struct {
	// Field is "uuid" or a metadata key (MetaType, ...).
	Field string
	// Message is the value on the message, Event the value from the
	// envelope.
	Message, Event string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("bus: message %s %q does not match event %s %q", e.Field, e.Message, e.Field, e.Event)
}

// Is makes errors.Is match ErrMetadataMismatch and events.ErrMalformed.
func (e *MismatchError) Is(target error) bool {
	return target == ErrMetadataMismatch || target == events.ErrMalformed
}

// ToMessage maps an event onto a watermill message: UUID = the event id,
// payload = the event's JSON envelope (as the store holds it, data
// included), metadata = MetaType, MetaStream, MetaPosition, MetaRevision,
// MetaSchema and, when set, MetaCorrelationID, MetaCausationID, MetaTenant.
// It fails with events.ErrMalformed when ev does not pass
// events.Event.Validate (such an event could never come out of a store).
func ToMessage(ev events.Event) (*message.Message, error) {
	if err := ev.Validate(); err != nil {
		return nil, err
	}
	payload, err := marshalEnvelope(&ev)
	if err != nil {
		return nil, fmt.Errorf("%w: encoding %s: %v", events.ErrMalformed, ev.ID, err)
	}
	msg := message.NewMessage(ev.ID.String(), payload)
	for _, m := range metadataOf(&ev) {
		if m.v != "" {
			msg.Metadata.Set(m.k, m.v)
		}
	}
	msg.SetContext(context.WithValue(msg.Context(), carriedKey{}, &carried{ev: ev, payload: slices.Clone(payload)}))
	return msg, nil
}

// carried is the event a message was made from, kept beside it in the
// message's context while it stays in this process (the in-process bus
// passes it to its subscribers), so that FromMessage need not decode the
// JSON envelope once per consumer group: with every component running,
// those decodes were a tenth of the process's CPU (bench/hotpath profile).
// payload is a private copy of the message's payload at ToMessage; the
// event is used only while the message's payload still equals it.
type carried struct {
	ev      events.Event
	payload []byte
}

type carriedKey struct{}

func carriedOf(msg *message.Message) *carried {
	c, _ := msg.Context().Value(carriedKey{}).(*carried)
	return c
}

// metadataOf lists the metadata an event's message carries ("" = absent).
func metadataOf(ev *events.Event) [8]struct{ k, v string } {
	return [8]struct{ k, v string }{
		{MetaType, ev.Type},
		{MetaStream, ev.Stream},
		{MetaPosition, strconv.FormatUint(ev.Position, 10)},
		{MetaRevision, strconv.FormatUint(ev.Revision, 10)},
		{MetaSchema, strconv.Itoa(ev.Schema)},
		{MetaCorrelationID, ev.CorrelationID},
		{MetaCausationID, ev.CausationID},
		{MetaTenant, ev.Tenant},
	}
}

// FromMessage decodes the event a message carries, strictly: the payload
// must be exactly one envelope with no unknown fields that passes
// events.Event.Validate (ErrBadPayload otherwise), and the message UUID and
// every event metadata key (present or absent) must agree with the
// envelope (*MismatchError otherwise). Other metadata keys (added by
// middleware, for example) are ignored. It does not decode the typed
// payload; use events.Decode for that.
func FromMessage(msg *message.Message) (events.Event, error) {
	if c := carriedOf(msg); c != nil && bytes.Equal(msg.Payload, c.payload) {
		// The payload is the one ToMessage made from c.ev (validated
		// there): decoding it would give c.ev back.
		ev := c.ev
		ev.Data = slices.Clone(ev.Data)
		return ev, checkMetadata(msg, &ev)
	}
	var ev events.Event
	dec := json.NewDecoder(bytes.NewReader(msg.Payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ev); err != nil {
		return events.Event{}, fmt.Errorf("%w: message %s: %v (%w)", ErrBadPayload, msg.UUID, err, events.ErrMalformed)
	}
	if dec.More() {
		return events.Event{}, fmt.Errorf("%w: message %s: trailing data (%w)", ErrBadPayload, msg.UUID, events.ErrMalformed)
	}
	if err := ev.Validate(); err != nil {
		return events.Event{}, fmt.Errorf("%w: message %s: %w", ErrBadPayload, msg.UUID, err)
	}
	if err := checkMetadata(msg, &ev); err != nil {
		return events.Event{}, err
	}
	return ev, nil
}

// checkMetadata reports the first of msg's UUID and event metadata that
// disagrees with ev.
func checkMetadata(msg *message.Message, ev *events.Event) error {
	if msg.UUID != ev.ID.String() {
		return &MismatchError{Field: "uuid", Message: msg.UUID, Event: ev.ID.String()}
	}
	for _, m := range metadataOf(ev) {
		if got := msg.Metadata.Get(m.k); got != m.v {
			return &MismatchError{Field: m.k, Message: got, Event: m.v}
		}
	}
	return nil
}
