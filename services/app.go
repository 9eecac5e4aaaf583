package services

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"

	"citizen/events"
	"citizen/events/memstore"
)

// App is one citizen process: its configuration and the components its
// modules build. Modules fill the fields in dependency order; a module
// reads only fields of modules it depends on.
type App struct {
	Config Config
	Log    *slog.Logger

	Store events.Store
}

// componentList is the fixed order in which components are documented.
var componentList = []string{"store"}

func knownComponent(name string) bool {
	for _, c := range componentList {
		if c == name {
			return true
		}
	}
	return false
}

func componentNames() []string {
	out := append([]string(nil), componentList...)
	sort.Strings(out)
	return out
}

// Modules returns the components of a. Their names are the --target values.
func (a *App) Modules() []Module {
	return []Module{
		{Name: "store", Init: a.initStore},
	}
}

func (a *App) initStore(ctx context.Context) (Service, error) {
	st, err := OpenStore(a.Config)
	if err != nil {
		return nil, err
	}
	a.Store = st
	return closer{close: st.Close}, nil
}

// OpenStore opens the configured event store backend.
func OpenStore(cfg Config) (events.Store, error) {
	switch cfg.Store.Backend {
	case "memory":
		return memstore.New(memstore.Config{}), nil
	case "embedded":
		dir := filepath.Join(cfg.DataDir, "events")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		return openEmbedded(dir)
	default:
		return nil, fmt.Errorf("store: backend %q is not available in this build", cfg.Store.Backend)
	}
}
