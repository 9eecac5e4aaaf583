// Package modules runs a process's components in the manner of Loki's
// and Mimir's module manager: each module names its dependencies, Init
// builds it once they are built, the targets select which run, and a
// failure or a signal stops them all in reverse dependency order, each
// drained before its dependencies close.
package modules

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"time"
)

// Service is a running component. Run blocks until ctx is cancelled (then
// it drains and returns nil) or the component fails (it returns the error).
// A Run that returns nil while its context is still live counts as a
// failure: components run until told to stop.
type Service interface {
	Run(ctx context.Context) error
}

// Stopper is implemented by services that release resources after Run has
// returned (a store closes its files). Stop is called in reverse
// dependency order, so a component's dependencies are still open while it
// drains.
type Stopper interface {
	Stop(ctx context.Context) error
}

// Starter is implemented by services that must wait until every module of
// the target is initialised before doing their work: the relay, so that
// every worker's consumer group exists before the first event is
// published. Manager.Run calls AllStarted once, after the last Init.
type Starter interface {
	AllStarted()
}

// Module is a named component with dependencies, in the manner of Loki's
// modules: Init builds it once its dependencies are initialised.
type Module struct {
	Name string
	Deps []string
	// Init builds the component. It may return a nil Service for modules
	// that only provide state to others.
	Init func(ctx context.Context) (Service, error)
	// NotInAll leaves the module out of target "all": it runs only when
	// named (the inference server, a tier of its own).
	NotInAll bool
}

// CoversAll reports whether order holds every module of mods that target
// "all" selects.
func CoversAll(mods []Module, order []string) bool {
	for _, m := range mods {
		if !m.NotInAll && !slices.Contains(order, m.Name) {
			return false
		}
	}
	return true
}

// Manager initialises, runs and stops a set of modules.
type Manager struct {
	modules map[string]Module
	log     *slog.Logger
}

// New returns a manager for the given modules.
func New(log *slog.Logger, mods ...Module) *Manager {
	m := &Manager{modules: map[string]Module{}, log: log}
	for _, mod := range mods {
		m.modules[mod.Name] = mod
	}
	return m
}

// Order returns the modules needed for targets (with their transitive
// dependencies) in dependency order. "all" selects every module but those
// marked NotInAll.
func (m *Manager) Order(targets []string) ([]string, error) {
	want := map[string]bool{}
	var visit func(name string, path []string) error
	var order []string
	state := map[string]int{} // 1 visiting, 2 done
	visit = func(name string, path []string) error {
		mod, ok := m.modules[name]
		if !ok {
			return fmt.Errorf("modules: unknown module %q", name)
		}
		switch state[name] {
		case 1:
			return fmt.Errorf("modules: dependency cycle: %v", append(path, name))
		case 2:
			return nil
		}
		state[name] = 1
		deps := append([]string(nil), mod.Deps...)
		sort.Strings(deps)
		for _, d := range deps {
			if err := visit(d, append(path, name)); err != nil {
				return err
			}
		}
		state[name] = 2
		order = append(order, name)
		return nil
	}
	for _, t := range targets {
		if t == "all" {
			for name, mod := range m.modules {
				if !mod.NotInAll {
					want[name] = true
				}
			}
			continue
		}
		want[t] = true
	}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := visit(n, nil); err != nil {
			return nil, err
		}
	}
	return order, nil
}

type running struct {
	name   string
	svc    Service
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// Run initialises the targets' modules in dependency order, runs them, and
// when ctx is cancelled or any module fails, stops them all in reverse
// order: each module's context is cancelled and its Run awaited (bounded
// by shutdownTimeout) before its dependencies are stopped. It returns the
// first failure, or nil after a clean stop.
func (m *Manager) Run(ctx context.Context, targets []string, shutdownTimeout time.Duration) error {
	order, err := m.Order(targets)
	if err != nil {
		return err
	}
	var (
		started []*running
		failed  = make(chan *running, len(order))
	)
	stopAll := func() error {
		var errs []error
		for i := len(started) - 1; i >= 0; i-- {
			r := started[i]
			r.cancel()
			if r.done != nil {
				select {
				case <-r.done:
				case <-time.After(shutdownTimeout):
					errs = append(errs, fmt.Errorf("modules: %s did not stop within %s", r.name, shutdownTimeout))
				}
			}
			if s, ok := r.svc.(Stopper); ok {
				sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
				if err := s.Stop(sctx); err != nil {
					errs = append(errs, fmt.Errorf("modules: stopping %s: %w", r.name, err))
				}
				cancel()
			}
			m.log.Debug("module stopped", "module", r.name)
		}
		return errors.Join(errs...)
	}
	for _, name := range order {
		svc, err := m.modules[name].Init(ctx)
		if err != nil {
			return errors.Join(fmt.Errorf("modules: init %s: %w", name, err), stopAll())
		}
		mctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		r := &running{name: name, svc: svc, cancel: cancel}
		started = append(started, r)
		if svc == nil {
			continue
		}
		r.done = make(chan struct{})
		go func() {
			defer close(r.done)
			err := svc.Run(mctx)
			if err == nil && mctx.Err() == nil {
				err = errors.New("returned before it was stopped")
			}
			if mctx.Err() == nil {
				r.err = err
				failed <- r
			}
		}()
		m.log.Debug("module started", "module", name)
	}
	for _, r := range started {
		if s, ok := r.svc.(Starter); ok {
			s.AllStarted()
		}
	}
	var first error
	select {
	case <-ctx.Done():
		m.log.Info("shutting down", "reason", context.Cause(ctx))
	case r := <-failed:
		first = fmt.Errorf("modules: %s failed: %w", r.name, r.err)
		m.log.Error("module failed; stopping the rest", "module", r.name, "err", r.err)
	}
	return errors.Join(first, stopAll())
}

// Func adapts a function to Service.
type Func func(ctx context.Context) error

// Run calls f.
func (f Func) Run(ctx context.Context) error { return f(ctx) }

// Closer is a Service that runs until cancelled and then closes a
// resource (a store's files).
func Closer(close func() error) Service { return closer{close} }

type closer struct{ close func() error }

func (c closer) Run(ctx context.Context) error  { <-ctx.Done(); return nil }
func (c closer) Stop(ctx context.Context) error { return c.close() }

// WithStop is a Service whose Run is run and whose Stop is stop.
func WithStop(run, stop func(ctx context.Context) error) Service { return startStop{run, stop} }

type startStop struct {
	run  func(ctx context.Context) error
	stop func(ctx context.Context) error
}

func (s startStop) Run(ctx context.Context) error  { return s.run(ctx) }
func (s startStop) Stop(ctx context.Context) error { return s.stop(ctx) }
