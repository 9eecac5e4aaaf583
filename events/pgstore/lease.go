package pgstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"citizen/events"

	"github.com/jackc/pgx/v5"
)

// Leases are PostgreSQL session advisory locks, each on a connection of
// its own outside the pool: the server releases a session lock when its
// session ends, so a holder that dies (kill -9, a lost machine) loses its
// lease as soon as the server sees its connection close (at once for a
// dead process; through TCP keepalives, set on the lease connection, for
// a lost network). The lock key is derived from the schema and the lease
// name, so stores with different schemas elect independently.
// docs/adr/0011-election-and-roles.md has the reasons.

var _ events.Leaser = (*Store)(nil)

// leaseKey is the advisory lock key of lease name in schema.
func leaseKey(schema, name string) int64 {
	h := fnv.New64a()
	h.Write([]byte("citizen\x00" + schema + "\x00" + name))
	return int64(h.Sum64())
}

// leaseAppPrefix starts the application_name of every lease connection:
// "citizen-lease <name> <host>:<pid>" (PostgreSQL keeps 63 bytes).
const leaseAppPrefix = "citizen-lease "

// Holder names this process in LeaseHolder's answer: "host:pid".
func Holder() string {
	host, _ := os.Hostname()
	return host + ":" + strconv.Itoa(os.Getpid())
}

// Acquire implements events.Leaser: it waits until it holds the advisory
// lock of name (trying every Config.LeaseInterval) on a new connection.
// A server that cannot be reached is retried (and logged), not returned;
// it returns ctx.Err() once ctx ends and events.ErrClosed after Close.
// The lease's connection is checked every LeaseInterval; when a check
// fails (for longer than five intervals, or the connection is gone) the
// lease is lost.
func (s *Store) Acquire(ctx context.Context, name string) (events.Lease, error) {
	if name == "" {
		return nil, errors.New("events: pgstore: lease needs a name")
	}
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	s.end()
	key := leaseKey(s.cfg.Schema, name)
	ccfg := s.lcfg.Copy()
	rp := ccfg.RuntimeParams
	rp["application_name"] = truncate(leaseAppPrefix+name+" "+Holder(), 63)
	// the server notices a holder lost on the network within about 11 s
	rp["tcp_keepalives_idle"], rp["tcp_keepalives_interval"], rp["tcp_keepalives_count"] = "5", "2", "3"
	log := s.log.With("lease", name)
	var conn *pgx.Conn
	closeConn := func() {
		if conn != nil {
			conn.Close(context.Background())
			conn = nil
		}
	}
	down := false
	for {
		select {
		case <-s.done:
			closeConn()
			return nil, events.ErrClosed
		default:
		}
		var err error
		if conn == nil {
			conn, err = pgx.ConnectConfig(ctx, ccfg)
			if err != nil {
				conn = nil
			}
		}
		if err == nil {
			var ok bool
			err = conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&ok)
			if err == nil && ok {
				if down {
					log.Info("pgstore: lease candidate reconnected")
				}
				return s.newLease(conn, key), nil
			}
			if err != nil {
				closeConn()
			}
		}
		if ctx.Err() != nil {
			closeConn()
			return nil, ctx.Err()
		}
		if err != nil && !down {
			log.Warn("pgstore: lease candidate cannot reach the server; retrying", "err", err)
			down = true
		}
		select {
		case <-time.After(s.cfg.LeaseInterval):
		case <-ctx.Done():
			closeConn()
			return nil, ctx.Err()
		case <-s.done:
			closeConn()
			return nil, events.ErrClosed
		}
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

type pgLease struct {
	s      *Store
	conn   *pgx.Conn
	key    int64
	lost   chan struct{}
	once   sync.Once
	stop   chan struct{}
	exited chan struct{}
}

func (s *Store) newLease(conn *pgx.Conn, key int64) *pgLease {
	l := &pgLease{s: s, conn: conn, key: key, lost: make(chan struct{}), stop: make(chan struct{}), exited: make(chan struct{})}
	go l.watch()
	return l
}

// watch checks the connection every LeaseInterval until the lease is
// released or the connection fails; it owns the connection and closes
// it on exit (which releases the lock on the server).
func (l *pgLease) watch() {
	defer close(l.exited)
	defer l.conn.Close(context.Background())
	defer l.markLost()
	iv := l.s.cfg.LeaseInterval
	t := time.NewTicker(iv)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-l.s.done:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*iv)
		var held bool
		err := l.conn.QueryRow(ctx,
			"SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted AND objsubid = 1 AND classid = $1 AND objid = $2)",
			uint32(uint64(l.key)>>32), uint32(uint64(l.key))).Scan(&held)
		cancel()
		if err != nil || !held {
			l.s.log.Warn("pgstore: lease lost", "key", l.key, "err", err, "held", held)
			return
		}
	}
}

func (l *pgLease) markLost() { l.once.Do(func() { close(l.lost) }) }

func (l *pgLease) Lost() <-chan struct{} { return l.lost }

// Release ends the lease's session (releasing the lock) and returns once
// its connection is closed.
func (l *pgLease) Release(ctx context.Context) error {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	select {
	case <-l.exited:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// LeaseHolder reports who holds lease name on this store's schema: the
// holder's "host:pid" (Holder) as its connection names it, and whether
// anyone holds it. It reads the server's lock table, so it sees holders
// in every process.
func (s *Store) LeaseHolder(ctx context.Context, name string) (string, bool, error) {
	if err := s.begin(ctx); err != nil {
		return "", false, err
	}
	defer s.end()
	key := leaseKey(s.cfg.Schema, name)
	var app string
	err := s.pool.QueryRow(ctx,
		"SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "+
			"WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND l.classid = $1 AND l.objid = $2 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
		uint32(uint64(key)>>32), uint32(uint64(key))).Scan(&app)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, s.dbErr(ctx, "reading lease holder", err)
	}
	holder := strings.TrimPrefix(app, leaseAppPrefix+name+" ")
	if holder == app {
		return "", true, fmt.Errorf("events: pgstore: lease %s is held by an unexpected session %q", name, app)
	}
	return holder, true, nil
}
