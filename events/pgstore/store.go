package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"citizen/events"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrUnavailable: the server could not be reached or the connection was
// lost, and retrying for Config.RetryTimeout did not help. It wraps the
// driver's error. For an Append the outcome is unknown (the commit may
// have happened); retrying with the same event ids is safe.
var ErrUnavailable = errors.New("events: pgstore: server unavailable")

// Stats are counters since Open.
type Stats struct {
	// Appends is the number of Append calls acknowledged (idempotent
	// retries included); Events the events this Store wrote; Groups the
	// transactions that committed them; Retries the group transactions
	// tried again after a lost connection.
	Appends, Events, Groups, Retries uint64
}

// Store is an events.Store on PostgreSQL. Safe for concurrent use, also
// by several processes (or Stores) sharing one schema: positions are
// assigned under a row lock that every append transaction takes first.
type Store struct {
	cfg    Config
	log    *slog.Logger
	pool   *pgxpool.Pool
	lcfg   *pgx.ConnConfig // the listener's connection
	sql    statements
	notify string // NOTIFY channel of the schema

	gatherWait time.Duration // maxGatherWait at Open

	// closeMu orders Close against calls in flight: calls hold it shared
	// while they query or submit requests.
	closeMu sync.RWMutex
	closed  bool
	reqs    chan *request
	cdone   chan struct{} // the committer has exited
	done    chan struct{} // closed by Close, for subscribers
	stopCtx context.Context
	stop    context.CancelFunc // ends the listener and subscribers' queries
	ldone   chan struct{}      // the listener has exited

	wakeMu sync.Mutex
	wake   chan struct{} // closed and replaced on every commit or notification

	stats struct {
		appends, events, groups, retries atomic.Uint64
	}
}

var _ events.Store = (*Store)(nil)

// Open connects to cfg.URL, checks the server (PostgreSQL 11 or later,
// UTF8 encoding), creates or migrates the schema and starts the committer
// and the notification listener. It fails if the server cannot be reached
// within ctx (wrapping ErrUnavailable) or the configuration or schema is
// invalid. Close releases what Open started.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("events: pgstore: bad URL: %w", err)
	}
	pcfg.MaxConns = cfg.MaxConns
	rp := pcfg.ConnConfig.RuntimeParams
	rp["synchronous_commit"] = cfg.SynchronousCommit
	if rp["application_name"] == "" {
		rp["application_name"] = "citizen-pgstore"
	}
	// A transaction left open by a stalled client would hold the head
	// lock and stop every writer; the server ends it after this long.
	rp["idle_in_transaction_session_timeout"] = "30s"
	if pcfg.ConnConfig.ConnectTimeout == 0 {
		pcfg.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("events: pgstore: %w", err)
	}
	where := fmt.Sprintf("%s:%d/%s", pcfg.ConnConfig.Host, pcfg.ConnConfig.Port, pcfg.ConnConfig.Database)
	if err := checkServer(ctx, pool); err != nil {
		pool.Close()
		if _, ok := errors.AsType[*pgconn.PgError](err); ok || errors.Is(err, errBadServer) {
			return nil, fmt.Errorf("events: pgstore: %s: %w", where, err)
		}
		return nil, fmt.Errorf("%w: connecting to %s: %w", ErrUnavailable, where, err)
	}
	if err := migrate(ctx, pool, cfg.Schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("events: pgstore: schema %s at %s: %w", cfg.Schema, where, err)
	}
	s := &Store{
		cfg: cfg, log: cfg.Logger.With("component", "pgstore", "schema", cfg.Schema), pool: pool,
		lcfg: pcfg.ConnConfig.Copy(), sql: newStatements(cfg.Schema), notify: "citizen_events_" + cfg.Schema,
		reqs:  make(chan *request, cfg.MaxGroup),
		cdone: make(chan struct{}), done: make(chan struct{}), ldone: make(chan struct{}),
		wake: make(chan struct{}), gatherWait: maxGatherWait,
	}
	s.stopCtx, s.stop = context.WithCancel(context.Background())
	go s.committer()
	go s.listen()
	return s, nil
}

var errBadServer = errors.New("unsupported server")

func checkServer(ctx context.Context, pool *pgxpool.Pool) error {
	var version int
	var encoding string
	if err := pool.QueryRow(ctx, "SELECT current_setting('server_version_num')::int, current_setting('server_encoding')").
		Scan(&version, &encoding); err != nil {
		return err
	}
	if version < 110000 {
		return fmt.Errorf("%w: PostgreSQL %d (need 11 or later)", errBadServer, version)
	}
	if encoding != "UTF8" {
		return fmt.Errorf("%w: database encoding %s (need UTF8)", errBadServer, encoding)
	}
	return nil
}

// Stats returns the counters since Open.
func (s *Store) Stats() Stats {
	return Stats{Appends: s.stats.appends.Load(), Events: s.stats.events.Load(),
		Groups: s.stats.groups.Load(), Retries: s.stats.retries.Load()}
}

// begin admits a call: ErrClosed after Close. end must follow.
func (s *Store) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return events.ErrClosed
	}
	return nil
}

func (s *Store) end() { s.closeMu.RUnlock() }

// Close implements events.Store: appends already submitted are committed
// (or fail), subscribers return ErrClosed, the connections are closed.
func (s *Store) Close() error {
	s.closeMu.Lock()
	if s.closed {
		s.closeMu.Unlock()
		return events.ErrClosed
	}
	s.closed = true
	close(s.reqs)
	s.closeMu.Unlock()
	<-s.cdone
	close(s.done)
	s.stop()
	<-s.ldone
	s.pool.Close() // waits for subscribers' queries to give their connections back
	return nil
}

// wakeChan returns the channel that the next commit or notification
// closes.
func (s *Store) wakeChan() chan struct{} {
	s.wakeMu.Lock()
	defer s.wakeMu.Unlock()
	return s.wake
}

// broadcast wakes every waiting subscriber.
func (s *Store) broadcast() {
	s.wakeMu.Lock()
	close(s.wake)
	s.wake = make(chan struct{})
	s.wakeMu.Unlock()
}

// listen holds a connection outside the pool that LISTENs on the schema's
// channel and wakes subscribers on every notification, reconnecting with
// backoff when the connection is lost (and waking everyone then, since
// notifications may have been missed meanwhile).
func (s *Store) listen() {
	defer close(s.ldone)
	ctx := s.stopCtx
	backoff, down := 100*time.Millisecond, false
	for ctx.Err() == nil {
		conn, err := pgx.ConnectConfig(ctx, s.lcfg)
		if err == nil {
			if _, err = conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.notify}.Sanitize()); err != nil {
				conn.Close(context.Background())
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !down {
				s.log.Warn("pgstore: notification listener cannot connect; subscribers poll meanwhile", "err", err)
				down = true
			}
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		if down {
			s.log.Info("pgstore: notification listener reconnected")
			down = false
		}
		backoff = 100 * time.Millisecond
		s.broadcast()
		for {
			if _, err = conn.WaitForNotification(ctx); err != nil {
				break
			}
			s.broadcast()
		}
		conn.Close(context.Background())
		if ctx.Err() == nil {
			s.log.Warn("pgstore: notification listener lost its connection", "err", err)
			down = true
			s.broadcast()
		}
	}
}

// transient reports whether err is a lost or refused connection or a
// server that is shutting down or starting up: worth retrying on a new
// connection.
func transient(err error) bool {
	if err == nil {
		return false
	}
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch {
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03", // admin/crash shutdown, cannot connect now
			pe.Code == "53300",                     // too many connections
			pe.Code == "40001", pe.Code == "40P01": // serialization failure, deadlock
			return true
		}
		return false
	}
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return true
	}
	if _, ok := errors.AsType[net.Error](err); ok {
		return true
	}
	return pgconn.Timeout(err) || pgconn.SafeToRetry(err) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}

// dbErr wraps a failed query's error: ctx's error once ctx is done,
// ErrClosed once the store is closing, ErrUnavailable for a lost
// connection, else the driver's error.
func (s *Store) dbErr(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	select {
	case <-s.done:
		return events.ErrClosed
	default:
	}
	if transient(err) {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
	}
	return fmt.Errorf("events: pgstore: %s: %w", op, err)
}
