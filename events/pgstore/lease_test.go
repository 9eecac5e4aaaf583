package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"citizen/events"
	"citizen/events/bus"
	"citizen/events/eventstest"

	"github.com/ThreeDotsLabs/watermill/message"
)

// leaseBackend returns the pid of the server session holding lease name.
func leaseBackend(t *testing.T, ctx context.Context, url, schema, name string) (int, bool) {
	t.Helper()
	conn := sqlConn(t, url)
	key := leaseKey(schema, name)
	var pid int
	err := conn.QueryRow(ctx, "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1 AND classid = $1 AND objid = $2",
		uint32(uint64(key)>>32), uint32(uint64(key))).Scan(&pid)
	if err != nil {
		return 0, false
	}
	return pid, true
}

// kill ends the server session holding lease name, as the server does
// when the holder's process dies.
func killHolder(t *testing.T, ctx context.Context, url, schema, name string) {
	t.Helper()
	pid, ok := leaseBackend(t, ctx, url, schema, name)
	if !ok {
		t.Fatalf("nobody holds %s", name)
	}
	conn := sqlConn(t, url)
	if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
}

func TestLeaseOneHolderAndFailover(t *testing.T) {
	url := serverURL(t)
	ctx := ctxT(t, time.Minute)
	schema := newSchema(t, url)
	cfg := Config{URL: url, Schema: schema, LeaseInterval: 100 * time.Millisecond}
	a, b := openT(t, cfg), openT(t, cfg)

	la, err := a.Acquire(ctx, "relay")
	if err != nil {
		t.Fatal(err)
	}
	holder, held, err := b.LeaseHolder(ctx, "relay")
	if err != nil || !held || holder != Holder() {
		t.Fatalf("LeaseHolder = %q %v %v, want %q", holder, held, err, Holder())
	}
	if _, held, err := b.LeaseHolder(ctx, "distiller"); err != nil || held {
		t.Fatalf("distiller held before anyone took it: %v %v", held, err)
	}
	// another name, and the same name in another schema, are independent
	other := openT(t, Config{URL: url, Schema: newSchema(t, url)})
	lo, err := other.Acquire(ctx, "relay")
	if err != nil {
		t.Fatal(err)
	}
	defer lo.Release(ctx)
	ld, err := b.Acquire(ctx, "distiller")
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Release(ctx)

	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if _, err := b.Acquire(short, "relay"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire of a held lease: %v, want deadline exceeded", err)
	}

	got := make(chan events.Lease, 1)
	go func() {
		lb, err := b.Acquire(ctx, "relay")
		if err != nil {
			t.Error(err)
		}
		got <- lb
	}()
	start := time.Now()
	killHolder(t, ctx, url, schema, "relay")
	select {
	case <-la.Lost():
	case <-ctx.Done():
		t.Fatal("the holder never noticed its session ended")
	}
	var lb events.Lease
	select {
	case lb = <-got:
	case <-ctx.Done():
		t.Fatal("the candidate never took the lease over")
	}
	t.Logf("taken over %v after the holder's session ended", time.Since(start).Round(time.Millisecond))
	if err := la.Release(ctx); err != nil {
		t.Fatalf("Release of a lost lease: %v", err)
	}
	select {
	case <-lb.Lost():
		t.Fatal("the new lease is lost")
	default:
	}
	// released: a third store takes it at once
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	<-lb.Lost()
	c := openT(t, cfg)
	lc, err := c.Acquire(ctx, "relay")
	if err != nil {
		t.Fatal(err)
	}
	lc.Release(ctx)

	// closing the store ends its candidates and loses its leases
	ld2, err := c.Acquire(ctx, "rollout")
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	<-ld2.Lost()
	if _, err := c.Acquire(ctx, "x"); !errors.Is(err, events.ErrClosed) {
		t.Fatalf("Acquire after Close: %v", err)
	}
}

// publishLog records what every relay published, in one global order.
type publishLog struct {
	mu   sync.Mutex
	seq  int
	recs []published
}

type published struct {
	relay string
	pos   uint64
	seq   int
}

type relayPub struct {
	name string
	log  *publishLog
}

func (p relayPub) Publish(_ string, msgs ...*message.Message) error {
	p.log.mu.Lock()
	defer p.log.mu.Unlock()
	for _, m := range msgs {
		pos, err := strconv.ParseUint(m.Metadata.Get(bus.MetaPosition), 10, 64)
		if err != nil {
			return err
		}
		p.log.seq++
		p.log.recs = append(p.log.recs, published{p.name, pos, p.log.seq})
	}
	return nil
}

func (relayPub) Close() error { return nil }

func (l *publishLog) snapshot() []published {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]published(nil), l.recs...)
}

// TestRelayFailover: two relays, each on a store of its own (as in two
// processes) on one schema, run under one lease. Only the holder
// publishes; when it stops (cancelled) the other resumes from its
// checkpoint without overlap, and when its session is killed the other
// takes over within seconds. Every event is published, at least once.
func TestRelayFailover(t *testing.T) {
	url := serverURL(t)
	ctx := ctxT(t, 2*time.Minute)
	schema := newSchema(t, url)
	cfg := Config{URL: url, Schema: schema, LeaseInterval: 100 * time.Millisecond, PollInterval: 100 * time.Millisecond}
	writer := openT(t, cfg)
	var plog publishLog
	const n = 300
	appendN := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := writer.Append(ctx, fmt.Sprintf("s-%d", i%7), events.Any, eventstest.Feedback(t, fmt.Sprintf("e%d", i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendN(0, n/3)

	type proc struct {
		name   string
		cancel context.CancelFunc
		done   chan error
	}
	start := func(name string) *proc {
		st := openT(t, cfg)
		r, err := bus.NewRelay(st, relayPub{name, &plog}, bus.RelayConfig{CheckpointEvery: 16, CheckpointInterval: 50 * time.Millisecond}, quiet)
		if err != nil {
			t.Fatal(err)
		}
		pctx, cancel := context.WithCancel(ctx)
		p := &proc{name: name, cancel: cancel, done: make(chan error, 1)}
		go func() { p.done <- events.RunLeased(pctx, st, "relay", quiet, r.Run) }()
		return p
	}
	count := func(relay string) int {
		k := 0
		for _, r := range plog.snapshot() {
			if relay == "" || r.relay == relay {
				k++
			}
		}
		return k
	}
	a := start("a")
	waitUntil(t, ctx, "relay a publishing", func() bool { return count("a") >= n/3 })
	b := start("b")
	appendN(n/3, 2*n/3)
	waitUntil(t, ctx, "relay a publishing the second third", func() bool { return count("a") >= 2*n/3 })
	if count("b") != 0 {
		t.Fatalf("the candidate published %d events while the holder ran", count("b"))
	}

	// a stops cleanly: b resumes after a's checkpoint, strictly after it
	a.cancel()
	if err := <-a.done; err != nil {
		t.Fatal(err)
	}
	lastA := plog.snapshot()
	appendN(2*n/3, n)
	waitUntil(t, ctx, "relay b taking over", func() bool { return count("b") > 0 })
	for _, r := range plog.snapshot()[len(lastA):] {
		if r.relay != "b" {
			t.Fatalf("relay a published position %d after it stopped", r.pos)
		}
	}

	// b's session dies: c takes over within seconds and nothing is lost
	c := start("c")
	waitUntil(t, ctx, "relay b publishing everything", func() bool { return maxPos(plog.snapshot()) >= uint64(n) })
	killed := time.Now()
	killHolder(t, ctx, url, schema, "relay")
	// The holder's process dies with its session: left running, b would
	// compete again and might win the lease back before c.
	b.cancel()
	extra := 50
	for i := n; i < n+extra; i++ {
		if _, err := writer.Append(ctx, "after", events.Any, eventstest.Feedback(t, fmt.Sprintf("e%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, ctx, "relay c taking over", func() bool { return count("c") > 0 })
	took := time.Since(killed)
	waitUntil(t, ctx, "every event published", func() bool { return maxPos(plog.snapshot()) >= uint64(n+extra) })
	if took > 10*time.Second {
		t.Errorf("relay c took over %v after the holder died (want within 10 s)", took)
	}
	t.Logf("took over %v after the holder's session was killed", took.Round(time.Millisecond))

	seen := map[uint64]int{}
	for _, r := range plog.snapshot() {
		seen[r.pos]++
	}
	dups := 0
	for p := uint64(1); p <= uint64(n+extra); p++ {
		if seen[p] == 0 {
			t.Fatalf("position %d never published", p)
		}
		dups += seen[p] - 1
	}
	// at-least-once: republished are only what a holder published after
	// its last checkpoint (a handful with CheckpointEvery 16)
	t.Logf("%d events, %d published again by a successor", n+extra, dups)
	if dups > 3*16+extra {
		t.Errorf("%d events published twice: more than the unsaved tail of a checkpoint", dups)
	}
	c.cancel()
	for _, p := range []*proc{b, c} {
		if err := <-p.done; err != nil {
			t.Errorf("relay %s: %v", p.name, err)
		}
	}
}

func maxPos(recs []published) uint64 {
	var m uint64
	for _, r := range recs {
		m = max(m, r.pos)
	}
	return m
}
