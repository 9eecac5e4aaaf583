package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

const urlEnv = "CITIZEN_PG_URL"

var quiet = slog.New(slog.DiscardHandler)

// serverURL returns the test server's URL, or skips t when none is set.
func serverURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv(urlEnv)
	if url == "" {
		t.Skip(urlEnv + " is not set: these tests need a PostgreSQL server. To run them: " +
			"export " + urlEnv + "=$(events/pgstore/testdata/start-postgres.sh) && go test ./events/pgstore " +
			"(the script starts a local PostgreSQL 11+ server; stop it with start-postgres.sh stop)")
	}
	return url
}

// newSchema returns a fresh schema name and drops the schema when t ends
// (after the stores opened later, whose cleanups run first).
func newSchema(t testing.TB, url string) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	schema := "t_" + hex.EncodeToString(b[:])
	t.Cleanup(func() { dropSchema(t, url, schema) })
	return schema
}

func dropSchema(t testing.TB, url, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Logf("dropping schema %s: %v", schema, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		t.Logf("dropping schema %s: %v", schema, err)
	}
}

// openT opens a store on cfg (Logger quiet unless set) and closes it when
// t ends.
func openT(t testing.TB, cfg Config) *Store {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// sqlConn is a plain connection for inspecting or tampering with a schema.
func sqlConn(t testing.TB, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}
