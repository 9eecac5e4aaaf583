package bus

import (
	"encoding/json"
	"strconv"
	"time"

	"citizen/events"
	"citizen/internal/jsonenc"
)

// appendEnvelope appends ev's envelope as JSON: the fields, names and
// order of json.Marshal(ev), its strings escaped as encoding/json escapes
// them, and Data written as it is (a valid JSON value, which Validate
// checked) instead of re-compacted. It is what ToMessage publishes; the
// reflection-driven json.Marshal was most of ToMessage's cost, which the
// relay pays for every event. ok is false for a time json.Marshal treats
// specially (a year outside 0-9999, a zone offset in seconds).
func appendEnvelope(b []byte, ev *events.Event) (_ []byte, ok bool) {
	if y := ev.Time.Year(); y < 0 || y > 9999 {
		return b, false
	}
	if _, off := ev.Time.Zone(); off%60 != 0 {
		return b, false // json.Marshal's strict RFC 3339 decides
	}
	b = append(b, `{"id":"`...)
	b = append(b, ev.ID.String()...)
	b = append(b, `","type":`...)
	b = jsonenc.AppendString(b, ev.Type, true)
	b = append(b, `,"stream":`...)
	b = jsonenc.AppendString(b, ev.Stream, true)
	b = append(b, `,"time":"`...)
	b = ev.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","schema":`...)
	b = strconv.AppendInt(b, int64(ev.Schema), 10)
	if ev.CorrelationID != "" {
		b = append(b, `,"correlation_id":`...)
		b = jsonenc.AppendString(b, ev.CorrelationID, true)
	}
	if ev.CausationID != "" {
		b = append(b, `,"causation_id":`...)
		b = jsonenc.AppendString(b, ev.CausationID, true)
	}
	if ev.Tenant != "" {
		b = append(b, `,"tenant":`...)
		b = jsonenc.AppendString(b, ev.Tenant, true)
	}
	b = append(b, `,"data":`...)
	b = append(b, ev.Data...)
	b = append(b, `,"revision":`...)
	b = strconv.AppendUint(b, ev.Revision, 10)
	b = append(b, `,"position":`...)
	b = strconv.AppendUint(b, ev.Position, 10)
	return append(b, '}'), true
}

// marshalEnvelope is ToMessage's encoding of ev.
func marshalEnvelope(ev *events.Event) ([]byte, error) {
	if b, ok := appendEnvelope(make([]byte, 0, len(ev.Data)+320), ev); ok {
		return b, nil
	}
	return json.Marshal(ev)
}
