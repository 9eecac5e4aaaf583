// Package pgstore is the events.Store backend on PostgreSQL (11 or later,
// UTF8 database), through github.com/jackc/pgx/v5 and its pool. It owns
// the store's schema, its migrations and the group committer; several
// processes may share one schema (docs/architecture.md section 7).
//
// # Schema
//
// Created by Open in Config.Schema (default "citizen"), versioned in
// schema_migrations (migrations in schema.go, applied in one transaction
// under an advisory lock, so concurrent Opens are safe; a schema newer
// than the build is refused):
//
//   - events: position (bigint primary key), stream (text, C collation),
//     revision (unique with stream), id (uuid, unique: idempotent appends
//     find stored ids through this index, never by scanning streams),
//     type, tenant, correlation_id, causation_id (text), time
//     (timestamptz, microseconds) with time_ns (the nanoseconds within
//     the microsecond, so times round-trip exactly), schema (bigint) and
//     data (bytea: the JSON exactly as appended; jsonb would rewrite it
//     and json refuses invalid UTF-8 and \u0000, which encoding/json and
//     the other backends accept).
//   - head: one row holding the last committed position.
//   - checkpoints: name, position (numeric(20,0), so every uint64 fits),
//     updated_at.
//
// # Positions in commit order
//
// A sequence would hand out positions in the order transactions start,
// while readers see them in the order they commit: a reader could see
// N+1 before N commits and, having moved past it, never deliver N (the
// outbox gap problem). Here every append transaction first locks the head
// row (SELECT ... FOR UPDATE), assigns positions after it, and moves it
// in the same transaction. PostgreSQL releases the row lock only after
// the commit is visible, so transactions that assign positions commit one
// after the other, in position order, across all processes: every
// snapshot sees a prefix 1..N of the log, positions have no gaps (a
// rolled-back transaction rolls back its head update too), and
// LastPosition is the head row.
//
// # Group commit
//
// Holding that lock through the commit's WAL flush limits a schema to one
// committing transaction at a time, so each transaction carries many
// appends. Append validates (events.AppendCheck, then what PostgreSQL
// text and timestamptz cannot hold: a NUL byte in type, tenant,
// correlation or causation, a time outside 4713 BC - 294276 AD) and
// copies its events on the caller's goroutine and queues them; one
// committer goroutine takes every queued request (Config.MaxGroup
// requests, 8192 events, 8 MiB at most) and runs one transaction in two
// round trips: [BEGIN; lock head; read the stored copies of the group's
// ids; read each stream's last revision], then, after deciding each
// request in queue order exactly as a single writer would (idempotent
// retry, id stored in another stream, expected revision against the
// stream as the requests before it left it), [INSERT all new events from
// arrays; move head; pg_notify; COMMIT]. A request that fails its check
// writes nothing and does not disturb the others. If the server refuses
// the transaction itself (a constraint, a trigger), its requests are
// committed one by one, so only the guilty one fails. After a commit that
// released k appends the committer waits (at most half that commit's
// duration, at most 2 ms) until they are back, so steady writers share a
// transaction instead of alternating in halves.
//
// # Durability and failures
//
// Sessions set synchronous_commit explicitly (Config.SynchronousCommit,
// "on" by default): an Append returns after its commit record is flushed,
// and survives a crash of PostgreSQL (TestCrashDuringAppends crashes it
// under load; with "off" that test loses acknowledged appends). A lost
// connection or a server that is down or recovering makes the committer
// retry the group on a fresh connection for Config.RetryTimeout; that is
// safe even if the failed COMMIT did happen, because the retry finds the
// ids and answers from the stored copies. After that an Append fails
// with ErrUnavailable, outcome unknown, and retrying with the same ids
// is safe. Reads fail with ErrUnavailable at once. Sessions also set
// idle_in_transaction_session_timeout (30 s), so a stalled client cannot
// hold the head lock for ever.
//
// # Reads and subscriptions
//
// ReadStream, ReadAll (filters applied by the server) and LastPosition
// are single statements. Subscribe reads pages of Config.ReadBatch: the
// head first, then the events after the subscriber's position in the
// same round trip; every event up to that head is visible to the second
// statement, so a page shorter than ReadBatch means caught up to the head
// even when the filter matched nothing. Caught up, it waits for a commit
// of this Store, a notification (one connection per Store LISTENs on the
// schema's channel, which every append transaction notifies at commit,
// and reconnects with backoff), or Config.PollInterval: a lost
// notification only delays delivery. A subscription rides out a lost
// connection (it logs and retries with backoff from where it was);
// other errors end it.
//
// # Numbers
//
// BenchmarkAppend runs both this store and the embedded log
// (events/eventlog) in one run. On the shared 2-vCPU development machine,
// under load averages of 4 to 17 from other work, with PostgreSQL 15 on
// the same machine at its default durability settings, durable 1 KB
// appends per second were: 1 writer 40-250 (p50 3-7 ms: two round trips
// and the WAL flush; a trivial pgbench transaction took 1.6 ms at the
// time), 16 writers 440-1,570 (16 appends per transaction), 64 writers
// 1,100-4,100 (63), 256 writers 3,000-8,900 (240); the embedded log did
// 2 to 4 times as many in the same runs. The server took 8-11 ms to
// insert 240 such rows and 2-3 ms to commit them: the time the head lock
// is held bounds throughput. The wait for released appenders doubled the
// group size and the throughput at 16 and 64 writers in one comparison
// (load about 10) and made no difference in another (load 12-17, where
// the writers were back before the next transaction anyway).
//
// # Limits
//
// One committing transaction at a time per schema, whatever the number of
// processes. Rows are never deleted (no retention). The checkpoint name
// must be valid UTF-8 without NUL.
package pgstore
