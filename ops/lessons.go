package ops

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"citizen/events"

	"github.com/labstack/echo/v4"
)

// LessonDecisionResponse is the answer to POST
// /v1/ops/lessons/{id}/approve: the lesson, its state after the decision
// and the appended event.
type LessonDecisionResponse struct {
	LessonID string       `json:"lesson_id"`
	State    string       `json:"state"`
	Event    events.Event `json:"event"`
}

// lessonState folds a lesson's stream as the lessons view does: the
// latest decision (promoted, superseded, retired) wins over proposals.
func lessonState(evs []events.Event) (state string, last events.LessonChange, err error) {
	for i := range evs {
		p, err := events.Decode(&evs[i])
		if err != nil {
			return "", last, err
		}
		ch, ok := events.LessonChangeOf(p)
		if !ok {
			continue
		}
		st := strings.TrimPrefix(evs[i].Type, "lesson.")
		if st == "proposed" && state != "" {
			continue
		}
		state, last = st, ch
	}
	return state, last, nil
}

// postApproveLesson serves POST /v1/ops/lessons/{id}/approve (operators
// only): a proposed lesson is promoted on the operator's word, recorded as
// lesson.promoted with actor "operator" and the body's optional reason
// ({"reason": "..."}). 404 for a lesson no event names, 409 for one that
// is not a proposal (already promoted, superseded or retired) or that
// changed while the request ran. Retiring is POST
// /v1/ops/lessons/{id}/retire, served with the lessons view.
func (h *Handler) postApproveLesson(c echo.Context) error {
	id := c.Param("id")
	if id == "" || len(id) > 200 {
		return writeErrorParam(c, http.StatusBadRequest, "the lesson id must be 1 to 200 characters", "id")
	}
	req, ok, err := readAction(c)
	if !ok {
		return err
	}
	ctx := c.Request().Context()
	stream := events.LessonStream(id)
	evs, err := h.store.ReadStream(ctx, stream, 0, events.Forward, 0)
	if errors.Is(err, events.ErrStreamNotFound) || errors.Is(err, events.ErrInvalidStream) {
		return writeErrorParam(c, http.StatusNotFound, "no lesson "+id, "id")
	}
	if err != nil {
		h.log.Error("approve lesson", "lesson", id, "err", err)
		return writeError(c, http.StatusServiceUnavailable, "the event store is not available")
	}
	state, ch, err := lessonState(evs)
	switch {
	case err != nil:
		h.log.Error("approve lesson", "lesson", id, "err", err)
		return writeError(c, http.StatusServiceUnavailable, "the lesson's events do not decode: "+err.Error())
	case state == "":
		return writeErrorParam(c, http.StatusNotFound, "no lesson "+id, "id")
	case state != "proposed":
		return writeErrorParam(c, http.StatusConflict, fmt.Sprintf("the lesson is %s, not a proposal", state), "id")
	}
	ch.Actor, ch.Reason, ch.Rule, ch.Retirement, ch.SupersededBy = "operator", req.Reason, "approved by an operator", nil, ""
	if ch.Reason == "" {
		ch.Reason = "approved by an operator"
	}
	last := evs[len(evs)-1]
	ev, err := events.Encode(&events.LessonPromoted{LessonChange: ch}, events.Meta{Stream: stream, CorrelationID: id,
		CausationID: last.ID.String(), Tenant: ch.Scope.Tenant})
	if err != nil {
		return writeError(c, http.StatusServiceUnavailable, err.Error())
	}
	res, err := h.store.Append(ctx, stream, events.Exact(last.Revision), ev)
	if errors.Is(err, events.ErrWrongExpectedRevision) {
		return writeErrorParam(c, http.StatusConflict, "the lesson changed while it was being approved; reload and try again", "id")
	}
	if err != nil {
		h.log.Error("approve lesson", "lesson", id, "err", err)
		return writeError(c, http.StatusServiceUnavailable, "the approval could not be recorded: "+err.Error())
	}
	ev.Position, ev.Revision = res.LastPosition, res.NextRevision
	h.log.Info("operator action", "action", "approve lesson", "lesson", id, "reason", ch.Reason, "position", ev.Position)
	return c.JSON(http.StatusOK, LessonDecisionResponse{LessonID: id, State: "promoted", Event: ev})
}
