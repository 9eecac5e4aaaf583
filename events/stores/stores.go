// Package stores opens the event store a citizen process is configured
// with (the embedded log, PostgreSQL, EventStoreDB, or memory for tests),
// with its settings (`store.*`) and their validation.
package stores

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"citizen/events"
	"citizen/events/esdb"
	"citizen/events/eventlog"
	"citizen/events/memstore"
	"citizen/events/pgstore"
)

// Config selects the event store backend.
type Config struct {
	Backend string `yaml:"backend" help:"embedded (a durable log under data_dir, one process), postgres (shared by every process) or esdb"`
	ESDBURL string `yaml:"esdb_url" secret:"url" help:"EventStoreDB connection string (backend esdb)"`
	PGURL   string `yaml:"pg_url" secret:"url" help:"PostgreSQL connection URL, e.g. postgres://user@host:5432/citizen (backend postgres)"`
	// PGSchema: see pgstore.Config.Schema.
	PGSchema string `yaml:"pg_schema" help:"PostgreSQL schema holding citizen's tables (backend postgres)"`
	Strict   bool   `yaml:"strict" help:"decode every payload on append (default: validate the envelope; consumers decode strictly)"`
	// ZeroFill: see eventlog.Config.ZeroFill.
	ZeroFill bool `yaml:"zero_fill" help:"keep the embedded log's space ahead zero-filled (cheaper fsyncs, twice the bytes written; off: faster on 2 cores)"`
}

// DefaultConfig is the embedded log.
func DefaultConfig() Config { return Config{Backend: "embedded", PGSchema: "citizen"} }

// Validate reports every invalid setting.
func (c Config) Validate() error {
	switch c.Backend {
	case "embedded", "memory":
	case "esdb":
		if c.ESDBURL == "" {
			return errors.New("store.esdb_url is required with store.backend=esdb")
		}
	case "postgres":
		if c.PGURL == "" {
			return errors.New("store.pg_url is required with store.backend=postgres")
		}
	default:
		return fmt.Errorf("store.backend %q: want embedded, postgres, memory or esdb", c.Backend)
	}
	return nil
}

// EmbeddedDir is where the embedded log of data directory dataDir lives.
func EmbeddedDir(dataDir string) string { return filepath.Join(dataDir, "events") }

// Open opens the configured store; the embedded log lives under dataDir.
func Open(c Config, dataDir string, log *slog.Logger) (events.Store, error) {
	// Envelope-level validation (valid JSON data, known type, sizes,
	// stream, ids) unless strict: every producer encodes typed payloads
	// with events.Encode and every consumer decodes them strictly, so
	// re-decoding each payload on append would only cost CPU: it halves
	// durable appends per second on 2 cores.
	check := events.AppendCheck{Lax: !c.Strict}
	switch c.Backend {
	case "memory":
		return memstore.New(memstore.Config{Check: check}), nil
	case "embedded":
		st, err := eventlog.Open(eventlog.Config{Dir: EmbeddedDir(dataDir), Logger: log, Check: check, ZeroFill: c.ZeroFill})
		if errors.Is(err, eventlog.ErrLocked) {
			return nil, fmt.Errorf("%w: another citizen process has data_dir %s open; store.backend=embedded serves one process. "+
				"Stop the other process, give this one its own data_dir, or run several processes on one shared store: "+
				"store.backend=postgres with store.pg_url (and bus.backend=kafka)", err, dataDir)
		}
		return st, err
	case "esdb":
		return esdb.Open(esdb.Config{URL: c.ESDBURL, Check: check})
	case "postgres":
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return pgstore.Open(ctx, pgstore.Config{URL: c.PGURL, Schema: c.PGSchema, Check: check, Logger: log})
	default:
		return nil, fmt.Errorf("store: backend %q is not available in this build", c.Backend)
	}
}
