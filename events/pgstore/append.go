package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"citizen/events"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// The range of times PostgreSQL's timestamptz holds (4713 BC to 294276
// AD), kept a year inside its ends.
var (
	minTime = time.Date(-4711, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(294275, 1, 1, 0, 0, 0, 0, time.UTC)
)

// splitTime splits t into what the time column keeps (microseconds) and
// the nanoseconds within the microsecond (time_ns).
func splitTime(t time.Time) (time.Time, int32) {
	ns := t.Nanosecond() % 1000
	return t.Add(-time.Duration(ns)).UTC(), int32(ns)
}

// joinTime is the inverse of splitTime, in UTC.
func joinTime(t time.Time, ns int32) time.Time { return t.Add(time.Duration(ns)).UTC() }

// checkText refuses what the events table cannot hold although
// AppendCheck accepts it: a NUL byte in a text column (PostgreSQL text
// cannot contain one) and a time outside timestamptz's range.
func checkText(evs []events.Event) error {
	for i := range evs {
		ev := &evs[i]
		for _, f := range [...]struct{ name, v string }{{"type", ev.Type}, {"tenant", ev.Tenant},
			{"correlation_id", ev.CorrelationID}, {"causation_id", ev.CausationID}} {
			if strings.IndexByte(f.v, 0) >= 0 {
				return fmt.Errorf("event %d: %w: NUL byte in %s (PostgreSQL text cannot hold it)", i, events.ErrMalformed, f.name)
			}
		}
		if ev.Time.Before(minTime) || !ev.Time.Before(maxTime) {
			return fmt.Errorf("event %d: %w: time %s outside PostgreSQL's range", i, events.ErrMalformed, ev.Time.UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// request is one Append on its way through the committer.
type request struct {
	ctx      context.Context
	stream   string
	expected events.ExpectedRevision
	evs      []events.Event // copies; Data in one buffer of the request's own
	bytes    int
	done     chan struct{} // capacity 1

	// set by the committer before done is signalled
	res events.AppendResult
	err error
}

// Append implements events.Store. Validation happens on the caller's
// goroutine; the committer then decides and writes this request together
// with every other one waiting, in one transaction (group commit): each
// request keeps its own expected-revision check and is written whole or
// not at all.
func (s *Store) Append(ctx context.Context, stream string, expected events.ExpectedRevision, evs ...events.Event) (events.AppendResult, error) {
	if err := ctx.Err(); err != nil {
		return events.AppendResult{}, err
	}
	if err := s.cfg.Check.Validate(stream, evs); err != nil {
		return events.AppendResult{}, err
	}
	if err := checkText(evs); err != nil {
		return events.AppendResult{}, err
	}
	r := &request{ctx: ctx, stream: stream, expected: expected, evs: make([]events.Event, len(evs)), done: make(chan struct{}, 1)}
	for i := range evs {
		r.bytes += len(evs[i].Data)
	}
	buf := make([]byte, 0, r.bytes)
	for i, ev := range evs {
		buf = append(buf, ev.Data...)
		ev.Data = buf[len(buf)-len(ev.Data) : len(buf) : len(buf)]
		r.evs[i] = ev
	}
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return events.AppendResult{}, events.ErrClosed
	}
	s.reqs <- r
	s.closeMu.RUnlock()
	select {
	case <-r.done:
		return r.res, r.err
	case <-ctx.Done():
		return events.AppendResult{}, ctx.Err()
	}
}

func finish(r *request, res events.AppendResult, err error) {
	r.res, r.err = res, err
	r.done <- struct{}{}
}

// Group limits besides Config.MaxGroup.
const (
	maxGroupBytes  = 8 << 20
	maxGroupEvents = 8192
	// groupTimeout bounds one attempt at a group transaction.
	groupTimeout = 30 * time.Second
)

// committer is the goroutine that writes appends: it takes every request
// waiting (up to the group limits) and commits them in one transaction.
//
// Left alone, a group would hold only the appends that queued while the
// previous transaction ran, and the ones that transaction released would
// form the next: with n steady writers, groups of n/2 alternating. So
// after a commit that released k requests it waits, at most half that
// transaction's duration (and at most maxGatherWait), until the k have
// come back as well: the group then covers every writer.
func (s *Store) committer() {
	defer close(s.cdone)
	var group []*request
	var timer *time.Timer
	target, window := 0, time.Duration(0)
	for {
		r, ok := <-s.reqs
		if !ok {
			return
		}
		group = append(group[:0], r)
		n, bytes := len(r.evs), r.bytes
		full := func() bool { return len(group) >= s.cfg.MaxGroup || n >= maxGroupEvents || bytes >= maxGroupBytes }
		take := func(r *request) {
			group = append(group, r)
			n, bytes = n+len(r.evs), bytes+r.bytes
		}
	gather:
		for !full() {
			select {
			case r, ok := <-s.reqs:
				if !ok {
					break gather
				}
				take(r)
			default:
				break gather
			}
		}
		if len(group) < target && !full() && window > 0 {
			if timer == nil {
				timer = time.NewTimer(window)
			} else {
				timer.Reset(window)
			}
		wait:
			for len(group) < target && !full() {
				select {
				case r, ok := <-s.reqs:
					if !ok {
						break wait
					}
					take(r)
				case <-timer.C:
					break wait
				}
			}
			timer.Stop()
		}
		start := time.Now()
		s.commit(group)
		// Released: len(group); already queued behind them: len(s.reqs).
		target = min(len(group)+len(s.reqs), s.cfg.MaxGroup)
		window = min(time.Since(start)/2, s.gatherWait) // a lone writer (target 1) never waits
	}
}

// maxGatherWait bounds the committer's wait for released appenders (0:
// no wait); Open copies it. A variable for the benchmark that compares
// both.
var maxGatherWait = 2 * time.Millisecond

// outcome is a request's decision within one attempt.
type outcome struct {
	res events.AppendResult
	err error
}

// commit writes group, retrying on a lost connection for up to
// RetryTimeout (idempotent: a retry finds the ids of an attempt that did
// commit). If the transaction fails on the server's word (a constraint,
// a trigger), the requests are committed one by one so that only the
// guilty one fails.
func (s *Store) commit(group []*request) {
	live := group[:0:0]
	for _, r := range group {
		if err := r.ctx.Err(); err != nil {
			finish(r, events.AppendResult{}, err)
			continue
		}
		live = append(live, r)
	}
	deadline := time.Now().Add(s.cfg.RetryTimeout)
	backoff := 50 * time.Millisecond
	for len(live) > 0 {
		outs, err := s.tryGroup(live)
		if err == nil {
			for i, r := range live {
				if outs[i].err == nil {
					s.stats.appends.Add(1)
				}
				finish(r, outs[i].res, outs[i].err)
			}
			return
		}
		if !transient(err) {
			if _, ok := errors.AsType[*pgconn.PgError](err); ok && len(live) > 1 {
				for _, r := range live {
					s.commit([]*request{r})
				}
				return
			}
			for _, r := range live {
				finish(r, events.AppendResult{}, fmt.Errorf("events: pgstore: append to %q: %w", r.stream, err))
			}
			return
		}
		if time.Now().Add(backoff).After(deadline) {
			for _, r := range live {
				finish(r, events.AppendResult{}, fmt.Errorf("%w: append to %q (outcome unknown; retrying with the same ids is safe): %w",
					ErrUnavailable, r.stream, err))
			}
			return
		}
		s.stats.retries.Add(1)
		s.log.Warn("pgstore: append transaction failed; retrying", "requests", len(live), "err", err)
		time.Sleep(backoff)
		backoff = min(2*backoff, time.Second)
		next := live[:0:0]
		for _, r := range live {
			if err := r.ctx.Err(); err != nil {
				finish(r, events.AppendResult{}, err)
				continue
			}
			next = append(next, r)
		}
		live = next
	}
}

type storedEvent struct {
	stream   string
	revision int64
	position int64
}

// insertRows are the columns of the events to insert, as arrays.
type insertRows struct {
	position, revision, schema []int64
	stream, typ, tenant        []string
	corr, caus                 []string
	id                         []pgtype.UUID
	time                       []time.Time
	ns                         []int32
	data                       [][]byte
}

func (w *insertRows) add(stream string, rev, pos int64, ev *events.Event) {
	t, ns := splitTime(ev.Time)
	w.position, w.revision, w.schema = append(w.position, pos), append(w.revision, rev), append(w.schema, int64(ev.Schema))
	w.stream, w.typ, w.tenant = append(w.stream, stream), append(w.typ, ev.Type), append(w.tenant, ev.Tenant)
	w.corr, w.caus = append(w.corr, ev.CorrelationID), append(w.caus, ev.CausationID)
	w.id = append(w.id, pgtype.UUID{Bytes: ev.ID, Valid: true})
	w.time, w.ns, w.data = append(w.time, t), append(w.ns, ns), append(w.data, ev.Data)
}

// tryGroup runs one transaction for group: it locks the head row (which
// serialises every writer of the schema, so commit order is position
// order and a reader never sees position N+1 before N), reads the ids
// already stored and the streams' last revisions, decides each request in
// order as the single writer would, inserts the new events with one
// statement, moves the head and notifies, and commits. Two round trips.
// The outcomes are valid only if err is nil.
func (s *Store) tryGroup(group []*request) (outs []outcome, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	defer cancel()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil && !conn.Conn().IsClosed() && conn.Conn().PgConn().TxStatus() != 'I' {
			rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
			conn.Exec(rctx, "ROLLBACK") //nolint:errcheck // Release destroys a connection left in a transaction
			rcancel()
		}
		conn.Release()
	}()

	var ids []pgtype.UUID
	var streams []string
	seenStream := map[string]bool{}
	for _, r := range group {
		for i := range r.evs {
			ids = append(ids, pgtype.UUID{Bytes: r.evs[i].ID, Valid: true})
		}
		if !seenStream[r.stream] {
			seenStream[r.stream] = true
			streams = append(streams, r.stream)
		}
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	b.Queue(s.sql.lockHead)
	b.Queue(s.sql.storedIDs, ids)
	b.Queue(s.sql.heads, streams)
	br := conn.SendBatch(ctx, b)
	var head int64
	stored := map[uuid.UUID]storedEvent{}
	heads := map[string]int64{} // last revision; -1: no events
	err = func() error {
		if _, err := br.Exec(); err != nil {
			return err
		}
		if err := br.QueryRow().Scan(&head); err != nil {
			return err
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		for rows.Next() {
			var id pgtype.UUID
			var st storedEvent
			if err := rows.Scan(&id, &st.stream, &st.revision, &st.position); err != nil {
				rows.Close()
				return err
			}
			stored[id.Bytes] = st
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = br.Query()
		if err != nil {
			return err
		}
		for rows.Next() {
			var name string
			var rev *int64
			if err := rows.Scan(&name, &rev); err != nil {
				rows.Close()
				return err
			}
			heads[name] = -1
			if rev != nil {
				heads[name] = *rev
			}
		}
		return rows.Err()
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}

	outs = make([]outcome, len(group))
	next := head + 1
	var w insertRows
	for gi, r := range group {
		outs[gi] = s.decide(r, stored, heads, &next, &w)
	}

	b = &pgx.Batch{}
	if len(w.position) > 0 {
		b.Queue(s.sql.insert, w.position, w.stream, w.revision, w.id, w.typ, w.tenant, w.time, w.ns, w.schema, w.corr, w.caus, w.data)
		b.Queue(s.sql.setHead, next-1)
		b.Queue("SELECT pg_notify($1, $2)", s.notify, strconv.FormatInt(next-1, 10))
	}
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	if len(w.position) > 0 {
		s.stats.events.Add(uint64(len(w.position)))
		s.stats.groups.Add(1)
		s.broadcast()
	}
	return outs, nil
}

// decide places r against what is stored and what the group placed
// before it (stored and heads are updated with r's new events, which are
// added to w at positions from *next).
func (s *Store) decide(r *request, stored map[uuid.UUID]storedEvent, heads map[string]int64, next *int64, w *insertRows) outcome {
	lastNew := -1
	for i := range r.evs {
		st, ok := stored[r.evs[i].ID]
		if !ok {
			lastNew = i
			continue
		}
		if st.stream != r.stream {
			return outcome{err: fmt.Errorf("%w: id %s is already stored in stream %q", events.ErrMalformed, r.evs[i].ID, st.stream)}
		}
	}
	if lastNew < 0 { // every event stored already: the first Append's result
		first, last := stored[r.evs[0].ID], stored[r.evs[len(r.evs)-1].ID]
		return outcome{res: events.AppendResult{FirstPosition: uint64(first.position), LastPosition: uint64(last.position),
			NextRevision: uint64(last.revision)}}
	}
	cur := heads[r.stream]
	if !r.expected.Check(uint64(max(cur, 0)), cur >= 0) {
		return outcome{err: &events.WrongRevisionError{Stream: r.stream, Expected: r.expected, Actual: uint64(max(cur, 0)), Exists: cur >= 0}}
	}
	var res events.AppendResult
	for i := range r.evs {
		ev := &r.evs[i]
		st, ok := stored[ev.ID]
		if !ok {
			cur++
			st = storedEvent{stream: r.stream, revision: cur, position: *next}
			*next++
			stored[ev.ID] = st
			w.add(r.stream, st.revision, st.position, ev)
		}
		if i == 0 {
			res.FirstPosition = uint64(st.position)
		}
		res.LastPosition = uint64(st.position)
	}
	heads[r.stream] = cur
	res.NextRevision = uint64(cur)
	return outcome{res: res}
}
