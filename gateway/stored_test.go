package gateway

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"citizen/events"
)

// listIDs returns the ids of one page of GET /v1/chat/completions?q.
func listIDs(t *testing.T, e *env, key, q string) []string {
	t.Helper()
	resp, b := e.do("GET", "/v1/chat/completions?"+q, key, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("list %s: %d %s", q, resp.StatusCode, b)
	}
	var out listOut
	decodeJSON(t, b, &out)
	var ids []string
	for _, c := range out.Data {
		ids = append(ids, c.ID)
	}
	return ids
}

func TestStoreFalseIsRecordedButNotStored(t *testing.T) {
	e := newEnv(t, nil)
	kept := complete(t, e, keyA, map[string]any{"store": true})
	plain := complete(t, e, keyA, map[string]any{})
	hidden := complete(t, e, keyA, map[string]any{"store": false, "metadata": map[string]string{"k": "v"}})
	// Recorded all the same: the interaction API and feedback see it.
	iid, _ := InteractionID(hidden)
	if _, rec := e.interaction(iid); rec.InteractionID != iid {
		t.Fatal("store=false completion not recorded")
	}
	if resp, b := e.do("GET", "/v1/interactions/"+hidden, keyA, nil); resp.StatusCode != 200 {
		t.Fatalf("interaction of a store=false completion: %d %s", resp.StatusCode, b)
	}
	if resp, b := e.post("/v1/feedback", keyA, map[string]any{"interaction_id": hidden, "text": "fine"}); resp.StatusCode != 200 {
		t.Fatalf("feedback on a store=false completion: %d %s", resp.StatusCode, b)
	}
	if got := listIDs(t, e, keyA, "limit=100"); strings.Join(got, ",") != kept+","+plain {
		t.Fatalf("listed %v, want [%s %s]", got, kept, plain)
	}
	for _, p := range []string{"", "/messages"} {
		resp, b := e.do("GET", "/v1/chat/completions/"+hidden+p, keyA, nil)
		if resp.StatusCode != 404 || apiErrOf(t, b).Type != "invalid_request_error" {
			t.Fatalf("GET %s of a store=false completion: %d %s", p, resp.StatusCode, b)
		}
	}
	if resp, _ := e.post("/v1/chat/completions/"+hidden, keyA, map[string]any{"metadata": map[string]string{}}); resp.StatusCode != 404 {
		t.Fatalf("update of a store=false completion: %d", resp.StatusCode)
	}
	if resp, _ := e.do("DELETE", "/v1/chat/completions/"+hidden, keyA, nil); resp.StatusCode != 404 {
		t.Fatalf("delete of a store=false completion: %d", resp.StatusCode)
	}
	// A restarted gateway rebuilds the same list from the store.
	srv2, err := New(Config{Listen: "127.0.0.1:0", DevMode: "off"}, Deps{Store: e.mem, Engine: e.stub, Keys: e.keys})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := srv2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := srv2.proj.list("tenant-a", "", 100, false, nil); len(got) != 2 {
		t.Fatalf("rebuilt list has %d entries, want 2", len(got))
	}
}

func TestStoreRequested(t *testing.T) {
	for _, c := range []struct {
		params string
		want   bool
	}{
		{``, true},
		{`{"model":"citizen"}`, true},
		{`{"store":true}`, true},
		{`{"store":false}`, false},
		{`{"model":"citizen","store":false,"metadata":{"a":"b"}}`, false},
		// "store":false nested in a schema is not the request's flag
		{`{"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"properties":{"store":false}}}}}`, true},
		{`{"store":false`, true}, // unparsable: recorded params are never refused
	} {
		if got := storeRequested([]byte(c.params)); got != c.want {
			t.Errorf("storeRequested(%s) = %v, want %v", c.params, got, c.want)
		}
	}
}

func TestUpdateCompletionMetadata(t *testing.T) {
	e := newEnv(t, nil)
	id := complete(t, e, keyA, map[string]any{"metadata": map[string]string{"topic": "old", "keep": "x"}})
	other := complete(t, e, keyA, map[string]any{"metadata": map[string]string{"topic": "old"}})
	resp, b := e.post("/v1/chat/completions/"+id, keyA, map[string]any{"metadata": map[string]string{"topic": "new"}})
	if resp.StatusCode != 200 {
		t.Fatalf("update: %d %s", resp.StatusCode, b)
	}
	var up completionOut
	decodeJSON(t, b, &up)
	if up.ID != id || up.Object != "chat.completion" || len(up.Metadata) != 1 || up.Metadata["topic"] != "new" {
		t.Fatalf("updated completion: %s", b)
	}
	_, b = e.do("GET", "/v1/chat/completions/"+id, keyA, nil)
	var got completionOut
	decodeJSON(t, b, &got)
	if got.Metadata["topic"] != "new" || got.Metadata["keep"] != "" {
		t.Fatalf("retrieved metadata %v", got.Metadata)
	}
	if ids := listIDs(t, e, keyA, "metadata[topic]=new"); len(ids) != 1 || ids[0] != id {
		t.Fatalf("filter topic=new: %v", ids)
	}
	if ids := listIDs(t, e, keyA, "metadata[topic]=old"); len(ids) != 1 || ids[0] != other {
		t.Fatalf("filter topic=old: %v", ids)
	}
	// The recorded request is untouched; the update is an event after it.
	iid, _ := InteractionID(id)
	if _, rec := e.interaction(iid); rec.Metadata["topic"] != "old" {
		t.Fatalf("the recorded metadata changed: %v", rec.Metadata)
	}
	evs, _ := e.mem.ReadStream(context.Background(), events.InteractionStream(iid), 0, events.Forward, 10)
	if len(evs) != 2 || evs[1].Type != events.TypeInteractionMetadataUpdated || evs[1].Tenant != "tenant-a" || evs[1].CorrelationID != iid {
		t.Fatalf("stream after update: %+v", evs)
	}
	// null clears; a later update wins after a rebuild too.
	if resp, b := e.post("/v1/chat/completions/"+id, keyA, `{"metadata":null}`); resp.StatusCode != 200 || strings.Contains(string(b), "topic") {
		t.Fatalf("clear: %d %s", resp.StatusCode, b)
	}
	srv2, err := New(Config{Listen: "127.0.0.1:0", DevMode: "off"}, Deps{Store: e.mem, Engine: e.stub, Keys: e.keys})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := srv2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if es, _ := srv2.proj.list("tenant-a", "", 100, false, map[string]string{"topic": "old"}); len(es) != 1 || CompletionID(es[0].ID) != other {
		t.Fatalf("rebuilt filter topic=old: %+v", es)
	}
	// Refusals: nothing appended.
	for _, c := range []struct {
		key, id, body string
		status        int
	}{
		{keyB, id, `{"metadata":{}}`, 404},
		{keyA, "chatcmpl-" + events.NewID().String(), `{"metadata":{}}`, 404},
		{keyA, "nonsense", `{"metadata":{}}`, 404},
		{keyA, id, `{}`, 400},
		{keyA, id, `{"metadata":{"a":1}}`, 400},
		{keyA, id, `{"metadata":"x"}`, 400},
		{keyA, id, `{"metadata":{},"extra":1}`, 400},
		{keyA, id, `{"metadata":{}} {}`, 400},
		{keyA, id, ``, 400},
		{keyA, id, `{"metadata":{"` + strings.Repeat("k", 65) + `":"v"}}`, 400},
		{keyA, id, `{"metadata":{"k":"` + strings.Repeat("v", 513) + `"}}`, 400},
	} {
		before, _ := e.mem.ReadStream(context.Background(), events.InteractionStream(iid), 0, events.Forward, 100)
		resp, b := e.post("/v1/chat/completions/"+c.id, c.key, c.body)
		if resp.StatusCode != c.status {
			t.Errorf("update %s %q: %d %s, want %d", c.id, c.body, resp.StatusCode, b, c.status)
			continue
		}
		apiErrOf(t, b)
		after, _ := e.mem.ReadStream(context.Background(), events.InteractionStream(iid), 0, events.Forward, 100)
		if len(after) != len(before) {
			t.Errorf("refused update %q appended an event", c.body)
		}
	}
	many := map[string]string{}
	for i := 0; i < 17; i++ {
		many[strings.Repeat("k", i+1)] = "v"
	}
	if resp, _ := e.post("/v1/chat/completions/"+id, keyA, map[string]any{"metadata": many}); resp.StatusCode != 400 {
		t.Errorf("17 metadata pairs: %d", resp.StatusCode)
	}
}

func TestDeleteCompletion(t *testing.T) {
	e := newEnv(t, nil)
	id := complete(t, e, keyA, map[string]any{})
	keep := complete(t, e, keyA, map[string]any{})
	if resp, _ := e.do("DELETE", "/v1/chat/completions/"+id, keyB, nil); resp.StatusCode != 404 {
		t.Fatalf("other tenant's delete: %d", resp.StatusCode)
	}
	resp, b := e.do("DELETE", "/v1/chat/completions/"+id, keyA, nil)
	if resp.StatusCode != 200 || string(b) != `{"id":"`+id+`","object":"chat.completion.deleted","deleted":true}`+"\n" {
		t.Fatalf("delete: %d %s", resp.StatusCode, b)
	}
	for _, p := range []string{"", "/messages"} {
		if resp, _ := e.do("GET", "/v1/chat/completions/"+id+p, keyA, nil); resp.StatusCode != 404 {
			t.Fatalf("GET %s after delete: %d", p, resp.StatusCode)
		}
	}
	if ids := listIDs(t, e, keyA, "limit=100"); len(ids) != 1 || ids[0] != keep {
		t.Fatalf("list after delete: %v", ids)
	}
	if resp, _ := e.do("DELETE", "/v1/chat/completions/"+id, keyA, nil); resp.StatusCode != 404 {
		t.Fatalf("second delete: %d", resp.StatusCode)
	}
	if resp, _ := e.post("/v1/chat/completions/"+id, keyA, `{"metadata":{}}`); resp.StatusCode != 404 {
		t.Fatalf("update after delete: %d", resp.StatusCode)
	}
	// The record stays (append-only); the deletion is an event after it,
	// and the interaction API shows both.
	iid, _ := InteractionID(id)
	evs, _ := e.mem.ReadStream(context.Background(), events.InteractionStream(iid), 0, events.Forward, 10)
	if len(evs) != 2 || evs[0].Type != events.TypeInteractionRecorded || evs[1].Type != events.TypeInteractionDeleted ||
		evs[1].ID != events.DeterministicID(events.TypeInteractionDeleted, iid) {
		t.Fatalf("stream after delete: %+v", evs)
	}
	if resp, b := e.do("GET", "/v1/interactions/"+id, keyA, nil); resp.StatusCode != 200 || !strings.Contains(string(b), events.TypeInteractionDeleted) {
		t.Fatalf("interaction after delete: %d %s", resp.StatusCode, b)
	}
	// A store that cannot record: 503, and the completion stays.
	e.store.failing.Store(true)
	resp, b = e.do("DELETE", "/v1/chat/completions/"+keep, keyA, nil)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("delete with a failing store: %d %s", resp.StatusCode, b)
	}
	e.store.failing.Store(false)
	if ids := listIDs(t, e, keyA, "limit=100"); len(ids) != 1 {
		t.Fatalf("list after a failed delete: %v", ids)
	}
	// A rebuilt gateway does not list the deleted one.
	srv2, err := New(Config{Listen: "127.0.0.1:0", DevMode: "off"}, Deps{Store: e.mem, Engine: e.stub, Keys: e.keys})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := srv2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if es, _ := srv2.proj.list("tenant-a", "", 100, false, nil); len(es) != 1 || CompletionID(es[0].ID) != keep {
		t.Fatalf("rebuilt list: %+v", es)
	}
}

func FuzzDecodeUpdate(f *testing.F) {
	for _, s := range []string{`{"metadata":{"a":"b"}}`, `{"metadata":null}`, `{}`, `{"metadata":{"a":1}}`, `[]`, `{"metadata":{}}{}`, "\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		md, err := decodeUpdate(b)
		if (err == nil) == (md == nil) {
			t.Fatalf("decodeUpdate(%q) = %v, %v", b, md, err)
		}
		if err != nil && (err.Status != 400 || err.Message == "") {
			t.Fatalf("decodeUpdate(%q): %+v", b, err)
		}
		if len(md) > maxMetadataPairs {
			t.Fatalf("too many pairs accepted")
		}
	})
}
