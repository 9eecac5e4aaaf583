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
//     and not starting at 1 (eventstest runs without Features.Gapless). A
//     position handed back to ReadAll or Subscribe is sent as a $all
//     position with commit = prepare, which holds for events appended
//     through gRPC (no explicit transactions).
//   - Expected revisions map onto esdb.Any, NoStream, StreamExists and
//     Revision(n); a conflict becomes *events.WrongRevisionError with the
//     stream's actual revision.
//   - ReadAll reads $all forward and filters on the client (this client's
//     ReadAll has no server-side filter).
//   - Checkpoints are streams "_citizen-checkpoint-<name>" whose last event
//     holds the position (max count 1); streams with the "_citizen-"
//     prefix and ESDB's system events ("$" types) are never returned by
//     ReadAll or Subscribe.
//
// # Idempotent appends
//
// ESDB has no index by event id, so Append does not search the stream for
// the batch's ids. It reads at most len(batch) events before the write
// (none for an exact revision or NoStream) and len(batch) after it (for
// the positions), and relies on the server's idempotency check, which
// compares ids where a retry of the same call would find them:
//
//   - Exact(n) and NoStream (n = -1): a batch already stored at revisions
//     n+1 .. n+len is always recognised, however far the stream has moved
//     on and across server restarts (the server compares the stored ids
//     there; so does Append when the server refuses the revision). The
//     result is the stored copies', as the first Append returned.
//   - Any and StreamExists: the batch is recognised when it is the
//     stream's last len events (Append reads them first: the retry after
//     a lost reply) or when the server's idempotency check finds it. That
//     check is best effort: it looks the first id up in a cache of
//     recently written events, kept in memory per node and lost on restart
//     or leader change. A batch stored earlier, with other events after
//     it, and out of that cache is written again (a duplicate).
//   - A batch found partly stored (its first k events where the rest
//     should follow, at revision n+1 or as the stream's tail, or refused as
//     partly stored by the server) fails with events.ErrMalformed and
//     writes nothing: an append is atomic, so such a batch is not a retry.
//     Send the stored part and the rest as two appends.
//   - Not detected: an id already stored anywhere else in the stream (a
//     batch mixing an old event with new ones, or a retry whose batch is
//     not where the expected revision puts it) and an id stored in another
//     stream (Features.StreamScopedIDs). Such events are written again.
//   - A retry with a different exact revision than the call that stored
//     the batch finds it only if it is the stream's tail; otherwise it is
//     a *events.WrongRevisionError.
//
// Callers that retry should keep the expected revision of the first try
// (Exact or NoStream where they can), which makes the retry exact.
//
// # Subscriptions
//
// Subscribe is a catch-up subscription to $all with a server-side
// stream-prefix or event-type filter, the exact Filter applied on the
// client. When the server drops it (restart, leader change, network,
// deadline) it is opened again after the last event received, after a
// capped exponential backoff (Config.ResumeInitial doubling to
// Config.ResumeMax, with jitter; reset once a subscription receives an
// event). Events at or before the last position received are skipped, so
// a server that sends one again does not deliver it twice; starting after
// the last received event skips none. Subscribe gives up only when ctx is
// done, the store is closed (events.ErrClosed), the handler fails, or the
// server refuses for good: unauthenticated, permission denied, an invalid
// request such as a bad filter, an unsupported feature, a closed client.
//
// Persistent subscriptions (server-side consumer groups) are not used.
// They keep the group's checkpoint on the server, spread events over the
// group's members, redeliver unacknowledged ones and park poison events.
// In citizen those jobs belong to the bus: one elected relay (events/bus)
// reads the store from its own checkpoint, kept with Store.Checkpoint,
// and publishes to the bus, whose consumer groups (Kafka) spread the
// events over workers with retries and a poison topic. Subscribe's
// contract (every matching event after a position the caller picks, in
// position order, without gaps or duplicates) is what a catch-up
// subscription gives and a persistent one does not: a group's members
// see events out of order (round robin, retries, parking), and its start
// is fixed when the group is created, not chosen per call.
//
// Untested against a server: none could run on the development machine.
// The resume loop and the idempotency decisions run here against a fake
// client that models the server's documented behaviour; the conformance
// suite runs against a server when CITIZEN_ESDB_URL is set. Until it has,
// treat this backend as unproven.
package esdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"citizen/events"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
)

// Config configures Open.
type Config struct {
	// URL is an EventStoreDB connection string, e.g.
	// "esdb://localhost:2113?tls=false".
	URL string
	// Check validates appends; its zero value checks types strictly
	// against events.Types.
	Check events.AppendCheck
	// ResumeInitial and ResumeMax bound the wait before a dropped
	// subscription is opened again (defaults 100 ms and 5 s).
	ResumeInitial, ResumeMax time.Duration
	// Logger receives a warning for each resumed subscription (default:
	// discarded).
	Logger *slog.Logger
}

// internalPrefix marks streams the backend uses for itself.
const internalPrefix = "_citizen-"

const checkpointType = "citizen.checkpoint"

// Store is an events.Store on EventStoreDB. Safe for concurrent use.
type Store struct {
	cfg    Config
	client client
	log    *slog.Logger

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
	c, err := esdb.NewClient(conf)
	if err != nil {
		return nil, fmt.Errorf("events: esdb: %w", err)
	}
	return newStore(cfg, grpcClient{c}), nil
}

// newStore is a Store on c, with cfg's defaults filled in.
func newStore(cfg Config, c client) *Store {
	if cfg.ResumeInitial <= 0 {
		cfg.ResumeInitial = 100 * time.Millisecond
	}
	if cfg.ResumeMax <= 0 {
		cfg.ResumeMax = 5 * time.Second
	}
	cfg.ResumeMax = max(cfg.ResumeMax, cfg.ResumeInitial)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Store{cfg: cfg, client: c, log: log.With("component", "esdb"), done: make(chan struct{})}
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

// readStream reads up to n events of stream from revision from in
// direction dir; found is false for a stream with no events.
func (s *Store) readStream(ctx context.Context, stream string, from esdb.StreamPosition, dir esdb.Direction, n uint64) (evs []events.Event, found bool, err error) {
	rs, err := s.client.ReadStream(ctx, stream, esdb.ReadStreamOptions{Direction: dir, From: from}, n)
	if err != nil {
		if errors.Is(err, errNotFound) {
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
		if errors.Is(err, errNotFound) {
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
