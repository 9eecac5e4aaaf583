package services

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"citizen/events/eventlog"
	"citizen/events/memstore"
)

// A deployment whose processes could not see each other's events is
// refused at start, and the message says what to use.
func TestInconsistentDeploymentsRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want []string // in the error output
	}{
		{"split target on the embedded store", []string{"--target=gateway"},
			[]string{"--target=gateway runs only part of citizen", "store.backend=embedded", "store.backend=postgres", "--target=all"}},
		{"split workers on the in-process bus", []string{"--target=reflection,feedback", "--store.backend=postgres", "--store.pg-url=postgres://nobody@127.0.0.1:1/none"},
			[]string{"bus.backend=inprocess", "bus.backend=kafka", "runs bus, reflection, feedback, memory"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rc, _, errs := run(t, append([]string{"serve", "--data-dir", t.TempDir(), "--model.engine=stub", "--log.level=error"}, c.args...)...)
			if rc != 1 {
				t.Fatalf("rc %d, want 1; stderr:\n%s", rc, errs)
			}
			for _, w := range c.want {
				if !strings.Contains(errs, w) {
					t.Errorf("the refusal does not say %q:\n%s", w, errs)
				}
			}
		})
	}
}

// A second process on an embedded data dir is refused with a message
// that says so and what to use.
func TestSecondProcessOnEmbeddedDataDir(t *testing.T) {
	dir := t.TempDir()
	st, err := eventlog.Open(eventlog.Config{Dir: filepath.Join(dir, "events")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rc, _, errs := run(t, "serve", "--data-dir", dir, "--model.engine=stub", "--log.level=error")
	if rc != 1 {
		t.Fatalf("rc %d, want 1:\n%s", rc, errs)
	}
	for _, w := range []string{"directory in use", "another citizen process has data_dir " + dir, "store.backend=postgres"} {
		if !strings.Contains(errs, w) {
			t.Errorf("the refusal does not say %q:\n%s", w, errs)
		}
	}
}

// What is consistent is accepted: every role in one process on any
// store; a gateway alone on a shared store with the in-process bus (it
// uses no bus); split workers on a shared store with Kafka.
func TestConsistentDeploymentsAccepted(t *testing.T) {
	for _, c := range []struct {
		name string
		mut  func(*Config)
	}{
		{"all embedded", func(*Config) {}},
		{"gateway on postgres", func(c *Config) { c.Target, c.Store.Backend = []string{"gateway"}, "postgres" }},
		{"workers on postgres and kafka", func(c *Config) {
			c.Target, c.Store.Backend, c.Bus.Backend = []string{"reflection", "feedback", "memory"}, "postgres", "kafka"
		}},
		{"memory store (tests)", func(c *Config) { c.Target, c.Store.Backend = []string{"reflection"}, "memory" }},
	} {
		cfg := DefaultConfig()
		c.mut(&cfg)
		a := &App{Config: cfg, Log: slog.New(slog.DiscardHandler)}
		if err := a.checkDeployment(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// A shared store that offers no lease (esdb) cannot elect: a split
// deployment's elected roles are refused; with every role in one
// process they run under a lease of this process.
func TestNoLeaseAcrossProcessesRefused(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Store.Backend, cfg.Target = "esdb", []string{"rollout"}
	a := &App{Config: cfg, Log: slog.New(slog.DiscardHandler), Store: memstore.New(memstore.Config{})}
	if _, err := a.leaser(); !errors.Is(err, ErrInconsistentDeployment) || !strings.Contains(err.Error(), "store.backend=postgres") {
		t.Fatalf("split esdb deployment: %v", err)
	}
	a.Config.Target = []string{"all"}
	l, err := a.leaser()
	if err != nil {
		t.Fatal(err)
	}
	ls, err := l.Acquire(context.Background(), "rollout")
	if err != nil {
		t.Fatal(err)
	}
	ls.Release(context.Background())
}
