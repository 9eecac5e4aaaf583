package pgstore

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrations are the schema's versions in order; migrations[i] takes the
// schema from version i to i+1. Applied ones are recorded in
// schema_migrations and never edited: a change is a new entry. "{s}" is
// the quoted schema name.
var migrations = []struct {
	description string
	sql         string
}{
	{"events, head, checkpoints", `
CREATE TABLE {s}.events (
	position       bigint PRIMARY KEY,
	stream         text COLLATE "C" NOT NULL,
	revision       bigint NOT NULL,
	id             uuid NOT NULL,
	type           text COLLATE "C" NOT NULL,
	tenant         text NOT NULL,
	time           timestamptz NOT NULL,
	time_ns        integer NOT NULL CHECK (time_ns BETWEEN 0 AND 999),
	schema         bigint NOT NULL,
	correlation_id text NOT NULL,
	causation_id   text NOT NULL,
	data           bytea NOT NULL,
	CONSTRAINT events_id_key UNIQUE (id),
	CONSTRAINT events_stream_revision_key UNIQUE (stream, revision),
	CHECK (position > 0 AND revision >= 0)
);
COMMENT ON TABLE {s}.events IS 'citizen event store (events/pgstore): append-only; position is gapless in commit order, assigned under the head row lock';
COMMENT ON COLUMN {s}.events.time_ns IS 'nanoseconds within the microsecond of time (timestamptz keeps microseconds)';
COMMENT ON COLUMN {s}.events.data IS 'the event''s JSON data, byte for byte as appended';
CREATE TABLE {s}.head (
	id       integer PRIMARY KEY CHECK (id = 1),
	position bigint NOT NULL
);
COMMENT ON TABLE {s}.head IS 'the last committed position; every append transaction locks this row first';
INSERT INTO {s}.head (id, position) VALUES (1, 0);
CREATE TABLE {s}.checkpoints (
	name       text PRIMARY KEY,
	position   numeric(20, 0) NOT NULL CHECK (position >= 0 AND position <= 18446744073709551615),
	updated_at timestamptz NOT NULL DEFAULT now()
);
`},
}

// migrate brings the schema to the latest version. It runs in one
// transaction under an advisory lock keyed by the schema name, so
// concurrent Opens of one schema apply each migration once; a schema
// newer than this build is refused.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string) (err error) {
	q := pgx.Identifier{schema}.Sanitize()
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // the first error is the one to report
		}
	}()
	h := fnv.New64a()
	h.Write([]byte("citizen/events/pgstore:" + schema))
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(h.Sum64())); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+q); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+q+`.schema_migrations (
	version     integer PRIMARY KEY,
	description text NOT NULL,
	applied_at  timestamptz NOT NULL DEFAULT now()
)`); err != nil {
		return err
	}
	var version int
	if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+q+".schema_migrations").Scan(&version); err != nil {
		return err
	}
	if version > len(migrations) {
		return fmt.Errorf("schema %s is at version %d, newer than this build (%d)", schema, version, len(migrations))
	}
	for v := version; v < len(migrations); v++ {
		m := migrations[v]
		if _, err := tx.Exec(ctx, strings.ReplaceAll(m.sql, "{s}", q)); err != nil {
			return fmt.Errorf("migration %d (%s): %w", v+1, m.description, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+q+".schema_migrations (version, description) VALUES ($1, $2)", v+1, m.description); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}
