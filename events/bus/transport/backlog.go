package transport

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"citizen/events"
	"citizen/events/bus"

	"github.com/prometheus/client_golang/prometheus"
)

// BacklogWatch measures, once a second, what each worker role's consumer
// group owes: the messages on the bus it has not acknowledged plus the
// store's events the relay has not published yet (they will reach it).
// It asks the bus, so a gateway sees the backlog of workers that run in
// other processes (Kafka knows every group's committed offsets); a group
// nobody consumes for is left out. Over bus.max_backlog, /readyz says not
// ready and the gateway refuses new completions with 503 overloaded
// (Retry-After): the backlog of ungraded work stays bounded, and a load
// balancer sends the traffic elsewhere. Gauges:
// citizen_worker_backlog_messages{group}, citizen_relay_unpublished_events.
type BacklogWatch struct {
	cfg    WatchConfig
	every  time.Duration
	gauge  *prometheus.GaugeVec
	relay  prometheus.Gauge
	logger *slog.Logger

	over atomic.Pointer[error] // set while a group owes more than cfg.Max
}

// WatchConfig says what a BacklogWatch reads.
type WatchConfig struct {
	Store events.Store
	// Max is bus.max_backlog (0: no bound, nothing is measured).
	Max int64
	// Groups maps each worker role's consumer group to its topics.
	Groups map[string][]string
	// RelayCheckpoint is the relay's checkpoint in the store: how far the
	// elected relay, wherever it runs, has published.
	RelayCheckpoint string
}

// NewBacklogWatch registers the watch's gauges on reg.
func NewBacklogWatch(cfg WatchConfig, reg prometheus.Registerer, logger *slog.Logger) (*BacklogWatch, error) {
	w := &BacklogWatch{cfg: cfg, every: time.Second, logger: logger,
		gauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "citizen_worker_backlog_messages",
			Help: "Messages a worker role's consumer group owes: unacknowledged on the bus plus events the relay has not published yet."}, []string{"group"}),
		relay: prometheus.NewGauge(prometheus.GaugeOpts{Name: "citizen_relay_unpublished_events",
			Help: "Store positions after the relay's: events not yet on the bus."})}
	for _, c := range []prometheus.Collector{w.gauge, w.relay} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// Run measures src's backlog until ctx ends. relay is this process's
// relay, if it has one (elected or not).
func (w *BacklogWatch) Run(ctx context.Context, src bus.Backlogger, relay *bus.Relay) {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		w.measure(ctx, src, relay)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Err is the reason the workers cannot take more, or nil.
func (w *BacklogWatch) Err() error {
	if p := w.over.Load(); p != nil {
		return *p
	}
	return nil
}

// Bounded reports whether there is a bound to watch (bus.max_backlog > 0).
func (w *BacklogWatch) Bounded() bool { return w.cfg.Max > 0 }

// measure reads every group's backlog once and sets the gauges and Err.
// A failed read keeps the last verdict (the bus being unreachable is the
// workers' problem to report, not a reason to refuse traffic).
func (w *BacklogWatch) measure(ctx context.Context, src bus.Backlogger, relay *bus.Relay) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	unpublished, err := w.unpublished(ctx, relay)
	if err != nil {
		if ctx.Err() == nil {
			w.logger.Warn("cannot read the relay's position", "err", err)
		}
		return
	}
	w.relay.Set(float64(unpublished))
	var over error
	for group, topics := range w.cfg.Groups {
		n, known, err := src.Backlog(ctx, group, topics)
		if err != nil {
			if ctx.Err() == nil {
				w.logger.Warn("cannot read a consumer group's backlog", "group", group, "err", err)
			}
			return
		}
		if !known {
			w.gauge.DeleteLabelValues(group)
			continue
		}
		n += unpublished
		w.gauge.WithLabelValues(group).Set(float64(n))
		if w.cfg.Max > 0 && n > w.cfg.Max && over == nil {
			over = fmt.Errorf("%s owes %d messages, more than bus.max_backlog %d", group, n, w.cfg.Max)
		}
	}
	if (over == nil) != (w.Err() == nil) {
		if over != nil {
			w.logger.Warn("workers behind: refusing new completions", "reason", over)
		} else {
			w.logger.Info("workers caught up: accepting completions")
		}
	}
	if over == nil {
		w.over.Store(nil)
	} else {
		w.over.Store(&over)
	}
}

// unpublished is the number of store positions after the relay's: the
// position this process's relay has published, or the relay checkpoint
// where the elected relay runs elsewhere.
func (w *BacklogWatch) unpublished(ctx context.Context, relay *bus.Relay) (int64, error) {
	last, err := w.cfg.Store.LastPosition(ctx)
	if err != nil {
		return 0, err
	}
	at := uint64(0)
	if relay != nil {
		at = relay.Published()
	}
	if cp, found, err := w.cfg.Store.Checkpoint(ctx, w.cfg.RelayCheckpoint); err != nil {
		return 0, err
	} else if found && cp > at {
		at = cp
	}
	if last <= at {
		return 0, nil
	}
	return int64(last - at), nil
}
