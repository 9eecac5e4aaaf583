package services

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"citizen/events"
	"citizen/gateway"
	"citizen/memory/lessons"
)

// lessonRoutes are the operator's view of the lessons: GET /v1/ops/lessons
// lists them (a tenant key sees its own tenant's; an operator any tenant's,
// or one with ?tenant=), ?state= filters; POST /v1/ops/lessons/{id}/retire
// (operator only) takes a lesson out of every context, recorded as
// lesson.retired with actor operator and the body's reason.
func (a *App) lessonRoutes(v1 *echo.Group, unavailable func(echo.Context, string) error, forbidden func(echo.Context) error) {
	v1.GET("/ops/lessons", func(c echo.Context) error {
		if a.Lessons == nil {
			return unavailable(c, "the lessons view")
		}
		k := gateway.KeyOf(c)
		tenant := k.Tenant
		if k.IsOperator() {
			tenant = c.QueryParam("tenant")
		}
		list := a.Lessons.List(tenant, c.QueryParam("state"))
		if list == nil {
			list = []lessons.Lesson{}
		}
		return c.JSON(http.StatusOK, map[string]any{"object": "list", "data": list})
	})
	v1.POST("/ops/lessons/:id/retire", func(c echo.Context) error {
		if !gateway.KeyOf(c).IsOperator() {
			return forbidden(c)
		}
		if a.Lessons == nil {
			return unavailable(c, "the lessons view")
		}
		l, ok := a.Lessons.Get(c.Param("id"))
		if !ok {
			return c.JSON(http.StatusNotFound, map[string]any{"error": map[string]any{
				"message": "no lesson " + c.Param("id"), "type": "invalid_request_error", "param": "id", "code": "lesson_not_found"}})
		}
		if l.State == "retired" {
			return c.JSON(http.StatusConflict, map[string]any{"error": map[string]any{
				"message": "the lesson is already retired", "type": "invalid_request_error", "param": "id", "code": "lesson_retired"}})
		}
		var body struct {
			Reason string `json:"reason"`
		}
		if c.Request().ContentLength != 0 {
			if err := json.NewDecoder(http.MaxBytesReader(c.Response(), c.Request().Body, 1<<16)).Decode(&body); err != nil {
				return c.JSON(http.StatusBadRequest, map[string]any{"error": map[string]any{
					"message": "the body must be a JSON object with an optional reason", "type": "invalid_request_error", "param": nil, "code": "invalid_body"}})
			}
		}
		ch := l.LessonChange
		ch.Actor, ch.Reason, ch.Retirement, ch.Rule = "operator", body.Reason, nil, ""
		if ch.Reason == "" {
			ch.Reason = "retired by an operator"
		}
		ev, err := events.Encode(&events.LessonRetired{LessonChange: ch}, events.Meta{Stream: events.LessonStream(l.LessonID),
			CorrelationID: l.LessonID, Tenant: l.Scope.Tenant})
		if err == nil {
			var res events.AppendResult
			if res, err = a.Store.Append(c.Request().Context(), ev.Stream, events.Any, ev); err == nil {
				// This process's view knows at once (its follower applies
				// the same event again, to the same state).
				ev.Position = res.LastPosition
				_ = a.Lessons.Apply(c.Request().Context(), ev)
			}
		}
		if err != nil {
			return c.JSON(http.StatusServiceUnavailable, map[string]any{"error": map[string]any{
				"message": "the retirement could not be recorded: " + err.Error(), "type": "api_error", "param": nil, "code": "store_unavailable"}})
		}
		return c.JSON(http.StatusOK, map[string]any{"lesson_id": l.LessonID, "state": "retired", "event": ev.ID.String()})
	})
}
