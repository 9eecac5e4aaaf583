// Package eventstest is the conformance suite every events.Store backend
// runs (the memory store, the embedded log, EventStoreDB), in the manner of
// watermill's pubsub/tests: one Run with feature flags for what a backend
// can promise.
//
//	func TestConformance(t *testing.T) {
//		eventstest.Run(t, func(t *testing.T) events.Store { return memstore.New(memstore.Config{}) },
//			eventstest.Features{Gapless: true})
//	}
//
// Every subtest gets a fresh store from newStore and uses stream names with a
// random prefix, so a backend whose stores share data (one EventStoreDB
// server) can run it too. newStore should register a cleanup that closes
// the store; the suite tolerates ErrClosed from that second Close.
package eventstest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"citizen/events"
)

// Features says what a backend promises beyond the common contract.
type Features struct {
	// Gapless: positions start at 1 in a fresh store and have no gaps
	// (the embedded stores). Without it the suite checks only that
	// positions are unique and increasing (EventStoreDB's commit positions).
	Gapless bool
	// Persistent: data and checkpoints survive Close; Reopen must be set.
	Persistent bool
	// Reopen opens the same store again after s (returned by newStore or
	// an earlier Reopen) has been closed.
	Reopen func(t *testing.T, s events.Store) events.Store
	// StreamScopedIDs: the backend finds an already stored event id only
	// within the stream appended to (EventStoreDB has no global id index),
	// so reusing an id in another stream is not refused.
	StreamScopedIDs bool
	// RetryScopedIDs: the backend looks for a batch's stored ids only
	// where a retry of it would sit (after the expected revision, or at
	// the stream's end), so a batch mixing an event stored earlier in the
	// stream with new ones stores that event again (EventStoreDB: a
	// bounded check instead of a scan of the stream). The mixed-batch
	// step is skipped.
	RetryScopedIDs bool
	// Writers is the number of concurrent appenders in the concurrency
	// tests (default 16); AppendsPerWriter how many each makes (default 50).
	Writers, AppendsPerWriter int
	// Timeout bounds each waiting step (default 10 s).
	Timeout time.Duration
}

func (f *Features) defaults() {
	if f.Writers == 0 {
		f.Writers = 16
	}
	if f.AppendsPerWriter == 0 {
		f.AppendsPerWriter = 50
	}
	if f.Timeout == 0 {
		f.Timeout = 10 * time.Second
	}
}

type suite struct {
	newStore func(t *testing.T) events.Store
	f        Features
}

// Run runs the whole suite, each test in its own subtest with its own
// store.
func Run(t *testing.T, newStore func(t *testing.T) events.Store, f Features) {
	f.defaults()
	if f.Persistent && f.Reopen == nil {
		t.Fatal("eventstest: Features.Persistent needs Reopen")
	}
	s := &suite{newStore: newStore, f: f}
	tests := []struct {
		name string
		fn   func(t *testing.T, s *suite)
	}{
		{"AppendReadStream", testAppendReadStream},
		{"ReadAllFilters", testReadAllFilters},
		{"ExpectedRevision", testExpectedRevision},
		{"Idempotency", testIdempotency},
		{"Refusals", testRefusals},
		{"ConcurrentAppends", testConcurrentAppends},
		{"ConcurrentExact", testConcurrentExact},
		{"SubscribeCatchUpLive", testSubscribeCatchUpLive},
		{"SubscribeFromPositionFiltered", testSubscribeFromPositionFiltered},
		{"SubscribeUnderLoad", testSubscribeUnderLoad},
		{"SubscribeFromFuture", testSubscribeFromFuture},
		{"SubscribeStops", testSubscribeStops},
		{"Checkpoints", testCheckpoints},
		{"Close", testClose},
		{"CloseUnderLoad", testCloseUnderLoad},
		{"Reopen", testReopen},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, s) })
	}
}

// ---- helpers ----

func (s *suite) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), s.f.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// prefix returns a random stream prefix unique to this test.
func prefix(t *testing.T) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "ct" + hex.EncodeToString(b[:]) + "-"
}

// Feedback returns a valid feedback.received event whose text is text.
func Feedback(t testing.TB, text string) events.Event {
	t.Helper()
	ev, err := events.Encode(&events.FeedbackReceived{
		InteractionID: "i-" + text, FeedbackID: events.NewID().String(), Source: "harness", Text: text,
	}, events.Meta{CorrelationID: "corr-" + text, CausationID: "cause-" + text, Tenant: "tenant-a"})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// Interpreted returns a valid feedback.interpreted event.
func Interpreted(t testing.TB, text string) events.Event {
	t.Helper()
	ev, err := events.Encode(&events.FeedbackInterpreted{
		InteractionID: "i-" + text, FeedbackID: "f-" + text, Polarity: 0.5, Strength: 1, Hint: text,
		Confidence: 0.9, InterpreterVersion: "v1",
	}, events.Meta{Tenant: "tenant-b"})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func feedbacks(t testing.TB, n int, tag string) []events.Event {
	out := make([]events.Event, n)
	for i := range out {
		out[i] = Feedback(t, fmt.Sprintf("%s-%d", tag, i))
	}
	return out
}

// sameEvent checks that got is want as stored in stream at rev.
func sameEvent(t *testing.T, got, want events.Event, stream string, rev uint64) {
	t.Helper()
	switch {
	case got.ID != want.ID:
		t.Fatalf("id %s, want %s", got.ID, want.ID)
	case got.Type != want.Type || got.Schema != want.Schema:
		t.Fatalf("type %s/%d, want %s/%d", got.Type, got.Schema, want.Type, want.Schema)
	case got.Stream != stream || got.Revision != rev:
		t.Fatalf("%s at %q rev %d, want %q rev %d", got.ID, got.Stream, got.Revision, stream, rev)
	case !got.Time.Equal(want.Time):
		t.Fatalf("time %v, want %v", got.Time, want.Time)
	case got.CorrelationID != want.CorrelationID || got.CausationID != want.CausationID || got.Tenant != want.Tenant:
		t.Fatalf("metadata %q/%q/%q, want %q/%q/%q", got.CorrelationID, got.CausationID, got.Tenant,
			want.CorrelationID, want.CausationID, want.Tenant)
	case !bytes.Equal(got.Data, want.Data):
		t.Fatalf("data %s, want %s", got.Data, want.Data)
	case got.Position == 0:
		t.Fatalf("%s has position 0", got.ID)
	}
}

func mustAppend(t *testing.T, ctx context.Context, st events.Store, stream string, exp events.ExpectedRevision, evs ...events.Event) events.AppendResult {
	t.Helper()
	r, err := st.Append(ctx, stream, exp, evs...)
	if err != nil {
		t.Fatalf("append to %q: %v", stream, err)
	}
	return r
}

func readStream(t *testing.T, ctx context.Context, st events.Store, stream string) []events.Event {
	t.Helper()
	evs, err := st.ReadStream(ctx, stream, 0, events.Forward, 0)
	if err != nil {
		t.Fatalf("read %q: %v", stream, err)
	}
	return evs
}

func lastPosition(t *testing.T, ctx context.Context, st events.Store) uint64 {
	t.Helper()
	p, err := st.LastPosition(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// checkOrder checks that evs have strictly increasing positions, and with
// gapless also consecutive ones.
func checkOrder(t *testing.T, evs []events.Event, gapless bool) {
	t.Helper()
	for i := 1; i < len(evs); i++ {
		if evs[i].Position <= evs[i-1].Position {
			t.Fatalf("position %d after %d", evs[i].Position, evs[i-1].Position)
		}
		if gapless && evs[i].Position != evs[i-1].Position+1 {
			t.Fatalf("gap: position %d after %d", evs[i].Position, evs[i-1].Position)
		}
	}
}

// ---- tests ----

func testAppendReadStream(t *testing.T, s *suite) {
	ctx, st := s.ctx(t), s.newStore(t)
	stream := prefix(t) + "a"
	evs := feedbacks(t, 5, "rs")
	r1 := mustAppend(t, ctx, st, stream, events.NoStream, evs[:2]...)
	if r1.NextRevision != 1 || r1.LastPosition <= r1.FirstPosition {
		t.Fatalf("first batch: %+v", r1)
	}
	if s.f.Gapless && (r1.FirstPosition != 1 || r1.LastPosition != 2) {
		t.Fatalf("first batch of a fresh store: %+v, want positions 1..2", r1)
	}
	r2 := mustAppend(t, ctx, st, stream, events.Exact(1), evs[2:]...)
	if r2.NextRevision != 4 || r2.FirstPosition <= r1.LastPosition || r2.LastPosition < r2.FirstPosition {
		t.Fatalf("second batch: %+v after %+v", r2, r1)
	}
	if s.f.Gapless && (r2.FirstPosition != 3 || r2.LastPosition != 5) {
		t.Fatalf("second batch: %+v, want positions 3..5", r2)
	}
	if lp := lastPosition(t, ctx, st); lp != r2.LastPosition {
		t.Fatalf("LastPosition %d, want %d", lp, r2.LastPosition)
	}

	all := readStream(t, ctx, st, stream)
	if len(all) != 5 {
		t.Fatalf("read %d events, want 5", len(all))
	}
	for i, ev := range all {
		sameEvent(t, ev, evs[i], stream, uint64(i))
	}
	checkOrder(t, all, s.f.Gapless)
	if all[0].Position != r1.FirstPosition || all[4].Position != r2.LastPosition {
		t.Fatalf("positions %d..%d, want %d..%d", all[0].Position, all[4].Position, r1.FirstPosition, r2.LastPosition)
	}

	cases := []struct {
		from uint64
		dir  events.Direction
		max  int
		want []uint64 // revisions
	}{
		{0, events.Forward, 2, []uint64{0, 1}},
		{2, events.Forward, 0, []uint64{2, 3, 4}},
		{3, events.Forward, 10, []uint64{3, 4}},
		{5, events.Forward, 10, nil},
		{math.MaxUint64, events.Backward, 3, []uint64{4, 3, 2}},
		{1, events.Backward, 0, []uint64{1, 0}},
		{4, events.Backward, 1, []uint64{4}},
		{0, events.Backward, 5, []uint64{0}},
	}
	for _, c := range cases {
		got, err := st.ReadStream(ctx, stream, c.from, c.dir, c.max)
		if err != nil {
			t.Fatalf("ReadStream(from %d, dir %d, max %d): %v", c.from, c.dir, c.max, err)
		}
		var revs []uint64
		for _, ev := range got {
			revs = append(revs, ev.Revision)
			sameEvent(t, ev, evs[ev.Revision], stream, ev.Revision)
		}
		if fmt.Sprint(revs) != fmt.Sprint(c.want) {
			t.Fatalf("ReadStream(from %d, dir %d, max %d) revisions %v, want %v", c.from, c.dir, c.max, revs, c.want)
		}
	}
	if _, err := st.ReadStream(ctx, prefix(t)+"missing", 0, events.Forward, 10); !errors.Is(err, events.ErrStreamNotFound) {
		t.Fatalf("missing stream: %v, want ErrStreamNotFound", err)
	}
	// Mutating what was read or appended must not change the store.
	all[0].Data[0] = 'X'
	evs[1].Data[0] = 'X'
	again := readStream(t, ctx, st, stream)
	if again[0].Data[0] != '{' || again[1].Data[0] != '{' {
		t.Fatalf("store shares data buffers with callers: %s", again[0].Data)
	}
}

func testReadAllFilters(t *testing.T, s *suite) {
	ctx, st := s.ctx(t), s.newStore(t)
	p := prefix(t)
	a, b, c := p+"alpha-1", p+"alpha-2", p+"beta-1"
	start := lastPosition(t, ctx, st)
	var want []events.Event // in append order
	add := func(stream string, evs ...events.Event) {
		r := mustAppend(t, ctx, st, stream, events.Any, evs...)
		for i := range evs {
			evs[i].Stream = stream
			evs[i].Position = r.FirstPosition + uint64(i)
		}
		want = append(want, evs...)
	}
	add(a, Feedback(t, "1"), Interpreted(t, "2"))
	add(c, Feedback(t, "3"))
	add(b, Interpreted(t, "4"), Feedback(t, "5"))
	add(a, Feedback(t, "6"))
	add(c, Interpreted(t, "7"))

	match := func(f events.Filter) []events.Event {
		var out []events.Event
		for i := range want {
			if f.Match(&want[i]) {
				out = append(out, want[i])
			}
		}
		return out
	}
	check := func(name string, after uint64, f events.Filter, max int, exp []events.Event) {
		t.Helper()
		got, err := st.ReadAll(ctx, after, f, max)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var gi, wi []string
		for _, ev := range got {
			gi = append(gi, ev.ID.String())
		}
		for _, ev := range exp {
			wi = append(wi, ev.ID.String())
		}
		if strings.Join(gi, ",") != strings.Join(wi, ",") {
			t.Fatalf("%s: got %d events %v, want %d %v", name, len(got), gi, len(exp), wi)
		}
		checkOrder(t, got, false)
		for _, ev := range got {
			if ev.Position <= after || !f.Match(&ev) {
				t.Fatalf("%s: event at %d does not match (after %d)", name, ev.Position, after)
			}
		}
	}
	all := events.Filter{StreamPrefixes: []string{p}}
	check("all", start, all, 0, want)
	if s.f.Gapless {
		got, err := st.ReadAll(ctx, 0, events.Filter{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("fresh store ReadAll gave %d events, want %d", len(got), len(want))
		}
		for i, ev := range got {
			if ev.Position != uint64(i+1) {
				t.Fatalf("event %d has position %d", i, ev.Position)
			}
		}
	}
	check("max", start, all, 3, want[:3])
	check("after", want[2].Position, all, 0, want[3:])
	check("after last", want[len(want)-1].Position, all, 0, nil)
	f := events.Filter{Types: []string{events.TypeFeedbackInterpreted}, StreamPrefixes: []string{p}}
	check("type", start, f, 0, match(f))
	f = events.Filter{StreamPrefixes: []string{p + "alpha-"}}
	check("prefix", start, f, 0, match(f))
	f = events.Filter{StreamPrefixes: []string{p + "alpha-2", p + "beta"}, Types: []string{events.TypeFeedbackReceived, events.TypeFeedbackInterpreted}}
	check("prefixes and types", start, f, 0, match(f))
	f = events.Filter{Types: []string{events.TypeFeedbackReceived}, StreamPrefixes: []string{p}}
	check("type with max", want[0].Position, f, 2, match(f)[1:3])
	f = events.Filter{StreamPrefixes: []string{p + "gamma"}}
	check("no match", start, f, 0, nil)
}

func wrongRevision(t *testing.T, err error, exists bool, actual uint64) {
	t.Helper()
	var wr *events.WrongRevisionError
	if !errors.As(err, &wr) || !errors.Is(err, events.ErrWrongExpectedRevision) {
		t.Fatalf("got %v, want *WrongRevisionError", err)
	}
	if wr.Exists != exists || (exists && wr.Actual != actual) {
		t.Fatalf("WrongRevisionError exists=%v actual=%d, want exists=%v actual=%d", wr.Exists, wr.Actual, exists, actual)
	}
}

func testExpectedRevision(t *testing.T, s *suite) {
	ctx, st := s.ctx(t), s.newStore(t)
	p := prefix(t)
	stream := p + "x"
	_, err := st.Append(ctx, stream, events.StreamExists, Feedback(t, "a"))
	wrongRevision(t, err, false, 0)
	_, err = st.Append(ctx, stream, events.Exact(0), Feedback(t, "a"))
	wrongRevision(t, err, false, 0)
	if _, err := st.ReadStream(ctx, stream, 0, events.Forward, 0); !errors.Is(err, events.ErrStreamNotFound) {
		t.Fatalf("failed appends created the stream: %v", err)
	}
	r := mustAppend(t, ctx, st, stream, events.NoStream, Feedback(t, "0"))
	if r.NextRevision != 0 {
		t.Fatalf("NextRevision %d, want 0", r.NextRevision)
	}
	_, err = st.Append(ctx, stream, events.NoStream, Feedback(t, "b"))
	wrongRevision(t, err, true, 0)
	r = mustAppend(t, ctx, st, stream, events.StreamExists, Feedback(t, "1"))
	r = mustAppend(t, ctx, st, stream, events.Exact(r.NextRevision), Feedback(t, "2"), Feedback(t, "3"))
	if r.NextRevision != 3 {
		t.Fatalf("NextRevision %d, want 3", r.NextRevision)
	}
	for _, exp := range []uint64{0, 2, 4, 100} {
		_, err = st.Append(ctx, stream, events.Exact(exp), Feedback(t, "c"))
		wrongRevision(t, err, true, 3)
	}
	mustAppend(t, ctx, st, stream, events.Any, Feedback(t, "4"))
	mustAppend(t, ctx, st, p+"y", events.Any, Feedback(t, "y0"))
	if got := readStream(t, ctx, st, stream); len(got) != 5 {
		t.Fatalf("stream has %d events, want 5", len(got))
	}
}

func testIdempotency(t *testing.T, s *suite) {
	ctx, st := s.ctx(t), s.newStore(t)
	p := prefix(t)
	stream := p + "idem"
	batch := feedbacks(t, 3, "idem")
	r1 := mustAppend(t, ctx, st, stream, events.NoStream, batch...)
	last := lastPosition(t, ctx, st)
	// Same batch again, even with an expectation that no longer holds.
	for _, exp := range []events.ExpectedRevision{events.NoStream, events.Any, events.Exact(7)} {
		r2 := mustAppend(t, ctx, st, stream, exp, batch...)
		if r2 != r1 {
			t.Fatalf("retry with %s gave %+v, want %+v", exp, r2, r1)
		}
	}
	if lp := lastPosition(t, ctx, st); lp != last {
		t.Fatalf("retry moved LastPosition %d -> %d", last, lp)
	}
	// An Exact append, then the same call again after it succeeded (a
	// client retrying after a lost reply), also after another append.
	ev := Feedback(t, "exact")
	r3 := mustAppend(t, ctx, st, stream, events.Exact(2), ev)
	if r4 := mustAppend(t, ctx, st, stream, events.Exact(2), ev); r4 != r3 {
		t.Fatalf("Exact retry gave %+v, want %+v", r4, r3)
	}
	mustAppend(t, ctx, st, stream, events.Exact(3), Feedback(t, "after"))
	if r5 := mustAppend(t, ctx, st, stream, events.Exact(2), ev); r5 != r3 {
		t.Fatalf("late Exact retry gave %+v, want %+v", r5, r3)
	}
	got := readStream(t, ctx, st, stream)
	if len(got) != 5 {
		t.Fatalf("stream has %d events, want 5", len(got))
	}
	seen := map[string]bool{}
	for _, e := range got {
		if seen[e.ID.String()] {
			t.Fatalf("id %s stored twice", e.ID)
		}
		seen[e.ID.String()] = true
	}
	if s.f.RetryScopedIDs {
		return
	}
	// A batch mixing a stored event and a new one writes only the new one.
	fresh := Feedback(t, "fresh")
	r6 := mustAppend(t, ctx, st, stream, events.Exact(4), batch[2], fresh)
	if r6.FirstPosition != r1.LastPosition || r6.NextRevision != 5 {
		t.Fatalf("mixed batch: %+v (first stored copy at %d)", r6, r1.LastPosition)
	}
	if got := readStream(t, ctx, st, stream); len(got) != 6 || got[5].ID != fresh.ID {
		t.Fatalf("mixed batch: stream has %d events", len(got))
	}
	if s.f.StreamScopedIDs {
		return
	}
	// The same id in another stream is refused.
	before := lastPosition(t, ctx, st)
	if _, err := st.Append(ctx, p+"other", events.Any, batch[0]); !errors.Is(err, events.ErrMalformed) {
		t.Fatalf("stored id in another stream: %v, want ErrMalformed", err)
	}
	if lp := lastPosition(t, ctx, st); lp != before {
		t.Fatalf("refused append moved LastPosition %d -> %d", before, lp)
	}
}

func testRefusals(t *testing.T, s *suite) {
	ctx, st := s.ctx(t), s.newStore(t)
	p := prefix(t)
	stream := p + "r"
	mustAppend(t, ctx, st, stream, events.NoStream, Feedback(t, "seed"))
	big := func(n int) events.Event {
		ev := Feedback(t, "big")
		ev.Data = []byte(`{"interaction_id":"i","feedback_id":"f","source":"harness","text":"` + strings.Repeat("x", n) + `"}`)
		return ev
	}
	mod := func(f func(*events.Event)) events.Event {
		ev := Feedback(t, "mod")
		f(&ev)
		return ev
	}
	tooMany := feedbacks(t, events.MaxBatchEvents+1, "many")
	var hugeBatch []events.Event
	for range events.MaxBatchSize/(events.MaxEventSize/2) + 1 {
		hugeBatch = append(hugeBatch, big(events.MaxEventSize/2))
	}
	cases := []struct {
		name   string
		stream string
		evs    []events.Event
		want   error
	}{
		{"empty batch", stream, nil, events.ErrEmptyBatch},
		{"invalid json", stream, []events.Event{mod(func(e *events.Event) { e.Data = []byte(`{"text":`) })}, events.ErrMalformed},
		{"empty data", stream, []events.Event{mod(func(e *events.Event) { e.Data = nil })}, events.ErrMalformed},
		{"unknown field", stream, []events.Event{mod(func(e *events.Event) { e.Data = []byte(`{"source":"harness","bogus":1}`) })}, events.ErrMalformed},
		{"wrong data type", stream, []events.Event{mod(func(e *events.Event) { e.Data = []byte(`[1,2]`) })}, events.ErrMalformed},
		{"unknown type", stream, []events.Event{mod(func(e *events.Event) { e.Type = "nobody.registered" })}, events.ErrUnknownType},
		{"missing id", stream, []events.Event{mod(func(e *events.Event) { e.ID = [16]byte{} })}, events.ErrMalformed},
		{"missing time", stream, []events.Event{mod(func(e *events.Event) { e.Time = time.Time{} })}, events.ErrMalformed},
		{"schema 0", stream, []events.Event{mod(func(e *events.Event) { e.Schema = 0 })}, events.ErrMalformed},
		{"future schema", stream, []events.Event{mod(func(e *events.Event) { e.Schema = 99 })}, events.ErrUnknownSchema},
		{"bad utf8 tenant", stream, []events.Event{mod(func(e *events.Event) { e.Tenant = "\xff" })}, events.ErrMalformed},
		{"empty stream", "", []events.Event{Feedback(t, "s")}, events.ErrInvalidStream},
		{"control char stream", p + "a\nb", []events.Event{Feedback(t, "s")}, events.ErrInvalidStream},
		{"long stream", p + strings.Repeat("s", events.MaxStreamName), []events.Event{Feedback(t, "s")}, events.ErrInvalidStream},
		{"oversized event", stream, []events.Event{big(events.MaxEventSize)}, events.ErrTooLarge},
		{"too many events", stream, tooMany, events.ErrTooLarge},
		{"oversized batch", stream, hugeBatch, events.ErrTooLarge},
		{"bad event last in batch", stream, []events.Event{Feedback(t, "ok1"), Feedback(t, "ok2"),
			mod(func(e *events.Event) { e.Data = []byte(`nope`) })}, events.ErrMalformed},
		{"duplicate id in batch", stream, func() []events.Event { e := Feedback(t, "d"); return []events.Event{e, e} }(), events.ErrMalformed},
	}
	for _, c := range cases {
		before := lastPosition(t, ctx, st)
		_, err := st.Append(ctx, c.stream, events.Any, c.evs...)
		if !errors.Is(err, c.want) {
			t.Fatalf("%s: got %v, want %v", c.name, err, c.want)
		}
		if lp := lastPosition(t, ctx, st); lp != before {
			t.Fatalf("%s: LastPosition moved %d -> %d", c.name, before, lp)
		}
		if got := readStream(t, ctx, st, stream); len(got) != 1 {
			t.Fatalf("%s: stream has %d events, want 1", c.name, len(got))
		}
		if got, err := st.ReadAll(ctx, before, events.Filter{StreamPrefixes: []string{p}}, 0); err != nil || len(got) != 0 {
			t.Fatalf("%s: %d events readable after refusal (%v)", c.name, len(got), err)
		}
	}
	// Just below the limit is accepted.
	mustAppend(t, ctx, st, stream, events.Any, big(events.MaxEventSize-1024))
}

// appendAll runs writers goroutines; writer w appends n events one by one
// to stream(w, i). It returns every acknowledged event with its assigned
// position.
func (s *suite) appendAll(t *testing.T, ctx context.Context, st events.Store, stream func(w, i int) string) []events.Event {
	var mu sync.Mutex
	var acked []events.Event
	var wg sync.WaitGroup
	errs := make(chan error, s.f.Writers)
	for w := range s.f.Writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range s.f.AppendsPerWriter {
				var ev events.Event
				if i%2 == 0 {
					ev = Feedback(t, fmt.Sprintf("w%d-%d", w, i))
				} else {
					ev = Interpreted(t, fmt.Sprintf("w%d-%d", w, i))
				}
				name := stream(w, i)
				r, err := st.Append(ctx, name, events.Any, ev)
				if err != nil {
					errs <- err
					return
				}
				ev.Stream, ev.Position, ev.Revision = name, r.FirstPosition, r.NextRevision
				mu.Lock()
				acked = append(acked, ev)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return acked
}

func testConcurrentAppends(t *testing.T, s *suite) {
	ctx, st := s.ctx(t), s.newStore(t)
	p := prefix(t)
	start := lastPosition(t, ctx, st)
	acked := s.appendAll(t, ctx, st, func(w, i int) string {
		if i%3 == 0 {
			return p + "shared"
		}
		return fmt.Sprintf("%sown-%d", p, w)
	})
	total := s.f.Writers * s.f.AppendsPerWriter
	if len(acked) != total {
		t.Fatalf("%d acknowledged, want %d", len(acked), total)
	}
	got, err := st.ReadAll(ctx, start, events.Filter{StreamPrefixes: []string{p}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != total {
		t.Fatalf("ReadAll gave %d events, want %d", len(got), total)
	}
	checkOrder(t, got, s.f.Gapless)
	if s.f.Gapless && (got[0].Position != start+1 || lastPosition(t, ctx, st) != got[len(got)-1].Position) {
		t.Fatalf("positions %d..%d after %d", got[0].Position, got[len(got)-1].Position, start)
	}
	byPos := map[uint64]events.Event{}
	for _, ev := range got {
		byPos[ev.Position] = ev
	}
	for _, a := range acked {
		g, ok := byPos[a.Position]
		if !ok || g.ID != a.ID || g.Stream != a.Stream || g.Revision != a.Revision {
			t.Fatalf("acknowledged %s at %d (%s rev %d) reads back as %s %s rev %d", a.ID, a.Position, a.Stream, a.Revision, g.ID, g.Stream, g.Revision)
		}
	}
	// Revisions contiguous and in position order per stream.
	next := map[string]uint64{}
	for _, ev := range got {
		if ev.Revision != next[ev.Stream] {
			t.Fatalf("%s: revision %d at position %d, want %d", ev.Stream, ev.Revision, ev.Position, next[ev.Stream])
		}
		next[ev.Stream]++
	}
	for name, n := range next {
		if evs := readStream(t, ctx, st, name); uint64(len(evs)) != n {
			t.Fatalf("%s: ReadStream %d events, ReadAll %d", name, len(evs), n)
		}
	}
}

// testConcurrentExact has writers contend on one stream with Exact,
// re-reading on conflict: no append may be lost or doubled.
func testConcurrentExact(t *testing.T, s *suite) {
	ctx, st := s.ctx(t), s.newStore(t)
	stream := prefix(t) + "counter"
	writers, per := min(s.f.Writers, 8), 10
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; {
				exp := events.NoStream
				if evs, err := st.ReadStream(ctx, stream, math.MaxUint64, events.Backward, 1); err == nil {
					exp = events.Exact(evs[0].Revision)
				} else if !errors.Is(err, events.ErrStreamNotFound) {
					errs <- err
					return
				}
				_, err := st.Append(ctx, stream, exp, Feedback(t, fmt.Sprintf("c%d-%d", w, i)))
				var wr *events.WrongRevisionError
				switch {
				case errors.As(err, &wr):
					continue
				case err != nil:
					errs <- err
					return
				}
				i++
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := readStream(t, ctx, st, stream)
	if len(got) != writers*per {
		t.Fatalf("stream has %d events, want %d", len(got), writers*per)
	}
	for i, ev := range got {
		if ev.Revision != uint64(i) {
			t.Fatalf("revision %d at index %d", ev.Revision, i)
		}
	}
	checkOrder(t, got, false)
}

type collector struct {
	mu   sync.Mutex
	evs  []events.Event
	cond chan struct{} // signalled (non-blocking) on every event
}

func newCollector() *collector { return &collector{cond: make(chan struct{}, 1)} }

func (c *collector) handle(_ context.Context, ev events.Event) error {
	c.mu.Lock()
	c.evs = append(c.evs, ev)
	c.mu.Unlock()
	select {
	case c.cond <- struct{}{}:
	default:
	}
	return nil
}

func (c *collector) snapshot() []events.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]events.Event(nil), c.evs...)
}

// waitFor waits until c holds n events or ctx ends.
func (c *collector) waitFor(t *testing.T, ctx context.Context, n int) []events.Event {
	t.Helper()
	for {
		if evs := c.snapshot(); len(evs) >= n {
			return evs
		}
		select {
		case <-c.cond:
		case <-ctx.Done():
			t.Fatalf("subscriber got %d events, want %d: %v", len(c.snapshot()), n, ctx.Err())
		}
	}
}

func subscribe(st events.Store, after uint64, f events.Filter, h events.Handler) (cancel func(), result <-chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan error, 1)
	go func() { ch <- st.Subscribe(ctx, after, f, h) }()
	return cancel, ch
}

func waitErr(t *testing.T, ctx context.Context, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		t.Fatal("Subscribe did not return")
		return nil
	}
}

func sameIDs(t *testing.T, got, want []events.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].ID != want[i].ID {
			t.Fatalf("event %d: id %s, want %s", i, got[i].ID, want[i].ID)
		}
	}
}

func testSubscribeCatchUpLive(t *testing.T, s *suite) {
	ctx, st := s.ctx(t), s.newStore(t)
	p := prefix(t)
	start := lastPosition(t, ctx, st)
	var want []events.Event
	for i := range 10 {
		ev := Feedback(t, fmt.Sprint("sub", i))
		mustAppend(t, ctx, st, fmt.Sprintf("%ss-%d", p, i%3), events.Any, ev)
		want = append(want, ev)
	}
	c := newCollector()
	cancel, done := subscribe(st, start, events.Filter{StreamPrefixes: []string{p}}, c.handle)
	sameIDs(t, c.waitFor(t, ctx, 10), want)
	for i := range 10 {
		ev := Feedback(t, fmt.Sprint("live", i))
		mustAppend(t, ctx, st, fmt.Sprintf("%ss-%d", p, i%3), events.Any, ev)
		want = append(want, ev)
		c.waitFor(t, ctx, len(want))
	}
	batch := feedbacks(t, 5, "livebatch")
	mustAppend(t, ctx, st, p+"batch", events.Any, batch...)
	want = append(want, batch...)
	got := c.waitFor(t, ctx, len(want))
	cancel()
	if err := waitErr(t, ctx, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("Subscribe returned %v, want context.Canceled", err)
	}
	got = c.snapshot()
	sameIDs(t, got, want)
	checkOrder(t, got, s.f.Gapless)
	for i, ev := range got {
		if ev.Stream == "" || ev.Position <= start || !bytes.Equal(ev.Data, want[i].Data) {
			t.Fatalf("event %d delivered wrongly: %+v", i, ev)
		}
	}
}

func testSubscribeFromPositionFiltered(t *testing.T, s *suite) {
	ctx, st := s.ctx(t), s.newStore(t)
	p := prefix(t)
	var all []events.Event
	for i := range 12 {
		var ev events.Event
		if i%2 == 0 {
			ev = Feedback(t, fmt.Sprint("f", i))
		} else {
			ev = Interpreted(t, fmt.Sprint("f", i))
		}
		stream := p + "keep"
		if i%3 == 0 {
			stream = p + "drop"
		}
		r := mustAppend(t, ctx, st, stream, events.Any, ev)
		ev.Stream, ev.Position = stream, r.FirstPosition
		all = append(all, ev)
	}
	after := all[4].Position
	f := events.Filter{Types: []string{events.TypeFeedbackReceived}, StreamPrefixes: []string{p + "keep"}}
	var want []events.Event
	for _, ev := range all[5:] {
		if f.Match(&ev) {
			want = append(want, ev)
		}
	}
	c := newCollector()
	cancel, done := subscribe(st, after, f, c.handle)
	c.waitFor(t, ctx, len(want))
	// Live events that do not match are skipped; matching ones arrive.
	mustAppend(t, ctx, st, p+"drop", events.Any, Feedback(t, "x"))
	mustAppend(t, ctx, st, p+"keep", events.Any, Interpreted(t, "y"))
	z := Feedback(t, "z")
	mustAppend(t, ctx, st, p+"keep-2", events.Any, z)
	want = append(want, z)
	c.waitFor(t, ctx, len(want))
	cancel()
	waitErr(t, ctx, done)
	got := c.snapshot()
	sameIDs(t, got, want)
	for _, ev := range got {
		if ev.Position <= after || !f.Match(&ev) {
			t.Fatalf("delivered %s at %d of type %s in %s", ev.ID, ev.Position, ev.Type, ev.Stream)
		}
	}
}

func testSubscribeUnderLoad(t *testing.T, s *suite) {
	ctx, st := s.ctx(t), s.newStore(t)
	p := prefix(t)
	start := lastPosition(t, ctx, st)
	c := newCollector()
	cancel, done := subscribe(st, start, events.Filter{StreamPrefixes: []string{p}}, c.handle)
	// A second subscriber joins half way (catch-up while writes go on).
	acked := s.appendAll(t, ctx, st, func(w, i int) string { return fmt.Sprintf("%sload-%d", p, w%4) })
	c.waitFor(t, ctx, len(acked))
	late := newCollector()
	cancel2, done2 := subscribe(st, start, events.Filter{StreamPrefixes: []string{p}}, late.handle)
	late.waitFor(t, ctx, len(acked))
	cancel()
	cancel2()
	waitErr(t, ctx, done)
	waitErr(t, ctx, done2)
	for _, got := range [][]events.Event{c.snapshot(), late.snapshot()} {
		if len(got) != len(acked) {
			t.Fatalf("delivered %d events, acknowledged %d", len(got), len(acked))
		}
		checkOrder(t, got, s.f.Gapless)
		sort.Slice(acked, func(i, j int) bool { return acked[i].Position < acked[j].Position })
		for i := range got {
			if got[i].ID != acked[i].ID || got[i].Position != acked[i].Position {
				t.Fatalf("event %d: delivered %s at %d, acknowledged %s at %d", i, got[i].ID, got[i].Position, acked[i].ID, acked[i].Position)
			}
		}
	}
}

func testSubscribeStops(t *testing.T, s *suite) {
	ctx, st := s.ctx(t), s.newStore(t)
	p := prefix(t)
	start := lastPosition(t, ctx, st)
	mustAppend(t, ctx, st, p+"a", events.Any, feedbacks(t, 5, "stop")...)
	// Handler error stops it with that error, after exactly 3 events.
	boom := errors.New("boom")
	n := 0
	err := st.Subscribe(ctx, start, events.Filter{StreamPrefixes: []string{p}}, func(_ context.Context, ev events.Event) error {
		n++
		if n == 3 {
			return fmt.Errorf("handler: %w", boom)
		}
		return nil
	})
	if !errors.Is(err, boom) || n != 3 {
		t.Fatalf("Subscribe returned %v after %d events, want boom after 3", err, n)
	}
	// Cancelling while it waits for live events.
	c := newCollector()
	cancel, done := subscribe(st, start, events.Filter{StreamPrefixes: []string{p}}, c.handle)
	c.waitFor(t, ctx, 5)
	cancel()
	if err := waitErr(t, ctx, done); !errors.Is(err, context.Canceled) {
		t.Fatalf("after cancel: %v", err)
	}
	// An already cancelled context returns at once.
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	if err := st.Subscribe(cctx, start, events.Filter{}, c.handle); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
	// Closing the store stops a waiting subscriber with ErrClosed.
	c2 := newCollector()
	_, done2 := subscribe(st, start, events.Filter{StreamPrefixes: []string{p}}, c2.handle)
	c2.waitFor(t, ctx, 5)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := waitErr(t, ctx, done2); !errors.Is(err, events.ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
}

func testCheckpoints(t *testing.T, s *suite) {
	ctx, st := s.ctx(t), s.newStore(t)
	p := prefix(t)
	if _, found, err := st.Checkpoint(ctx, p+"relay"); err != nil || found {
		t.Fatalf("missing checkpoint: found=%v err=%v", found, err)
	}
	for _, pos := range []uint64{0, 42, 7, math.MaxUint64} {
		if err := st.SaveCheckpoint(ctx, p+"relay", pos); err != nil {
			t.Fatal(err)
		}
		got, found, err := st.Checkpoint(ctx, p+"relay")
		if err != nil || !found || got != pos {
			t.Fatalf("checkpoint %d, %v, %v; want %d", got, found, err, pos)
		}
	}
	if err := st.SaveCheckpoint(ctx, p+"other", 5); err != nil {
		t.Fatal(err)
	}
	// Many concurrent savers on distinct names.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := st.SaveCheckpoint(ctx, fmt.Sprintf("%sw%d", p, i), uint64(i+100)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	check := func(st events.Store) {
		t.Helper()
		want := map[string]uint64{p + "relay": math.MaxUint64, p + "other": 5}
		for i := range 8 {
			want[fmt.Sprintf("%sw%d", p, i)] = uint64(i + 100)
		}
		for name, pos := range want {
			got, found, err := st.Checkpoint(ctx, name)
			if err != nil || !found || got != pos {
				t.Fatalf("%s: %d, %v, %v; want %d", name, got, found, err, pos)
			}
		}
	}
	check(st)
	if s.f.Persistent {
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		check(s.f.Reopen(t, st))
	}
}

func testClose(t *testing.T, s *suite) {
	ctx, st := s.ctx(t), s.newStore(t)
	stream := prefix(t) + "c"
	mustAppend(t, ctx, st, stream, events.Any, Feedback(t, "c"))
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	checks := map[string]error{}
	_, checks["Append"] = st.Append(ctx, stream, events.Any, Feedback(t, "d"))
	_, checks["ReadStream"] = st.ReadStream(ctx, stream, 0, events.Forward, 0)
	_, checks["ReadAll"] = st.ReadAll(ctx, 0, events.Filter{}, 0)
	_, checks["LastPosition"] = st.LastPosition(ctx)
	_, _, checks["Checkpoint"] = st.Checkpoint(ctx, "x")
	checks["SaveCheckpoint"] = st.SaveCheckpoint(ctx, "x", 1)
	checks["Subscribe"] = st.Subscribe(ctx, 0, events.Filter{}, func(context.Context, events.Event) error { return nil })
	checks["Close"] = st.Close()
	for name, err := range checks {
		if !errors.Is(err, events.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

func testReopen(t *testing.T, s *suite) {
	if !s.f.Persistent {
		t.Skip("backend is not persistent")
	}
	ctx, st := s.ctx(t), s.newStore(t)
	p := prefix(t)
	a := feedbacks(t, 4, "ro")
	r1 := mustAppend(t, ctx, st, p+"a", events.NoStream, a[:3]...)
	mustAppend(t, ctx, st, p+"b", events.NoStream, a[3])
	before, err := st.ReadAll(ctx, 0, events.Filter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	last := lastPosition(t, ctx, st)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = s.f.Reopen(t, st)
	after, err := st.ReadAll(ctx, 0, events.Filter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) || lastPosition(t, ctx, st) != last {
		t.Fatalf("after reopen %d events (last %d), before %d (last %d)", len(after), lastPosition(t, ctx, st), len(before), last)
	}
	for i := range after {
		sameEvent(t, after[i], before[i], before[i].Stream, before[i].Revision)
		if after[i].Position != before[i].Position {
			t.Fatalf("position %d became %d", before[i].Position, after[i].Position)
		}
	}
	// Idempotency and revisions survive the reopen.
	if r := mustAppend(t, ctx, st, p+"a", events.NoStream, a[:3]...); r != r1 {
		t.Fatalf("retry after reopen gave %+v, want %+v", r, r1)
	}
	_, err = st.Append(ctx, p+"a", events.Exact(1), Feedback(t, "x"))
	wrongRevision(t, err, true, 2)
	r := mustAppend(t, ctx, st, p+"a", events.Exact(2), Feedback(t, "y"))
	if r.NextRevision != 3 || r.FirstPosition <= last {
		t.Fatalf("append after reopen: %+v (last was %d)", r, last)
	}
	if s.f.Gapless && r.FirstPosition != last+1 {
		t.Fatalf("append after reopen at %d, want %d", r.FirstPosition, last+1)
	}
}

// testCloseUnderLoad closes the store while appenders run: each Append
// either succeeds or fails with ErrClosed, and (persistent stores) every
// acknowledged event is there after reopening.
func testCloseUnderLoad(t *testing.T, s *suite) {
	ctx, st := s.ctx(t), s.newStore(t)
	p := prefix(t)
	var mu sync.Mutex
	var acked []events.Event
	started := make(chan struct{}, 8)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				ev := Feedback(t, fmt.Sprintf("cl%d-%d", w, i))
				r, err := st.Append(ctx, fmt.Sprintf("%sw%d", p, w), events.Any, ev)
				if err != nil {
					errs <- err
					return
				}
				ev.Position = r.FirstPosition
				mu.Lock()
				acked = append(acked, ev)
				mu.Unlock()
				if i == 2 {
					started <- struct{}{}
				}
			}
		}()
	}
	for range 8 {
		select {
		case <-started:
		case <-ctx.Done():
			t.Fatal("appenders did not start")
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, events.ErrClosed) {
			t.Fatalf("append during Close: %v, want ErrClosed", err)
		}
	}
	if !s.f.Persistent {
		return
	}
	st = s.f.Reopen(t, st)
	got, err := st.ReadAll(ctx, 0, events.Filter{StreamPrefixes: []string{p}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]uint64{}
	for _, ev := range got {
		have[ev.ID.String()] = ev.Position
	}
	for _, a := range acked {
		if pos, ok := have[a.ID.String()]; !ok || pos != a.Position {
			t.Fatalf("acknowledged %s at %d missing after Close and reopen (found at %d, %v)", a.ID, a.Position, pos, ok)
		}
	}
}

// testSubscribeFromFuture subscribes after a position not reached yet: it
// waits, then delivers only what comes after that position.
func testSubscribeFromFuture(t *testing.T, s *suite) {
	if !s.f.Gapless {
		t.Skip("needs predictable positions")
	}
	ctx, st := s.ctx(t), s.newStore(t)
	p := prefix(t)
	mustAppend(t, ctx, st, p+"a", events.Any, Feedback(t, "0"))
	last := lastPosition(t, ctx, st)
	c := newCollector()
	cancel, done := subscribe(st, last+2, events.Filter{}, c.handle)
	evs := feedbacks(t, 4, "future")
	for _, ev := range evs {
		mustAppend(t, ctx, st, p+"a", events.Any, ev)
	}
	got := c.waitFor(t, ctx, 2)
	cancel()
	waitErr(t, ctx, done)
	got = c.snapshot()
	sameIDs(t, got, evs[2:])
	if got[0].Position != last+3 {
		t.Fatalf("first delivered position %d, want %d", got[0].Position, last+3)
	}
}
