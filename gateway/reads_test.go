package gateway

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"citizen/events"
)

func complete(t *testing.T, e *env, key string, body map[string]any) string {
	t.Helper()
	if body["model"] == nil {
		body["model"] = "citizen"
	}
	if body["messages"] == nil {
		body["messages"] = userMsg("hi")
	}
	resp, b := e.post("/v1/chat/completions", key, body)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	var out completionOut
	decodeJSON(t, b, &out)
	return out.ID
}

func TestFeedbackIdempotentAndTenantChecked(t *testing.T) {
	e := newEnv(t, nil)
	id := complete(t, e, keyA, map[string]any{})
	iid, _ := InteractionID(id)
	fb := map[string]any{"interaction_id": id, "feedback_id": "fb-1", "text": "good", "rating": 1, "outcome": "success", "correction": "hi!"}
	for i := 0; i < 2; i++ {
		if resp, body := e.post("/v1/feedback", keyA, fb); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
	if resp, body := e.post("/v1/chat/completions/"+id+"/feedback", keyA, map[string]any{"feedback_id": "fb-2", "outcome": "failure"}); resp.StatusCode != 200 {
		t.Fatalf("path form: %d %s", resp.StatusCode, body)
	}
	evs, err := e.mem.ReadStream(context.Background(), events.InteractionStream(iid), 0, events.Forward, 100)
	if err != nil || len(evs) != 3 {
		t.Fatalf("want recorded + 2 feedback events, got %d (%v)", len(evs), err)
	}
	p, err := events.Decode(&evs[1])
	if err != nil {
		t.Fatal(err)
	}
	f := p.(*events.FeedbackReceived)
	if f.FeedbackID != "fb-1" || f.Text != "good" || *f.Rating != 1 || f.Outcome != "success" || f.Correction != "hi!" || f.Source != "customer" || f.User != "alice" || evs[1].Tenant != "tenant-a" {
		t.Fatalf("feedback: %+v", f)
	}
	// Other tenant and unknown ids: 404, nothing appended.
	for _, c := range []struct{ key, id string }{{keyB, id}, {keyA, "chatcmpl-" + events.NewID().String()}, {keyA, "nonsense"}} {
		resp, body := e.post("/v1/feedback", c.key, map[string]any{"interaction_id": c.id, "text": "x"})
		if resp.StatusCode != 404 {
			t.Fatalf("%s/%s: %d %s", c.key, c.id, resp.StatusCode, body)
		}
	}
	for _, bad := range []map[string]any{{"interaction_id": id}, {"interaction_id": id, "outcome": "meh"}, {"interaction_id": id, "rating": 99}, {"interaction_id": id, "text": 3}, {"text": "x"}} {
		if resp, body := e.post("/v1/feedback", keyA, bad); resp.StatusCode != 400 {
			t.Fatalf("%v: %d %s", bad, resp.StatusCode, body)
		}
	}
	if n, _ := e.mem.LastPosition(context.Background()); n != 3 {
		t.Fatalf("store has %d events", n)
	}
}

func TestReadsAreTenantScoped(t *testing.T) {
	e := newEnv(t, nil)
	id := complete(t, e, keyA, map[string]any{"metadata": map[string]string{"k": "v"}})
	iid, _ := InteractionID(id)
	resp, body := e.do("GET", "/v1/chat/completions/"+id, keyA, nil)
	var out completionOut
	decodeJSON(t, body, &out)
	if resp.StatusCode != 200 || out.ID != id || out.Metadata["k"] != "v" || *out.Choices[0].Message.Content != "echo: hi" {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if resp, _ := e.do("GET", "/v1/chat/completions/"+iid, keyA, nil); resp.StatusCode != 200 {
		t.Fatal("the bare interaction id works too")
	}
	if resp, _ := e.post("/v1/feedback", keyA, map[string]any{"interaction_id": iid, "text": "meh", "feedback_id": "f"}); resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
	resp, body = e.do("GET", "/v1/interactions/"+iid, keyA, nil)
	var io interactionOut
	decodeJSON(t, body, &io)
	if resp.StatusCode != 200 || len(io.Events) != 2 || io.Events[1].Type != events.TypeFeedbackReceived || len(io.Interaction) == 0 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	resp, body = e.do("GET", "/v1/chat/completions/"+id+"/messages", keyA, nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"content":"hi"`) {
		t.Fatalf("messages: %d %s", resp.StatusCode, body)
	}
	for _, p := range []string{"/v1/chat/completions/" + id, "/v1/interactions/" + iid, "/v1/chat/completions/" + id + "/messages"} {
		if resp, body := e.do("GET", p, keyB, nil); resp.StatusCode != 404 {
			t.Fatalf("tenant B read %s: %d %s", p, resp.StatusCode, body)
		}
	}
	resp, body = e.do("GET", "/v1/chat/completions", keyB, nil)
	var l listOut
	decodeJSON(t, body, &l)
	if resp.StatusCode != 200 || len(l.Data) != 0 || l.HasMore {
		t.Fatalf("tenant B list: %s", body)
	}
}

func TestListPaginationAndFilters(t *testing.T) {
	e := newEnv(t, nil)
	var ids []string
	for i := 0; i < 7; i++ {
		ids = append(ids, complete(t, e, keyA, map[string]any{"metadata": map[string]string{"parity": fmt.Sprint(i % 2)}}))
	}
	list := func(q url.Values) listOut {
		resp, body := e.do("GET", "/v1/chat/completions?"+q.Encode(), keyA, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		var l listOut
		decodeJSON(t, body, &l)
		return l
	}
	var got []string
	after := ""
	for {
		q := url.Values{"limit": {"3"}}
		if after != "" {
			q.Set("after", after)
		}
		l := list(q)
		for _, d := range l.Data {
			got = append(got, d.ID)
		}
		if !l.HasMore {
			break
		}
		after = *l.LastID
	}
	if fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Fatalf("pages %v, want %v", got, ids)
	}
	l := list(url.Values{"order": {"desc"}, "limit": {"2"}})
	if l.Data[0].ID != ids[6] || l.Data[1].ID != ids[5] || !l.HasMore || *l.FirstID != ids[6] {
		t.Fatalf("desc: %+v", l)
	}
	l = list(url.Values{"order": {"desc"}, "after": {ids[5]}, "limit": {"100"}})
	if len(l.Data) != 5 || l.Data[0].ID != ids[4] || l.HasMore {
		t.Fatalf("desc after: %d", len(l.Data))
	}
	l = list(url.Values{"metadata[parity]": {"1"}})
	if len(l.Data) != 3 || l.Data[0].ID != ids[1] {
		t.Fatalf("filter: %d", len(l.Data))
	}
	for _, q := range []string{"limit=0", "limit=101", "order=up", "after=zzz"} {
		if resp, _ := e.do("GET", "/v1/chat/completions?"+q, keyA, nil); resp.StatusCode != 400 {
			t.Fatalf("%s: %d", q, resp.StatusCode)
		}
	}
}

func TestProjectionRebuiltOnStart(t *testing.T) {
	e := newEnv(t, nil)
	for i := 0; i < 3; i++ {
		complete(t, e, keyA, map[string]any{})
	}
	srv2, err := New(Config{DevMode: "off"}, Deps{Store: e.mem, Engine: e.stub, Keys: e.keys})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := srv2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := srv2.proj.list("tenant-a", "", 100, false, nil)
	if len(got) != 3 {
		t.Fatalf("rebuilt %d entries", len(got))
	}
	// Live: an interaction recorded by another gateway shows up.
	changed := srv2.proj.watch()
	complete(t, e, keyA, map[string]any{})
	timeout := time.After(10 * time.Second)
	for {
		if got, _ = srv2.proj.list("tenant-a", "", 100, false, nil); len(got) == 4 {
			break
		}
		select {
		case <-changed:
			changed = srv2.proj.watch()
		case <-timeout:
			t.Fatalf("live update missing: %d", len(got))
		}
	}
}

func TestModelsAndRouting(t *testing.T) {
	e := newEnv(t, nil)
	resp, body := e.do("GET", "/v1/models", keyA, nil)
	var ml struct {
		Data []modelOut `json:"data"`
	}
	decodeJSON(t, body, &ml)
	if resp.StatusCode != 200 || len(ml.Data) != 3 || ml.Data[0].ID != "citizen" || ml.Data[2].ID != "citizen@v2" || ml.Data[2].Parent != "citizen@v1" {
		t.Fatalf("%s", body)
	}
	if resp, body := e.do("GET", "/v1/models/citizen@v2", keyA, nil); resp.StatusCode != 200 || !strings.Contains(string(body), `"parent":"citizen@v1"`) {
		t.Fatalf("model: %d %s", resp.StatusCode, body)
	}
	if resp, _ := e.do("GET", "/v1/models/citizen@v9", keyA, nil); resp.StatusCode != 404 {
		t.Fatalf("unknown model: %d", resp.StatusCode)
	}
	resp, body = e.post("/v1/chat/completions", keyA, map[string]any{"model": "citizen@v2", "messages": userMsg("x")})
	if resp.StatusCode != 200 || resp.Header.Get("X-Citizen-Model-Version") != "v2" {
		t.Fatalf("pinned: %d %s", resp.StatusCode, body)
	}
	for _, m := range []string{"gpt-4o", "citizen@v9", "citizen@"} {
		resp, body := e.post("/v1/chat/completions", keyA, map[string]any{"model": m, "messages": userMsg("x")})
		if eo := apiErrOf(t, body); resp.StatusCode != 404 || *eo.Code != "model_not_found" {
			t.Fatalf("%s: %d %s", m, resp.StatusCode, body)
		}
	}
	e.srv.Router().SetRollout("v1", "v2", 0.3)
	counts := map[string]int{}
	for i := 0; i < 200; i++ {
		conv := fmt.Sprintf("conv-%d", i)
		var first string
		for j := 0; j < 2; j++ {
			resp, _ := e.post("/v1/chat/completions", keyA, map[string]any{"model": "citizen", "messages": userMsg("x"), "metadata": map[string]string{"conversation_id": conv}})
			v := resp.Header.Get("X-Citizen-Model-Version")
			if j == 0 {
				first = v
				counts[v]++
			} else if v != first {
				t.Fatalf("conversation %s moved from %s to %s", conv, first, v)
			}
		}
	}
	if counts["v2"] < 30 || counts["v2"] > 90 {
		t.Fatalf("canary share: %v", counts)
	}
	recs := e.interactions()
	if recs[len(recs)-1].ModelVersion == "" {
		t.Fatal("version not recorded")
	}
}

func TestRouterFollowsRolloutEvents(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	appendRollout := func(p events.Payload) {
		ev, err := events.Encode(p, events.Meta{Stream: events.RolloutStream("r1")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.mem.Append(ctx, ev.Stream, events.Any, ev); err != nil {
			t.Fatal(err)
		}
	}
	changed := e.srv.Router().Changed()
	waitFor := func(want Rollout) {
		timeout := time.After(10 * time.Second)
		for e.srv.Router().Rollout() != want {
			select {
			case <-changed:
				changed = e.srv.Router().Changed()
			case <-timeout:
				t.Fatalf("router %+v, want %+v", e.srv.Router().Rollout(), want)
			}
		}
	}
	ch := events.RolloutChange{RolloutID: "r1", Stable: "v1", Candidate: "v2", Weight: 0.05}
	appendRollout(&events.RolloutStarted{RolloutChange: ch})
	waitFor(Rollout{Stable: "v1", Candidate: "v2", Weight: 0.05})
	ch.Weight = 0.25
	appendRollout(&events.RolloutAdvanced{RolloutChange: ch})
	waitFor(Rollout{Stable: "v1", Candidate: "v2", Weight: 0.25})
	appendRollout(&events.RolloutPromoted{RolloutChange: ch})
	waitFor(Rollout{Stable: "v2"})
}

// A gateway started on the store of one that served half a rollout (a
// restart, or another replica) sends every conversation to the version
// that answered it: the assignments are rebuilt from the recorded
// interactions. At 50% a fresh assignment would move about half of them.
func TestRouterRemembersAssignmentsFromTheStore(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	ev, err := events.Encode(&events.RolloutStarted{RolloutChange: events.RolloutChange{RolloutID: "r1", Stable: "v1", Candidate: "v2", Weight: 0.5}},
		events.Meta{Stream: events.RolloutStream("r1")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.mem.Append(ctx, ev.Stream, events.Any, ev); err != nil {
		t.Fatal(err)
	}
	waitRouter := func(r *Router, ok func() bool) {
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("router %+v, %d keys remembered", r.Rollout(), r.remembered())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitRouter(e.srv.Router(), func() bool { return e.srv.Router().Rollout().Candidate == "v2" })
	const n = 60
	first := map[string]string{}
	count := map[string]int{}
	for i := range n {
		conv := fmt.Sprintf("conv-%d", i)
		resp, body := e.post("/v1/chat/completions", keyA, map[string]any{"model": "citizen", "messages": userMsg("x"), "metadata": map[string]string{"conversation_id": conv}})
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		first[conv] = resp.Header.Get("X-Citizen-Model-Version")
		count[first[conv]]++
	}
	// A pinned request does not assign its conversation.
	if resp, _ := e.post("/v1/chat/completions", keyA, map[string]any{"model": "citizen@v2", "messages": userMsg("x"), "metadata": map[string]string{"conversation_id": "pinned"}}); resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
	if count["v2"] < n/2-1 || count["v2"] > n/2+1 {
		t.Fatalf("first gateway: %v", count)
	}

	again := newEnv(t, func(c *Config, d *Deps) { d.Store = e.store })
	r := again.srv.Router()
	waitRouter(r, func() bool { return r.Rollout().Candidate == "v2" && r.remembered() == n })
	for conv, v := range first {
		resp, _ := again.post("/v1/chat/completions", keyA, map[string]any{"model": "citizen", "messages": userMsg("x"), "metadata": map[string]string{"conversation_id": conv}})
		if got := resp.Header.Get("X-Citizen-Model-Version"); got != v {
			t.Errorf("%s: %s before the restart, %s after", conv, v, got)
		}
	}
	// The step's quota continues from the recorded assignments: new
	// conversations bring the candidate's share back to half.
	for i := range 20 {
		resp, _ := again.post("/v1/chat/completions", keyA, map[string]any{"model": "citizen", "messages": userMsg("x"), "metadata": map[string]string{"conversation_id": fmt.Sprintf("new-%d", i)}})
		count[resp.Header.Get("X-Citizen-Model-Version")]++
	}
	if count["v2"] < (n+20)/2-1 || count["v2"] > (n+20)/2+1 {
		t.Fatalf("after the restart: %v of %d conversations", count, n+20)
	}
}

// observe remembers only the public model's interactions answered by the
// stable or the candidate, during a rollout, for keys not yet assigned.
func TestRouterObserve(t *testing.T) {
	r := NewRouter("v1")
	r.observe(recordedRoute{Model: ModelName, ModelVersion: "v1", Conversation: "c0", User: ""}) // no rollout
	r.SetRollout("v1", "v2", 0.05)
	r.observe(recordedRoute{Model: ModelName, ModelVersion: "v2", Conversation: "c1", User: ""})
	r.observe(recordedRoute{Model: ModelName, ModelVersion: "v1", Conversation: "", User: "bob"}) // the user is the key without a conversation
	r.observe(recordedRoute{Model: "citizen@v2", ModelVersion: "v2", Conversation: "c2", User: ""})
	r.observe(recordedRoute{Model: ModelName, ModelVersion: "v9", Conversation: "c3", User: ""})
	r.observe(recordedRoute{Model: ModelName, ModelVersion: "v2", Conversation: "", User: ""})
	if got := r.remembered(); got != 2 {
		t.Fatalf("%d keys remembered, want 2 (c1, bob)", got)
	}
	known := func(string) bool { return false }
	if v, _ := r.Route(ModelName, "c1", "", known); v != "v2" {
		t.Errorf("c1 on %s, want the candidate it was observed on", v)
	}
	if v, _ := r.Route(ModelName, "bob", "", known); v != "v1" {
		t.Errorf("bob on %s", v)
	}
	r.observe(recordedRoute{Model: ModelName, ModelVersion: "v1", Conversation: "c1", User: ""}) // an arm is never overwritten
	if v, _ := r.Route(ModelName, "c1", "", known); v != "v2" {
		t.Errorf("c1 moved to %s", v)
	}
	if err := r.Apply(&events.Event{Type: events.TypeInteractionRecorded, Data: []byte("{")}); err == nil {
		t.Error("an undecodable interaction during a rollout: no error")
	}
}

func TestKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.json")
	fk, err := OpenFileKeys(path)
	if err != nil {
		t.Fatal(err)
	}
	fk.RecheckEvery = 0
	if _, _, err := CreateKey(path, KeySpec{}); err == nil {
		t.Fatal("a key needs a tenant")
	}
	secret, key, err := CreateKey(path, KeySpec{Name: "ci", Tenant: "acme", User: "bob", RequestsPerMinute: 5})
	if err != nil {
		t.Fatal(err)
	}
	got, ok := fk.Lookup(HashKey(secret))
	if !ok || got.Tenant != "acme" || got.User != "bob" || got.ID != key.ID || got.RequestsPerMinute != 5 {
		t.Fatalf("lookup: %+v %v", got, ok)
	}
	keys, err := ListKeys(path)
	if err != nil || len(keys) != 1 || keys[0].Hash != HashKey(secret) {
		t.Fatalf("list: %+v %v", keys, err)
	}
	if err := RevokeKey(path, key.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := fk.Lookup(HashKey(secret)); ok {
		t.Fatal("revoked key still accepted")
	}
	if err := RevokeKey(path, "key_nope"); err == nil {
		t.Fatal("unknown id")
	}
	// The server reads the same file.
	_, _, err = CreateKey(path, KeySpec{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	secret2, _, _ := CreateKey(path, KeySpec{Tenant: "zeta"})
	e := newEnv(t, func(c *Config, d *Deps) { d.Keys = nil; c.KeysFile = path })
	if resp, body := e.post("/v1/chat/completions", secret2, map[string]any{"model": "citizen", "messages": userMsg("x")}); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if resp, _ := e.post("/v1/chat/completions", secret, map[string]any{"model": "citizen", "messages": userMsg("x")}); resp.StatusCode != 401 {
		t.Fatal("revoked key accepted by the server")
	}
	if e.interactions()[0].Tenant != "zeta" {
		t.Fatal("tenant")
	}
}

func TestMetricsHealthReady(t *testing.T) {
	e := newEnv(t, nil)
	if resp, _ := e.post("/v1/chat/completions", keyA, map[string]any{"model": "citizen", "messages": userMsg("hi"), "stream": true}); resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
	complete(t, e, keyA, map[string]any{})
	e.post("/v1/chat/completions", keyA, "{")
	for _, p := range []string{"/healthz", "/readyz"} {
		if resp, _ := e.do("GET", p, "", nil); resp.StatusCode != 200 {
			t.Fatalf("%s %d", p, resp.StatusCode)
		}
	}
	_, body := e.do("GET", "/metrics", "", nil)
	for _, want := range []string{
		`gen_ai_server_request_duration_seconds_count{error_type="",gen_ai_operation_name="chat",gen_ai_provider_name="citizen",gen_ai_request_model="citizen",gen_ai_response_model="citizen@v1"} 2`,
		`gen_ai_server_time_to_first_token_seconds_count{gen_ai_operation_name="chat",gen_ai_provider_name="citizen",gen_ai_request_model="citizen",gen_ai_response_model="citizen@v1"} 2`,
		`gen_ai_client_token_usage_count{gen_ai_operation_name="chat",gen_ai_provider_name="citizen",gen_ai_request_model="citizen",gen_ai_response_model="citizen@v1",gen_ai_token_type="output"} 2`,
		`citizen_generation_tokens_total{model_name="citizen"} 16`, // 2 × "echo: hi",
		`citizen_gateway_errors_total{route="/v1/chat/completions",status="400",type="invalid_request_error"} 1`,
		`citizen_gateway_interactions_recorded_total 2`,
		`citizen_gateway_http_request_duration_seconds_count{method="POST",route="/v1/chat/completions",status="200"} 2`,
	} {
		if !containsLine(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func containsLine(body, line string) bool {
	for _, l := range splitLines(body) {
		if l == line {
			return true
		}
	}
	return false
}

func splitLines(s string) []string {
	var out []string
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] != '\n' {
			i++
		}
		out = append(out, s[:i])
		if i < len(s) {
			i++
		}
		s = s[i:]
	}
	return out
}
