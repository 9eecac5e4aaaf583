package services

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"citizen/events"
	"citizen/events/bus"
	"citizen/events/bus/transport"
	"citizen/gateway"
	"citizen/memory"
	"citizen/memory/lessons"
)

// The worker roles' consumer groups and the event types each consumes:
// the workers subscribe with these, and the backlog watch reads what each
// group owes.
var (
	groupReflection = []string{events.TypeInteractionRecorded, events.TypeFeedbackReceived, events.TypeFeedbackInterpreted}
	groupDetectors  = []string{events.TypeInteractionEvaluated, events.TypeRolloutStarted, events.TypeRolloutPromoted}
	groupFeedback   = []string{events.TypeFeedbackReceived}
)

// workerGroups maps each worker role's consumer group to its event types.
func workerGroups() map[string][]string {
	return map[string][]string{
		"reflection": groupReflection,
		"detectors":  groupDetectors,
		"feedback":   groupFeedback,
		"memory":     memory.IndexedTypes,
		"lessons":    lessons.Topics,
	}
}

// topicsOf returns the bus topics of event types.
func topicsOf(types []string) []string {
	out := make([]string, len(types))
	for i, t := range types {
		out[i] = bus.Topic(t)
	}
	return out
}

// backlogWatch measures, once a second, what each worker role's consumer
// group owes: the messages on the bus it has not acknowledged plus the
// store's events the relay has not published yet (they will reach it).
// It asks the bus, so a gateway sees the backlog of workers that run in
// other processes (Kafka knows every group's committed offsets); a group
// nobody consumes for is left out. Over bus.max_backlog, /readyz says not
// ready and the gateway refuses new completions with 503 overloaded
// (Retry-After): the backlog of ungraded work stays bounded, and a load
// balancer sends the traffic elsewhere. Gauges:
// citizen_worker_backlog_messages{group}, citizen_relay_unpublished_events.
type backlogWatch struct {
	store  events.Store
	max    int64
	every  time.Duration
	gauge  *prometheus.GaugeVec
	relay  prometheus.Gauge
	logger *slog.Logger

	mu   sync.Mutex
	over error // non-nil while a group owes more than max
}

func newBacklogWatch(store events.Store, max int64, reg prometheus.Registerer, logger *slog.Logger) (*backlogWatch, error) {
	w := &backlogWatch{store: store, max: max, every: time.Second, logger: logger,
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
func (w *backlogWatch) Run(ctx context.Context, src bus.Backlogger, relay *bus.Relay) {
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
func (w *backlogWatch) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.over
}

// measure reads every group's backlog once and sets the gauges and Err.
// A failed read keeps the last verdict (the bus being unreachable is the
// workers' problem to report, not a reason to refuse traffic).
func (w *backlogWatch) measure(ctx context.Context, src bus.Backlogger, relay *bus.Relay) {
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
	for group, types := range workerGroups() {
		n, known, err := src.Backlog(ctx, group, topicsOf(types))
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
		if w.max > 0 && n > w.max && over == nil {
			over = fmt.Errorf("%s owes %d messages, more than bus.max_backlog %d", group, n, w.max)
		}
	}
	w.mu.Lock()
	if (over == nil) != (w.over == nil) {
		if over != nil {
			w.logger.Warn("workers behind: refusing new completions", "reason", over)
		} else {
			w.logger.Info("workers caught up: accepting completions")
		}
	}
	w.over = over
	w.mu.Unlock()
}

// unpublished is the number of store positions after the relay's: the
// position this process's relay has published, or the relay checkpoint
// where the elected relay runs elsewhere.
func (w *backlogWatch) unpublished(ctx context.Context, relay *bus.Relay) (int64, error) {
	last, err := w.store.LastPosition(ctx)
	if err != nil {
		return 0, err
	}
	at := uint64(0)
	if relay != nil {
		at = relay.Published()
	}
	if cp, found, err := w.store.Checkpoint(ctx, leaseRelay); err != nil {
		return 0, err
	} else if found && cp > at {
		at = cp
	}
	if last <= at {
		return 0, nil
	}
	return int64(last - at), nil
}

// backlogSource is where the gateway's watch reads the workers' backlog,
// once every module is initialised: this process's bus, or the brokers
// where the bus runs elsewhere (a gateway-only process on Kafka); nil
// where no worker's backlog can be seen (the in-process bus of another
// process). relay is this process's relay, if it has one.
func (a *App) backlogSource() (src bus.Backlogger, relay *bus.Relay, err error) {
	if a.Bus != nil {
		return a.Bus, a.relay, nil
	}
	lag, err := transport.OpenBacklog(a.Config.Bus)
	return lag, nil, err
}

// gatewayService runs the gateway and, once every module is initialised,
// the watch of the workers' backlog it admits requests by.
type gatewayService struct {
	srv    *gateway.Server
	watch  *backlogWatch
	source func() (bus.Backlogger, *bus.Relay, error)
	ready  chan struct{} // closed by AllStarted
	once   sync.Once
}

func (g *gatewayService) AllStarted() { g.once.Do(func() { close(g.ready) }) }

func (g *gatewayService) Run(ctx context.Context) error {
	go func() {
		select {
		case <-g.ready:
		case <-ctx.Done():
			return
		}
		src, relay, err := g.source()
		if err != nil {
			g.watch.logger.Error("cannot watch the workers' backlog", "err", err)
			return
		}
		if src != nil && g.watch.max > 0 {
			g.watch.Run(ctx, src, relay)
		}
	}()
	return g.srv.Run(ctx, "")
}
