// Package events owns citizen's system of record: the event envelope, the
// typed events of docs/architecture.md section 2 with their codec and upcasting, the
// Store interface with its backends, the bus and the relay that feeds it.
//
// Every other component writes by appending events and reads by replaying or
// subscribing; nothing else is the truth. This package imports no other
// citizen package.
//
// Positions. Every event in a store has a global Position (1, 2, 3, ... with
// no gaps, in commit order) and a Revision inside its stream (0, 1, 2, ...).
// Readers and subscribers start "after" a position: after 0 means from the
// beginning, and a checkpoint is simply the position of the last event that
// was fully handled.
//
// Idempotency. An event's ID (a UUID) identifies it for good: appending an
// event whose ID is already in the store does not write it again, so a
// handler that derives IDs deterministically (see DeterministicID) can retry
// an append safely under at-least-once delivery.
package events
