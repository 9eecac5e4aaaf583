package reflection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"citizen/events"
)

// ScoreboardHandler serves the scoreboard as JSON on GET:
// {"rows":[Row...]}, filtered by the optional query parameters type and
// version. Other methods get 405.
func ScoreboardHandler(sb *Scoreboard) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		q := r.URL.Query()
		rows := sb.Rows(q.Get("type"), q.Get("version"))
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(map[string]any{"rows": rows})
	})
}

// Subscriber is what the live stream reads; events.Store satisfies it.
type Subscriber interface {
	Subscribe(ctx context.Context, after uint64, f events.Filter, h events.Handler) error
}

// streamTypes are the event types the live stream may carry.
var streamTypes = map[string]bool{events.TypeInteractionEvaluated: true, events.TypeAnomalyDetected: true, events.TypeFeedbackInterpreted: true}

// heartbeat is the interval of SSE comments that keep idle connections
// open.
var heartbeat = 15 * time.Second

// StreamHandler serves reflection's events as Server-Sent Events: each
// event is sent as "id: <store position>", "event: <type>" and "data:
// <the event envelope as JSON>". Query parameters: types (comma-separated,
// from interaction.evaluated, anomaly.detected, feedback.interpreted;
// default the first two), task_type, version, kind (anomalies), tenant.
// A reconnecting client resumes after its Last-Event-ID header (or the
// last_event_id parameter); without one the stream replays from the start
// of the store, then goes live. Comments (": ping") are sent every 15 s.
// The response ends when the client goes away.
func StreamHandler(sub Subscriber, logger *slog.Logger) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("component", "reflection")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", "GET")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		q := r.URL.Query()
		var types []string
		if t := q.Get("types"); t != "" {
			for _, x := range strings.Split(t, ",") {
				x = strings.TrimSpace(x)
				if !streamTypes[x] {
					http.Error(w, fmt.Sprintf("unknown event type %q", x), http.StatusBadRequest)
					return
				}
				types = append(types, x)
			}
		} else {
			types = []string{events.TypeInteractionEvaluated, events.TypeAnomalyDetected}
		}
		after := uint64(0)
		last := r.Header.Get("Last-Event-ID")
		if last == "" {
			last = q.Get("last_event_id")
		}
		if last != "" {
			v, err := strconv.ParseUint(strings.TrimSpace(last), 10, 64)
			if err != nil {
				http.Error(w, "bad Last-Event-ID", http.StatusBadRequest)
				return
			}
			after = v
		}
		taskType, version, kind, tenant := q.Get("task_type"), q.Get("version"), q.Get("kind"), q.Get("tenant")

		rc := http.NewResponseController(w)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("Connection", "keep-alive")
		w.Header().Set("X-Accel-Buffering", "no")
		w.WriteHeader(http.StatusOK)
		var mu sync.Mutex
		write := func(s string) error {
			mu.Lock()
			defer mu.Unlock()
			if _, err := w.Write([]byte(s)); err != nil {
				return err
			}
			return rc.Flush()
		}
		if err := write(": reflection stream\n\n"); err != nil {
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		go func() {
			t := time.NewTicker(heartbeat)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					if write(": ping\n\n") != nil {
						cancel()
						return
					}
				}
			}
		}()
		err := sub.Subscribe(ctx, after, events.Filter{Types: types}, func(ctx context.Context, ev events.Event) error {
			if tenant != "" && ev.Tenant != tenant {
				return nil
			}
			if !matchStream(&ev, taskType, version, kind) {
				return nil
			}
			data, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			return write(fmt.Sprintf("id: %d\nevent: %s\ndata: %s\n\n", ev.Position, ev.Type, data))
		})
		if err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
			logger.WarnContext(r.Context(), "stream ended", "err", err)
		}
	})
}

// matchStream applies the task type, version and kind filters.
func matchStream(ev *events.Event, taskType, version, kind string) bool {
	if taskType == "" && version == "" && kind == "" {
		return true
	}
	p, err := events.Decode(ev)
	if err != nil {
		return false
	}
	switch x := p.(type) {
	case *events.InteractionEvaluated:
		return (taskType == "" || x.TaskType == taskType) && (version == "" || x.ModelVersion == version) && kind == ""
	case *events.AnomalyDetected:
		return (taskType == "" || x.TaskType == taskType) && (version == "" || x.Version == version) && (kind == "" || x.Kind == kind)
	case *events.FeedbackInterpreted:
		return taskType == "" && version == "" && kind == ""
	}
	return false
}
