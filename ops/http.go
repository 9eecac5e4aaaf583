package ops

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"citizen/events"
	"citizen/ops/rollout"

	"github.com/labstack/echo/v4"
)

//go:embed dashboard.html
var dashboardHTML []byte

//go:embed dashboard.js
var dashboardJS []byte

// Deps are the HTTP surface's collaborators.
type Deps struct {
	// Store is read for the rollout state, the versions and the stream,
	// and appended to by the operator actions (required).
	Store events.Store
	// Auth authenticates every /v1/ops request; returning an error refuses
	// it (return an *echo.HTTPError to choose the status; any other error
	// is a 401). nil allows everything: development only. The dashboard
	// page itself (GET /ops) holds no data and is not authenticated; it
	// sends the key the operator types in as "Authorization: Bearer".
	Auth func(c echo.Context) error
	// Rollout is the controller's configuration, used by the read-side
	// projection for the steps and the evidence shown.
	Rollout rollout.Config
	// Caller says who is asking, after Auth accepted the request: the
	// tenant whose data the caller may read, whether it is an operator
	// (who reads every tenant and acts on rollouts) and a check that the
	// credential is still valid (a live stream ends within a second of it
	// turning false). nil treats every caller as a valid operator:
	// development and tests only.
	Caller func(c echo.Context) Caller
	// Heartbeat is the interval of SSE comments on an idle stream
	// (default 15s).
	Heartbeat time.Duration
	// MaxStreamsPerKey bounds the live streams one key holds open at once
	// (default 4); one more gets 429.
	MaxStreamsPerKey int
	// Logger; nil discards.
	Logger *slog.Logger
}

// Caller is the identity the operator surface enforces its access rules
// on. Every route is for operators except the reads of tenant data (the
// live stream, the series and the recent events), which a tenant's key
// may read for its own tenant only (events without a tenant, such as
// rollouts, anomalies and trained weights, are cross-tenant and therefore
// operator-only too).
type Caller struct {
	// Key identifies the credential (for the per-key stream limit).
	Key      string
	Tenant   string
	Operator bool
	// Valid reports whether the caller's credential is still valid; nil
	// means always.
	Valid func() bool
}

func (c Caller) valid() bool { return c.Valid == nil || c.Valid() }

// Routes is what Register needs from echo: *echo.Echo and *echo.Group
// both have it.
type Routes interface {
	GET(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route
	POST(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route
}

// Handler serves the operator surface. Create it with New; safe for
// concurrent use.
type Handler struct {
	store     events.Store
	auth      func(c echo.Context) error
	caller    func(c echo.Context) Caller
	proj      *rollout.Projection
	board     *board
	rollout   rollout.Config
	heartbeat time.Duration
	log       *slog.Logger

	maxStreams int
	streamsMu  sync.Mutex
	streams    map[string]int // open streams per key
	closing    chan struct{}  // closed by CloseStreams
	closeOnce  sync.Once
}

// New checks deps and returns a handler.
func New(deps Deps) (*Handler, error) {
	if deps.Store == nil {
		return nil, errors.New("ops: Deps.Store is required")
	}
	cfg := deps.Rollout.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("ops: %w", err)
	}
	h := &Handler{store: deps.Store, auth: deps.Auth, caller: deps.Caller, proj: rollout.NewProjection(cfg, deps.Store), board: newBoard(deps.Store), rollout: cfg,
		heartbeat: deps.Heartbeat, log: deps.Logger, maxStreams: deps.MaxStreamsPerKey, streams: map[string]int{}, closing: make(chan struct{})}
	if h.maxStreams <= 0 {
		h.maxStreams = 4
	}
	if h.heartbeat <= 0 {
		h.heartbeat = 15 * time.Second
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.log = h.log.With("component", "ops")
	return h, nil
}

// CloseStreams ends every open live stream and refuses new ones (503): a
// server calls it when it begins shutting down, so that its drain waits
// only for bounded requests. Safe to call more than once.
func (h *Handler) CloseStreams() { h.closeOnce.Do(func() { close(h.closing) }) }

// Register is New followed by Handler.Register.
func Register(r Routes, deps Deps) (*Handler, error) {
	h, err := New(deps)
	if err != nil {
		return nil, err
	}
	h.Register(r)
	return h, nil
}

// Register adds every route to r, the root *echo.Echo (or a group
// without a prefix): the API under /v1/ops and the page /ops. To mount on
// the gateway, use RegisterAPI and RegisterPages instead (gateway.Deps
// Routes and Pages).
func (h *Handler) Register(r Routes) {
	h.registerAPI(r, "/v1")
	h.RegisterPages(r)
}

// RegisterAPI adds the API routes to v1, a group whose prefix is "/v1"
// (the gateway's authenticated group: gateway.Deps.Routes); Deps.Auth, if
// set, runs after the group's middleware (for example to require an
// operator key with gateway.KeyOf).
func (h *Handler) RegisterAPI(v1 Routes) { h.registerAPI(v1, "") }

func (h *Handler) registerAPI(r Routes, prefix string) {
	a, op := h.authenticate, h.operatorOnly
	r.GET(prefix+"/ops/rollout", h.getRollout, a, op)
	r.POST(prefix+"/ops/rollout/start", h.postStart, a, op)
	r.POST(prefix+"/ops/rollout/:action", h.postRollout, a, op)
	r.GET(prefix+"/ops/versions", h.getVersions, a, op)
	r.GET(prefix+"/ops/stream", h.stream, a)
	r.GET(prefix+"/ops/series", h.getSeries, a)
	r.GET(prefix+"/ops/recent", h.getRecent, a)
	r.POST(prefix+"/ops/lessons/:id/approve", h.postApproveLesson, a, op)
}

// RegisterPages adds GET /ops, the dashboard, and GET /ops/dashboard.js,
// its script, to the root e without authentication (they hold no data;
// gateway.Deps.Pages).
func (h *Handler) RegisterPages(e Routes) {
	e.GET("/ops", h.dashboard)
	e.GET("/ops/dashboard.js", h.dashboardScript)
}

// HTTPHandler returns a standalone echo serving only the operator
// surface, for mounting next to another handler (http.ServeMux).
func (h *Handler) HTTPHandler() http.Handler {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	h.Register(e)
	return e
}

func (h *Handler) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if h.auth != nil {
			if err := h.auth(c); err != nil {
				var he *echo.HTTPError
				if errors.As(err, &he) {
					return writeError(c, he.Code, fmt.Sprint(he.Message))
				}
				return writeError(c, http.StatusUnauthorized, err.Error())
			}
		}
		return next(c)
	}
}

// callerOf returns the request's caller (a valid operator without
// Deps.Caller).
func (h *Handler) callerOf(c echo.Context) Caller {
	if h.caller == nil {
		return Caller{Operator: true}
	}
	return h.caller(c)
}

// operatorOnly refuses callers that are not operators with 403.
func (h *Handler) operatorOnly(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !h.callerOf(c).Operator {
			return writeError(c, http.StatusForbidden, "this endpoint needs an operator key")
		}
		return next(c)
	}
}

// writeError writes an OpenAI-shaped error, as the gateway does: type
// from the status, param null, code a stable machine-readable string.
func writeError(c echo.Context, status int, msg string) error {
	return writeErrorParam(c, status, msg, "")
}

func writeErrorParam(c echo.Context, status int, msg, param string) error {
	typ, code := "invalid_request_error", "invalid_request"
	switch {
	case status == http.StatusUnauthorized:
		typ, code = "authentication_error", "invalid_api_key"
	case status == http.StatusForbidden:
		typ, code = "permission_error", "permission_denied"
	case status == http.StatusNotFound:
		code = "not_found"
	case status == http.StatusConflict:
		code = "conflict"
	case status == http.StatusTooManyRequests:
		typ, code = "rate_limit_error", "too_many_streams"
	case status >= 500:
		typ, code = "api_error", "unavailable"
	}
	var p any
	if param != "" {
		p = param
	}
	return c.JSON(status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": p, "code": code}})
}

func (h *Handler) getRollout(c echo.Context) error {
	st, _, err := h.proj.Sync(c.Request().Context())
	if err != nil {
		h.log.Error("rollout state", "err", err)
		return writeError(c, http.StatusServiceUnavailable, "the event store is not available")
	}
	return c.JSON(http.StatusOK, st)
}

// VersionsResponse is GET /v1/ops/versions.
type VersionsResponse struct {
	Stable   string            `json:"stable"`
	Versions []rollout.Version `json:"versions"`
	Rollout  rollout.Status    `json:"rollout"`
}

func (h *Handler) getVersions(c echo.Context) error {
	st, vs, err := h.proj.Sync(c.Request().Context())
	if err != nil {
		h.log.Error("versions", "err", err)
		return writeError(c, http.StatusServiceUnavailable, "the event store is not available")
	}
	return c.JSON(http.StatusOK, VersionsResponse{Stable: st.Stable, Versions: vs, Rollout: st})
}

// ActionRequest is the optional body of POST /v1/ops/rollout/{action}.
type ActionRequest struct {
	Reason string `json:"reason"`
}

// ActionResponse is the answer to an operator action: the appended event
// and the state after it.
type ActionResponse struct {
	Event  events.Event   `json:"event"`
	Status rollout.Status `json:"status"`
}

var actions = map[string]func(context.Context, events.Store, string) (events.Event, error){
	"pause": rollout.Pause, "resume": rollout.Resume, "promote": rollout.Promote, "abort": rollout.Abort,
}

func (h *Handler) postRollout(c echo.Context) error {
	name := c.Param("action")
	act, ok := actions[name]
	if !ok {
		return writeError(c, http.StatusNotFound, fmt.Sprintf("unknown action %q (pause, resume, promote, abort)", name))
	}
	req, ok, err := readAction(c)
	if !ok {
		return err
	}
	if req.Reason == "" {
		req.Reason = c.QueryParam("reason")
	}
	ctx := c.Request().Context()
	ev, err := act(ctx, h.store, req.Reason)
	switch {
	case errors.Is(err, rollout.ErrNoRollout), errors.Is(err, rollout.ErrPaused), errors.Is(err, rollout.ErrNotPaused),
		errors.Is(err, rollout.ErrConflict):
		return writeError(c, http.StatusConflict, err.Error())
	case err != nil:
		h.log.Error("operator action", "action", name, "err", err)
		return writeError(c, http.StatusServiceUnavailable, err.Error())
	}
	h.log.Info("operator action", "action", name, "rollout", ev.CorrelationID, "reason", req.Reason, "position", ev.Position)
	st, _, err := h.proj.Sync(ctx)
	if err != nil {
		return writeError(c, http.StatusServiceUnavailable, err.Error())
	}
	return c.JSON(http.StatusOK, ActionResponse{Event: ev, Status: st})
}

// StartRequest is the body of POST /v1/ops/rollout/start.
type StartRequest struct {
	// Candidate is the trained version whose canary starts (required).
	Candidate string `json:"candidate"`
	Reason    string `json:"reason"`
}

// postStart starts the canary of a trained version (rollout.Start): 200
// with the rollout.started event and the state after it; 400 without a
// candidate, 404 for a version no weights.trained records, 409 while a
// rollout runs or when the version cannot be a canary.
func (h *Handler) postStart(c echo.Context) error {
	var req StartRequest
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, 64<<10))
	if err != nil {
		return writeError(c, http.StatusBadRequest, "reading the body: "+err.Error())
	}
	if len(strings.TrimSpace(string(body))) > 0 {
		dec := json.NewDecoder(strings.NewReader(string(body)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			return writeErrorParam(c, http.StatusBadRequest, "the body must be JSON {\"candidate\": \"VERSION\", \"reason\": \"...\"}: "+err.Error(), "candidate")
		}
	}
	if req.Candidate == "" {
		req.Candidate = c.QueryParam("candidate")
	}
	if req.Reason == "" {
		req.Reason = c.QueryParam("reason")
	}
	if req.Candidate == "" {
		return writeErrorParam(c, http.StatusBadRequest, "candidate is required: the trained version whose canary starts", "candidate")
	}
	ctx := c.Request().Context()
	ev, err := rollout.Start(ctx, h.store, h.rollout, req.Candidate, req.Reason)
	switch {
	case errors.Is(err, rollout.ErrUnknownVersion):
		return writeErrorParam(c, http.StatusNotFound, err.Error(), "candidate")
	case errors.Is(err, rollout.ErrRunning), errors.Is(err, rollout.ErrNotServable), errors.Is(err, rollout.ErrConflict):
		return writeError(c, http.StatusConflict, err.Error())
	case err != nil:
		h.log.Error("operator action", "action", "start", "err", err)
		return writeError(c, http.StatusServiceUnavailable, err.Error())
	}
	h.log.Info("operator action", "action", "start", "candidate", req.Candidate, "rollout", ev.CorrelationID, "reason", req.Reason, "position", ev.Position)
	st, _, err := h.proj.Sync(ctx)
	if err != nil {
		return writeError(c, http.StatusServiceUnavailable, err.Error())
	}
	return c.JSON(http.StatusOK, ActionResponse{Event: ev, Status: st})
}

func (h *Handler) dashboard(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "no-cache")
	c.Response().Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'unsafe-inline'")
	return c.Blob(http.StatusOK, "text/html; charset=utf-8", dashboardHTML)
}

func (h *Handler) dashboardScript(c echo.Context) error {
	c.Response().Header().Set("Cache-Control", "no-cache")
	return c.Blob(http.StatusOK, "text/javascript; charset=utf-8", dashboardJS)
}

// readAction reads an operator action's optional body, {"reason": "..."}
// of at most 64 KiB. On a bad body it writes the 400 and returns ok false
// with the write's error.
func readAction(c echo.Context) (req ActionRequest, ok bool, err error) {
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, 64<<10))
	if err != nil {
		return req, false, writeError(c, http.StatusBadRequest, "reading the body: "+err.Error())
	}
	if len(strings.TrimSpace(string(body))) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			return req, false, writeError(c, http.StatusBadRequest, "the body must be JSON {\"reason\": \"...\"}: "+err.Error())
		}
	}
	return req, true, nil
}
