package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"citizen/events"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// columns of an event row, in the order scanEvent reads them.
const columns = "position, stream, revision, id, type, tenant, time, time_ns, schema, correlation_id, causation_id, data"

// statements are the store's SQL with the schema's qualified names.
type statements struct {
	lockHead, heads, storedIDs, insert, setHead   string
	readFwd, readBwd, streamExists, readAll, head string
	checkpoint, saveCheckpoint                    string
}

func newStatements(schema string) statements {
	t := func(name string) string { return pgx.Identifier{schema, name}.Sanitize() }
	ev, head, ck := t("events"), t("head"), t("checkpoints")
	return statements{
		lockHead: "SELECT position FROM " + head + " WHERE id = 1 FOR UPDATE",
		heads: "SELECT s.stream, (SELECT e.revision FROM " + ev + " e WHERE e.stream = s.stream ORDER BY e.revision DESC LIMIT 1)" +
			" FROM unnest($1::text[]) AS s(stream)",
		storedIDs: "SELECT id, stream, revision, position FROM " + ev + " WHERE id = ANY($1::uuid[])",
		insert: "INSERT INTO " + ev + " (" + columns + ") SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[]," +
			" $4::uuid[], $5::text[], $6::text[], $7::timestamptz[], $8::integer[], $9::bigint[], $10::text[], $11::text[], $12::bytea[])",
		setHead:      "UPDATE " + head + " SET position = $1 WHERE id = 1",
		readFwd:      "SELECT " + columns + " FROM " + ev + " WHERE stream = $1 AND revision >= $2 ORDER BY revision LIMIT $3",
		readBwd:      "SELECT " + columns + " FROM " + ev + " WHERE stream = $1 AND revision <= $2 ORDER BY revision DESC LIMIT $3",
		streamExists: "SELECT EXISTS (SELECT 1 FROM " + ev + " WHERE stream = $1)",
		readAll: "SELECT " + columns + " FROM " + ev + " WHERE position > $1" +
			" AND ($2::text[] IS NULL OR type = ANY($2::text[]))" +
			" AND ($3::text[] IS NULL OR EXISTS (SELECT 1 FROM unnest($3::text[]) AS p(prefix) WHERE starts_with(stream, p.prefix)))" +
			" ORDER BY position LIMIT $4",
		head:       "SELECT position FROM " + head + " WHERE id = 1",
		checkpoint: "SELECT position::text FROM " + ck + " WHERE name = $1",
		saveCheckpoint: "INSERT INTO " + ck + " (name, position) VALUES ($1, $2::text::numeric)" +
			" ON CONFLICT (name) DO UPDATE SET position = EXCLUDED.position, updated_at = now()",
	}
}

// scanEvent reads one event row (columns order).
func scanEvent(rows pgx.Rows) (events.Event, error) {
	var ev events.Event
	var pos, rev, schema int64
	var id pgtype.UUID
	var t time.Time
	var ns int32
	if err := rows.Scan(&pos, &ev.Stream, &rev, &id, &ev.Type, &ev.Tenant, &t, &ns, &schema,
		&ev.CorrelationID, &ev.CausationID, &ev.Data); err != nil {
		return ev, err
	}
	if pos <= 0 || rev < 0 || schema > math.MaxInt || schema < math.MinInt || !id.Valid {
		return ev, fmt.Errorf("%w: row at position %d", events.ErrCorrupt, pos)
	}
	ev.Position, ev.Revision, ev.ID, ev.Schema = uint64(pos), uint64(rev), id.Bytes, int(schema)
	ev.Time = joinTime(t, ns)
	return ev, nil
}

func collect(rows pgx.Rows, capHint int) ([]events.Event, error) {
	defer rows.Close()
	out := make([]events.Event, 0, capHint)
	for rows.Next() {
		ev, err := scanEvent(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// clamp maps a uint64 position or revision onto bigint.
func clamp(v uint64) int64 { return int64(min(v, math.MaxInt64)) }

// limit maps max <= 0 (no limit) onto SQL's LIMIT NULL.
func limit(max int) any {
	if max <= 0 {
		return nil
	}
	return int64(max)
}

// ReadStream implements events.Store.
func (s *Store) ReadStream(ctx context.Context, stream string, from uint64, dir events.Direction, max int) ([]events.Event, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	if err := events.ValidateStream(stream); err != nil {
		return nil, fmt.Errorf("%w: %w", events.ErrStreamNotFound, err)
	}
	q := s.sql.readFwd
	if dir == events.Backward {
		q = s.sql.readBwd
	}
	read := func() ([]events.Event, error) {
		rows, err := s.pool.Query(ctx, q, stream, clamp(from), limit(max))
		if err != nil {
			return nil, s.dbErr(ctx, "read "+strconv.Quote(stream), err)
		}
		evs, err := collect(rows, min(max, 64))
		if err != nil {
			return nil, s.dbErr(ctx, "read "+strconv.Quote(stream), err)
		}
		return evs, nil
	}
	evs, err := read()
	if err != nil || len(evs) > 0 {
		return evs, err
	}
	// Nothing read: a stream with no events, or a range past its end.
	// The stream may have been created after the read; since streams
	// never go away, reading again once it exists gives an answer as of
	// that later moment.
	var exists bool
	if err := s.pool.QueryRow(ctx, s.sql.streamExists, stream).Scan(&exists); err != nil {
		return nil, s.dbErr(ctx, "read "+strconv.Quote(stream), err)
	}
	if !exists {
		return nil, fmt.Errorf("%w: %q", events.ErrStreamNotFound, stream)
	}
	return read()
}

// filterArgs maps a Filter onto the readAll statement's $2 and $3 (NULL:
// no condition).
func filterArgs(f events.Filter) (types, prefixes []string) {
	if len(f.Types) > 0 {
		types = f.Types
	}
	if len(f.StreamPrefixes) > 0 {
		prefixes = f.StreamPrefixes
	}
	return types, prefixes
}

// ReadAll implements events.Store. The filter is applied by the server.
func (s *Store) ReadAll(ctx context.Context, after uint64, f events.Filter, max int) ([]events.Event, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	types, prefixes := filterArgs(f)
	rows, err := s.pool.Query(ctx, s.sql.readAll, clamp(after), types, prefixes, limit(max))
	if err != nil {
		return nil, s.dbErr(ctx, "read all", err)
	}
	evs, err := collect(rows, min(max, 256))
	if err != nil {
		return nil, s.dbErr(ctx, "read all", err)
	}
	return evs, nil
}

// LastPosition implements events.Store.
func (s *Store) LastPosition(ctx context.Context) (uint64, error) {
	if err := s.begin(ctx); err != nil {
		return 0, err
	}
	defer s.end()
	var p int64
	if err := s.pool.QueryRow(ctx, s.sql.head).Scan(&p); err != nil {
		return 0, s.dbErr(ctx, "last position", err)
	}
	return uint64(p), nil
}

// readPage reads the head position and then up to ReadBatch events after
// after that match f, in one round trip. Every event at or below head is
// visible to the second statement (positions become visible in order), so
// when fewer than ReadBatch events come back the subscriber has seen every
// match up to head.
func (s *Store) readPage(ctx context.Context, after uint64, f events.Filter) ([]events.Event, uint64, error) {
	types, prefixes := filterArgs(f)
	b := &pgx.Batch{}
	b.Queue(s.sql.head)
	b.Queue(s.sql.readAll, clamp(after), types, prefixes, int64(s.cfg.ReadBatch))
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	var head int64
	if err := br.QueryRow().Scan(&head); err != nil {
		return nil, 0, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, 0, err
	}
	evs, err := collect(rows, 64)
	if err != nil {
		return nil, 0, err
	}
	return evs, uint64(head), br.Close()
}

// Subscribe implements events.Store. It reads pages of Config.ReadBatch
// events; once caught up it waits for a commit of this Store, a
// notification from another writer of the schema, or PollInterval,
// whichever comes first. A lost connection does not end it: it logs,
// retries with backoff and resumes where it was.
func (s *Store) Subscribe(ctx context.Context, after uint64, f events.Filter, h events.Handler) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	s.end()
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.stopCtx, cancel)()
	timer := time.NewTimer(s.cfg.PollInterval)
	defer timer.Stop()
	backoff, down := 100*time.Millisecond, false
	for {
		select {
		case <-s.done:
			return events.ErrClosed
		default:
		}
		wake := s.wakeChan()
		batch, head, err := s.readPage(qctx, after, f)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			select {
			case <-s.done:
				return events.ErrClosed
			default:
			}
			if !transient(err) {
				return s.dbErr(ctx, "subscribe", err)
			}
			if !down {
				s.log.Warn("pgstore: subscription lost its connection; retrying", "after", after, "err", err)
				down = true
			}
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return ctx.Err()
			case <-s.done:
				return events.ErrClosed
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		if down {
			s.log.Info("pgstore: subscription reconnected", "after", after)
			down, backoff = false, 100*time.Millisecond
		}
		for _, ev := range batch {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := h(ctx, ev); err != nil {
				return err
			}
			after = ev.Position
		}
		if len(batch) == s.cfg.ReadBatch {
			continue
		}
		after = max(after, head)
		timer.Reset(s.cfg.PollInterval)
		select {
		case <-wake:
		case <-timer.C:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return events.ErrClosed
		}
	}
}

// checkName refuses checkpoint names that PostgreSQL text cannot hold.
func checkName(name string) error {
	if !utf8.ValidString(name) || strings.IndexByte(name, 0) >= 0 {
		return fmt.Errorf("%w: checkpoint name %q: invalid UTF-8 or NUL", events.ErrMalformed, name)
	}
	return nil
}

// Checkpoint implements events.Store.
func (s *Store) Checkpoint(ctx context.Context, name string) (uint64, bool, error) {
	if err := s.begin(ctx); err != nil {
		return 0, false, err
	}
	defer s.end()
	if err := checkName(name); err != nil {
		return 0, false, err
	}
	var text string
	err := s.pool.QueryRow(ctx, s.sql.checkpoint, name).Scan(&text)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, s.dbErr(ctx, "checkpoint "+strconv.Quote(name), err)
	}
	pos, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%w: checkpoint %q holds %q", events.ErrCorrupt, name, text)
	}
	return pos, true, nil
}

// SaveCheckpoint implements events.Store: an upsert, durable when it
// returns (under the session's synchronous_commit).
func (s *Store) SaveCheckpoint(ctx context.Context, name string, pos uint64) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	if err := checkName(name); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, s.sql.saveCheckpoint, name, strconv.FormatUint(pos, 10)); err != nil {
		return s.dbErr(ctx, "save checkpoint "+strconv.Quote(name), err)
	}
	return nil
}
