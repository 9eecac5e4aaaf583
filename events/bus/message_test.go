package bus_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"

	"citizen/events"
	"citizen/events/bus"
)

func TestMessageRoundTrip(t *testing.T) {
	ev := feedback(t, 7, 1)
	ev.Position, ev.Revision = 42, 3
	ev.CausationID = "cause"
	msg, err := bus.ToMessage(ev)
	if err != nil {
		t.Fatal(err)
	}
	if msg.UUID != ev.ID.String() {
		t.Fatalf("uuid %s, want %s", msg.UUID, ev.ID)
	}
	want := map[string]string{
		bus.MetaType: events.TypeFeedbackReceived, bus.MetaStream: "interaction-7", bus.MetaPosition: "42",
		bus.MetaRevision: "3", bus.MetaSchema: "1", bus.MetaCorrelationID: "corr-7", bus.MetaCausationID: "cause",
		bus.MetaTenant: "acme",
	}
	for k, v := range want {
		if got := msg.Metadata.Get(k); got != v {
			t.Errorf("metadata %s = %q, want %q", k, got, v)
		}
	}
	if len(msg.Metadata) != len(want) {
		t.Errorf("metadata has %d keys, want %d: %v", len(msg.Metadata), len(want), msg.Metadata)
	}
	got, err := bus.FromMessage(msg)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Time.Equal(ev.Time) {
		t.Fatalf("time %v, want %v", got.Time, ev.Time)
	}
	got.Time = ev.Time
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(ev)
	if string(a) != string(b) {
		t.Fatalf("round trip:\n got %s\nwant %s", a, b)
	}
	// empty optional attributes are absent, and still round-trip
	ev.CausationID, ev.Tenant, ev.CorrelationID = "", "", ""
	msg, _ = bus.ToMessage(ev)
	if _, ok := msg.Metadata[bus.MetaTenant]; ok {
		t.Fatal("empty tenant should not be set")
	}
	if _, err := bus.FromMessage(msg); err != nil {
		t.Fatal(err)
	}
}

func TestToMessageRejectsInvalidEvent(t *testing.T) {
	ev := feedback(t, 1, 1)
	ev.Data = json.RawMessage(`{`)
	if _, err := bus.ToMessage(ev); !errors.Is(err, events.ErrMalformed) {
		t.Fatalf("err = %v, want ErrMalformed", err)
	}
	ev = feedback(t, 1, 1)
	ev.ID = uuid.Nil
	if _, err := bus.ToMessage(ev); !errors.Is(err, events.ErrMalformed) {
		t.Fatalf("err = %v, want ErrMalformed", err)
	}
}

func TestFromMessageStrict(t *testing.T) {
	good := func() *message.Message {
		ev := feedback(t, 3, 1)
		ev.Position = 9
		msg, err := bus.ToMessage(ev)
		if err != nil {
			t.Fatal(err)
		}
		return msg
	}
	cases := []struct {
		name   string
		mutate func(m *message.Message)
		want   error
		field  string
	}{
		{"not json", func(m *message.Message) { m.Payload = []byte("x") }, bus.ErrBadPayload, ""},
		{"trailing data", func(m *message.Message) { m.Payload = append(m.Payload, []byte(" {}")...) }, bus.ErrBadPayload, ""},
		{"unknown field", func(m *message.Message) { m.Payload = append([]byte(`{"extra":1,`), m.Payload[1:]...) }, bus.ErrBadPayload, ""},
		{"invalid envelope", func(m *message.Message) {
			var ev events.Event
			_ = json.Unmarshal(m.Payload, &ev)
			ev.Schema = 0
			m.Payload, _ = json.Marshal(ev)
			m.Metadata.Set(bus.MetaSchema, "0")
		}, bus.ErrBadPayload, ""},
		{"uuid", func(m *message.Message) { m.UUID = uuid.NewString() }, bus.ErrMetadataMismatch, "uuid"},
		{"type", func(m *message.Message) { m.Metadata.Set(bus.MetaType, "x.y") }, bus.ErrMetadataMismatch, bus.MetaType},
		{"missing stream", func(m *message.Message) { delete(m.Metadata, bus.MetaStream) }, bus.ErrMetadataMismatch, bus.MetaStream},
		{"position", func(m *message.Message) { m.Metadata.Set(bus.MetaPosition, "10") }, bus.ErrMetadataMismatch, bus.MetaPosition},
		{"extra tenant", func(m *message.Message) { m.Metadata.Set(bus.MetaTenant, "other") }, bus.ErrMetadataMismatch, bus.MetaTenant},
		{"unrelated metadata is fine", func(m *message.Message) { m.Metadata.Set("reason_poisoned", "x") }, nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := good()
			c.mutate(m)
			_, err := bus.FromMessage(m)
			if c.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, c.want) || !errors.Is(err, events.ErrMalformed) {
				t.Fatalf("err = %v, want %v and ErrMalformed", err, c.want)
			}
			if !bus.IsPermanent(err) {
				t.Fatalf("%v should be permanent", err)
			}
			var me *bus.MismatchError
			if c.field != "" && (!errors.As(err, &me) || me.Field != c.field) {
				t.Fatalf("err = %#v, want mismatch on %s", err, c.field)
			}
		})
	}
}

func TestTopic(t *testing.T) {
	if got := bus.Topic(events.TypeInteractionRecorded); got != "citizen.interaction.recorded" {
		t.Fatal(got)
	}
}
