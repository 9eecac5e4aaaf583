package ops_test

import (
	"context"
	"log/slog"
	"net/http"

	"citizen/events/memstore"
	"citizen/ops"
	"citizen/ops/rollout"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
)

// How a service wires the rollout controller and mounts the operator
// surface on its echo server.
func ExampleRegister() {
	ctx := context.Background()
	logger := slog.Default()
	store := memstore.New(memstore.Config{}) // the service's events.Store
	// The version the gateway serves before any promotion.
	cfg := rollout.Config{Stable: "base"}

	ctrl, err := rollout.New(cfg, store, logger)
	if err != nil {
		panic(err)
	}
	if err := ctrl.Register(prometheus.NewRegistry()); err != nil { // the service's /metrics registry
		panic(err)
	}
	go func() { _ = ctrl.Run(ctx) }() // until ctx is cancelled; restart on error

	e := echo.New() // the gateway's root echo
	_, err = ops.Register(e, ops.Deps{
		Store:   store,
		Rollout: cfg,
		Logger:  logger,
		Auth: func(c echo.Context) error { // the service's key check
			if c.Request().Header.Get("Authorization") != "Bearer sk-citizen-dev" {
				return echo.NewHTTPError(http.StatusUnauthorized, "invalid API key")
			}
			return nil
		},
	})
	if err != nil {
		panic(err)
	}
}
