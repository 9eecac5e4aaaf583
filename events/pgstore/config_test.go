package pgstore

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// These tests need no server.

func TestConfigValidate(t *testing.T) {
	ok := Config{URL: "postgres://x@127.0.0.1/db"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no url", Config{}, "URL is empty"},
		{"upper-case schema", Config{URL: "x", Schema: "Citizen"}, "schema"},
		{"quoted schema", Config{URL: "x", Schema: `a"b`}, "schema"},
		{"digit first", Config{URL: "x", Schema: "1abc"}, "schema"},
		{"pg_ schema", Config{URL: "x", Schema: "pg_events"}, "schema"},
		{"long schema", Config{URL: "x", Schema: strings.Repeat("a", 49)}, "schema"},
		{"sync commit", Config{URL: "x", SynchronousCommit: "maybe"}, "SynchronousCommit"},
		{"one conn", Config{URL: "x", MaxConns: 1}, "MaxConns"},
		{"negative group", Config{URL: "x", MaxGroup: -1}, "positive"},
	} {
		err := c.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "events: pgstore: ") {
			t.Errorf("%s: %v, want an error about %s", c.name, err, c.want)
		}
		if _, oerr := Open(context.Background(), c.cfg); oerr == nil {
			t.Errorf("%s: Open accepted the config", c.name)
		}
	}
}

func TestOpenBadURL(t *testing.T) {
	for _, url := range []string{
		"not a url at all",
		"postgres://user:s3cret@127.0.0.1:notaport/db",
		"postgres://[::1/db",
		"postgres://127.0.0.1/db?sslmode=sometimes",
		"host=127.0.0.1 port=abc",
	} {
		_, err := Open(context.Background(), Config{URL: url, Logger: quiet})
		if err == nil {
			t.Errorf("%q: Open succeeded", url)
			continue
		}
		if !strings.HasPrefix(err.Error(), "events: pgstore: bad URL") {
			t.Errorf("%q: %v, want a bad URL error", url, err)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%q: the error shows the password: %v", url, err)
		}
	}
}

// freePort returns a loopback port that nothing listens on (it listened
// a moment ago and was closed).
func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

func TestOpenUnreachable(t *testing.T) {
	url := "postgres://citizen@127.0.0.1:" + freePort(t) + "/citizen?sslmode=disable&connect_timeout=2"
	start := time.Now()
	_, err := Open(context.Background(), Config{URL: url, Logger: quiet})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "connecting to 127.0.0.1:") {
		t.Fatalf("Open of a closed port: %v, want ErrUnavailable naming the address", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("Open took %v to fail", el)
	}
	// ctx bounds Open too.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := Open(ctx, Config{URL: "postgres://citizen@10.255.255.1:5432/citizen?connect_timeout=30", Logger: quiet}); err == nil {
		t.Fatal("Open of an unroutable address succeeded")
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("Open ignored its context: %v", el)
	}
}

func TestTimeSplit(t *testing.T) {
	for _, tm := range []time.Time{
		time.Date(2026, 12, 2, 10, 11, 12, 123456789, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(1, 1, 2, 0, 0, 0, 1, time.UTC),
		time.Date(2026, 1, 1, 0, 0, 0, 999, time.FixedZone("x", 3600)),
		minTime, maxTime.Add(-1),
	} {
		base, ns := splitTime(tm)
		if base.Nanosecond()%1000 != 0 || ns < 0 || ns > 999 {
			t.Fatalf("%v split into %v + %d", tm, base, ns)
		}
		if got := joinTime(base, ns); !got.Equal(tm) || got.Location() != time.UTC {
			t.Fatalf("%v came back as %v", tm, got)
		}
	}
}

// FuzzTimeSplit: every time in range splits into a whole microsecond and
// 0-999 ns that join back to the same instant.
func FuzzTimeSplit(f *testing.F) {
	f.Add(int64(0), int64(0))
	f.Add(int64(1798761600), int64(123456789))
	f.Add(int64(-62135596800), int64(1))
	f.Add(minTime.Unix(), int64(0))
	f.Add(maxTime.Unix()-1, int64(999999999))
	f.Fuzz(func(t *testing.T, sec, nsec int64) {
		tm := time.Unix(sec, nsec%1_000_000_000)
		if tm.Before(minTime) || !tm.Before(maxTime) {
			return
		}
		base, ns := splitTime(tm)
		if base.Nanosecond()%1000 != 0 || ns < 0 || ns > 999 || !joinTime(base, ns).Equal(tm) {
			t.Fatalf("%v: split %v + %d", tm, base, ns)
		}
	})
}
