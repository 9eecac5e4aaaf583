package ops

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"citizen/events"
	"citizen/events/memstore"
	"citizen/ops/rollout"

	"github.com/labstack/echo/v4"
)

const testKey = "sk-ops-test"

// bearer is the auth hook the tests install.
func bearer(c echo.Context) error {
	if c.Request().Header.Get("Authorization") != "Bearer "+testKey {
		return echo.NewHTTPError(http.StatusUnauthorized, "missing or wrong API key")
	}
	return nil
}

type env struct {
	t     *testing.T
	ctx   context.Context
	store *memstore.Store
	srv   *httptest.Server
	ctrl  *rollout.Controller
}

func newEnv(t *testing.T, auth func(echo.Context) error, heartbeat time.Duration) *env {
	t.Helper()
	return newEnvWith(t, Deps{Auth: auth, Heartbeat: heartbeat}, nil)
}

// newEnvWith serves deps (its Store and Rollout are set here) and, when
// mount is not nil, the routes mount adds to the same server.
func newEnvWith(t *testing.T, deps Deps, mount func(e *echo.Echo, store events.Store)) *env {
	t.Helper()
	store := memstore.New(memstore.Config{})
	e := echo.New()
	cfg := rollout.Config{Stable: "v1"}
	deps.Store, deps.Rollout = store, cfg
	if _, err := Register(e, deps); err != nil {
		t.Fatal(err)
	}
	if mount != nil {
		mount(e, store)
	}
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	ctrl, err := rollout.New(cfg, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, ctx: context.Background(), store: store, srv: srv, ctrl: ctrl}
}

func (e *env) append(stream, tenant string, p events.Payload) events.Event {
	e.t.Helper()
	ev, err := events.Encode(p, events.Meta{Stream: stream, Tenant: tenant})
	if err != nil {
		e.t.Fatal(err)
	}
	res, err := e.store.Append(e.ctx, stream, events.Any, ev)
	if err != nil {
		e.t.Fatal(err)
	}
	ev.Position, ev.Revision = res.LastPosition, res.NextRevision
	return ev
}

func (e *env) evaluated(id, version, tenant string, reward float64) events.Event {
	return e.append(events.InteractionStream(id), tenant, &events.InteractionEvaluated{InteractionID: id, Seq: 1, TaskType: "qa",
		ModelVersion: version, Reward: reward, AnswerLength: 42, RubricVersion: "r", EvaluatorVersion: "e"})
}

// startRollout trains v2 and lets the controller start its rollout.
func (e *env) startRollout() {
	e.t.Helper()
	e.append(events.VersionStream("v2"), "", &events.WeightsTrained{Version: "v2", Parent: "v1", Accepted: true, Objective: "x"})
	if err := e.ctrl.CatchUp(e.ctx); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) do(method, path, key, body string, out any) int {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, out); err != nil {
			e.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

// sse is one Server-Sent Event (or comment) as read off the wire.
type sse struct {
	id, event, data, comment string
}

// sseReader reads events from an open stream.
type sseReader struct {
	resp *http.Response
	br   *bufio.Reader
}

func (e *env) openStream(query, lastEventID string) *sseReader {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.ctx, http.MethodGet, e.srv.URL+"/v1/ops/stream"+query, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		e.t.Fatalf("stream %s: %d %s", query, resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		e.t.Fatalf("content type %q", ct)
	}
	r := &sseReader{resp: resp, br: newBufReader(resp)}
	e.t.Cleanup(func() { resp.Body.Close() })
	return r
}

// next returns the next block (event or comment). A deadline closes the
// body so that a missing event fails the test instead of hanging it.
func (r *sseReader) next(t *testing.T) sse {
	t.Helper()
	timer := time.AfterFunc(10*time.Second, func() { r.resp.Body.Close() })
	defer timer.Stop()
	var s sse
	for {
		line, err := r.br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if s != (sse{}) {
				return s
			}
		case strings.HasPrefix(line, ":"):
			s.comment = strings.TrimSpace(line[1:])
		case strings.HasPrefix(line, "id: "):
			s.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			s.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			s.data = line[6:]
		case strings.HasPrefix(line, "retry: "):
		default:
			t.Fatalf("unexpected line %q", line)
		}
	}
}

// nextEvent skips comments.
func (r *sseReader) nextEvent(t *testing.T) (sse, events.Event) {
	t.Helper()
	for {
		s := r.next(t)
		if s.event == "" {
			continue
		}
		var ev events.Event
		if err := json.Unmarshal([]byte(s.data), &ev); err != nil {
			t.Fatal(err)
		}
		return s, ev
	}
}

var errDone = errors.New("done")

func newBufReader(resp *http.Response) *bufio.Reader { return bufio.NewReader(resp.Body) }
