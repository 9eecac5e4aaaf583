package events

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Limits shared by every backend so that an event accepted by one is
// accepted by all.
const (
	// MaxEventSize bounds one event's encoded envelope (data included).
	MaxEventSize = 4 << 20
	// MaxBatchEvents bounds the number of events in one Append.
	MaxBatchEvents = 4096
	// MaxBatchSize bounds the encoded size of one Append.
	MaxBatchSize = 16 << 20
	// MaxStreamName bounds a stream name in bytes.
	MaxStreamName = 512
)

// ExpectedRevision is the optimistic-concurrency condition of an Append.
// The zero value is Any.
type ExpectedRevision struct {
	kind expectKind
	rev  uint64
}

type expectKind uint8

const (
	expectAny expectKind = iota
	expectNoStream
	expectExists
	expectExact
)

var (
	// Any appends whatever the stream's state.
	Any = ExpectedRevision{kind: expectAny}
	// NoStream appends only if the stream has no events yet.
	NoStream = ExpectedRevision{kind: expectNoStream}
	// StreamExists appends only if the stream has at least one event.
	StreamExists = ExpectedRevision{kind: expectExists}
)

// Exact appends only if the stream's last event has revision rev.
func Exact(rev uint64) ExpectedRevision { return ExpectedRevision{kind: expectExact, rev: rev} }

// Kind tells which condition e is, for backends that map it onto their
// own (EventStoreDB): "any", "no_stream", "stream_exists" or "exact"; rev
// is the expected revision for "exact".
func (e ExpectedRevision) Kind() (kind string, rev uint64) {
	switch e.kind {
	case expectNoStream:
		return "no_stream", 0
	case expectExists:
		return "stream_exists", 0
	case expectExact:
		return "exact", e.rev
	default:
		return "any", 0
	}
}

// Check reports whether a stream whose last revision is current (exists
// false: the stream is empty) satisfies e.
func (e ExpectedRevision) Check(current uint64, exists bool) bool {
	switch e.kind {
	case expectNoStream:
		return !exists
	case expectExists:
		return exists
	case expectExact:
		return exists && current == e.rev
	default:
		return true
	}
}

func (e ExpectedRevision) String() string {
	switch e.kind {
	case expectNoStream:
		return "no stream"
	case expectExists:
		return "stream exists"
	case expectExact:
		return fmt.Sprintf("revision %d", e.rev)
	default:
		return "any"
	}
}

// AppendResult tells where an Append's events landed.
type AppendResult struct {
	// FirstPosition and LastPosition are the global positions of the first
	// and last event of the batch (equal for a batch of one). For a batch
	// whose events were all already stored (idempotent retry) they are the
	// positions of the stored copies.
	FirstPosition, LastPosition uint64
	// NextRevision is the revision of the stream's last event after the
	// append; pass Exact(NextRevision) to append after it.
	NextRevision uint64
}

// Direction of a stream read.
type Direction uint8

const (
	Forward Direction = iota
	Backward
)

// Filter selects events for ReadAll and Subscribe. A zero Filter matches
// everything. An event matches when its type is in Types (if any) and its
// stream starts with one of StreamPrefixes (if any).
type Filter struct {
	Types          []string
	StreamPrefixes []string
}

// Match reports whether ev passes the filter.
func (f Filter) Match(ev *Event) bool {
	if len(f.Types) > 0 {
		ok := false
		for _, t := range f.Types {
			if ev.Type == t {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	if len(f.StreamPrefixes) > 0 {
		for _, p := range f.StreamPrefixes {
			if strings.HasPrefix(ev.Stream, p) {
				return true
			}
		}
		return false
	}
	return true
}

// Handler receives subscribed events in position order. Returning an error
// stops the subscription with that error.
type Handler func(ctx context.Context, ev Event) error

// DeliverThenWait is the common step of a backend's catch-up-then-live
// Subscribe loop: it hands batch to h in order and, when the subscriber
// has caught up with the log, waits until notify is closed (new events),
// ctx is done or closed is closed (the store closed: ErrClosed). A nil
// result means: read the next batch.
func DeliverThenWait(ctx context.Context, batch []Event, h Handler, caughtUp bool, notify, closed <-chan struct{}) error {
	for _, ev := range batch {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := h(ctx, ev); err != nil {
			return err
		}
	}
	if !caughtUp {
		return nil
	}
	select {
	case <-notify:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-closed:
		return ErrClosed
	}
}

// Store is the event store: an append-only log of events grouped into
// streams. All methods are safe for concurrent use.
type Store interface {
	// Append writes evs to stream atomically if expected holds, and returns
	// only once they are durable. Events get their Stream, Revision and
	// Position assigned by the store; an event whose ID is already stored
	// is not written again (idempotent retry), and if every event of the
	// batch was already stored Append succeeds without checking expected
	// and returns the positions and revision of the stored copies (the
	// same result as the first Append). Arguments are checked with
	// AppendCheck (types against a Registry, events.Types by default).
	// An ID already stored in another stream is ErrMalformed where the
	// backend can see it (EventStoreDB's looks only where a retry of the
	// batch would sit in the stream).
	// Errors: ErrEmptyBatch, ErrTooLarge, ErrInvalidStream, ErrMalformed,
	// ErrUnknownType, ErrUnknownSchema, *WrongRevisionError, ErrClosed.
	// On error nothing is written. If ctx ends while Append waits for
	// durability it returns ctx.Err() and the events may or may not be
	// stored; retrying with the same IDs is safe.
	Append(ctx context.Context, stream string, expected ExpectedRevision, evs ...Event) (AppendResult, error)

	// ReadStream returns up to max events of stream starting at revision
	// from (inclusive), in the given direction. Reading backward from
	// revision math.MaxUint64 starts at the last event. A stream with no
	// events gives ErrStreamNotFound. max <= 0 means no limit.
	ReadStream(ctx context.Context, stream string, from uint64, dir Direction, max int) ([]Event, error)

	// ReadAll returns up to max events with position > after that match f,
	// in position order. max <= 0 means no limit.
	ReadAll(ctx context.Context, after uint64, f Filter, max int) ([]Event, error)

	// Subscribe delivers every event with position > after that matches f
	// to h, first the stored ones (catch-up) and then new ones as they are
	// committed (live), in position order without gaps or duplicates. It
	// blocks until ctx is cancelled (returning ctx.Err()), h returns an
	// error (returning it) or the store is closed (ErrClosed).
	Subscribe(ctx context.Context, after uint64, f Filter, h Handler) error

	// LastPosition returns the position of the last committed event (0 for
	// an empty store).
	LastPosition(ctx context.Context) (uint64, error)

	// Checkpoint returns the durable checkpoint stored under name (found
	// false if none); SaveCheckpoint stores it durably.
	Checkpoint(ctx context.Context, name string) (pos uint64, found bool, err error)
	SaveCheckpoint(ctx context.Context, name string, pos uint64) error

	// Close flushes and releases the store; pending appends finish first.
	// Calls after Close fail with ErrClosed.
	Close() error
}

// ValidateStream checks a stream name: non-empty, at most MaxStreamName
// bytes, valid UTF-8 and no control characters.
func ValidateStream(stream string) error {
	if stream == "" || len(stream) > MaxStreamName || !utf8.ValidString(stream) {
		return fmt.Errorf("%w: %q", ErrInvalidStream, truncate(stream, 64))
	}
	for _, r := range stream {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: control character in %q", ErrInvalidStream, truncate(stream, 64))
		}
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
