package esdb

import (
	"bytes"
	"encoding/json"
	"os"
	"sync"
	"testing"
	"time"

	"citizen/events"
	"citizen/events/eventstest"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
)

const urlEnv = "CITIZEN_ESDB_URL"

// TestConformance runs the shared suite against a real server. There is
// none on the development machine, so it is skipped unless CITIZEN_ESDB_URL
// is set. This backend looks for a batch's ids only where a retry would sit
// (package doc), so the suite skips its mixed-batch step (RetryScopedIDs).
func TestConformance(t *testing.T) {
	url := os.Getenv(urlEnv)
	if url == "" {
		t.Skip(urlEnv + " is not set: EventStoreDB is the external backend and no server runs on this machine. " +
			"To run: start one (docker run -d -p 2113:2113 eventstore/eventstore:24.10 --insecure --run-projections=None " +
			"or KurrentDB) and run CITIZEN_ESDB_URL='esdb://localhost:2113?tls=false' go test ./events/esdb")
	}
	var mu sync.Mutex
	open := func(t *testing.T) events.Store {
		s, err := Open(Config{URL: url})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	eventstest.Run(t, func(t *testing.T) events.Store {
		mu.Lock()
		defer mu.Unlock()
		return open(t)
	}, eventstest.Features{
		Persistent:      true,
		StreamScopedIDs: true,
		RetryScopedIDs:  true,
		Reopen:          func(t *testing.T, _ events.Store) events.Store { return open(t) },
		Writers:         8, AppendsPerWriter: 20, Timeout: 30 * time.Second,
	})
}

// The tests below need no server: they pin the envelope mapping. The
// append and subscription logic runs against the fake in fake_test.go.

func TestEnvelopeRoundTrip(t *testing.T) {
	ev := eventstest.Feedback(t, "x")
	ev.Stream, ev.Revision, ev.Position = "interaction-1", 3, 12345
	d, err := toEventData(&ev)
	if err != nil {
		t.Fatal(err)
	}
	if d.EventID != ev.ID || d.EventType != ev.Type || d.ContentType != esdb.ContentTypeJson || !bytes.Equal(d.Data, ev.Data) {
		t.Fatalf("event data %+v", d)
	}
	var md map[string]any
	if err := json.Unmarshal(d.Metadata, &md); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"specversion", "time", "schema", "tenant", "$correlationId", "$causationId"} {
		if _, ok := md[k]; !ok {
			t.Fatalf("metadata lacks %q: %s", k, d.Metadata)
		}
	}
	got, err := fromRecorded(&esdb.RecordedEvent{EventID: d.EventID, EventType: d.EventType, StreamID: ev.Stream,
		EventNumber: 3, Position: esdb.Position{Commit: 12345, Prepare: 12345}, Data: d.Data, UserMetadata: d.Metadata})
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != ev.ID || got.Type != ev.Type || got.Stream != ev.Stream || !got.Time.Equal(ev.Time) ||
		got.Schema != ev.Schema || got.CorrelationID != ev.CorrelationID || got.CausationID != ev.CausationID ||
		got.Tenant != ev.Tenant || !bytes.Equal(got.Data, ev.Data) || got.Revision != 3 || got.Position != 12345 {
		t.Fatalf("round trip:\n%+v\n%+v", ev, got)
	}
	if _, err := fromRecorded(&esdb.RecordedEvent{UserMetadata: []byte("not json")}); err == nil {
		t.Fatal("bad metadata accepted")
	}
}

func TestExpectedMapping(t *testing.T) {
	cases := []struct {
		in   events.ExpectedRevision
		want esdb.ExpectedRevision
	}{
		{events.Any, esdb.Any{}},
		{events.NoStream, esdb.NoStream{}},
		{events.StreamExists, esdb.StreamExists{}},
		{events.Exact(7), esdb.Revision(7)},
	}
	for _, c := range cases {
		if got := toExpected(c.in); got != c.want {
			t.Errorf("%s -> %#v, want %#v", c.in, got, c.want)
		}
	}
}

func TestVisibleAndFilters(t *testing.T) {
	for _, c := range []struct {
		stream, typ string
		want        bool
	}{
		{"interaction-1", "feedback.received", true},
		{"$stats-1", "x", false},
		{"interaction-1", "$metadata", false},
		{checkpointStream("relay"), checkpointType, false},
	} {
		if got := visible(&esdb.RecordedEvent{StreamID: c.stream, EventType: c.typ}); got != c.want {
			t.Errorf("visible(%s, %s) = %v", c.stream, c.typ, got)
		}
	}
	if f := serverFilter(events.Filter{StreamPrefixes: []string{"a-"}, Types: []string{"t"}}); f.Type != esdb.StreamFilterType || f.Prefixes[0] != "a-" {
		t.Errorf("stream filter %+v", f)
	}
	if f := serverFilter(events.Filter{Types: []string{"t"}}); f.Type != esdb.EventFilterType || f.Prefixes[0] != "t" {
		t.Errorf("type filter %+v", f)
	}
	if f := serverFilter(events.Filter{}); f.Regex == "" {
		t.Errorf("default filter %+v", f)
	}
}

func TestOpenBadURL(t *testing.T) {
	if _, err := Open(Config{URL: "not a url"}); err == nil {
		t.Fatal("Open accepted a bad URL")
	}
}
