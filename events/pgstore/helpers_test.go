package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
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

// cluster is a private PostgreSQL server (its own data directory and
// port), started with testdata/start-postgres.sh, for the tests that stop
// or crash the server. They share one (each in its own schema); TestMain
// destroys it.
type cluster struct {
	work, url string
}

var (
	privOnce sync.Once
	priv     *cluster
	privErr  error
)

// privateCluster returns the private server, starting it on first use.
// It needs what the shared server needs (CITIZEN_PG_URL set shows the
// machine can run one) and is skipped under -short.
func privateCluster(t *testing.T) *cluster {
	t.Helper()
	serverURL(t)
	if testing.Short() {
		t.Skip("-short: skipping a test that starts its own PostgreSQL server")
	}
	privOnce.Do(func() {
		work, err := os.MkdirTemp("", "citizen-pg-test-")
		if err == nil {
			// The server runs as another user when the tests run as root.
			err = os.Chmod(work, 0o755)
		}
		if err != nil {
			privErr = err
			return
		}
		c := &cluster{work: work}
		priv = c
		c.url, privErr = c.run("start")
	})
	if privErr != nil {
		t.Fatal(privErr)
	}
	// A test that failed half way may have left it stopped.
	priv.script(t, "start")
	return priv
}

func TestMain(m *testing.M) {
	code := m.Run()
	if priv != nil {
		if _, err := priv.run("destroy"); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		os.RemoveAll(priv.work)
	}
	os.Exit(code)
}

// run runs start-postgres.sh with arg on c's work directory and returns
// its stdout.
func (c *cluster) run(arg string) (string, error) {
	cmd := exec.Command("testdata/start-postgres.sh", arg)
	cmd.Env = append(os.Environ(), "PG_WORK="+c.work)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("start-postgres.sh %s: %v\n%s", arg, err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

func (c *cluster) script(t *testing.T, arg string) string {
	t.Helper()
	out, err := c.run(arg)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
