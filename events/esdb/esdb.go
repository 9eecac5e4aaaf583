// Package esdb is the events.Store backend on EventStoreDB (KurrentDB),
// through github.com/EventStore/EventStore-Client-Go/v4.
//
// Mapping:
//
//   - An event becomes ESDB event data with the same id and type, JSON
//     content and Data as its body; the rest of the envelope travels in
//     JSON metadata with CloudEvents-style names (specversion, time,
//     dataschema-like "schema", "tenant") plus ESDB's own "$correlationId"
//     and "$causationId", which its projections understand.
//   - Stream revisions are ESDB event numbers. Positions are the events'
//     prepare positions in $all: unique and increasing, but not gapless
//     and not starting at 1 (eventstest runs without Features.Gapless).
//   - Expected revisions map onto esdb.Any, NoStream, StreamExists and
//     Revision(n); a conflict becomes *events.WrongRevisionError with the
//     stream's actual revision read back after the failure.
//   - Idempotency: before appending, the stream is read (at most
//     IDLookback events from its end) for the batch's ids; a batch whose
//     events are all there is answered from the stored copies. ESDB has no
//     global id index, so an id reused in another stream is not detected
//     (Features.StreamScopedIDs), and two identical retries racing each
//     other rely on ESDB's own idempotent-write check.
//   - ReadAll reads $all forward and filters on the client (this client's
//     ReadAll has no server-side filter); Subscribe is a catch-up
//     subscription to $all with a server-side stream-prefix or event-type
//     filter, the exact Filter applied on the client.
//   - Checkpoints are streams "_citizen-checkpoint-<name>" whose last event
//     holds the position (max count 1); streams with the "_citizen-"
//     prefix and ESDB's system events ("$" types) are never returned by
//     ReadAll or Subscribe.
//
// Untested here: no EventStoreDB server could run on the development
// machine. The conformance suite runs against a server when
// CITIZEN_ESDB_URL is set; until it has, treat this backend as unproven.
package esdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	"citizen/events"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
)

// Config configures Open.
type Config struct {
	// URL is an EventStoreDB connection string, e.g.
	// "esdb://localhost:2113?tls=false".
	URL string
	// Check validates appends; its zero value checks types strictly
	// against events.Types.
	Check events.AppendCheck
	// IDLookback bounds how many of a stream's last events are searched
	// for already stored ids on Append (default 10,000).
	IDLookback uint64
}

// internalPrefix marks streams the backend uses for itself.
const internalPrefix = "_citizen-"

const checkpointType = "citizen.checkpoint"

// Store is an events.Store on EventStoreDB. Safe for concurrent use.
type Store struct {
	cfg    Config
	client *esdb.Client

	mu     sync.RWMutex
	closed bool
	done   chan struct{}
}

var _ events.Store = (*Store)(nil)

// Open connects to the server in cfg.URL.
func Open(cfg Config) (*Store, error) {
	conf, err := esdb.ParseConnectionString(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("events: esdb: %w", err)
	}
	client, err := esdb.NewClient(conf)
	if err != nil {
		return nil, fmt.Errorf("events: esdb: %w", err)
	}
	if cfg.IDLookback == 0 {
		cfg.IDLookback = 10_000
	}
	return &Store{cfg: cfg, client: client, done: make(chan struct{})}, nil
}

// metadata is the envelope beyond id, type and data.
type metadata struct {
	SpecVersion   string    `json:"specversion"`
	Time          time.Time `json:"time"`
	Schema        int       `json:"schema"`
	Tenant        string    `json:"tenant,omitempty"`
	CorrelationID string    `json:"$correlationId,omitempty"`
	CausationID   string    `json:"$causationId,omitempty"`
}

// toEventData maps an envelope onto ESDB event data.
func toEventData(ev *events.Event) (esdb.EventData, error) {
	md, err := json.Marshal(metadata{SpecVersion: "1.0", Time: ev.Time.UTC(), Schema: ev.Schema, Tenant: ev.Tenant,
		CorrelationID: ev.CorrelationID, CausationID: ev.CausationID})
	if err != nil {
		return esdb.EventData{}, fmt.Errorf("%w: metadata: %v", events.ErrMalformed, err)
	}
	return esdb.EventData{EventID: ev.ID, EventType: ev.Type, ContentType: esdb.ContentTypeJson, Data: ev.Data, Metadata: md}, nil
}

// fromRecorded maps a recorded ESDB event back onto an envelope.
func fromRecorded(r *esdb.RecordedEvent) (events.Event, error) {
	var md metadata
	if err := json.Unmarshal(r.UserMetadata, &md); err != nil {
		return events.Event{}, fmt.Errorf("%w: metadata of %s/%d: %v", events.ErrCorrupt, r.StreamID, r.EventNumber, err)
	}
	return events.Event{
		ID: r.EventID, Type: r.EventType, Stream: r.StreamID, Time: md.Time.UTC(), Schema: md.Schema,
		CorrelationID: md.CorrelationID, CausationID: md.CausationID, Tenant: md.Tenant,
		Data: r.Data, Revision: r.EventNumber, Position: r.Position.Prepare,
	}, nil
}

// visible reports whether an $all event is one of ours to return.
func visible(r *esdb.RecordedEvent) bool {
	return !strings.HasPrefix(r.EventType, "$") && !strings.HasPrefix(r.StreamID, "$") &&
		!strings.HasPrefix(r.StreamID, internalPrefix)
}

func toExpected(e events.ExpectedRevision) esdb.ExpectedRevision {
	switch kind, rev := e.Kind(); kind {
	case "no_stream":
		return esdb.NoStream{}
	case "stream_exists":
		return esdb.StreamExists{}
	case "exact":
		return esdb.Revision(rev)
	default:
		return esdb.Any{}
	}
}

func (s *Store) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return events.ErrClosed
	}
	return nil
}

func (s *Store) end() { s.mu.RUnlock() }

func isCode(err error, code esdb.ErrorCode) bool {
	var e *esdb.Error
	return errors.As(err, &e) && e.Code() == code
}

// readStream reads up to n events of stream from revision from in
// direction dir; found is false for a stream with no events.
func (s *Store) readStream(ctx context.Context, stream string, from esdb.StreamPosition, dir esdb.Direction, n uint64) (evs []events.Event, found bool, err error) {
	rs, err := s.client.ReadStream(ctx, stream, esdb.ReadStreamOptions{Direction: dir, From: from}, n)
	if err != nil {
		if isCode(err, esdb.ErrorCodeResourceNotFound) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("events: esdb: read %q: %w", stream, err)
	}
	defer rs.Close()
	for {
		r, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return evs, true, nil
		}
		if isCode(err, esdb.ErrorCodeResourceNotFound) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("events: esdb: read %q: %w", stream, err)
		}
		ev, err := fromRecorded(r.Event)
		if err != nil {
			return nil, false, err
		}
		evs = append(evs, ev)
	}
}

// Append implements events.Store.
func (s *Store) Append(ctx context.Context, stream string, expected events.ExpectedRevision, evs ...events.Event) (events.AppendResult, error) {
	if err := s.cfg.Check.Validate(stream, evs); err != nil {
		return events.AppendResult{}, err
	}
	if err := s.begin(ctx); err != nil {
		return events.AppendResult{}, err
	}
	defer s.end()
	// Ids already in the stream.
	stored, _, err := s.readStream(ctx, stream, esdb.End{}, esdb.Backwards, s.cfg.IDLookback)
	if err != nil {
		return events.AppendResult{}, err
	}
	byID := make(map[uuid.UUID]events.Event, len(stored))
	for _, ev := range stored {
		byID[ev.ID] = ev
	}
	var fresh []esdb.EventData
	for i := range evs {
		if _, ok := byID[evs[i].ID]; ok {
			continue
		}
		d, err := toEventData(&evs[i])
		if err != nil {
			return events.AppendResult{}, err
		}
		fresh = append(fresh, d)
	}
	if len(fresh) == 0 {
		first, last := byID[evs[0].ID], byID[evs[len(evs)-1].ID]
		return events.AppendResult{FirstPosition: first.Position, LastPosition: last.Position, NextRevision: last.Revision}, nil
	}
	if _, err := s.client.AppendToStream(ctx, stream, esdb.AppendToStreamOptions{ExpectedRevision: toExpected(expected)}, fresh...); err != nil {
		if isCode(err, esdb.ErrorCodeWrongExpectedVersion) {
			wr := &events.WrongRevisionError{Stream: stream, Expected: expected}
			if last, found, rerr := s.readStream(ctx, stream, esdb.End{}, esdb.Backwards, 1); rerr == nil && found && len(last) == 1 {
				wr.Actual, wr.Exists = last[0].Revision, true
			}
			return events.AppendResult{}, wr
		}
		return events.AppendResult{}, fmt.Errorf("events: esdb: append to %q: %w", stream, err)
	}
	// Read the batch back for its positions (the write result carries the
	// last commit position only).
	tail, _, err := s.readStream(ctx, stream, esdb.End{}, esdb.Backwards, s.cfg.IDLookback)
	if err != nil {
		return events.AppendResult{}, err
	}
	for _, ev := range tail {
		byID[ev.ID] = ev
	}
	first, ok1 := byID[evs[0].ID]
	last, ok2 := byID[evs[len(evs)-1].ID]
	if !ok1 || !ok2 {
		return events.AppendResult{}, fmt.Errorf("events: esdb: appended events to %q not found when read back", stream)
	}
	return events.AppendResult{FirstPosition: first.Position, LastPosition: last.Position, NextRevision: last.Revision}, nil
}

// ReadStream implements events.Store.
func (s *Store) ReadStream(ctx context.Context, stream string, from uint64, dir events.Direction, max int) ([]events.Event, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	n := uint64(math.MaxInt64)
	if max > 0 {
		n = uint64(max)
	}
	var start esdb.StreamPosition = esdb.Revision(from)
	d := esdb.Forwards
	if dir == events.Backward {
		d = esdb.Backwards
		if from == math.MaxUint64 {
			start = esdb.End{}
		} else if last, found, err := s.readStream(ctx, stream, esdb.End{}, esdb.Backwards, 1); err != nil {
			return nil, err
		} else if found && len(last) == 1 && from > last[0].Revision {
			start = esdb.End{}
		}
	}
	evs, found, err := s.readStream(ctx, stream, start, d, n)
	if err != nil {
		return nil, err
	}
	if !found || (len(evs) == 0 && dir == events.Backward) {
		return nil, fmt.Errorf("%w: %q", events.ErrStreamNotFound, stream)
	}
	if len(evs) == 0 {
		// Forward past the end: the stream exists only if it has events.
		if _, found, err := s.readStream(ctx, stream, esdb.Start{}, esdb.Forwards, 1); err != nil {
			return nil, err
		} else if !found {
			return nil, fmt.Errorf("%w: %q", events.ErrStreamNotFound, stream)
		}
	}
	return evs, nil
}

// ReadAll implements events.Store.
func (s *Store) ReadAll(ctx context.Context, after uint64, f events.Filter, max int) ([]events.Event, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	if max <= 0 {
		max = math.MaxInt
	}
	rs, err := s.client.ReadAll(ctx, esdb.ReadAllOptions{Direction: esdb.Forwards, From: esdb.Position{Commit: after, Prepare: after}}, math.MaxInt64)
	if err != nil {
		return nil, fmt.Errorf("events: esdb: read $all: %w", err)
	}
	defer rs.Close()
	var out []events.Event
	for len(out) < max {
		r, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("events: esdb: read $all: %w", err)
		}
		if r.Event == nil || !visible(r.Event) || r.Event.Position.Prepare <= after {
			continue
		}
		ev, err := fromRecorded(r.Event)
		if err != nil {
			return nil, err
		}
		if f.Match(&ev) {
			out = append(out, ev)
		}
	}
	return out, nil
}

// serverFilter picks the server-side filter of a subscription: stream
// prefixes if any, else event types, else ESDB's system events excluded.
func serverFilter(f events.Filter) *esdb.SubscriptionFilter {
	switch {
	case len(f.StreamPrefixes) > 0:
		return &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: f.StreamPrefixes}
	case len(f.Types) > 0:
		return &esdb.SubscriptionFilter{Type: esdb.EventFilterType, Prefixes: f.Types}
	default:
		return esdb.ExcludeSystemEventsFilter()
	}
}

// Subscribe implements events.Store with a catch-up subscription to $all.
func (s *Store) Subscribe(ctx context.Context, after uint64, f events.Filter, h events.Handler) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var from esdb.AllPosition = esdb.Start{}
	if after > 0 {
		from = esdb.Position{Commit: after, Prepare: after}
	}
	sub, err := s.client.SubscribeToAll(sctx, esdb.SubscribeToAllOptions{From: from, Filter: serverFilter(f)})
	s.end()
	if err != nil {
		return fmt.Errorf("events: esdb: subscribe to $all: %w", err)
	}
	defer sub.Close()
	stop := context.AfterFunc(ctx, func() { sub.Close() })
	defer stop()
	go func() {
		select {
		case <-s.done:
			sub.Close()
		case <-sctx.Done():
		}
	}()
	last := after
	for {
		e := sub.Recv()
		if err := ctx.Err(); err != nil {
			return err
		}
		select {
		case <-s.done:
			return events.ErrClosed
		default:
		}
		switch {
		case e.SubscriptionDropped != nil:
			return fmt.Errorf("events: esdb: subscription dropped: %w", e.SubscriptionDropped.Error)
		case e.EventAppeared != nil:
			r := e.EventAppeared.Event
			if r == nil || !visible(r) || r.Position.Prepare <= last {
				continue
			}
			ev, err := fromRecorded(r)
			if err != nil {
				return err
			}
			last = ev.Position
			if !f.Match(&ev) {
				continue
			}
			if err := h(ctx, ev); err != nil {
				return err
			}
		}
	}
}

// LastPosition implements events.Store: the position of the last event
// in $all (system events included).
func (s *Store) LastPosition(ctx context.Context) (uint64, error) {
	if err := s.begin(ctx); err != nil {
		return 0, err
	}
	defer s.end()
	rs, err := s.client.ReadAll(ctx, esdb.ReadAllOptions{Direction: esdb.Backwards, From: esdb.End{}}, 1)
	if err != nil {
		return 0, fmt.Errorf("events: esdb: read $all: %w", err)
	}
	defer rs.Close()
	r, err := rs.Recv()
	if errors.Is(err, io.EOF) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("events: esdb: read $all: %w", err)
	}
	return r.OriginalEvent().Position.Prepare, nil
}

func checkpointStream(name string) string { return internalPrefix + "checkpoint-" + name }

type checkpointData struct {
	Position uint64 `json:"position"`
}

// Checkpoint implements events.Store.
func (s *Store) Checkpoint(ctx context.Context, name string) (uint64, bool, error) {
	if err := s.begin(ctx); err != nil {
		return 0, false, err
	}
	defer s.end()
	evs, found, err := s.readStream(ctx, checkpointStream(name), esdb.End{}, esdb.Backwards, 1)
	if err != nil || !found || len(evs) == 0 {
		return 0, false, err
	}
	var d checkpointData
	if err := json.Unmarshal(evs[0].Data, &d); err != nil {
		return 0, false, fmt.Errorf("%w: checkpoint %q: %v", events.ErrCorrupt, name, err)
	}
	return d.Position, true, nil
}

// SaveCheckpoint implements events.Store. The first save also sets the
// stream's max count to 1 so old checkpoints are scavenged.
func (s *Store) SaveCheckpoint(ctx context.Context, name string, pos uint64) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	data, _ := json.Marshal(checkpointData{Position: pos})
	md, _ := json.Marshal(metadata{SpecVersion: "1.0", Time: time.Now().UTC(), Schema: 1})
	stream := checkpointStream(name)
	res, err := s.client.AppendToStream(ctx, stream, esdb.AppendToStreamOptions{ExpectedRevision: esdb.Any{}},
		esdb.EventData{EventID: events.NewID(), EventType: checkpointType, ContentType: esdb.ContentTypeJson, Data: data, Metadata: md})
	if err != nil {
		return fmt.Errorf("events: esdb: save checkpoint %q: %w", name, err)
	}
	if res.NextExpectedVersion == 0 {
		var meta esdb.StreamMetadata
		meta.SetMaxCount(1)
		if _, err := s.client.SetStreamMetadata(ctx, stream, esdb.AppendToStreamOptions{ExpectedRevision: esdb.Any{}}, meta); err != nil {
			return fmt.Errorf("events: esdb: checkpoint %q metadata: %w", name, err)
		}
	}
	return nil
}

// Close implements events.Store: subscriptions end with ErrClosed and the
// connection is closed.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return events.ErrClosed
	}
	s.closed = true
	close(s.done)
	return s.client.Close()
}
