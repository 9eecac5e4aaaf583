package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"time"
	"unicode/utf8"

	"citizen/events"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
)

// FeedbackRequest is the body of POST /v1/feedback and
// POST /v1/chat/completions/{id}/feedback (where interaction_id may be
// omitted). At least one of text, rating, outcome and correction is needed.
type FeedbackRequest struct {
	InteractionID string   `json:"interaction_id"` // interaction id or completion id
	FeedbackID    string   `json:"feedback_id"`    // idempotency key; generated if empty
	Source        string   `json:"source"`         // customer (default), harness, operator
	Text          string   `json:"text"`
	Rating        *float64 `json:"rating"`  // in [-10, 10]; e.g. -1/+1 or 1..5
	Outcome       string   `json:"outcome"` // success, failure, timeout, abandoned
	Correction    string   `json:"correction"`
	User          string   `json:"user"`
}

type feedbackOut struct {
	Object        string `json:"object"`
	ID            string `json:"id"`
	InteractionID string `json:"interaction_id"`
	EventID       string `json:"event_id"`
	Position      uint64 `json:"position"`
}

const maxFeedbackText = 64 << 10

// feedback appends feedback.received to the interaction's stream. The event
// id is DeterministicID("feedback.received", interaction, feedback_id), so
// a retried POST with the same feedback_id stores one event (the first).
func (s *Server) feedback(c echo.Context) error {
	buf := s.bufs.Get().(*bytes.Buffer)
	buf.Reset()
	defer s.bufs.Put(buf)
	if e := s.readBody(c, buf); e != nil {
		return s.fail(c, e)
	}
	if !utf8.Valid(buf.Bytes()) {
		return s.fail(c, badRequest("", "We could not parse the JSON body of your request: it is not valid UTF-8."))
	}
	var req FeedbackRequest
	dec := json.NewDecoder(bytes.NewReader(buf.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return s.fail(c, jsonError(err))
	}
	if dec.More() {
		return s.fail(c, badRequest("", "We could not parse the JSON body of your request: trailing data."))
	}
	raw := req.InteractionID
	if p := c.Param("id"); p != "" {
		if raw != "" {
			a, _ := InteractionID(raw)
			b, _ := InteractionID(p)
			if a != b {
				return s.fail(c, badRequest("interaction_id", "'interaction_id' does not match the completion id in the path."))
			}
		}
		raw = p
	}
	if raw == "" {
		return s.fail(c, badRequest("interaction_id", "Missing required parameter: 'interaction_id'."))
	}
	iid, ok := InteractionID(raw)
	if !ok {
		return s.fail(c, errNotFound("interaction_id", "No interaction found with id '"+raw+"'."))
	}
	if req.Source == "" {
		req.Source = "customer"
	}
	switch {
	case req.Source != "customer" && req.Source != "harness" && req.Source != "operator":
		return s.fail(c, badRequest("source", "Invalid 'source': expected 'customer', 'harness' or 'operator'."))
	case req.Outcome != "" && req.Outcome != "success" && req.Outcome != "failure" && req.Outcome != "timeout" && req.Outcome != "abandoned":
		return s.fail(c, badRequest("outcome", "Invalid 'outcome': expected 'success', 'failure', 'timeout' or 'abandoned'."))
	case req.Rating != nil && (math.IsNaN(*req.Rating) || *req.Rating < -10 || *req.Rating > 10):
		return s.fail(c, badRequest("rating", "Invalid 'rating': expected a number in [-10, 10]."))
	case req.Text == "" && req.Rating == nil && req.Outcome == "" && req.Correction == "":
		return s.fail(c, badRequest("", "Feedback needs at least one of 'text', 'rating', 'outcome' and 'correction'."))
	case len(req.Text) > maxFeedbackText || len(req.Correction) > maxFeedbackText:
		return s.fail(c, badRequest("text", "'text' and 'correction' are limited to 64 KiB."))
	case len(req.FeedbackID) > 128 || len(req.User) > maxUserLen:
		return s.fail(c, badRequest("feedback_id", "'feedback_id' is limited to 128 and 'user' to 256 characters."))
	}
	key := keyOf(c)
	ctx := c.Request().Context()
	if _, _, apiErr := s.loadInteraction(ctx, iid, key.Tenant); apiErr != nil {
		return s.fail(c, apiErr)
	}
	if req.FeedbackID == "" {
		req.FeedbackID = events.NewID().String()
	}
	if req.User == "" {
		req.User = key.User
	}
	evID := events.DeterministicID(events.TypeFeedbackReceived, iid, req.FeedbackID)
	if apiErr := s.feedbackRoom(ctx, iid, evID); apiErr != nil {
		return s.fail(c, apiErr)
	}
	p := &events.FeedbackReceived{InteractionID: iid, FeedbackID: req.FeedbackID, Source: req.Source, Text: req.Text,
		Rating: req.Rating, Outcome: req.Outcome, Correction: req.Correction, User: req.User}
	ev, err := events.Encode(p, events.Meta{Stream: events.InteractionStream(iid), CorrelationID: iid,
		Tenant: key.Tenant, ID: evID})
	if err != nil {
		return s.fail(c, errInternal("The feedback could not be encoded."))
	}
	res, err := s.store.Append(ctx, ev.Stream, events.StreamExists, ev)
	if err != nil {
		s.log.Error("recording feedback failed", "interaction", iid, "err", err)
		return s.fail(c, errNotRecorded("The feedback could not be recorded. Please retry with the same feedback_id."))
	}
	return c.JSON(http.StatusOK, feedbackOut{Object: "feedback", ID: req.FeedbackID, InteractionID: iid, EventID: ev.ID.String(), Position: res.LastPosition})
}

// feedbackRoom refuses a new feedback on an interaction that already
// holds Config.MaxFeedbackPerInteraction of them (one interaction must not
// be able to outweigh the rest of the evidence, nor grow its stream without
// bound). A retry of a feedback already stored (the same event id) is
// always let through: the store keeps the first.
func (s *Server) feedbackRoom(ctx context.Context, iid string, id uuid.UUID) *APIError {
	limit := s.cfg.MaxFeedbackPerInteraction
	var n int
	var from uint64
	for {
		evs, err := s.store.ReadStream(ctx, events.InteractionStream(iid), from, events.Forward, 256)
		if err != nil {
			s.log.Error("reading an interaction failed", "interaction", iid, "err", err)
			return &APIError{Status: http.StatusServiceUnavailable, Type: "api_error", Message: "The event store is unavailable.", RetryAfter: time.Second}
		}
		for i := range evs {
			if evs[i].ID == id {
				return nil
			}
			if evs[i].Type == events.TypeFeedbackReceived {
				n++
			}
		}
		if len(evs) < 256 {
			break
		}
		from = evs[len(evs)-1].Revision + 1
	}
	if n >= limit {
		return &APIError{Status: http.StatusConflict, Type: "invalid_request_error", Code: "feedback_limit_reached", Param: "interaction_id",
			Message: fmt.Sprintf("This interaction already has %d feedbacks, the most one interaction accepts.", limit)}
	}
	return nil
}
