package rollout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"citizen/events"

	"github.com/prometheus/client_golang/prometheus"
)

// Controller runs rollouts: it follows the store into its State and,
// after each event, appends the decision (if any) that the state calls
// for. Create it with New and call Run. Status is safe for concurrent use
// with Run.
type Controller struct {
	cfg   Config
	store events.Store
	log   *slog.Logger

	mu        sync.Mutex
	st        *State
	decisions *prometheus.CounterVec
	// await is the position of the controller's last appended decision;
	// it decides nothing until its state includes that position.
	await uint64
}

// New returns a controller for store; cfg's zero fields take defaults.
// logger nil discards.
func New(cfg Config, store events.Store, logger *slog.Logger) (*Controller, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if store == nil {
		return nil, errors.New("rollout: New needs a store")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Controller{cfg: cfg, store: store, log: logger.With("component", "rollout"), st: NewState(cfg),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "citizen_rollout_decisions_total",
			Help: "Rollout decisions appended by this controller."}, []string{"type", "reason"})}, nil
}

// Status returns the controller's view of the rollout (as of the last
// event it applied).
func (c *Controller) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st.Status()
}

// Versions returns the lineage of trained versions as the controller sees
// it.
func (c *Controller) Versions() []Version {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st.Versions()
}

// Run rebuilds the state from the store (deciding nothing while it
// replays history), makes the decision the state calls for, then follows
// new events and decides after each, until ctx is cancelled (returning
// ctx.Err()) or the store fails. Several controllers may run on one store:
// decisions are appended with the expected revision of the rollout stream
// (a fresh stream for a start) and with deterministic event ids, so for
// each revision exactly one decision lands; the others get a
// wrong-revision error, which is expected and only logged, and they
// re-decide on the events that follow.
func (c *Controller) Run(ctx context.Context) error {
	head, err := c.store.LastPosition(ctx)
	if err != nil {
		return fmt.Errorf("rollout: %w", err)
	}
	if err := c.replay(ctx, head); err != nil {
		return err
	}
	if err := c.step(ctx); err != nil {
		return err
	}
	c.mu.Lock()
	after := c.st.pos
	c.mu.Unlock()
	err = c.store.Subscribe(ctx, after, Filter(), func(ctx context.Context, ev events.Event) error {
		return c.handle(ctx, &ev)
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("rollout: subscription: %w", err)
}

// replay applies stored events up to head without deciding.
func (c *Controller) replay(ctx context.Context, head uint64) error {
	for {
		c.mu.Lock()
		after := c.st.pos
		c.mu.Unlock()
		if after >= head {
			return nil
		}
		evs, err := c.store.ReadAll(ctx, after, Filter(), 1024)
		if err != nil {
			return fmt.Errorf("rollout: replay: %w", err)
		}
		if len(evs) == 0 {
			return nil
		}
		c.mu.Lock()
		for i := range evs {
			if evs[i].Position > head {
				c.mu.Unlock()
				return nil
			}
			c.apply(&evs[i])
		}
		c.mu.Unlock()
	}
}

// CatchUp applies every stored event not yet applied, deciding after each
// (and appending its own decisions, which it then applies too), and
// returns once it has applied everything stored. For tests and tools that
// drive the controller step by step; Run is the service loop.
func (c *Controller) CatchUp(ctx context.Context) error {
	if err := c.step(ctx); err != nil {
		return err
	}
	for {
		c.mu.Lock()
		after := c.st.pos
		c.mu.Unlock()
		evs, err := c.store.ReadAll(ctx, after, Filter(), 256)
		if err != nil {
			return fmt.Errorf("rollout: %w", err)
		}
		if len(evs) == 0 {
			return nil
		}
		for i := range evs {
			if err := c.handle(ctx, &evs[i]); err != nil {
				return err
			}
		}
	}
}

func (c *Controller) apply(ev *events.Event) {
	if err := c.st.Apply(ev); err != nil {
		c.log.Warn("skipping an event that does not decode", "type", ev.Type, "position", ev.Position, "err", err)
	}
}

func (c *Controller) handle(ctx context.Context, ev *events.Event) error {
	c.mu.Lock()
	c.apply(ev)
	c.mu.Unlock()
	return c.step(ctx)
}

// step appends the decision the state calls for, if any.
func (c *Controller) step(ctx context.Context) error {
	c.mu.Lock()
	if c.st.pos < c.await {
		c.mu.Unlock()
		return nil
	}
	d := c.st.decide()
	c.mu.Unlock()
	if d == nil {
		return nil
	}
	ev, err := events.Encode(d.payload, events.Meta{Stream: d.stream, ID: d.id, CorrelationID: d.change.RolloutID})
	if err != nil {
		return fmt.Errorf("rollout: encoding %s: %w", d.payload.EventType(), err)
	}
	res, err := c.store.Append(ctx, d.stream, d.expected, ev)
	if errors.Is(err, events.ErrWrongExpectedRevision) {
		c.log.Info("another writer decided first", "type", ev.Type, "rollout", d.change.RolloutID, "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("rollout: appending %s: %w", ev.Type, err)
	}
	c.mu.Lock()
	c.await = res.LastPosition
	c.mu.Unlock()
	code, _, _ := strings.Cut(d.change.Reason, ":")
	c.decisions.WithLabelValues(ev.Type, code).Inc()
	c.log.Info("rollout decision", "type", ev.Type, "rollout", d.change.RolloutID, "candidate", d.change.Candidate,
		"stable", d.change.Stable, "step", d.change.Step, "weight", d.change.Weight, "reason", d.change.Reason)
	return nil
}
