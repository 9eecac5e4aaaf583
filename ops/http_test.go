package ops

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"citizen/events"
	"citizen/ops/rollout"
)

func TestAuth(t *testing.T) {
	e := newEnv(t, bearer, 0)
	for _, path := range []string{"/v1/ops/rollout", "/v1/ops/versions", "/v1/ops/stream"} {
		if code := e.do(http.MethodGet, path, "", "", nil); code != http.StatusUnauthorized {
			t.Fatalf("GET %s without a key: %d", path, code)
		}
		if code := e.do(http.MethodGet, path, "wrong", "", nil); code != http.StatusUnauthorized {
			t.Fatalf("GET %s with a wrong key: %d", path, code)
		}
	}
	if code := e.do(http.MethodPost, "/v1/ops/rollout/abort", "", "", nil); code != http.StatusUnauthorized {
		t.Fatalf("POST abort without a key: %d", code)
	}
	if code := e.do(http.MethodGet, "/ops", "", "", nil); code != http.StatusOK {
		t.Fatalf("GET /ops: %d", code)
	}
}

func TestRolloutEndpoints(t *testing.T) {
	e := newEnv(t, bearer, 0)
	var st rollout.Status
	if code := e.do(http.MethodGet, "/v1/ops/rollout", testKey, "", &st); code != http.StatusOK || st.Active != nil || st.Stable != "v1" {
		t.Fatalf("empty: %d %+v", code, st)
	}
	if code := e.do(http.MethodPost, "/v1/ops/rollout/pause", testKey, "", nil); code != http.StatusConflict {
		t.Fatalf("pause without rollout: %d", code)
	}
	e.startRollout()
	if code := e.do(http.MethodGet, "/v1/ops/rollout", testKey, "", &st); code != http.StatusOK || st.Active == nil ||
		st.Active.Candidate != "v2" || st.Active.Weight != 0.05 || st.Active.Paused {
		t.Fatalf("running: %d %+v", code, st)
	}
	var ar ActionResponse
	if code := e.do(http.MethodPost, "/v1/ops/rollout/pause", testKey, `{"reason":"checking"}`, &ar); code != http.StatusOK {
		t.Fatalf("pause: %d", code)
	}
	if ar.Event.Type != events.TypeRolloutPaused || ar.Status.Active == nil || !ar.Status.Active.Paused {
		t.Fatalf("pause answer %+v", ar)
	}
	p, err := events.Decode(&ar.Event)
	if err != nil {
		t.Fatal(err)
	}
	if c := p.(*events.RolloutPaused); c.Actor != rollout.ActorOperator || c.Reason != "checking" {
		t.Fatalf("paused %+v", c)
	}
	if code := e.do(http.MethodPost, "/v1/ops/rollout/pause", testKey, "", nil); code != http.StatusConflict {
		t.Fatalf("second pause: %d", code)
	}
	if code := e.do(http.MethodPost, "/v1/ops/rollout/resume?reason=ok", testKey, "", &ar); code != http.StatusOK || ar.Status.Active.Paused {
		t.Fatalf("resume: %d %+v", code, ar.Status)
	}
	if code := e.do(http.MethodPost, "/v1/ops/rollout/explode", testKey, "", nil); code != http.StatusNotFound {
		t.Fatalf("unknown action: %d", code)
	}
	if code := e.do(http.MethodPost, "/v1/ops/rollout/abort", testKey, "{bad", nil); code != http.StatusBadRequest {
		t.Fatalf("bad body: %d", code)
	}
	ar = ActionResponse{}
	if code := e.do(http.MethodPost, "/v1/ops/rollout/abort", testKey, `{"reason":"no"}`, &ar); code != http.StatusOK ||
		ar.Status.Active != nil || ar.Status.History[0].Outcome != "rolled_back" || ar.Status.History[0].Reason != "no" {
		t.Fatalf("abort: %d %+v", code, ar.Status)
	}
	var vr VersionsResponse
	if code := e.do(http.MethodGet, "/v1/ops/versions", testKey, "", &vr); code != http.StatusOK || vr.Stable != "v1" ||
		len(vr.Versions) != 1 || vr.Versions[0].Version != "v2" || vr.Versions[0].Status != "rolled_back" || vr.Versions[0].Parent != "v1" {
		t.Fatalf("versions: %d %+v", code, vr)
	}
	// promote the next one
	e.append(events.VersionStream("v3"), "", &events.WeightsTrained{Version: "v3", Parent: "v1", Accepted: true})
	if err := e.ctrl.CatchUp(e.ctx); err != nil {
		t.Fatal(err)
	}
	ar = ActionResponse{}
	if code := e.do(http.MethodPost, "/v1/ops/rollout/promote", testKey, "", &ar); code != http.StatusOK || ar.Status.Stable != "v3" {
		t.Fatalf("promote: %d %+v", code, ar.Status)
	}
}

func TestStream(t *testing.T) {
	e := newEnv(t, bearer, 0)
	// history: two versions' evaluations, two tenants, a recorded
	// interaction (never on the stream)
	e.append(events.InteractionStream("x"), "acme", &events.InteractionRecorded{InteractionID: "x", Model: "citizen", ModelVersion: "v1"})
	a := e.evaluated("a", "v1", "acme", 0.5)
	b := e.evaluated("b", "v2", "acme", 0.7)
	c := e.evaluated("c", "v1", "globex", 0.1)

	r := e.openStream("?after=0&type=interaction.evaluated", "")
	if s := r.next(t); s.comment == "" {
		t.Fatalf("first block %+v, want the opening comment", s)
	}
	for _, want := range []events.Event{a, b, c} {
		s, ev := r.nextEvent(t)
		if s.id != strconv.FormatUint(want.Position, 10) || s.event != want.Type || ev.ID != want.ID || ev.Position != want.Position {
			t.Fatalf("got %+v / %+v, want position %d", s, ev, want.Position)
		}
	}
	// live: flushed as it is appended
	d := e.evaluated("d", "v2", "acme", 0.9)
	if s, ev := r.nextEvent(t); ev.ID != d.ID || s.id != fmt.Sprint(d.Position) {
		t.Fatalf("live event %+v", s)
	}

	// resume after b with Last-Event-ID: c, d and nothing twice
	r2 := e.openStream("?type=interaction.evaluated", fmt.Sprint(b.Position))
	for _, want := range []events.Event{c, d} {
		if _, ev := r2.nextEvent(t); ev.ID != want.ID {
			t.Fatalf("resumed: got position %d, want %d", ev.Position, want.Position)
		}
	}

	// filters: version and tenant
	r3 := e.openStream("?after=0&version=v2&tenant=acme", "")
	for _, want := range []events.Event{b, d} {
		if _, ev := r3.nextEvent(t); ev.ID != want.ID {
			t.Fatalf("filtered: got %s at %d, want %d", ev.Type, ev.Position, want.Position)
		}
	}
	// by type family, live: only the rollout events reach r4
	r4 := e.openStream("?type=rollout", "")
	e.evaluated("e", "v2", "acme", 0.1)
	e.startRollout()
	if _, ev := r4.nextEvent(t); ev.Type != events.TypeRolloutStarted {
		t.Fatalf("type filter: got %s", ev.Type)
	}
	// r3 (version v2, tenant acme) sees e's evaluation; the rollout events
	// carry no tenant. Without the tenant filter, version v2 also selects
	// v2's weights.trained and rollout.started.
	if _, ev := r3.nextEvent(t); ev.Type != events.TypeInteractionEvaluated || ev.Position <= d.Position {
		t.Fatalf("version filter live: got %s at %d", ev.Type, ev.Position)
	}
	r5 := e.openStream(fmt.Sprintf("?after=%d&version=v2", d.Position), "")
	for _, want := range []string{events.TypeInteractionEvaluated, events.TypeWeightsTrained, events.TypeRolloutStarted} {
		if _, ev := r5.nextEvent(t); ev.Type != want {
			t.Fatalf("version filter: got %s, want %s", ev.Type, want)
		}
	}
	e.evaluated("f", "v1", "acme", 0.1) // not v2
	g := e.evaluated("g", "v2", "globex", 0.1)
	if _, ev := r5.nextEvent(t); ev.ID != g.ID {
		t.Fatalf("version filter: got %s at %d, want %d", ev.Type, ev.Position, g.Position)
	}

	for _, q := range []string{"?type=interaction.recorded", "?after=x", "?backlog=-1"} {
		if code := e.do(http.MethodGet, "/v1/ops/stream"+q, testKey, "", nil); code != http.StatusBadRequest {
			t.Fatalf("%s: %d", q, code)
		}
	}
}

func TestStreamHeartbeatAndDefaultStart(t *testing.T) {
	e := newEnv(t, bearer, 5*time.Millisecond)
	e.evaluated("old", "v1", "acme", 0.5)
	r := e.openStream("", "") // no position: only new events
	seen := 0
	for seen < 2 {
		if s := r.next(t); len(s.comment) > 9 && s.comment[:9] == "heartbeat" {
			seen++
		} else if s.event != "" {
			t.Fatalf("an old event on a stream that starts at the end: %+v", s)
		}
	}
	n := e.evaluated("new", "v1", "acme", 0.5)
	if _, ev := r.nextEvent(t); ev.ID != n.ID {
		t.Fatalf("got %d, want %d", ev.Position, n.Position)
	}
	// the stream ends when the client goes away
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+"/v1/ops/stream?backlog=1", nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
}

// POST /v1/ops/rollout/start starts the canary of a version the offline
// gate rejected, as the operator, with the reason; the controller then
// holds it in its first step (rollout package tests).
func TestStartEndpoint(t *testing.T) {
	e := newEnv(t, bearer, 0)
	if code := e.do(http.MethodPost, "/v1/ops/rollout/start", "", `{"candidate":"v2"}`, nil); code != http.StatusUnauthorized {
		t.Fatalf("start without a key: %d", code)
	}
	if code := e.do(http.MethodPost, "/v1/ops/rollout/start", testKey, `{"candidate":"v2"}`, nil); code != http.StatusNotFound {
		t.Fatalf("start of an unknown version: %d", code)
	}
	e.append(events.VersionStream("v2"), "", &events.WeightsTrained{Version: "v2", Parent: "v1", Accepted: false, Reason: "gate: policy regressed",
		Artifact: &events.Artifact{Format: "peft-lora", Path: "weights/v2", SHA256: "00"}})
	if err := e.ctrl.CatchUp(e.ctx); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"", "{bad", `{"reason":"no candidate"}`, `{"candidate":"v2","weight":1}`} {
		if code := e.do(http.MethodPost, "/v1/ops/rollout/start", testKey, body, nil); code != http.StatusBadRequest {
			t.Fatalf("start with body %q: %d", body, code)
		}
	}
	var ar ActionResponse
	if code := e.do(http.MethodPost, "/v1/ops/rollout/start", testKey, `{"candidate":"v2","reason":"see it live"}`, &ar); code != http.StatusOK {
		t.Fatalf("start: %d", code)
	}
	p, err := events.Decode(&ar.Event)
	if err != nil {
		t.Fatal(err)
	}
	if s := p.(*events.RolloutStarted); s.Actor != rollout.ActorOperator || s.Reason != "see it live" || s.Candidate != "v2" || s.Stable != "v1" || s.Step != 0 {
		t.Fatalf("started %+v", s)
	}
	if a := ar.Status.Active; a == nil || a.Candidate != "v2" || a.Weight != 0.05 {
		t.Fatalf("status after start %+v", ar.Status)
	}
	if code := e.do(http.MethodPost, "/v1/ops/rollout/start?candidate=v2", testKey, "", nil); code != http.StatusConflict {
		t.Fatalf("start while a rollout runs: %d", code)
	}
}
