package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"citizen/events"

	"github.com/labstack/echo/v4"
)

// maxInteractionEvents bounds GET /v1/interactions/{id}.
const maxInteractionEvents = 10000

// loadInteraction reads the interaction.recorded event of iid and checks
// that it belongs to tenant; another tenant's interaction is "not found".
func (s *Server) loadInteraction(ctx context.Context, iid, tenant string) (*events.Event, *events.InteractionRecorded, *APIError) {
	evs, err := s.store.ReadStream(ctx, events.InteractionStream(iid), 0, events.Forward, 1)
	if errors.Is(err, events.ErrStreamNotFound) || err == nil && len(evs) == 0 {
		return nil, nil, errNotFound("id", "No interaction found with id '"+iid+"'.")
	}
	if err != nil {
		s.log.Error("reading an interaction failed", "interaction", iid, "err", err)
		return nil, nil, &APIError{Status: http.StatusServiceUnavailable, Type: "api_error", Message: "The event store is unavailable.", RetryAfter: time.Second}
	}
	ev := &evs[0]
	if ev.Tenant != tenant || ev.Type != events.TypeInteractionRecorded {
		return nil, nil, errNotFound("id", "No interaction found with id '"+iid+"'.")
	}
	p, err := events.Decode(ev)
	if err != nil {
		return nil, nil, errInternal("The recorded interaction could not be decoded.")
	}
	rec, _ := p.(*events.InteractionRecorded)
	return ev, rec, nil
}

func storedCompletion(ev *events.Event, rec *events.InteractionRecorded) *completionOut {
	out := &completionOut{ID: CompletionID(rec.InteractionID), Object: "chat.completion", Created: ev.Time.Unix(),
		Model: publicModel(rec.ModelVersion), Metadata: rec.Metadata, ServiceTier: "default"}
	if out.Metadata == nil {
		out.Metadata = map[string]string{}
	}
	u := Usage(rec.Usage)
	out.Usage = &u
	for _, ch := range rec.Choices {
		cr := ChoiceResult{Index: ch.Index, Content: ch.Message.Content, FinishReason: ch.FinishReason}
		for _, tc := range ch.Message.ToolCalls {
			cr.ToolCalls = append(cr.ToolCalls, ToolCall(tc))
		}
		out.Choices = append(out.Choices, choiceJSON(cr, false))
	}
	return out
}

// getCompletion serves GET /v1/chat/completions/{id}: a stored completion
// with its current metadata.
func (s *Server) getCompletion(c echo.Context) error {
	st, apiErr := s.loadStored(c.Request().Context(), c.Param("id"), keyOf(c).Tenant)
	if apiErr != nil {
		return s.fail(c, apiErr)
	}
	return c.JSON(http.StatusOK, st.completion())
}

type storedMessage struct {
	ID         string        `json:"id"`
	Role       string        `json:"role"`
	Content    *string       `json:"content"`
	Name       string        `json:"name,omitempty"`
	ToolCalls  []toolCallOut `json:"tool_calls,omitempty"`
	ToolCallID string        `json:"tool_call_id,omitempty"`
}

// getMessages serves GET /v1/chat/completions/{id}/messages: the request's
// messages in OpenAI's list shape (after, limit, order).
func (s *Server) getMessages(c echo.Context) error {
	q := c.QueryParams()
	limit := 20
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return s.fail(c, badRequest("limit", "Invalid 'limit': expected an integer between 1 and 100."))
		}
		limit = n
	}
	order := q.Get("order")
	if order != "" && order != "asc" && order != "desc" {
		return s.fail(c, badRequest("order", "Invalid 'order': expected 'asc' or 'desc'."))
	}
	st, apiErr := s.loadStored(c.Request().Context(), c.Param("id"), keyOf(c).Tenant)
	if apiErr != nil {
		return s.fail(c, apiErr)
	}
	rec, iid := st.rec, st.rec.InteractionID
	all := make([]storedMessage, len(rec.Messages))
	for i, m := range rec.Messages {
		content := m.Content
		sm := storedMessage{ID: fmt.Sprintf("%s-%d", CompletionID(iid), i), Role: m.Role, Content: &content, Name: m.Name, ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			sm.ToolCalls = append(sm.ToolCalls, toolCallOut{ID: tc.ID, Type: "function", Function: fnOut{Name: tc.Name, Arguments: tc.Arguments}})
		}
		all[i] = sm
	}
	if order == "desc" {
		for i, j := 0, len(all)-1; i < j; i, j = i+1, j-1 {
			all[i], all[j] = all[j], all[i]
		}
	}
	start := 0
	if after := q.Get("after"); after != "" {
		start = len(all)
		for i, m := range all {
			if m.ID == after {
				start = i + 1
			}
		}
	}
	page := all[start:]
	more := len(page) > limit
	if more {
		page = page[:limit]
	}
	out := map[string]any{"object": "list", "data": page, "has_more": more, "first_id": nil, "last_id": nil}
	if len(page) > 0 {
		out["first_id"], out["last_id"] = page[0].ID, page[len(page)-1].ID
	}
	return c.JSON(http.StatusOK, out)
}

type listOut struct {
	Object  string           `json:"object"`
	Data    []*completionOut `json:"data"`
	FirstID *string          `json:"first_id"`
	LastID  *string          `json:"last_id"`
	HasMore bool             `json:"has_more"`
}

// listCompletions serves GET /v1/chat/completions?after=&limit=&order=&
// model=&metadata[k]=v from the projection (stored completions only, with
// their current metadata), reading each completion from the store.
func (s *Server) listCompletions(c echo.Context) error {
	q := c.QueryParams()
	limit := 20
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return s.fail(c, badRequest("limit", "Invalid 'limit': expected an integer between 1 and 100."))
		}
		limit = n
	}
	desc := false
	switch q.Get("order") {
	case "", "asc":
	case "desc":
		desc = true
	default:
		return s.fail(c, badRequest("order", "Invalid 'order': expected 'asc' or 'desc'."))
	}
	after := ""
	if v := q.Get("after"); v != "" {
		iid, ok := InteractionID(v)
		if !ok {
			return s.fail(c, badRequest("after", "Invalid 'after': expected a chat completion id."))
		}
		after = iid
	}
	filter := map[string]string{}
	for k, vs := range q {
		if name, ok := strings.CutPrefix(k, "metadata["); ok && strings.HasSuffix(name, "]") && len(vs) > 0 {
			filter[strings.TrimSuffix(name, "]")] = vs[0]
		}
	}
	model := q.Get("model")
	tenant := keyOf(c).Tenant
	out := &listOut{Object: "list", Data: []*completionOut{}}
	// A model filter is applied after the page is cut from the projection,
	// so over-fetch and trim.
	fetch := limit
	if model != "" {
		fetch = math.MaxInt32
	}
	entries, more := s.proj.list(tenant, after, fetch, desc, filter)
	if model != "" {
		kept := entries[:0]
		for _, e := range entries {
			if e.Model == model || ModelName == model {
				kept = append(kept, e)
			}
		}
		entries, more = kept, len(kept) > limit
		if more {
			entries = entries[:limit]
		}
	}
	for _, e := range entries {
		ev, rec, apiErr := s.loadInteraction(c.Request().Context(), e.ID, tenant)
		if apiErr != nil {
			if apiErr.Status == http.StatusNotFound {
				continue
			}
			return s.fail(c, apiErr)
		}
		st := &stored{ev: ev, rec: rec, metadata: e.Metadata}
		out.Data = append(out.Data, st.completion())
	}
	if len(out.Data) > 0 {
		f, l := out.Data[0].ID, out.Data[len(out.Data)-1].ID
		out.FirstID, out.LastID = &f, &l
	}
	out.HasMore = more
	return c.JSON(http.StatusOK, out)
}

type eventOut struct {
	ID            string          `json:"id"`
	Type          string          `json:"type"`
	Time          time.Time       `json:"time"`
	Schema        int             `json:"schema"`
	Revision      uint64          `json:"revision"`
	Position      uint64          `json:"position"`
	CorrelationID string          `json:"correlation_id,omitempty"`
	CausationID   string          `json:"causation_id,omitempty"`
	Data          json.RawMessage `json:"data"`
}

type interactionOut struct {
	ID           string          `json:"id"`
	Object       string          `json:"object"`
	CompletionID string          `json:"completion_id"`
	Interaction  json.RawMessage `json:"interaction"`
	Events       []eventOut      `json:"events"`
}

// getInteraction serves GET /v1/interactions/{id}: the recorded interaction
// and every event on its stream (feedback, evaluations, interpretations),
// upcast to their current schema.
func (s *Server) getInteraction(c echo.Context) error {
	iid, ok := InteractionID(c.Param("id"))
	if !ok {
		return s.fail(c, errNotFound("id", "No interaction found with id '"+c.Param("id")+"'."))
	}
	ctx := c.Request().Context()
	if _, _, apiErr := s.loadInteraction(ctx, iid, keyOf(c).Tenant); apiErr != nil {
		return s.fail(c, apiErr)
	}
	evs, err := s.store.ReadStream(ctx, events.InteractionStream(iid), 0, events.Forward, maxInteractionEvents)
	if err != nil {
		return s.fail(c, &APIError{Status: http.StatusServiceUnavailable, Type: "api_error", Message: "The event store is unavailable.", RetryAfter: time.Second})
	}
	out := &interactionOut{ID: iid, Object: "interaction", CompletionID: CompletionID(iid), Events: []eventOut{}}
	for i := range evs {
		ev := &evs[i]
		data := ev.Data
		schema := ev.Schema
		if p, err := events.Decode(ev); err == nil {
			if b, err := json.Marshal(p); err == nil {
				data = b
				schema = 0 // current
			}
		}
		if schema == 0 {
			schema = ev.Schema
		}
		if i == 0 {
			out.Interaction = data
		}
		out.Events = append(out.Events, eventOut{ID: ev.ID.String(), Type: ev.Type, Time: ev.Time, Schema: schema,
			Revision: ev.Revision, Position: ev.Position, CorrelationID: ev.CorrelationID, CausationID: ev.CausationID, Data: data})
	}
	return c.JSON(http.StatusOK, out)
}

type modelOut struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	Parent  string `json:"parent,omitempty"`
	Root    string `json:"root,omitempty"`
	Role    string `json:"citizen_role,omitempty"` // stable, candidate
}

func (s *Server) models(ctx context.Context) ([]modelOut, error) {
	vs, err := s.engine.Versions(ctx)
	if err != nil {
		return nil, err
	}
	ro := s.router.Rollout()
	var created int64
	for _, v := range vs {
		if v.ID == ro.Stable && !v.Created.IsZero() {
			created = v.Created.Unix()
		}
	}
	out := []modelOut{{ID: ModelName, Object: "model", Created: created, OwnedBy: "citizen", Parent: publicModel(ro.Stable)}}
	for _, v := range vs {
		m := modelOut{ID: publicModel(v.ID), Object: "model", OwnedBy: "citizen", Root: ModelName}
		if !v.Created.IsZero() {
			m.Created = v.Created.Unix()
		}
		if v.Parent != "" {
			m.Parent = publicModel(v.Parent)
		}
		switch v.ID {
		case ro.Stable:
			m.Role = "stable"
		case ro.Candidate:
			m.Role = "candidate"
		}
		out = append(out, m)
	}
	return out, nil
}

func (s *Server) listModels(c echo.Context) error {
	ms, err := s.models(c.Request().Context())
	if err != nil {
		return s.fail(c, &APIError{Status: http.StatusServiceUnavailable, Type: "api_error", Message: "The engine cannot list its versions.", RetryAfter: time.Second})
	}
	return c.JSON(http.StatusOK, map[string]any{"object": "list", "data": ms})
}

func (s *Server) getModel(c echo.Context) error {
	ms, err := s.models(c.Request().Context())
	if err != nil {
		return s.fail(c, &APIError{Status: http.StatusServiceUnavailable, Type: "api_error", Message: "The engine cannot list its versions.", RetryAfter: time.Second})
	}
	for _, m := range ms {
		if m.ID == c.Param("model") {
			return c.JSON(http.StatusOK, m)
		}
	}
	return s.fail(c, errModelNotFound(c.Param("model")))
}
