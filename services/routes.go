package services

import (
	"net/http"

	"citizen/gateway"
	"citizen/memory"
	"citizen/reflection"

	"github.com/labstack/echo/v4"
)

// opsRoutes mounts the operator endpoints of the components running in
// this process on the gateway's authenticated /v1 group. Components start
// after the gateway, so each handler looks its component up per request
// and answers 503 when it is not running here (a split deployment).
// Tenancy: operator keys (tenant "operator", or the development key) see
// everything; any other key sees only its own tenant's data, and the
// cross-tenant scoreboard is for operators only. The rollout state and
// the operator's actions on it (pause, resume, promote, abort, and start
// of a trained version's canary), the versions, the live stream and the
// dashboard come from package ops.
func (a *App) opsRoutes(v1 *echo.Group) {
	unavailable := func(c echo.Context, what string) error {
		return c.JSON(http.StatusServiceUnavailable, map[string]any{"error": map[string]any{
			"message": what + " is not running in this process", "type": "api_error", "param": nil, "code": "service_unavailable"}})
	}
	forbidden := func(c echo.Context) error {
		return c.JSON(http.StatusForbidden, map[string]any{"error": map[string]any{
			"message": "this endpoint needs an operator key", "type": "permission_error", "param": nil, "code": "permission_denied"}})
	}
	a.lessonRoutes(v1, unavailable, forbidden)
	v1.GET("/ops/scoreboard", func(c echo.Context) error {
		if !gateway.KeyOf(c).IsOperator() {
			return forbidden(c)
		}
		if a.Scoreboard == nil {
			return unavailable(c, "reflection")
		}
		reflection.ScoreboardHandler(a.Scoreboard).ServeHTTP(c.Response(), c.Request())
		return nil
	})
	v1.GET("/ops/failure-modes", func(c echo.Context) error {
		if a.Failures == nil {
			return unavailable(c, "memory")
		}
		k := gateway.KeyOf(c)
		memory.FailureModesHandler(a.Failures, func(*http.Request) string {
			if k.IsOperator() {
				return c.QueryParam("tenant")
			}
			return k.Tenant
		}).ServeHTTP(c.Response(), c.Request())
		return nil
	})
}
