package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
	"unicode/utf8"

	"citizen/events"

	"github.com/labstack/echo/v4"
)

// Stored completions (OpenAI's GET/POST/DELETE /v1/chat/completions/{id}):
// every interaction is recorded, but only those whose request did not say
// "store": false are stored completions, and a deleted one is not any more.
// Metadata updates and deletions are events on the interaction's stream
// (docs/adr/0012-stored-completions.md).

// stored is a stored completion folded from its interaction's stream.
type stored struct {
	ev       *events.Event // interaction.recorded
	rec      *events.InteractionRecorded
	metadata map[string]string // current
}

func completionNotFound(id string) *APIError {
	return errNotFound("completion_id", "No chat completion found with id '"+id+"'.")
}

func storeUnavailable() *APIError {
	return &APIError{Status: http.StatusServiceUnavailable, Type: "api_error", Message: "The event store is unavailable.", RetryAfter: time.Second}
}

// loadStored reads the interaction's stream and folds it into the stored
// completion. An interaction of another tenant, one recorded with
// "store": false and a deleted one are all "not found".
func (s *Server) loadStored(ctx context.Context, id, tenant string) (*stored, *APIError) {
	iid, ok := InteractionID(id)
	if !ok {
		return nil, completionNotFound(id)
	}
	// The messages name the interaction id, as loadInteraction's do.
	id = iid
	evs, err := s.store.ReadStream(ctx, events.InteractionStream(iid), 0, events.Forward, maxInteractionEvents)
	if errors.Is(err, events.ErrStreamNotFound) || err == nil && len(evs) == 0 {
		return nil, completionNotFound(id)
	}
	if err != nil {
		s.log.Error("reading an interaction failed", "interaction", iid, "err", err)
		return nil, storeUnavailable()
	}
	first := &evs[0]
	if first.Tenant != tenant || first.Type != events.TypeInteractionRecorded {
		return nil, completionNotFound(id)
	}
	p, err := events.Decode(first)
	if err != nil {
		return nil, errInternal("The recorded interaction could not be decoded.")
	}
	rec, _ := p.(*events.InteractionRecorded)
	if rec == nil || !storeRequested(rec.Params) {
		return nil, completionNotFound(id)
	}
	st := &stored{ev: first, rec: rec, metadata: rec.Metadata}
	for i := 1; i < len(evs); i++ {
		switch evs[i].Type {
		case events.TypeInteractionDeleted:
			return nil, completionNotFound(id)
		case events.TypeInteractionMetadataUpdated:
			if p, err := events.Decode(&evs[i]); err == nil {
				if u, ok := p.(*events.InteractionMetadataUpdated); ok {
					st.metadata = u.Metadata
				}
			}
		}
	}
	return st, nil
}

func (st *stored) completion() *completionOut {
	out := storedCompletion(st.ev, st.rec)
	out.Metadata = map[string]string{}
	for k, v := range st.metadata {
		out.Metadata[k] = v
	}
	return out
}

// updateRequest is the body of POST /v1/chat/completions/{id}.
type updateRequest struct {
	Metadata json.RawMessage `json:"metadata"` // empty: absent`
}

// decodeUpdate parses an update body strictly: one object with "metadata"
// (an object of strings within the request limits, or null to clear it).
func decodeUpdate(body []byte) (map[string]string, *APIError) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, badRequest("", "We could not parse the JSON body of your request: the body is empty.")
	}
	if !utf8.Valid(body) {
		return nil, badRequest("", "We could not parse the JSON body of your request: it is not valid UTF-8.")
	}
	var r updateRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, badRequest("", "We could not parse the JSON body of your request: trailing data after the JSON object.")
	}
	if len(r.Metadata) == 0 {
		return nil, badRequest("metadata", "Missing required parameter: 'metadata'.")
	}
	md := map[string]string{}
	if string(r.Metadata) != "null" {
		if err := json.Unmarshal(r.Metadata, &md); err != nil || md == nil {
			return nil, badRequest("metadata", "Invalid type for 'metadata': expected an object with string values.")
		}
	}
	if len(md) > maxMetadataPairs {
		return nil, badRequest("metadata", fmt.Sprintf("Invalid 'metadata': too many properties. Expected an object with at most %d properties, but got %d instead.", maxMetadataPairs, len(md)))
	}
	for k, v := range md {
		if len(k) > maxMetadataKey {
			return nil, badRequest("metadata", fmt.Sprintf("Invalid 'metadata': key too long, at most %d characters.", maxMetadataKey))
		}
		if len(v) > maxMetadataValue {
			return nil, badRequest("metadata", fmt.Sprintf("Invalid 'metadata': value of %q too long, at most %d characters.", k, maxMetadataValue))
		}
	}
	return md, nil
}

// updateCompletion serves POST /v1/chat/completions/{id}: it replaces the
// stored completion's metadata (interaction.metadata_updated) and answers
// the updated completion.
func (s *Server) updateCompletion(c echo.Context) error {
	buf := s.bufs.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= 1<<20 {
			s.bufs.Put(buf)
		}
	}()
	if e := s.readBody(c, buf); e != nil {
		return s.fail(c, e)
	}
	md, apiErr := decodeUpdate(buf.Bytes())
	if apiErr != nil {
		return s.fail(c, apiErr)
	}
	ctx := c.Request().Context()
	tenant := keyOf(c).Tenant
	st, apiErr := s.loadStored(ctx, c.Param("id"), tenant)
	if apiErr != nil {
		return s.fail(c, apiErr)
	}
	iid := st.rec.InteractionID
	ev, err := events.Encode(&events.InteractionMetadataUpdated{InteractionID: iid, Metadata: md}, events.Meta{
		Stream: events.InteractionStream(iid), CorrelationID: iid, CausationID: st.ev.ID.String(), Tenant: tenant})
	if err != nil {
		return s.fail(c, errInternal("The update could not be encoded."))
	}
	// Concurrent updates: the later one in store order wins, here and in
	// every replay; an update racing a deletion changes nothing visible.
	res, err := s.appendChange(ctx, ev, events.Any)
	if err != nil {
		s.log.Error("recording a metadata update failed", "interaction", iid, "err", err)
		return s.fail(c, errNotRecorded("The update could not be recorded. Please retry."))
	}
	s.proj.setMetadata(tenant, iid, md, res.LastPosition)
	st.metadata = md
	return c.JSON(http.StatusOK, st.completion())
}

type deletedOut struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Deleted bool   `json:"deleted"`
}

// deleteCompletion serves DELETE /v1/chat/completions/{id}: it appends
// interaction.deleted (a fixed event id per interaction, so a retry is
// idempotent); the completion is then neither listed nor retrievable, and it
// is never trained on.
func (s *Server) deleteCompletion(c echo.Context) error {
	ctx := c.Request().Context()
	key := keyOf(c)
	st, apiErr := s.loadStored(ctx, c.Param("id"), key.Tenant)
	if apiErr != nil {
		return s.fail(c, apiErr)
	}
	iid := st.rec.InteractionID
	source := "api"
	if key.IsOperator() {
		source = "operator"
	}
	ev, err := events.Encode(&events.InteractionDeleted{InteractionID: iid, Source: source}, events.Meta{
		Stream: events.InteractionStream(iid), CorrelationID: iid, CausationID: st.ev.ID.String(), Tenant: key.Tenant,
		ID: events.DeterministicID(events.TypeInteractionDeleted, iid)})
	if err != nil {
		return s.fail(c, errInternal("The deletion could not be encoded."))
	}
	if _, err := s.appendChange(ctx, ev, events.Any); err != nil {
		s.log.Error("recording a deletion failed", "interaction", iid, "err", err)
		return s.fail(c, errNotRecorded("The deletion could not be recorded. Please retry."))
	}
	s.proj.remove(key.Tenant, iid)
	return c.JSON(http.StatusOK, deletedOut{ID: CompletionID(iid), Object: "chat.completion.deleted", Deleted: true})
}

// appendChange appends one event to its stream within RecordTimeout, even
// if the client goes away meanwhile.
func (s *Server) appendChange(ctx context.Context, ev events.Event, expected events.ExpectedRevision) (events.AppendResult, error) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.RecordTimeout)
	defer cancel()
	return s.store.Append(actx, ev.Stream, expected, ev)
}
