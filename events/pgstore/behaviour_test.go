package pgstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"citizen/events"
	"citizen/events/eventstest"

	"github.com/jackc/pgx/v5"
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestRefusedBeforeWrite: what the events table cannot hold is refused
// with ErrMalformed before anything is written; what it can hold, however
// odd, comes back byte for byte and to the nanosecond.
func TestRefusedBeforeWrite(t *testing.T) {
	url := serverURL(t)
	ctx := ctxT(t, 30*time.Second)
	s := openT(t, Config{URL: url, Schema: newSchema(t, url), Check: events.AppendCheck{Lax: true}})
	mod := func(f func(*events.Event)) events.Event {
		ev := eventstest.Feedback(t, "x")
		f(&ev)
		return ev
	}
	for name, ev := range map[string]events.Event{
		"NUL in tenant":      mod(func(e *events.Event) { e.Tenant = "a\x00b" }),
		"NUL in correlation": mod(func(e *events.Event) { e.CorrelationID = "\x00" }),
		"NUL in causation":   mod(func(e *events.Event) { e.CausationID = "c\x00" }),
		"time before range":  mod(func(e *events.Event) { e.Time = time.Date(-5000, 1, 1, 0, 0, 0, 0, time.UTC) }),
		"time after range":   mod(func(e *events.Event) { e.Time = time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC) }),
	} {
		_, err := s.Append(ctx, "refused", events.Any, eventstest.Feedback(t, "ok"), ev)
		if !errors.Is(err, events.ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	if lp, err := s.LastPosition(ctx); err != nil || lp != 0 {
		t.Fatalf("after refusals LastPosition %d, %v", lp, err)
	}
	odd := []events.Event{
		mod(func(e *events.Event) { e.Time = time.Date(-4700, 3, 4, 5, 6, 7, 891, time.UTC) }),
		mod(func(e *events.Event) { e.Time = time.Date(294000, 1, 1, 0, 0, 0, 999999999, time.UTC) }),
		mod(func(e *events.Event) {
			e.Time = time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("+05:30", 5*3600+1800))
			// Whitespace, escapes, key order and bytes jsonb would rewrite
			// or PostgreSQL json would refuse (invalid UTF-8, \u0000).
			e.Data = []byte(" {\"text\" : \"\xff\xfe \\u0000 \\ud83d\\ude00\", \"source\":\"harness\" ,\"interaction_id\":\"i\",\"feedback_id\":\"f\"}\n")
			e.Tenant, e.CorrelationID, e.CausationID = "ténant ✓", strings.Repeat("c", 2000), ""
			e.Schema = 1 << 40
		}),
	}
	if _, err := s.Append(ctx, "odd", events.NoStream, odd...); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadStream(ctx, "odd", 0, events.Forward, 0)
	if err != nil || len(got) != len(odd) {
		t.Fatalf("read %d events, %v", len(got), err)
	}
	for i, ev := range got {
		w := odd[i]
		if ev.ID != w.ID || !ev.Time.Equal(w.Time) || ev.Time.Location() != time.UTC || !bytes.Equal(ev.Data, w.Data) ||
			ev.Tenant != w.Tenant || ev.CorrelationID != w.CorrelationID || ev.CausationID != w.CausationID || ev.Schema != w.Schema {
			t.Fatalf("event %d:\n got %+v\nwant %+v", i, ev, w)
		}
	}
	for _, name := range []string{"a\x00b", "\xff"} {
		if err := s.SaveCheckpoint(ctx, name, 1); !errors.Is(err, events.ErrMalformed) {
			t.Errorf("SaveCheckpoint(%q): %v, want ErrMalformed", name, err)
		}
		if _, _, err := s.Checkpoint(ctx, name); !errors.Is(err, events.ErrMalformed) {
			t.Errorf("Checkpoint(%q): %v, want ErrMalformed", name, err)
		}
	}
}

// TestGroupIsolation: a request that the server refuses inside a group
// transaction (here a trigger raises for one tenant) fails alone; the
// other requests of its group are committed, and nothing of it is stored.
func TestGroupIsolation(t *testing.T) {
	url := serverURL(t)
	ctx := ctxT(t, 30*time.Second)
	schema := newSchema(t, url)
	s := openT(t, Config{URL: url, Schema: schema})
	q := pgx.Identifier{schema}.Sanitize()
	conn := sqlConn(t, url)
	if _, err := conn.Exec(ctx, `CREATE FUNCTION `+q+`.poison() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.tenant = 'poison' THEN RAISE EXCEPTION 'poisoned event %', NEW.id; END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER poison BEFORE INSERT ON `+q+`.events FOR EACH ROW EXECUTE FUNCTION `+q+`.poison();`); err != nil {
		t.Fatal(err)
	}
	for round := range 5 {
		var wg sync.WaitGroup
		errs := make([]error, 32)
		bad := eventstest.Feedback(t, "bad")
		bad.Tenant = "poison"
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ev := eventstest.Feedback(t, fmt.Sprint("good", i))
				if i == 7 {
					ev = bad
				}
				_, errs[i] = s.Append(ctx, fmt.Sprintf("iso-%d-%d", round, i%4), events.Any, ev)
			}()
		}
		wg.Wait()
		for i, err := range errs {
			switch {
			case i == 7 && (err == nil || !strings.Contains(err.Error(), "poisoned event") || errors.Is(err, ErrUnavailable)):
				t.Fatalf("poisoned append: %v", err)
			case i != 7 && err != nil:
				t.Fatalf("append %d in the poisoned group: %v", i, err)
			}
		}
		if _, err := s.ReadStream(ctx, fmt.Sprintf("iso-%d-3", round), 0, events.Forward, 0); err != nil {
			t.Fatal(err)
		}
		all, err := s.ReadAll(ctx, 0, events.Filter{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 31*(round+1) {
			t.Fatalf("round %d: %d events stored, want %d", round, len(all), 31*(round+1))
		}
		for i, ev := range all {
			if ev.Tenant == "poison" || ev.Position != uint64(i+1) {
				t.Fatalf("event %d: %+v", i, ev)
			}
		}
	}
}

// TestGroupCommit: concurrent appends share transactions, each keeping its
// own expected-revision check.
func TestGroupCommit(t *testing.T) {
	url := serverURL(t)
	ctx := ctxT(t, 30*time.Second)
	s := openT(t, Config{URL: url, Schema: newSchema(t, url)})
	const writers, per = 64, 10
	var wg sync.WaitGroup
	var mu sync.Mutex
	conflicts := 0
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				// Half the writers race NoStream on one stream per round:
				// exactly one of them may win.
				exp, stream := events.Any, fmt.Sprintf("own-%d", w)
				if w%2 == 0 {
					exp, stream = events.NoStream, fmt.Sprintf("race-%d", i)
				}
				_, err := s.Append(ctx, stream, exp, eventstest.Feedback(t, fmt.Sprint(w, "-", i)))
				var wr *events.WrongRevisionError
				switch {
				case errors.As(err, &wr) && w%2 == 0:
					mu.Lock()
					conflicts++
					mu.Unlock()
				case err != nil:
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	st := s.Stats()
	t.Logf("%d writers: %+v", writers, st)
	if want := writers/2*per - per; conflicts != want {
		t.Fatalf("%d NoStream conflicts, want %d", conflicts, want)
	}
	if st.Appends != uint64(writers*per-conflicts) || st.Events != st.Appends {
		t.Fatalf("stats %+v after %d successful appends", st, writers*per-conflicts)
	}
	if st.Groups*2 > st.Appends {
		t.Fatalf("%d transactions for %d appends: no group commit", st.Groups, st.Appends)
	}
	for i := range per {
		if evs, err := s.ReadStream(ctx, fmt.Sprintf("race-%d", i), 0, events.Forward, 0); err != nil || len(evs) != 1 {
			t.Fatalf("race-%d: %d events, %v", i, len(evs), err)
		}
	}
}

// TestMigrations: concurrent Opens of a fresh schema create it once; a
// schema newer than this build is refused.
func TestMigrations(t *testing.T) {
	url := serverURL(t)
	ctx := ctxT(t, 30*time.Second)
	schema := newSchema(t, url)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(ctx, Config{URL: url, Schema: schema, Logger: quiet})
			if err == nil {
				s.Close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	conn := sqlConn(t, url)
	q := pgx.Identifier{schema}.Sanitize()
	var n, v int
	if err := conn.QueryRow(ctx, "SELECT count(*), max(version) FROM "+q+".schema_migrations").Scan(&n, &v); err != nil {
		t.Fatal(err)
	}
	if n != len(migrations) || v != len(migrations) {
		t.Fatalf("%d migrations recorded up to version %d, want %d", n, v, len(migrations))
	}
	if _, err := conn.Exec(ctx, "INSERT INTO "+q+".schema_migrations (version, description) VALUES (99, 'from the future')"); err != nil {
		t.Fatal(err)
	}
	_, err := Open(ctx, Config{URL: url, Schema: schema, Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), "newer than this build") {
		t.Fatalf("Open of a newer schema: %v", err)
	}
}

// TestSessionSettings: synchronous_commit is set explicitly on every
// session of the store, on unless relaxed.
func TestSessionSettings(t *testing.T) {
	url := serverURL(t)
	ctx := ctxT(t, 30*time.Second)
	schema := newSchema(t, url)
	for _, want := range []string{"", "off", "local"} {
		s := openT(t, Config{URL: url, Schema: schema, SynchronousCommit: want})
		var got string
		if err := s.pool.QueryRow(ctx, "SHOW synchronous_commit").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if want == "" {
			want = "on"
		}
		if got != want {
			t.Fatalf("synchronous_commit %q, want %q", got, want)
		}
	}
}

// TestNotifyAcrossStores: a subscriber learns of another Store's commits
// (another process) through NOTIFY, long before its poll interval.
func TestNotifyAcrossStores(t *testing.T) {
	url := serverURL(t)
	ctx := ctxT(t, 30*time.Second)
	schema := newSchema(t, url)
	a := openT(t, Config{URL: url, Schema: schema})
	b := openT(t, Config{URL: url, Schema: schema, PollInterval: time.Hour})
	got := make(chan events.Event, 16)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go b.Subscribe(sctx, 0, events.Filter{}, func(_ context.Context, ev events.Event) error { got <- ev; return nil }) //nolint:errcheck // ends with the test
	for i := range 5 {
		ev := eventstest.Feedback(t, fmt.Sprint("n", i))
		if _, err := a.Append(ctx, "notify", events.Any, ev); err != nil {
			t.Fatal(err)
		}
		select {
		case d := <-got:
			if d.ID != ev.ID {
				t.Fatalf("delivered %s, want %s", d.ID, ev.ID)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("event %d of another Store not delivered within 10 s (poll interval 1 h)", i)
		}
	}
}

// TestPollFallback: an event committed without a notification (another
// writer that does not notify, or a notification lost with the listener's
// connection) is still delivered, by the subscriber's poll.
func TestPollFallback(t *testing.T) {
	url := serverURL(t)
	ctx := ctxT(t, 30*time.Second)
	schema := newSchema(t, url)
	s := openT(t, Config{URL: url, Schema: schema, PollInterval: 100 * time.Millisecond})
	first := eventstest.Feedback(t, "first")
	if _, err := s.Append(ctx, "poll", events.NoStream, first); err != nil {
		t.Fatal(err)
	}
	got := make(chan events.Event, 16)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go s.Subscribe(sctx, 0, events.Filter{}, func(_ context.Context, ev events.Event) error { got <- ev; return nil }) //nolint:errcheck // ends with the test
	if d := <-got; d.ID != first.ID {
		t.Fatalf("delivered %s", d.ID)
	}
	// A silent writer: the same rows Append writes, under the head lock,
	// without pg_notify.
	ev := eventstest.Feedback(t, "silent")
	tb, ns := splitTime(ev.Time)
	q := pgx.Identifier{schema}.Sanitize()
	conn := sqlConn(t, url)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []struct {
		sql  string
		args []any
	}{
		{"SELECT position FROM " + q + ".head WHERE id = 1 FOR UPDATE", nil},
		{"INSERT INTO " + q + ".events (" + columns + ") VALUES (2, 'poll', 1, $1, $2, $3, $4, $5, $6, $7, $8, $9)",
			[]any{ev.ID.String(), ev.Type, ev.Tenant, tb, ns, ev.Schema, ev.CorrelationID, ev.CausationID, []byte(ev.Data)}},
		{"UPDATE " + q + ".head SET position = 2 WHERE id = 1", nil},
	} {
		if _, err := tx.Exec(ctx, stmt.sql, stmt.args...); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-got:
		if d.ID != ev.ID || d.Position != 2 || !bytes.Equal(d.Data, ev.Data) {
			t.Fatalf("delivered %+v", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("an event committed without a notification was not delivered by the poll")
	}
}

// TestServerGoesAway stops the server (fast shutdown) under a Store: calls
// fail with ErrUnavailable within RetryTimeout and say what failed, Open
// fails the same way; once the server is back the same Store appends
// again, the subscription that was running resumes without a gap, and
// the notification listener has reconnected.
func TestServerGoesAway(t *testing.T) {
	c := privateCluster(t)
	ctx := ctxT(t, 2*time.Minute)
	schema := newSchema(t, c.url)
	s := openT(t, Config{URL: c.url, Schema: schema, RetryTimeout: 300 * time.Millisecond})
	other := openT(t, Config{URL: c.url, Schema: schema, PollInterval: time.Hour}) // learns of s's commits by NOTIFY only
	if _, err := s.Append(ctx, "away", events.NoStream, eventstest.Feedback(t, "before")); err != nil {
		t.Fatal(err)
	}
	sub := newSeqCollector()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go other.Subscribe(sctx, 0, events.Filter{}, sub.handle) //nolint:errcheck // ends with the test
	sub.waitFor(t, ctx, 1)

	c.script(t, "stop")
	start := time.Now()
	ev := eventstest.Feedback(t, "during")
	_, err := s.Append(ctx, "away", events.Exact(0), ev)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), `append to "away"`) || !strings.Contains(err.Error(), "outcome unknown") {
		t.Fatalf("Append with the server down: %v", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("Append took %v to fail (RetryTimeout 300 ms)", el)
	}
	checks := map[string]error{}
	_, checks["ReadAll"] = s.ReadAll(ctx, 0, events.Filter{}, 0)
	_, checks["ReadStream"] = s.ReadStream(ctx, "away", 0, events.Forward, 0)
	_, checks["LastPosition"] = s.LastPosition(ctx)
	_, _, checks["Checkpoint"] = s.Checkpoint(ctx, "c")
	checks["SaveCheckpoint"] = s.SaveCheckpoint(ctx, "c", 1)
	_, checks["Open"] = Open(ctx, Config{URL: c.url, Schema: schema, Logger: quiet})
	for name, err := range checks {
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s with the server down: %v, want ErrUnavailable", name, err)
		}
	}

	c.script(t, "start")
	// The same event again: the retry the error message promises is safe.
	r, err := s.Append(ctx, "away", events.Exact(0), ev)
	if err != nil || r.FirstPosition != 2 || r.NextRevision != 1 {
		t.Fatalf("Append after the restart: %+v, %v", r, err)
	}
	sub.waitFor(t, ctx, 2)
	// By now the listener is back: a commit reaches the other Store at
	// once, although its poll interval is an hour.
	if _, err := s.Append(ctx, "away", events.Exact(1), eventstest.Feedback(t, "after")); err != nil {
		t.Fatal(err)
	}
	nctx, ncancel := context.WithTimeout(ctx, 10*time.Second)
	defer ncancel()
	got := sub.waitFor(t, nctx, 3)
	if got[2].Position != 3 {
		t.Fatalf("subscriber's third event at %d", got[2].Position)
	}
}

// TestAppendContext: an Append whose context is done before the committer
// takes it writes nothing and returns the context's error; one cancelled
// while in flight returns at once, and its retry with the same ids gives
// the one stored copy.
func TestAppendContext(t *testing.T) {
	url := serverURL(t)
	ctx := ctxT(t, 30*time.Second)
	s := openT(t, Config{URL: url, Schema: newSchema(t, url)})
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Append(done, "ctx", events.Any, eventstest.Feedback(t, "x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
	for i := range 20 {
		ev := eventstest.Feedback(t, fmt.Sprint("c", i))
		short, cancel := context.WithTimeout(ctx, time.Duration(i)*100*time.Microsecond)
		_, err := s.Append(short, "ctx", events.Any, ev)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("append %d: %v", i, err)
		}
		r, err := s.Append(ctx, "ctx", events.Any, ev)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := s.ReadStream(ctx, "ctx", 0, events.Forward, 0)
		if err != nil || len(evs) != i+1 || evs[i].ID != ev.ID || evs[i].Position != r.FirstPosition {
			t.Fatalf("after append %d: %d events, %v", i, len(evs), err)
		}
	}
}

// TestOpenRefusedByServer: a server that answers but refuses (no such
// database) is a clear error, not ErrUnavailable.
func TestOpenRefusedByServer(t *testing.T) {
	url := serverURL(t)
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	bad := fmt.Sprintf("postgres://%s@%s:%d/no_such_db_here?sslmode=disable", cfg.User, cfg.Host, cfg.Port)
	_, err = Open(ctxT(t, 30*time.Second), Config{URL: bad, Logger: quiet})
	if err == nil || errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "no_such_db_here") ||
		!strings.HasPrefix(err.Error(), "events: pgstore: ") {
		t.Fatalf("Open of a missing database: %v", err)
	}
	t.Log(err)
}
