package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"citizen/events"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Registry is where the process's components register their metrics and
// what /metrics serves (a *prometheus.Registry).
type Registry interface {
	prometheus.Registerer
	prometheus.Gatherer
}

// Deps are the gateway's collaborators.
type Deps struct {
	// Store records interactions and feedback (required).
	Store events.Store
	// Engine generates completions (required).
	Engine Engine
	// Keys resolves API keys; nil means the key file Config.KeysFile (or
	// no keys at all when that is empty: only the dev key, if enabled).
	Keys KeyStore
	// Router chooses versions; nil means a new router whose stable version
	// is Config.StableVersion or the engine's first version.
	Router *Router
	// Logger, already carrying the caller's component attribute; nil
	// discards.
	Logger *slog.Logger
	// Registry for the metrics; nil means a fresh one (served on /metrics
	// either way).
	Registry Registry
	// Routes, if set, registers more routes on the authenticated /v1
	// group (the operator endpoints); their handlers read the caller with
	// KeyOf. Pages, if set, registers routes on the root without
	// authentication (the dashboard page, which authenticates its API calls).
	Routes func(v1 *echo.Group)
	Pages  func(e *echo.Echo)
	// OnShutdown, if set, runs (in its own goroutine) when Run or Serve
	// begins shutting down, after the listener is closed: long-lived
	// responses such as the operator stream end there, so that the drain
	// waits only for bounded requests.
	OnShutdown func()
	// Ready, if set, is asked by /readyz besides the gateway's own state:
	// a non-nil error (for example the event store cannot record) makes
	// the gateway not ready, with the error's text in the body.
	Ready func() error
	// Admit, if set, is asked before each generating request (chat
	// completions, responses): a non-nil error refuses it with 503
	// overloaded and Retry-After before anything is recorded (the workers
	// are too far behind to grade more; see services' bus.max_backlog).
	Admit func() error
	// Lessons, if set, says which lessons to place in each request's
	// context (fast memory).
	Lessons LessonSource
	// Embedder, if set, serves POST /v1/embeddings; nil means the engine,
	// if it implements Embedder, or none (the endpoint then answers 400
	// embeddings_unavailable).
	Embedder Embedder
}

// Server is the HTTP gateway. Create it with New; serve Handler() yourself
// (after Start) or call Run. Safe for concurrent use.
type Server struct {
	cfg     Config
	store   events.Store
	engine  Engine
	keys    KeyStore
	router  *Router
	log     *slog.Logger
	reg     Registry
	metrics *metrics
	limiter *limiter
	proj    *projection
	echo    *echo.Echo
	devKey  bool
	deps    Deps

	startOnce sync.Once
	startErr  error
	ready     atomic.Bool
	// onShutdown, if set (tests), runs when Serve begins shutting down,
	// after the listener is closed.
	onShutdown func()
	bufs       sync.Pool // *bytes.Buffer for request bodies
	outs       sync.Pool // *[]byte for encoded responses
}

// New builds a server: it fills defaults, validates cfg and wires the
// routes. It starts nothing; see Start and Run.
func New(cfg Config, deps Deps) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Store == nil || deps.Engine == nil {
		return nil, errors.New("gateway: Deps.Store and Deps.Engine are required")
	}
	s := &Server{cfg: cfg, store: deps.Store, engine: deps.Engine, keys: deps.Keys, router: deps.Router,
		log: deps.Logger, reg: deps.Registry, limiter: newLimiter(), proj: newProjection(), devKey: cfg.DevKeyEnabled(), deps: deps}
	s.bufs.New = func() any { return new(bytes.Buffer) }
	s.outs.New = func() any { b := make([]byte, 0, 4096); return &b }
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
	}
	s.metrics = newMetrics(s.reg)
	if s.keys == nil && cfg.KeysFile != "" {
		fk, err := OpenFileKeys(cfg.KeysFile)
		if err != nil {
			return nil, err
		}
		s.keys = fk
	}
	if s.keys == nil {
		s.keys = NewStaticKeys()
	}
	if s.router == nil {
		stable := cfg.StableVersion
		if stable == "" {
			vs, err := s.engine.Versions(context.Background())
			if err != nil {
				return nil, fmt.Errorf("gateway: engine versions: %w", err)
			}
			if len(vs) == 0 {
				return nil, errors.New("gateway: the engine serves no version")
			}
			stable = vs[0].ID
		}
		s.router = NewRouter(stable)
	}
	if s.devKey {
		s.log.Info("development key enabled", "key", DevKey, "tenant", DevTenant)
	}
	s.echo = s.routes()
	return s, nil
}

// Router returns the server's router (for SetRollout).
func (s *Server) Router() *Router { return s.router }

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler { return s.echo }

// Start rebuilds the in-memory projection of recorded interactions from the
// store (catch-up; it returns when that is done) and then keeps it and, unless
// Config.IgnoreRollouts, the router up to date in the background until ctx is
// cancelled. Calling it again does nothing.
func (s *Server) Start(ctx context.Context) error {
	s.startOnce.Do(func() { s.startErr = s.start(ctx) })
	return s.startErr
}

func (s *Server) start(ctx context.Context) error {
	filter := events.Filter{Types: projectionTypes}
	var after uint64
	for {
		evs, err := s.store.ReadAll(ctx, after, filter, 1024)
		if err != nil {
			return fmt.Errorf("gateway: rebuilding the interaction index: %w", err)
		}
		for i := range evs {
			s.proj.apply(&evs[i])
			after = evs[i].Position
		}
		if len(evs) < 1024 {
			break
		}
	}
	go func() {
		err := s.store.Subscribe(ctx, after, filter, func(_ context.Context, ev events.Event) error {
			s.proj.apply(&ev)
			return nil
		})
		if err != nil && ctx.Err() == nil {
			s.log.Error("interaction index subscription stopped", "err", err)
			s.ready.Store(false)
		}
	}()
	if !s.cfg.IgnoreRollouts {
		go func() {
			if err := s.router.FollowRollouts(ctx, s.store); err != nil && ctx.Err() == nil {
				s.log.Error("rollout subscription stopped", "err", err)
			}
		}()
	}
	s.ready.Store(true)
	return nil
}

// Run starts the server (Start), listens on addr (Config.Listen if empty)
// and serves until ctx is cancelled; then it stops accepting connections
// and drains in-flight requests for up to Config.ShutdownTimeout.
func (s *Server) Run(ctx context.Context, addr string) error {
	if addr == "" {
		addr = s.cfg.Listen
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("gateway: listen: %w", err)
	}
	return s.Serve(ctx, ln)
}

// Serve is Run on an existing listener (closed when it returns).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	if err := s.Start(bg); err != nil {
		ln.Close()
		return err
	}
	hs := &http.Server{Handler: s.echo, ReadHeaderTimeout: s.cfg.ReadHeaderTimeout, IdleTimeout: s.cfg.IdleTimeout,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	if s.onShutdown != nil {
		hs.RegisterOnShutdown(s.onShutdown)
	}
	if s.deps.OnShutdown != nil {
		hs.RegisterOnShutdown(s.deps.OnShutdown)
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	s.log.Info("gateway listening", "addr", ln.Addr().String())
	select {
	case err := <-errc:
		return fmt.Errorf("gateway: serve: %w", err)
	case <-ctx.Done():
	}
	s.ready.Store(false)
	sctx, scancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer scancel()
	err := hs.Shutdown(sctx)
	<-errc
	if err != nil {
		return fmt.Errorf("gateway: shutdown: %w", err)
	}
	return nil
}

func (s *Server) routes() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.echoError
	e.Use(s.observe)
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok\n") })
	e.GET("/readyz", func(c echo.Context) error {
		if !s.ready.Load() {
			return c.String(http.StatusServiceUnavailable, "not ready\n")
		}
		if s.deps.Ready != nil {
			if err := s.deps.Ready(); err != nil {
				return c.String(http.StatusServiceUnavailable, "not ready: "+err.Error()+"\n")
			}
		}
		return c.String(http.StatusOK, "ready\n")
	})
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})))
	e.GET("/openapi.yaml", openAPI) // public: the API's shape, no data (openapi.go)
	v1 := e.Group("/v1", s.auth)
	v1.POST("/chat/completions", s.chat)
	v1.POST("/responses", s.responses)
	v1.POST("/embeddings", s.embeddings)
	v1.GET("/chat/completions", s.listCompletions)
	v1.GET("/chat/completions/:id", s.getCompletion)
	v1.POST("/chat/completions/:id", s.updateCompletion)
	v1.DELETE("/chat/completions/:id", s.deleteCompletion)
	v1.GET("/chat/completions/:id/messages", s.getMessages)
	v1.POST("/chat/completions/:id/feedback", s.feedback)
	v1.POST("/feedback", s.feedback)
	v1.GET("/models", s.listModels)
	v1.GET("/models/:model", s.getModel)
	v1.GET("/interactions/:id", s.getInteraction)
	if s.deps.Routes != nil {
		s.deps.Routes(v1)
	}
	if s.deps.Pages != nil {
		s.deps.Pages(e)
	}
	return e
}

// echoError renders errors from echo itself (no route, wrong method) and
// anything a handler returns in OpenAI's shape.
func (s *Server) echoError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var ae *APIError
	var he *echo.HTTPError
	switch {
	case errors.As(err, &ae):
	case errors.As(err, &he):
		msg := fmt.Sprint(he.Message)
		typ := "invalid_request_error"
		if he.Code >= 500 {
			typ = "api_error"
		}
		if he.Code == http.StatusNotFound {
			msg = fmt.Sprintf("Unknown request URL: %s %s.", c.Request().Method, c.Request().URL.Path)
		}
		ae = &APIError{Status: he.Code, Type: typ, Message: msg}
	default:
		s.log.Error("unhandled error", "err", err, "path", c.Request().URL.Path)
		ae = errInternal("The server had an error while processing your request.")
	}
	s.fail(c, ae)
}

// fail writes an API error and counts it.
func (s *Server) fail(c echo.Context, e *APIError) error {
	route := c.Path()
	if route == "" {
		route = "unmatched"
	}
	s.metrics.observeError(route, e.Status, e.Type)
	writeAPIError(c.Response(), e)
	return nil
}

type ctxKey int

const keyCtx ctxKey = 0

// observe sets x-request-id on every response, records the HTTP metrics
// and turns a panic into a 500 (logged; it is a bug).
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		start := time.Now()
		rid := c.Request().Header.Get("X-Request-Id")
		if !validRequestID(rid) {
			rid = newRequestID()
		}
		c.Response().Header().Set("X-Request-Id", rid)
		if servesModel(c) {
			s.metrics.running.Inc()
			defer s.metrics.running.Dec()
		}
		if r := c.Request(); r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			// The body must arrive within BodyReadTimeout; readBody lifts
			// the deadline once it has the body (a deadline left on the
			// connection would cancel a long generation's context).
			_ = http.NewResponseController(c.Response().Writer).SetReadDeadline(time.Now().Add(s.cfg.BodyReadTimeout))
		}
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("panic in handler", "panic", p, "path", c.Request().URL.Path, "request_id", rid)
				if !c.Response().Committed {
					s.fail(c, errInternal("The server had an error while processing your request."))
				}
				err = nil
			}
			route := c.Path()
			if route == "" {
				route = "unmatched"
			}
			s.metrics.observeHTTP(route, c.Request().Method, c.Response().Status, time.Since(start))
		}()
		if err = next(c); err != nil {
			s.echoError(err, c)
			err = nil
		}
		return nil
	}
}

// servesModel reports whether the request is one for the model (counted
// in citizen_num_requests_running).
func servesModel(c echo.Context) bool {
	if c.Request().Method != http.MethodPost {
		return false
	}
	switch c.Path() {
	case "/v1/chat/completions", "/v1/responses", "/v1/embeddings":
		return true
	}
	return false
}

func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}

// auth resolves the bearer key to a Key (tenant, user, limits).
func (s *Server) auth(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Request().Header.Get("Authorization")
		secret, ok := strings.CutPrefix(h, "Bearer ")
		secret = strings.TrimSpace(secret)
		if !ok || secret == "" {
			return s.fail(c, errUnauthorized("You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."))
		}
		var key Key
		if s.devKey && secret == DevKey {
			key = Key{ID: "dev", Tenant: DevTenant, Name: "development key"}
		} else if key, ok = s.keys.Lookup(HashKey(secret)); !ok {
			return s.fail(c, errUnauthorized("Incorrect API key provided: "+redact(secret)+"."))
		}
		c.Set("citizen.key", key)
		if key.ID != "dev" {
			hash := HashKey(secret)
			c.Set("citizen.key.valid", func() bool { _, ok := s.keys.Lookup(hash); return ok })
		}
		return next(c)
	}
}

// KeyOf returns the authenticated caller of a request on the /v1 group.
func KeyOf(c echo.Context) Key {
	k, _ := c.Get("citizen.key").(Key)
	return k
}

func keyOf(c echo.Context) Key { return KeyOf(c) }

// KeyValid reports whether the key that authenticated the request is still
// active (not revoked since): long-lived responses ask it periodically.
func KeyValid(c echo.Context) bool {
	if f, ok := c.Get("citizen.key.valid").(func() bool); ok {
		return f()
	}
	return c.Get("citizen.key") != nil
}

// OperatorTenant is the tenant of operator keys: they see every tenant's
// data on the operator endpoints. The development key acts as an operator.
const OperatorTenant = "operator"

// IsOperator reports whether the key may see every tenant's data.
func (k Key) IsOperator() bool { return k.Tenant == OperatorTenant || k.ID == "dev" }

func redact(secret string) string {
	if len(secret) <= 8 {
		return "****"
	}
	return secret[:4] + "****" + secret[len(secret)-4:]
}

// readBody reads the request body up to the configured limit.
func (s *Server) readBody(c echo.Context, buf *bytes.Buffer) *APIError {
	r := c.Request()
	limit := s.cfg.MaxBodyBytes
	if r.ContentLength > limit {
		return errTooLarge(limit)
	}
	_, err := buf.ReadFrom(io.LimitReader(r.Body, limit+1))
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return &APIError{Status: http.StatusRequestTimeout, Type: "invalid_request_error", Code: "request_timeout",
				Message: fmt.Sprintf("The request body did not arrive within %s.", s.cfg.BodyReadTimeout)}
		}
		return badRequest("", "Could not read the request body.")
	}
	_ = http.NewResponseController(c.Response().Writer).SetReadDeadline(time.Time{})
	if int64(buf.Len()) > limit {
		return errTooLarge(limit)
	}
	return nil
}
