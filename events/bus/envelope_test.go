package bus

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"citizen/events"
)

// The envelope ToMessage publishes is json.Marshal's, byte for byte, for
// compact data, and decodes to the same event otherwise.
func TestAppendEnvelopeMatchesMarshal(t *testing.T) {
	base := events.Event{ID: events.NewID(), Type: events.TypeFeedbackReceived, Stream: "interaction-<1>&", Schema: 1,
		Time: time.Date(2026, 12, 3, 12, 0, 0, 123456789, time.UTC), Data: json.RawMessage(`{"interaction_id":"1","text":"a\u003cb"}`),
		Revision: 3, Position: 1 << 40}
	cases := map[string]func(*events.Event){
		"minimal":     func(*events.Event) {},
		"all":         func(e *events.Event) { e.CorrelationID, e.CausationID, e.Tenant = "c\"1", "k\n2", "t\u2028" },
		"whole sec":   func(e *events.Event) { e.Time = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) },
		"zone":        func(e *events.Event) { e.Time = time.Date(2026, 1, 2, 3, 4, 5, 600, time.FixedZone("x", 5*3600+30*60)) },
		"bad stream":  func(e *events.Event) { e.Stream = "s\xff" },
		"spaced data": func(e *events.Event) { e.Data = json.RawMessage(" {\"interaction_id\": \"1\",\n \"text\":\"<\"} ") },
	}
	for name, mut := range cases {
		t.Run(name, func(t *testing.T) {
			ev := base
			mut(&ev)
			want, err := json.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			got, err := marshalEnvelope(&ev)
			if err != nil {
				t.Fatal(err)
			}
			if name != "spaced data" && !bytes.Equal(got, want) {
				t.Fatalf("got  %s\nwant %s", got, want)
			}
			var a, b events.Event
			if err := json.Unmarshal(got, &a); err != nil {
				t.Fatalf("%s: %v", got, err)
			}
			if err := json.Unmarshal(want, &b); err != nil {
				t.Fatal(err)
			}
			var da, db any
			json.Unmarshal(a.Data, &da)
			json.Unmarshal(b.Data, &db)
			a.Data, b.Data = nil, nil
			if !reflect.DeepEqual(a, b) || !reflect.DeepEqual(da, db) {
				t.Fatalf("decoded differently:\n%+v %v\n%+v %v", a, da, b, db)
			}
		})
	}
	ev := base
	ev.Time = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := marshalEnvelope(&ev); err == nil {
		t.Fatal("year 10000 encoded")
	}
}
