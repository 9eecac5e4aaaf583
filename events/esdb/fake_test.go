package esdb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fakeServer is a client that models the server's documented behaviour
// closely enough for the store's own decisions: appends with ESDB's
// idempotency check (ids compared after an exact expected revision; for
// Any and StreamExists a cache of recently written ids, cleared by
// restart), stream reads, and catch-up subscriptions to $all that a test
// can drop on a script.
type fakeServer struct {
	mu      sync.Mutex
	streams map[string][]*esdb.RecordedEvent
	all     []*esdb.RecordedEvent
	cache   map[uuid.UUID]*esdb.RecordedEvent
	changed chan struct{}
	closed  bool

	// plans scripts successive SubscribeToAll calls; with none left a
	// subscription is never dropped by the server.
	plans []subPlan
	// inclusive subscriptions send the event at their start position too.
	inclusive bool

	opens    []esdb.AllPosition // From of each SubscribeToAll
	appends  int                // AppendToStream calls
	maxCount uint64             // largest count of a ReadStream call
}

// subPlan is what one SubscribeToAll call does: fail with openErr, or
// deliver dropAfter events (negative: no limit) and then drop with dropErr.
type subPlan struct {
	openErr   error
	dropAfter int
	dropErr   error
}

func newFake() *fakeServer {
	return &fakeServer{streams: map[string][]*esdb.RecordedEvent{}, cache: map[uuid.UUID]*esdb.RecordedEvent{}, changed: make(chan struct{})}
}

// restart forgets the idempotency cache, as a server restart or a leader
// change does.
func (f *fakeServer) restart() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.cache)
}

func (f *fakeServer) streamLen(stream string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.streams[stream])
}

func (f *fakeServer) opened() []esdb.AllPosition {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.opens)
}

var errFakeWrong = fmt.Errorf("%w: fake server", errWrongVersion)

func (f *fakeServer) AppendToStream(_ context.Context, stream string, opts esdb.AppendToStreamOptions, evs ...esdb.EventData) (*esdb.WriteResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, errors.New("fake: closed")
	}
	f.appends++
	cur := int64(len(f.streams[stream])) - 1
	k := int64(len(evs))
	expect, exact := int64(0), false
	switch e := opts.ExpectedRevision.(type) {
	case esdb.StreamRevision:
		expect, exact = int64(e.Value), true
	case esdb.NoStream:
		expect, exact = -1, true
	case esdb.StreamExists:
		if cur < 0 {
			return nil, errFakeWrong
		}
	}
	if exact && expect > cur {
		return nil, errFakeWrong
	}
	if exact && expect < cur {
		// Idempotent only if every event is where a retry puts it.
		for i := range evs {
			at := expect + 1 + int64(i)
			if at > cur || f.streams[stream][at].EventID != evs[i].EventID {
				return nil, errFakeWrong
			}
		}
		return &esdb.WriteResult{NextExpectedVersion: uint64(expect + k)}, nil
	}
	if !exact {
		if first, ok := f.cache[evs[0].EventID]; ok && first.StreamID == stream {
			for i := range evs {
				at := int64(first.EventNumber) + int64(i)
				if at > cur || f.streams[stream][at].EventID != evs[i].EventID {
					return nil, errFakeWrong
				}
			}
			return &esdb.WriteResult{NextExpectedVersion: first.EventNumber + uint64(k) - 1}, nil
		}
	}
	var last *esdb.RecordedEvent
	for _, d := range evs {
		p := uint64(1000 + 10*len(f.all))
		last = &esdb.RecordedEvent{EventID: d.EventID, EventType: d.EventType, ContentType: "application/json", StreamID: stream,
			EventNumber: uint64(len(f.streams[stream])), Position: esdb.Position{Commit: p, Prepare: p}, Data: d.Data, UserMetadata: d.Metadata}
		f.streams[stream] = append(f.streams[stream], last)
		f.all = append(f.all, last)
		f.cache[d.EventID] = last
	}
	close(f.changed)
	f.changed = make(chan struct{})
	return &esdb.WriteResult{CommitPosition: last.Position.Commit, PreparePosition: last.Position.Prepare, NextExpectedVersion: last.EventNumber}, nil
}

func (f *fakeServer) ReadStream(_ context.Context, stream string, opts esdb.ReadStreamOptions, count uint64) (recvStream, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.maxCount = max(f.maxCount, count)
	evs, ok := f.streams[stream]
	if !ok {
		return &fakeRead{err: fmt.Errorf("%w: %q", errNotFound, stream)}, nil
	}
	var out []*esdb.RecordedEvent
	if opts.Direction == esdb.Backwards {
		i := len(evs) - 1
		if r, ok := opts.From.(esdb.StreamRevision); ok {
			i = min(i, int(r.Value))
		}
		for ; i >= 0 && uint64(len(out)) < count; i-- {
			out = append(out, evs[i])
		}
	} else {
		i := 0
		if r, ok := opts.From.(esdb.StreamRevision); ok {
			i = int(min(r.Value, uint64(len(evs))))
		}
		for ; i < len(evs) && uint64(len(out)) < count; i++ {
			out = append(out, evs[i])
		}
	}
	return &fakeRead{evs: out}, nil
}

func (f *fakeServer) ReadAll(_ context.Context, opts esdb.ReadAllOptions, count uint64) (recvStream, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*esdb.RecordedEvent
	if opts.Direction == esdb.Backwards {
		for i := len(f.all) - 1; i >= 0 && uint64(len(out)) < count; i-- {
			out = append(out, f.all[i])
		}
		return &fakeRead{evs: out}, nil
	}
	from := uint64(0)
	if p, ok := opts.From.(esdb.Position); ok {
		from = p.Prepare
	}
	for _, r := range f.all {
		if r.Position.Prepare >= from && uint64(len(out)) < count {
			out = append(out, r)
		}
	}
	return &fakeRead{evs: out}, nil
}

func (f *fakeServer) SetStreamMetadata(context.Context, string, esdb.AppendToStreamOptions, esdb.StreamMetadata) (*esdb.WriteResult, error) {
	return &esdb.WriteResult{}, nil
}

func (f *fakeServer) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

func (f *fakeServer) SubscribeToAll(ctx context.Context, opts esdb.SubscribeToAllOptions) (subscription, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opens = append(f.opens, opts.From)
	plan := subPlan{dropAfter: -1}
	if len(f.plans) > 0 {
		plan, f.plans = f.plans[0], f.plans[1:]
	}
	if plan.openErr != nil {
		return nil, plan.openErr
	}
	sub := &fakeSub{f: f, plan: plan}
	sub.ctx, sub.cancel = context.WithCancel(ctx)
	if p, ok := opts.From.(esdb.Position); ok {
		sub.after, sub.started = p.Prepare, true
	}
	sub.inclusive = f.inclusive && sub.started
	return sub, nil
}

type fakeRead struct {
	evs []*esdb.RecordedEvent
	err error
}

func (r *fakeRead) Recv() (*esdb.ResolvedEvent, error) {
	if r.err != nil {
		return nil, r.err
	}
	if len(r.evs) == 0 {
		return nil, io.EOF
	}
	ev := r.evs[0]
	r.evs = r.evs[1:]
	return &esdb.ResolvedEvent{Event: ev}, nil
}

func (r *fakeRead) Close() {}

// fakeSub is a catch-up subscription: stored events after its start, a
// caught-up message, then new events as they are appended.
type fakeSub struct {
	f         *fakeServer
	plan      subPlan
	ctx       context.Context
	cancel    context.CancelFunc
	after     uint64 // last position sent (or the start)
	started   bool   // after is meaningful (not from the start)
	inclusive bool   // the next event may sit at after itself
	sent      int
	caughtUp  bool
}

func (s *fakeSub) Close() error {
	s.cancel()
	return nil
}

func (s *fakeSub) Recv() *esdb.SubscriptionEvent {
	for {
		if s.plan.dropAfter >= 0 && s.sent == s.plan.dropAfter {
			s.plan.dropAfter = -1
			return &esdb.SubscriptionEvent{SubscriptionDropped: &esdb.SubscriptionDropped{Error: s.plan.dropErr}}
		}
		s.f.mu.Lock()
		var next *esdb.RecordedEvent
		for _, r := range s.f.all {
			p := r.Position.Prepare
			if !s.started || p > s.after || (s.inclusive && p == s.after) {
				next = r
				break
			}
		}
		changed := s.f.changed
		s.f.mu.Unlock()
		if next != nil {
			s.after, s.started, s.inclusive = next.Position.Prepare, true, false
			s.sent++
			return &esdb.SubscriptionEvent{EventAppeared: &esdb.ResolvedEvent{Event: next}}
		}
		if !s.caughtUp {
			s.caughtUp = true
			return &esdb.SubscriptionEvent{CaughtUp: &esdb.Subscription{}}
		}
		select {
		case <-changed:
		case <-s.ctx.Done():
			return &esdb.SubscriptionEvent{SubscriptionDropped: &esdb.SubscriptionDropped{Error: status.Error(codes.Canceled, "context canceled")}}
		}
	}
}
