package eventlog

import (
	"errors"
	"fmt"
	"time"

	"citizen/events"
)

// Sentinel errors of the embedded store, besides those of package events
// (ErrClosed, ErrCorrupt, ...). Callers test with errors.Is.
var (
	// ErrLocked: another Store (in this or another process) has the
	// directory open, or Repair runs on it.
	ErrLocked = errors.New("events: eventlog: directory in use")

	// ErrCorrupt is events.ErrCorrupt: stored bytes failed their checksum,
	// framing or consistency checks. Open returns it as a *CorruptError
	// (segment, byte offset, what to do); reads wrap it with the position.
	ErrCorrupt = events.ErrCorrupt

	// ErrUnavailable: the store cannot record appends now because a write
	// or fdatasync failed. Nothing from the failed appends is kept (a retry
	// with the same ids is safe); the store recovers by itself, on the
	// next Append or in the background, once the filesystem accepts writes
	// again. Ready reports it. The error also matches its cause (an
	// *os.PathError, syscall.EIO, ...).
	ErrUnavailable = errors.New("events: eventlog: cannot record now")

	// ErrNoSpace: ErrUnavailable because the disk or quota is full
	// (ENOSPC, EDQUOT). An error that matches ErrNoSpace matches
	// ErrUnavailable too.
	ErrNoSpace = fmt.Errorf("%w: no space left", ErrUnavailable)

	// ErrAheadOfLog: a checkpoint, or the start of a ReadAll or Subscribe,
	// lies beyond the end of the log although the log once reached it:
	// events it covers were lost or moved aside by Repair, and the
	// positions after the end will be reused by new events, which a
	// consumer resuming there would skip without a word. The consumer
	// must be reset (SaveCheckpoint with a position within the log) after
	// deciding what to do about the events it processed and the log no
	// longer has. A position the log has never reached is not an error:
	// Subscribe waits for it (the events.Store contract).
	ErrAheadOfLog = errors.New("events: eventlog: position beyond the end of the log")
)

// unavailable is the state of a store that cannot record.
type unavailable struct {
	err   error         // what Append and Ready return
	since time.Time     // the first failure
	next  time.Time     // the next recovery attempt is due
	wait  time.Duration // the current backoff
}

// unavailableErr wraps the cause of a failure in ErrNoSpace or
// ErrUnavailable.
func unavailableErr(cause error) error {
	if noSpace(cause) {
		return fmt.Errorf("%w (appends are refused until space is freed; the store recovers by itself): %w", ErrNoSpace, cause)
	}
	return fmt.Errorf("%w (a write or sync failed; the store retries by itself): %w", ErrUnavailable, cause)
}

func (s *Store) unavailErr() error {
	if u := s.unavail.Load(); u != nil {
		return u.err
	}
	return nil
}

// fail stops recording after an I/O error: what was written but not
// synced is in doubt, so every pending and later Append fails until the
// writer has recovered (heal.go). It returns the error to answer with.
func (s *Store) fail(cause error) error {
	now := time.Now()
	u := &unavailable{err: unavailableErr(cause), since: now, next: now.Add(s.cfg.retryMin), wait: s.cfg.retryMin}
	if s.unavail.CompareAndSwap(nil, u) {
		s.stats.failures.Add(1)
		s.log.Error("store cannot record: appends fail until it recovers", "err", cause, "retry_in", u.wait)
	}
	return s.unavailErr()
}

// Ready reports whether the store can record appends now: nil if so; an
// error matching ErrUnavailable (and ErrNoSpace when the disk is full)
// from a failed write or sync until the store has recovered by itself;
// events.ErrClosed after Close. A readiness probe (/readyz) calls it; it
// does no I/O.
func (s *Store) Ready() error {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return events.ErrClosed
	}
	return s.unavailErr()
}

// RetryAfter is how long until the store next tries to recover (zero if
// it is recording): a hint for a Retry-After header.
func (s *Store) RetryAfter() time.Duration {
	if u := s.unavail.Load(); u != nil {
		return max(time.Until(u.next), 0)
	}
	return 0
}
