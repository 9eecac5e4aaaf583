package events

import (
	"errors"
	"fmt"
)

// Sentinel errors. Callers test with errors.Is; messages are prefixed
// "events: ". Backends wrap these with detail.
var (
	// ErrMalformed: an envelope or payload is not valid (bad JSON, missing
	// required field, invalid UTF-8, bad ID).
	ErrMalformed = errors.New("events: malformed event")
	// ErrUnknownType: the event type is not registered with the codec.
	ErrUnknownType = errors.New("events: unknown event type")
	// ErrUnknownSchema: the schema version is newer than this build knows,
	// or older without an upcaster.
	ErrUnknownSchema = errors.New("events: unknown schema version")
	// ErrWrongExpectedRevision: optimistic concurrency check failed. The
	// concrete error is a *WrongRevisionError.
	ErrWrongExpectedRevision = errors.New("events: wrong expected revision")
	// ErrEmptyBatch: Append was called with no events.
	ErrEmptyBatch = errors.New("events: empty batch")
	// ErrTooLarge: an event or batch exceeds the store's size limits.
	ErrTooLarge = errors.New("events: event or batch too large")
	// ErrStreamNotFound: ReadStream on a stream with no events.
	ErrStreamNotFound = errors.New("events: stream not found")
	// ErrInvalidStream: a stream name is empty, too long or contains
	// control characters.
	ErrInvalidStream = errors.New("events: invalid stream name")
	// ErrClosed: the store or bus has been closed.
	ErrClosed = errors.New("events: closed")
	// ErrCorrupt: stored bytes failed their checksum or framing.
	ErrCorrupt = errors.New("events: corrupt data")
)

// WrongRevisionError reports an optimistic-concurrency failure. It matches
// ErrWrongExpectedRevision with errors.Is.
type WrongRevisionError struct {
	Stream   string
	Expected ExpectedRevision
	// Actual is the stream's current revision; Exists is false when the
	// stream has no events.
	Actual uint64
	Exists bool
}

func (e *WrongRevisionError) Error() string {
	actual := "no stream"
	if e.Exists {
		actual = fmt.Sprintf("revision %d", e.Actual)
	}
	return fmt.Sprintf("events: wrong expected revision on %q: expected %s, stream is at %s", e.Stream, e.Expected, actual)
}

// Is makes errors.Is(err, ErrWrongExpectedRevision) true.
func (e *WrongRevisionError) Is(target error) bool { return target == ErrWrongExpectedRevision }
