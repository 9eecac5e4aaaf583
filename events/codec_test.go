package events

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestCodecRoundTrip(t *testing.T) {
	in := &FeedbackReceived{InteractionID: "i1", FeedbackID: "f1", Source: "customer", Text: "no - it's 60 days now", Correction: "60 days"}
	ev, err := Encode(in, Meta{Stream: InteractionStream("i1"), Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != TypeFeedbackReceived || ev.Schema != 1 || ev.Tenant != "acme" || ev.ID.Version() != 7 {
		t.Fatalf("envelope: %+v", ev)
	}
	p, err := Decode(&ev)
	if err != nil {
		t.Fatal(err)
	}
	got := p.(*FeedbackReceived)
	if *got != *in {
		t.Fatalf("got %+v want %+v", got, in)
	}
	rb := RolloutRolledBack{RolloutChange{RolloutID: "r1", Candidate: "v2", Stable: "v1", Reason: "guardrail"}}
	ev, err = Encode(rb, Meta{Stream: RolloutStream("r1")})
	if err != nil || ev.Type != TypeRolloutRolledBack {
		t.Fatalf("%v %s", err, ev.Type)
	}
	var flat map[string]any
	if err := json.Unmarshal(ev.Data, &flat); err != nil || flat["candidate"] != "v2" {
		t.Fatalf("rollout data not flattened: %s", ev.Data)
	}
}

func TestCodecRefuses(t *testing.T) {
	good, _ := Encode(&FeedbackReceived{InteractionID: "i1", FeedbackID: "f"}, Meta{Stream: "interaction-i1"})
	cases := []struct {
		name string
		mut  func(e *Event)
		want error
	}{
		{"invalid json", func(e *Event) { e.Data = json.RawMessage(`{"interaction_id":`) }, ErrMalformed},
		{"unknown field", func(e *Event) { e.Data = json.RawMessage(`{"interaction_id":"x","bogus":1}`) }, ErrMalformed},
		{"wrong field type", func(e *Event) { e.Data = json.RawMessage(`{"interaction_id":5}`) }, ErrMalformed},
		{"trailing data", func(e *Event) { e.Data = json.RawMessage(`{} {}`) }, ErrMalformed},
		{"trailing brace", func(e *Event) { e.Data = json.RawMessage(`{"interaction_id":"x"}}`) }, ErrMalformed},
		{"invalid after the value", func(e *Event) { e.Data = json.RawMessage(`{"interaction_id":"x"} x`) }, ErrMalformed},
		{"empty data", func(e *Event) { e.Data = nil }, ErrMalformed},
		{"unknown type", func(e *Event) { e.Type = "interaction.exploded" }, ErrUnknownType},
		{"future schema", func(e *Event) { e.Schema = 99 }, ErrUnknownSchema},
		{"zero schema", func(e *Event) { e.Schema = 0 }, ErrMalformed},
		{"missing id", func(e *Event) { e.ID = [16]byte{} }, ErrMalformed},
		{"missing time", func(e *Event) { e.Time = zeroTime }, ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev := good
			c.mut(&ev)
			if _, err := Decode(&ev); !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if c.name == "unknown field" || c.name == "wrong field type" {
				return // a view reads only the fields it names, leniently
			}
			var view struct {
				InteractionID string `json:"interaction_id"`
			}
			if err := DecodeView(&ev, &view); !errors.Is(err, c.want) {
				t.Fatalf("DecodeView: got %v, want %v", err, c.want)
			}
		})
	}
}

func TestUpcasting(t *testing.T) {
	r := NewRegistry()
	r.Register(TypeFeedbackReceived, 3, func() Payload { return &FeedbackReceived{} })
	// v1 called the text "comment"; v2 called the source "origin".
	r.RegisterUpcaster(TypeFeedbackReceived, 1, func(d json.RawMessage) (json.RawMessage, error) {
		var m map[string]any
		if err := json.Unmarshal(d, &m); err != nil {
			return nil, err
		}
		m["text"] = m["comment"]
		delete(m, "comment")
		return json.Marshal(m)
	})
	ev := Event{ID: NewID(), Type: TypeFeedbackReceived, Schema: 1, Time: nowForTest(), Data: json.RawMessage(`{"interaction_id":"i","comment":"great"}`)}
	if _, err := r.Decode(&ev); !errors.Is(err, ErrUnknownSchema) {
		t.Fatalf("missing v2->v3 upcaster should fail with ErrUnknownSchema, got %v", err)
	}
	r.RegisterUpcaster(TypeFeedbackReceived, 2, func(d json.RawMessage) (json.RawMessage, error) { return d, nil })
	p, err := r.Decode(&ev)
	if err != nil {
		t.Fatal(err)
	}
	if p.(*FeedbackReceived).Text != "great" {
		t.Fatalf("upcast lost text: %+v", p)
	}
}

func TestDeterministicID(t *testing.T) {
	a, b := DeterministicID("x", "y"), DeterministicID("x", "y")
	if a != b || a == DeterministicID("xy") || a == DeterministicID("x", "z") {
		t.Fatal("deterministic ids must be stable and separate their parts")
	}
}

func TestRolloutChangeOf(t *testing.T) {
	c := RolloutChange{RolloutID: "r", Candidate: "v2", Stable: "v1", Weight: 0.05}
	for _, p := range []Payload{RolloutStarted{c}, &RolloutAdvanced{c}, &RolloutPaused{c}, &RolloutResumed{c}, &RolloutPromoted{c}, &RolloutRolledBack{c}} {
		if got, ok := RolloutChangeOf(p); !ok || got != c {
			t.Fatalf("%T: %+v %v", p, got, ok)
		}
	}
	if _, ok := RolloutChangeOf(&FeedbackReceived{}); ok {
		t.Fatal("feedback.received is not a rollout change")
	}
}

// weights.trained schema 1 could say gate_failed (a candidate accepted
// although the offline gate had reasons to reject it); schema 2 reads it
// as rejected, keeps the gate's reason, and decodes the rest unchanged.
func TestWeightsTrainedSchema1(t *testing.T) {
	for _, c := range []struct {
		data     string
		accepted bool
	}{
		{`{"version":"d0001","parent":"","accepted":true,"gate_failed":true,"reason":"forced; gate: policy regressed"}`, false},
		{`{"version":"d0001","parent":"","accepted":true,"gate_failed":false}`, true},
		{`{"version":"d0001","parent":"","accepted":true}`, true},
		{`{"version":"d0001","parent":"","accepted":false,"reason":"gate: policy regressed"}`, false},
	} {
		ev := Event{ID: NewID(), Type: TypeWeightsTrained, Stream: VersionStream("d0001"), Schema: 1, Time: nowForTest(), Data: json.RawMessage(c.data)}
		p, err := Decode(&ev)
		if err != nil {
			t.Fatalf("%s: %v", c.data, err)
		}
		wt := p.(*WeightsTrained)
		if wt.Version != "d0001" || wt.Accepted != c.accepted {
			t.Fatalf("%s: %+v", c.data, wt)
		}
	}
	bad := Event{ID: NewID(), Type: TypeWeightsTrained, Stream: VersionStream("d0001"), Schema: 1, Time: nowForTest(), Data: json.RawMessage(`{"version":"d0001","gate_failed":"yes"}`)}
	if _, err := Decode(&bad); !errors.Is(err, ErrMalformed) {
		t.Fatalf("gate_failed not a bool: %v", err)
	}
	// Schema 2 knows no gate_failed.
	now := bad
	now.Schema, now.Data = 2, json.RawMessage(`{"version":"d0001","parent":"","accepted":true,"gate_failed":true}`)
	if _, err := Decode(&now); !errors.Is(err, ErrMalformed) {
		t.Fatalf("schema 2 with gate_failed: %v", err)
	}
	if ev, err := Encode(&WeightsTrained{Version: "d0002"}, Meta{Stream: VersionStream("d0002")}); err != nil || ev.Schema != 3 {
		t.Fatalf("encoded schema %d: %v", ev.Schema, err)
	}
	// Schema 2's correction check and contradicted statements are
	// dropped; schema 3 knows neither.
	two := Event{ID: NewID(), Type: TypeWeightsTrained, Stream: VersionStream("d0003"), Schema: 2, Time: nowForTest(),
		Data: json.RawMessage(`{"version":"d0003","parent":"d0002","accepted":true,"corrections":{"n":2,"candidate":1,"parent":0},"contradicted":["policy: 30 days"]}`)}
	if p, err := Decode(&two); err != nil || p.(*WeightsTrained).Version != "d0003" || !p.(*WeightsTrained).Accepted {
		t.Fatalf("schema 2 with a correction check: %+v, %v", p, err)
	}
	two.Schema = 3
	if _, err := Decode(&two); !errors.Is(err, ErrMalformed) {
		t.Fatalf("schema 3 with a correction check: %v", err)
	}
}
