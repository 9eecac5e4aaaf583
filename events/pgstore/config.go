package pgstore

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"citizen/events"
)

// Config configures Open. The zero value of every field but URL is a
// usable default.
type Config struct {
	// URL is a PostgreSQL connection string (URL or key=value form), e.g.
	// "postgres://citizen@127.0.0.1:5432/citizen?sslmode=disable".
	// Required.
	URL string
	// Schema is the PostgreSQL schema that holds the store's tables,
	// created on Open if missing (default "citizen"). Lowercase letters,
	// digits and '_', starting with a letter or '_', at most 48 bytes.
	// Stores with different schemas in one database are independent.
	Schema string
	// Check validates appends; its zero value checks types strictly
	// against events.Types.
	Check events.AppendCheck
	// SynchronousCommit is the synchronous_commit setting of the store's
	// sessions (default "on": an Append returns only once its commit
	// record is flushed to the server's WAL, so it survives a crash of
	// PostgreSQL or of its machine). "off" acknowledges an Append before
	// that flush: a crash of the server (not of this process) can then
	// lose the appends of about the last 3 × wal_writer_delay (600 ms by
	// default) that were already acknowledged and possibly read by
	// subscribers; positions stay gapless and in commit order. "local",
	// "remote_write" and "remote_apply" choose how synchronous replicas
	// take part (PostgreSQL's documentation of synchronous_commit).
	SynchronousCommit string
	// MaxConns bounds the connection pool (default 8). The committer
	// holds one connection at a time; reads and subscriptions borrow one
	// per query; one more, outside the pool, listens for notifications.
	MaxConns int32
	// MaxGroup bounds how many Append calls one transaction commits
	// (default 1024).
	MaxGroup int
	// PollInterval is how often a caught-up subscriber reads the store
	// even without a notification (default 1 s): a missed notification
	// delays delivery by at most this much.
	PollInterval time.Duration
	// ReadBatch is the number of events a subscriber reads per query
	// (default 512).
	ReadBatch int
	// RetryTimeout is how long an Append whose transaction failed on a
	// lost connection or an unavailable server keeps retrying on fresh
	// connections before it fails with ErrUnavailable (default 5 s;
	// negative: no retry). Retrying is safe even when the failed commit
	// may have succeeded: the events' ids make the retry idempotent.
	RetryTimeout time.Duration
	// LeaseInterval is how often a lease holder checks its connection and
	// a candidate tries to take a held lease (default 1 s): a holder whose
	// process dies loses its lease at once (the server ends its session),
	// and a candidate takes it within about this long. A holder cut off
	// from the server notices within about two intervals.
	LeaseInterval time.Duration
	// Logger reports lost connections and recoveries (default
	// slog.Default()).
	Logger *slog.Logger
}

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,47}$`)

// Validate reports the first invalid field of c (after defaults).
func (c Config) Validate() error {
	c.setDefaults()
	switch {
	case c.URL == "":
		return errors.New("events: pgstore: Config.URL is empty")
	case !schemaName.MatchString(c.Schema) || len(c.Schema) >= 3 && c.Schema[:3] == "pg_":
		return fmt.Errorf("events: pgstore: schema %q: want 1-48 of a-z, 0-9 and '_', not starting with a digit or pg_", c.Schema)
	case c.MaxConns < 2:
		return fmt.Errorf("events: pgstore: MaxConns %d: need at least 2", c.MaxConns)
	case c.MaxGroup < 1 || c.ReadBatch < 1 || c.PollInterval <= 0 || c.LeaseInterval <= 0:
		return errors.New("events: pgstore: MaxGroup, ReadBatch, PollInterval and LeaseInterval must be positive")
	}
	switch c.SynchronousCommit {
	case "on", "off", "local", "remote_write", "remote_apply":
	default:
		return fmt.Errorf("events: pgstore: SynchronousCommit %q: want on, off, local, remote_write or remote_apply", c.SynchronousCommit)
	}
	return nil
}

func (c *Config) setDefaults() {
	if c.Schema == "" {
		c.Schema = "citizen"
	}
	if c.SynchronousCommit == "" {
		c.SynchronousCommit = "on"
	}
	if c.MaxConns == 0 {
		c.MaxConns = 8
	}
	if c.MaxGroup == 0 {
		c.MaxGroup = 1024
	}
	if c.PollInterval == 0 {
		c.PollInterval = time.Second
	}
	if c.ReadBatch == 0 {
		c.ReadBatch = 512
	}
	if c.LeaseInterval == 0 {
		c.LeaseInterval = time.Second
	}
	if c.RetryTimeout == 0 {
		c.RetryTimeout = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}
