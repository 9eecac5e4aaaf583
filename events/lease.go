package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
)

// Leaser grants named leases: at most one holder of a name at a time
// among everyone who shares the Leaser's backend (every process on one
// PostgreSQL store, or one process for LocalLeaser). The roles that must
// run once in a deployment (the relay, the distiller, the rollout
// controller) run only while they hold their lease; see RunLeased and
// docs/adr/0011-election-and-roles.md.
type Leaser interface {
	// Acquire blocks until the lease named name is held and returns it,
	// or returns ctx.Err() once ctx ends (or ErrClosed when the backend
	// was closed). Transient failures of the backend are retried, not
	// returned.
	Acquire(ctx context.Context, name string) (Lease, error)
}

// Lease is a held lease. Safe for concurrent use.
type Lease interface {
	// Lost is closed once the lease is no longer held: released, or lost
	// with the backend (a PostgreSQL lease is lost when its connection
	// is). A holder must stop the leased work when Lost is closed; until
	// it notices, another holder may already run (for at most about the
	// backend's check interval), which is why leased work must be safe
	// to run at least once, not exactly once.
	Lost() <-chan struct{}
	// Release gives the lease up (another Acquire may then succeed) and
	// closes Lost. Calling it again does nothing.
	Release(ctx context.Context) error
}

// LocalLeaser is a Leaser within one process, for stores that only one
// process opens (the embedded log, the memory store). The zero value is
// ready to use.
type LocalLeaser struct {
	mu   sync.Mutex
	held map[string]*localLease
}

// Acquire implements Leaser.
func (l *LocalLeaser) Acquire(ctx context.Context, name string) (Lease, error) {
	if name == "" {
		return nil, errors.New("events: lease needs a name")
	}
	for {
		l.mu.Lock()
		cur := l.held[name]
		if cur == nil {
			if l.held == nil {
				l.held = map[string]*localLease{}
			}
			ls := &localLease{owner: l, name: name, lost: make(chan struct{})}
			l.held[name] = ls
			l.mu.Unlock()
			return ls, nil
		}
		l.mu.Unlock()
		select {
		case <-cur.lost:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

type localLease struct {
	owner *LocalLeaser
	name  string
	once  sync.Once
	lost  chan struct{}
}

func (ls *localLease) Lost() <-chan struct{} { return ls.lost }

func (ls *localLease) Release(context.Context) error {
	ls.once.Do(func() {
		ls.owner.mu.Lock()
		if ls.owner.held[ls.name] == ls {
			delete(ls.owner.held, ls.name)
		}
		ls.owner.mu.Unlock()
		close(ls.lost)
	})
	return nil
}

// RunLeased runs run only while it holds the lease name: it acquires the
// lease, runs run with a context that is cancelled when the lease is
// lost, and when that happens waits for run to return and competes for
// the lease again. It returns nil once ctx is cancelled (releasing the
// lease after run has returned), run's result when run returns while
// ctx is live and the lease is held (releasing the lease), or the
// Leaser's error. run must therefore be restartable: each tenure calls
// it afresh. logger may be nil.
func RunLeased(ctx context.Context, l Leaser, name string, logger *slog.Logger, run func(ctx context.Context) error) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("lease", name)
	for {
		logger.Debug("waiting for the lease")
		lease, err := l.Acquire(ctx, name)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("events: acquiring lease %s: %w", name, err)
		}
		logger.Info("lease acquired; running")
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- run(rctx) }()
		select {
		case err = <-done:
			cancel()
			rerr := lease.Release(context.WithoutCancel(ctx))
			if ctx.Err() != nil {
				return nil
			}
			if err == nil {
				err = errors.New("returned while holding its lease")
			}
			return errors.Join(err, rerr)
		case <-lease.Lost():
			cancel()
			<-done
			if ctx.Err() != nil {
				return nil
			}
			logger.Warn("lease lost; stopped until it is held again")
		case <-ctx.Done():
			cancel()
			<-done
			_ = lease.Release(context.WithoutCancel(ctx))
			return nil
		}
	}
}
