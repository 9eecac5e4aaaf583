package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"citizen/events"
	"citizen/events/memstore"
)

const (
	keyA = "sk-test-tenant-a"
	keyB = "sk-test-tenant-b"
)

// faultyStore wraps a store; Append fails while failing is set, and
// appended counts successful appends.
type faultyStore struct {
	events.Store
	failing  atomic.Bool
	appended atomic.Int64
	// failEvery, if > 0, fails every failEvery-th append.
	failEvery int64
	calls     atomic.Int64
}

var errInjected = errors.New("injected store failure")

func (f *faultyStore) Append(ctx context.Context, stream string, exp events.ExpectedRevision, evs ...events.Event) (events.AppendResult, error) {
	n := f.calls.Add(1)
	if f.failing.Load() || f.failEvery > 0 && n%f.failEvery == 0 {
		return events.AppendResult{}, errInjected
	}
	res, err := f.Store.Append(ctx, stream, exp, evs...)
	if err == nil {
		f.appended.Add(1)
	}
	return res, err
}

type env struct {
	t     testing.TB
	srv   *Server
	store *faultyStore
	mem   *memstore.Store
	stub  *StubEngine
	keys  *StaticKeys
	ts    *httptest.Server
}

func newEnv(t testing.TB, mod func(*Config, *Deps)) *env {
	t.Helper()
	mem := memstore.New(memstore.Config{})
	e := &env{t: t, mem: mem, store: &faultyStore{Store: mem}, stub: NewStubEngine(
		VersionInfo{ID: "v1"}, VersionInfo{ID: "v2", Parent: "v1"}), keys: NewStaticKeys()}
	e.keys.Add(keyA, KeySpec{Tenant: "tenant-a", User: "alice"})
	e.keys.Add(keyB, KeySpec{Tenant: "tenant-b"})
	cfg := Config{Listen: "127.0.0.1:0", DevMode: "off", MaxBodyBytes: 64 << 10}
	deps := Deps{Store: e.store, Engine: e.stub, Keys: e.keys}
	if mod != nil {
		mod(&cfg, &deps)
	}
	srv, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	e.ts = httptest.NewServer(srv.Handler())
	t.Cleanup(e.ts.Close)
	return e
}

func (e *env) do(method, path, key string, body any) (*http.Response, []byte) {
	e.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(b)
	case string:
		r = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.ts.URL+path, r)
	if err != nil {
		e.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp, out
}

func (e *env) post(path, key string, body any) (*http.Response, []byte) {
	return e.do(http.MethodPost, path, key, body)
}

// interactions returns every interaction.recorded in the store.
func (e *env) interactions() []*events.InteractionRecorded {
	e.t.Helper()
	evs, err := e.mem.ReadAll(context.Background(), 0, events.Filter{Types: []string{events.TypeInteractionRecorded}}, 1<<20)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []*events.InteractionRecorded
	for i := range evs {
		p, err := events.Decode(&evs[i])
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, p.(*events.InteractionRecorded))
	}
	return out
}

func (e *env) interaction(iid string) (*events.Event, *events.InteractionRecorded) {
	e.t.Helper()
	evs, err := e.mem.ReadStream(context.Background(), events.InteractionStream(iid), 0, events.Forward, 1)
	if err != nil {
		e.t.Fatalf("interaction %s: %v", iid, err)
	}
	p, err := events.Decode(&evs[0])
	if err != nil {
		e.t.Fatal(err)
	}
	return &evs[0], p.(*events.InteractionRecorded)
}

// sse splits an event stream into its data payloads.
func sse(t testing.TB, body []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

func userMsg(text string) []map[string]any {
	return []map[string]any{{"role": "user", "content": text}}
}

func decodeJSON(t testing.TB, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
}

func apiErrOf(t testing.TB, b []byte) errorObject {
	t.Helper()
	var eb errorBody
	decodeJSON(t, b, &eb)
	if eb.Error.Type == "" || eb.Error.Message == "" {
		t.Fatalf("not an OpenAI error body: %s", b)
	}
	return eb.Error
}
