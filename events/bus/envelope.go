package bus

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"citizen/events"
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
	b = appendString(b, ev.Type)
	b = append(b, `,"stream":`...)
	b = appendString(b, ev.Stream)
	b = append(b, `,"time":"`...)
	b = ev.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","schema":`...)
	b = strconv.AppendInt(b, int64(ev.Schema), 10)
	if ev.CorrelationID != "" {
		b = append(b, `,"correlation_id":`...)
		b = appendString(b, ev.CorrelationID)
	}
	if ev.CausationID != "" {
		b = append(b, `,"causation_id":`...)
		b = appendString(b, ev.CausationID)
	}
	if ev.Tenant != "" {
		b = append(b, `,"tenant":`...)
		b = appendString(b, ev.Tenant)
	}
	b = append(b, `,"data":`...)
	b = append(b, ev.Data...)
	b = append(b, `,"revision":`...)
	b = strconv.AppendUint(b, ev.Revision, 10)
	b = append(b, `,"position":`...)
	b = strconv.AppendUint(b, ev.Position, 10)
	return append(b, '}'), true
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string escaped as encoding/json does
// by default: '"', '\\' and control characters escaped (\b, \f, \n, \r, \t
// short), '<', '>' and '&' as \u003c etc., U+2028 and U+2029 escaped and
// invalid UTF-8 replaced by U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// marshalEnvelope is ToMessage's encoding of ev.
func marshalEnvelope(ev *events.Event) ([]byte, error) {
	if b, ok := appendEnvelope(make([]byte, 0, len(ev.Data)+320), ev); ok {
		return b, nil
	}
	return json.Marshal(ev)
}
