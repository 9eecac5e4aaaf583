package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"citizen/events"

	"github.com/labstack/echo/v4"
)

// StreamTypes are the event types GET /v1/ops/stream serves (and its
// default selection). interaction.recorded and feedback.received (prompts
// and customers' words) are not on the operator stream.
var StreamTypes = []string{
	events.TypeInteractionEvaluated, events.TypeFeedbackInterpreted, events.TypeAnomalyDetected,
	events.TypeWeightsTrained,
	events.TypeRolloutStarted, events.TypeRolloutAdvanced, events.TypeRolloutPaused,
	events.TypeRolloutResumed, events.TypeRolloutPromoted, events.TypeRolloutRolledBack,
}

// streamFilter is a parsed stream query.
type streamFilter struct {
	types     []string
	versions  []string
	tenant    string
	taskTypes []string
	kinds     []string
}

// list splits repeated and comma-separated query values.
func list(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

func parseStreamFilter(c echo.Context) (streamFilter, error) {
	q := c.QueryParams()
	f := streamFilter{versions: list(q["version"]), taskTypes: list(q["task_type"]), kinds: list(q["kind"])}
	switch ts := list(q["tenant"]); len(ts) {
	case 0:
	case 1:
		f.tenant = ts[0]
	default:
		return f, paramErrorf("tenant", "the stream selects at most one tenant, got %d", len(ts))
	}
	for _, t := range list(append(q["type"], q["types"]...)) {
		// "rollout" or "rollout.*" select every rollout type
		if p, ok := strings.CutSuffix(t, ".*"); ok {
			t = p
		}
		n := len(f.types)
		for _, st := range StreamTypes {
			if st == t || strings.HasPrefix(st, t+".") {
				f.types = append(f.types, st)
			}
		}
		if len(f.types) == n {
			return f, paramErrorf("types", "type %q is not on the stream (one of %s, or a prefix such as rollout)", t, strings.Join(StreamTypes, ", "))
		}
	}
	if len(f.types) == 0 {
		f.types = slices.Clone(StreamTypes)
	}
	return f, nil
}

// versionsLite is what the filters read from an event's data.
type versionsLite struct {
	TaskType     string `json:"task_type"`
	Kind         string `json:"kind"`
	ModelVersion string `json:"model_version"`
	Version      string `json:"version"`
	Parent       string `json:"parent"`
	Candidate    string `json:"candidate"`
	Stable       string `json:"stable"`
}

// paramError is a bad query parameter: a 400 naming it.
type paramError struct {
	param string
	msg   string
}

func (e *paramError) Error() string { return e.msg }

func paramErrorf(param, format string, args ...any) error {
	return &paramError{param: param, msg: fmt.Sprintf(format, args...)}
}

func badParam(c echo.Context, err error) error {
	var pe *paramError
	if errors.As(err, &pe) {
		return writeErrorParam(c, http.StatusBadRequest, pe.msg, pe.param)
	}
	return writeError(c, http.StatusBadRequest, err.Error())
}

func (f streamFilter) match(ev *events.Event) bool {
	if f.tenant != "" && ev.Tenant != f.tenant {
		return false
	}
	if len(f.versions) == 0 && len(f.taskTypes) == 0 && len(f.kinds) == 0 {
		return true
	}
	var v versionsLite
	if json.Unmarshal(ev.Data, &v) != nil {
		return false
	}
	if len(f.taskTypes) > 0 && !slices.Contains(f.taskTypes, v.TaskType) {
		return false
	}
	if len(f.kinds) > 0 && (ev.Type != events.TypeAnomalyDetected || !slices.Contains(f.kinds, v.Kind)) {
		return false
	}
	if len(f.versions) == 0 {
		return true
	}
	for _, want := range f.versions {
		if want != "" && (want == v.ModelVersion || want == v.Version || want == v.Parent || want == v.Candidate || want == v.Stable) {
			return true
		}
	}
	return false
}

// stream serves GET /v1/ops/stream: Server-Sent Events, one per stored
// event, "id" the store position, "event" the type and "data" the JSON
// envelope. It starts after Last-Event-ID (header, or query last_event_id
// or after), else backlog positions before the end of the store, else at
// the end (only new events). Filters: type or types (repeated or
// comma-separated; a prefix such as "rollout" selects a family), version
// (the event's model_version, version, parent, candidate or stable; events
// naming no version, feedback.interpreted, do not match), tenant (the
// envelope's; events without a tenant do not match), task_type
// (evaluations and anomalies of that task type), kind (anomalies of that
// kind; other types do not match). All filters combine with AND. A
// comment line is sent at once and then every Deps.Heartbeat while nothing
// else is sent.
//
// A caller that is not an operator reads only its own tenant's events:
// the tenant filter is forced to its tenant (naming another is a 403), and
// the stream ends within a second of its key being revoked.
func (h *Handler) stream(c echo.Context) error {
	f, err := parseStreamFilter(c)
	if err != nil {
		return badParam(c, err)
	}
	who := h.callerOf(c)
	if !who.Operator {
		if f.tenant != "" && f.tenant != who.Tenant {
			return writeErrorParam(c, http.StatusForbidden, "a tenant's key reads only its own tenant's events", "tenant")
		}
		if who.Tenant == "" {
			return writeError(c, http.StatusForbidden, "this key has no tenant")
		}
		f.tenant = who.Tenant
	}
	select {
	case <-h.closing:
		return writeError(c, http.StatusServiceUnavailable, "the server is shutting down")
	default:
	}
	if !h.acquireStream(who.Key) {
		return writeError(c, http.StatusTooManyRequests, fmt.Sprintf("this key already holds %d open streams", h.maxStreams))
	}
	defer h.releaseStream(who.Key)
	req := c.Request()
	ctx, cancel := context.WithCancel(req.Context())
	defer cancel()
	after, err := h.startPosition(ctx, c)
	if err != nil {
		return badParam(c, err)
	}
	w := c.Response()
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("Connection", "keep-alive")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// A server WriteTimeout would cut the stream: this response has none.
	// A writer that cannot flush (a middleware's wrapper) still works,
	// buffered.
	rc := http.NewResponseController(w.Writer)
	_ = rc.SetWriteDeadline(time.Time{})
	flush := func() {
		if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			h.log.Debug("stream flush", "err", err)
		}
	}

	var mu sync.Mutex
	var werr error
	write := func(b []byte) error {
		mu.Lock()
		defer mu.Unlock()
		if werr != nil {
			return werr
		}
		if _, werr = w.Write(b); werr == nil {
			flush()
		} else {
			cancel()
		}
		return werr
	}
	if err := write(fmt.Appendf(nil, "retry: 2000\n: citizen ops stream from position %d\n\n", after)); err != nil {
		return nil
	}
	// The heartbeat goroutine writes to the response: it must be gone
	// before the handler returns and net/http finishes the response.
	hbDone := make(chan struct{})
	defer func() { cancel(); <-hbDone }()
	go func() {
		defer close(hbDone)
		t := time.NewTicker(h.heartbeat)
		defer t.Stop()
		recheck := time.NewTicker(250 * time.Millisecond)
		defer recheck.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-h.closing:
				cancel()
				return
			case <-recheck.C:
				if !who.valid() {
					h.log.Info("stream ended: the key is no longer valid", "tenant", who.Tenant)
					cancel()
					return
				}
			case now := <-t.C:
				if write(fmt.Appendf(nil, ": heartbeat %s\n\n", now.UTC().Format(time.RFC3339))) != nil {
					return
				}
			}
		}
	}()
	sf := events.Filter{Types: f.types}
	err = h.store.Subscribe(ctx, after, sf, func(_ context.Context, ev events.Event) error {
		if !f.match(&ev) {
			return nil
		}
		data, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		buf := make([]byte, 0, len(data)+64)
		buf = fmt.Appendf(buf, "id: %d\nevent: %s\ndata: ", ev.Position, ev.Type)
		buf = append(buf, data...)
		buf = append(buf, "\n\n"...)
		return write(buf)
	})
	if err != nil && ctx.Err() == nil && !errors.Is(err, events.ErrClosed) {
		h.log.Warn("stream ended", "err", err)
	}
	return nil
}

// acquireStream counts an open stream against key's limit; a caller
// without a key identity (no Deps.Caller) is not limited.
func (h *Handler) acquireStream(key string) bool {
	if key == "" {
		return true
	}
	h.streamsMu.Lock()
	defer h.streamsMu.Unlock()
	if h.streams[key] >= h.maxStreams {
		return false
	}
	h.streams[key]++
	return true
}

func (h *Handler) releaseStream(key string) {
	if key == "" {
		return
	}
	h.streamsMu.Lock()
	defer h.streamsMu.Unlock()
	if h.streams[key]--; h.streams[key] <= 0 {
		delete(h.streams, key)
	}
}

func (h *Handler) startPosition(ctx context.Context, c echo.Context) (uint64, error) {
	req := c.Request()
	for _, s := range []string{req.Header.Get("Last-Event-ID"), c.QueryParam("last_event_id"), c.QueryParam("after")} {
		if s = strings.TrimSpace(s); s != "" {
			p, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return 0, paramErrorf("after", "Last-Event-ID / after must be a store position (an unsigned integer), got %q", s)
			}
			return p, nil
		}
	}
	last, err := h.store.LastPosition(ctx)
	if err != nil {
		return 0, err
	}
	if s := c.QueryParam("backlog"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, paramErrorf("backlog", "backlog must be a count of positions, got %q", s)
		}
		if n >= last {
			return 0, nil
		}
		return last - n, nil
	}
	return last, nil
}
