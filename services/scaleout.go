package services

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"citizen/events"
	"citizen/internal/modules"
)

// Scale-out wiring: which deployments citizen refuses at start, and the
// elected roles (docs/adr/0011-election-and-roles.md).

// Lease names of the roles that run once per deployment.
const (
	leaseRelay     = "relay"
	leaseDistiller = "distiller"
	leaseRollout   = "rollout"
)

// busModules are the modules that need the bus: the bus itself (the
// relay) and the workers that consume it.
func (a *App) busModules(order []string) []string {
	var out []string
	for _, m := range a.Modules() {
		if slices.Contains(order, m.Name) && (m.Name == "bus" || slices.Contains(m.Deps, "bus")) {
			out = append(out, m.Name)
		}
	}
	return out
}

// ErrInconsistentDeployment: the configuration runs part of citizen in
// this process with a store or bus that cannot be shared with the
// processes that run the rest. The message says what to use instead.
var ErrInconsistentDeployment = errors.New("deployment cannot be consistent")

// checkDeployment refuses a process that runs only some of citizen's
// roles (a split --target) where the other processes could never see its
// events:
//   - with store.backend=embedded while it runs the relay or a worker: the
//     log under data_dir is this process's own (another process can
//     neither open it nor see it). A gateway alone is accepted with a
//     warning: nothing else runs on its store meanwhile, and a later
//     process with every role on the same data_dir grades what it
//     recorded;
//   - with bus.backend=inprocess while this process runs the relay or a
//     worker: the in-process bus carries events only to this process's
//     workers, and only one process's relay (the elected one) publishes.
//
// store.backend=memory (a volatile store for tests) is exempt.
func (a *App) checkDeployment() error {
	cfg := a.Config
	order, err := modules.New(a.Log, a.Modules()...).Order(cfg.Target)
	if err != nil {
		return err
	}
	if modules.CoversAll(a.Modules(), order) {
		return nil // every role in this process
	}
	target := "--target=" + strings.Join(cfg.Target, ",")
	bm := a.busModules(order)
	switch cfg.Store.Backend {
	case "embedded":
		if len(bm) == 0 && a.Log != nil {
			a.Log.Warn("this process records interactions that nothing grades while it runs: store.backend=embedded serves one process; "+
				"a later `citizen serve` (every role) on this data_dir catches up", "target", strings.Join(cfg.Target, ","))
		}
		if len(bm) == 0 {
			// A gateway alone: nothing else can open this store while it
			// runs (the directory lock), and a later process with every
			// role on this data_dir grades what it recorded.
			return nil
		}
		return fmt.Errorf("%w: %s runs only part of citizen, but store.backend=embedded is a log only this process can open "+
			"(the processes running the other roles could never see its events): run every role in one process (--target=all), "+
			"or share one store between the processes: store.backend=postgres with the same store.pg_url in each (see deploy/compose.yaml)",
			ErrInconsistentDeployment, target)
	case "memory":
		return nil
	}
	if len(bm) > 0 && cfg.Bus.Backend == "inprocess" {
		return fmt.Errorf("%w: %s runs %s, but bus.backend=inprocess carries events only within one process "+
			"(the elected relay publishes to its own process alone): use bus.backend=kafka with bus.kafka_brokers in every process, "+
			"or run every role in one process (--target=all)",
			ErrInconsistentDeployment, target, strings.Join(bm, ", "))
	}
	return nil
}

// leaser returns the lease backend of the elected roles: the store's own
// when it offers one (PostgreSQL: every process on it competes), else a
// process-local one, which is right only when this process is the only
// one on its store: the embedded log guarantees that, other stores
// (esdb) cannot elect, so they run the elected roles only with every role
// in one process.
func (a *App) leaser() (events.Leaser, error) {
	if l, ok := a.Store.(events.Leaser); ok {
		return l, nil
	}
	if a.localLeaser == nil {
		switch a.Config.Store.Backend {
		case "embedded", "memory":
		default:
			order, err := modules.New(a.Log, a.Modules()...).Order(a.Config.Target)
			if err != nil {
				return nil, err
			}
			if !modules.CoversAll(a.Modules(), order) {
				return nil, fmt.Errorf("%w: store.backend=%s cannot elect the relay, the distiller and the rollout controller "+
					"(no lease across processes): run every role in one process (--target=all), or use store.backend=postgres",
					ErrInconsistentDeployment, a.Config.Store.Backend)
			}
		}
		a.localLeaser = &events.LocalLeaser{}
	}
	return a.localLeaser, nil
}

// elected runs svc only while this process holds lease name; the other
// processes wait and take over when the holder goes (events.RunLeased).
// svc's Run must be restartable; Stop and AllStarted pass through.
func (a *App) elected(name string, svc modules.Service) (modules.Service, error) {
	l, err := a.leaser()
	if err != nil {
		return nil, err
	}
	log := a.logger(name)
	return electedService{svc: svc, run: func(ctx context.Context) error {
		return events.RunLeased(ctx, l, name, log, svc.Run)
	}}, nil
}

type electedService struct {
	svc modules.Service
	run func(ctx context.Context) error
}

func (e electedService) Run(ctx context.Context) error { return e.run(ctx) }

func (e electedService) Stop(ctx context.Context) error {
	if s, ok := e.svc.(modules.Stopper); ok {
		return s.Stop(ctx)
	}
	return nil
}

func (e electedService) AllStarted() {
	if s, ok := e.svc.(modules.Starter); ok {
		s.AllStarted()
	}
}

// followStore hands the store's events of types after position after to
// handle, a bus handler whose derived events are none (a projection), in
// order until ctx is cancelled. A failing event is tried three times and
// then skipped with a warning, as the bus would set it aside.
func followStore(ctx context.Context, st events.Store, after uint64, types []string,
	handle func(context.Context, events.Event) ([]events.Event, error), log *slog.Logger) error {
	err := st.Subscribe(ctx, after, events.Filter{Types: types}, func(ctx context.Context, ev events.Event) error {
		wait := 100 * time.Millisecond
		for attempt := 1; ; attempt++ {
			_, err := handle(ctx, ev)
			if err == nil || ctx.Err() != nil {
				return nil
			}
			if attempt == 3 {
				log.Warn("event skipped", "position", ev.Position, "type", ev.Type, "err", err)
				return nil
			}
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return nil
			}
			wait *= 4
		}
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}
