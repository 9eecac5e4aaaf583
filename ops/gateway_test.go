package ops

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"citizen/events"
	"citizen/events/memstore"
	"citizen/gateway"
	"citizen/ops/rollout"

	"github.com/labstack/echo/v4"
)

// Mounted on the gateway the way services does it: the API on the
// gateway's authenticated /v1 group, the page on the root.
func TestMountedOnGateway(t *testing.T) {
	store := memstore.New(memstore.Config{})
	h, err := New(Deps{Store: store, Rollout: rollout.Config{Stable: "base"},
		Auth: func(c echo.Context) error { // actions need an operator key
			if c.Request().Method == http.MethodPost && !gateway.KeyOf(c).IsOperator() {
				return echo.NewHTTPError(http.StatusForbidden, "operator key required")
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{DevMode: "on", IgnoreRollouts: true}, gateway.Deps{Store: store, Engine: gateway.NewStubEngine(),
		Routes: func(v1 *echo.Group) { h.RegisterAPI(v1) }, Pages: func(e *echo.Echo) { h.RegisterPages(e) }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler())
	defer srv.Close()
	e := &env{t: t, store: store, srv: srv}
	var st rollout.Status
	if code := e.do(http.MethodGet, "/v1/ops/rollout", "", "", nil); code != http.StatusUnauthorized {
		t.Fatalf("without a key: %d", code)
	}
	if code := e.do(http.MethodGet, "/v1/ops/rollout", gateway.DevKey, "", &st); code != http.StatusOK || st.Stable != "base" {
		t.Fatalf("with the dev key: %d %+v", code, st)
	}
	if code := e.do(http.MethodPost, "/v1/ops/rollout/pause", gateway.DevKey, "", nil); code != http.StatusConflict {
		t.Fatalf("pause without rollout: %d", code)
	}
	for _, path := range []string{"/ops", "/ops/dashboard.js"} { // the page and its script need no key
		if code := e.do(http.MethodGet, path, "", "", nil); code != http.StatusOK {
			t.Fatalf("dashboard %s: %d", path, code)
		}
	}
	// the stream's filters through the gateway
	e.ctx = t.Context()
	e.append(events.VersionStream("base"), "", &events.AnomalyDetected{Kind: "drop_rate", TaskType: "qa", Version: "base", Detector: "d"})
	want := e.append(events.VersionStream("base"), "", &events.AnomalyDetected{Kind: "length_drift", TaskType: "qa", Version: "base", Detector: "d"})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/v1/ops/stream?after=0&types=anomaly.detected&kind=length_drift&task_type=qa", nil)
	req.Header.Set("Authorization", "Bearer "+gateway.DevKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := &sseReader{resp: resp, br: newBufReader(resp)}
	if _, ev := r.nextEvent(t); ev.ID != want.ID {
		t.Fatalf("kind filter: got %s at %d", ev.Type, ev.Position)
	}
}
