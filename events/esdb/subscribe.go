package esdb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"time"

	"citizen/events"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// serverFilter picks the server-side filter of a subscription: stream
// prefixes if any, else event types, else ESDB's system events excluded.
func serverFilter(f events.Filter) *esdb.SubscriptionFilter {
	switch {
	case len(f.StreamPrefixes) > 0:
		return &esdb.SubscriptionFilter{Type: esdb.StreamFilterType, Prefixes: f.StreamPrefixes}
	case len(f.Types) > 0:
		return &esdb.SubscriptionFilter{Type: esdb.EventFilterType, Prefixes: f.Types}
	default:
		return esdb.ExcludeSystemEventsFilter()
	}
}

// Subscribe implements events.Store with a catch-up subscription to $all
// that is resumed after a drop (see the package doc).
func (s *Store) Subscribe(ctx context.Context, after uint64, f events.Filter, h events.Handler) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	s.end()
	// Close cancels the subscription in progress and any wait before the
	// next one.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-sctx.Done():
		}
	}()
	filter := serverFilter(f)
	r := &resumer{
		open: func(ctx context.Context, from esdb.AllPosition) (subscription, error) {
			return s.client.SubscribeToAll(ctx, esdb.SubscribeToAllOptions{From: from, Filter: filter})
		},
		filter:  f,
		closed:  s.done,
		backoff: backoff{initial: s.cfg.ResumeInitial, max: s.cfg.ResumeMax},
		wait:    sleep,
		log:     s.log,
	}
	return r.run(sctx, after, h)
}

// resumer runs a catch-up subscription to $all for one Subscribe call and
// opens it again from the last event received whenever it is dropped for a
// transient reason, after a capped exponential backoff.
type resumer struct {
	// open starts a subscription after from (esdb.Start{}: from the start).
	open    func(ctx context.Context, from esdb.AllPosition) (subscription, error)
	filter  events.Filter
	closed  <-chan struct{}
	backoff backoff
	// wait pauses for d, or returns ctx.Err() once ctx is done.
	wait func(ctx context.Context, d time.Duration) error
	log  *slog.Logger
}

// handlerError marks an error from the handler or from decoding an event:
// run returns it as it is, without resuming.
type handlerError struct{ err error }

func (e handlerError) Error() string { return e.err.Error() }

// run delivers every event after position after that matches r.filter to
// h, in position order, each once. It returns ctx.Err() once ctx is done,
// events.ErrClosed once r.closed is, h's error, or a non-transient error
// from the server.
func (r *resumer) run(ctx context.Context, after uint64, h events.Handler) error {
	var from esdb.AllPosition = esdb.Start{}
	if after > 0 {
		from = esdb.Position{Commit: after, Prepare: after}
	}
	last := after
	for {
		progressed, err := r.once(ctx, &from, &last, h)
		if stop := r.stopped(ctx); stop != nil {
			return stop
		}
		var he handlerError
		if errors.As(err, &he) {
			return he.err
		}
		if !transient(err) {
			return fmt.Errorf("events: esdb: subscription to $all: %w", err)
		}
		if progressed {
			r.backoff.reset()
		}
		d := r.backoff.next()
		r.log.Warn("subscription to $all dropped; resuming", "after", last, "in", d, "err", err)
		if err := r.wait(ctx, d); err != nil {
			if stop := r.stopped(ctx); stop != nil {
				return stop
			}
			return err
		}
	}
}

// stopped is events.ErrClosed once the store is closed, ctx.Err() once ctx
// is done, nil otherwise.
func (r *resumer) stopped(ctx context.Context) error {
	select {
	case <-r.closed:
		return events.ErrClosed
	default:
		return ctx.Err()
	}
}

// once runs one subscription from *from until it is dropped. Every event
// received moves *from and *last on (after delivery, for those delivered),
// so that the next subscription starts after it; events at or before
// *last are skipped, so one that is sent again is not delivered twice.
// progressed reports whether any event was received.
func (r *resumer) once(ctx context.Context, from *esdb.AllPosition, last *uint64, h events.Handler) (progressed bool, err error) {
	sub, err := r.open(ctx, *from)
	if err != nil {
		return false, err
	}
	defer sub.Close()
	for {
		e := sub.Recv()
		if stop := r.stopped(ctx); stop != nil {
			return progressed, stop
		}
		switch {
		case e == nil:
			continue
		case e.SubscriptionDropped != nil:
			if e.SubscriptionDropped.Error == nil {
				return progressed, errors.New("dropped without a reason")
			}
			return progressed, e.SubscriptionDropped.Error
		case e.EventAppeared != nil:
			rec := e.EventAppeared.Event
			if rec == nil || rec.Position.Prepare <= *last {
				continue
			}
			progressed = true
			if visible(rec) {
				ev, err := fromRecorded(rec)
				if err != nil {
					return progressed, handlerError{err}
				}
				if r.filter.Match(&ev) {
					if err := h(ctx, ev); err != nil {
						return progressed, handlerError{err}
					}
				}
			}
			*last, *from = rec.Position.Prepare, rec.Position
		}
	}
}

// transient reports whether a subscription that failed with err may be
// opened again: unavailable servers, leader changes, deadlines, aborted or
// reset streams and errors the client cannot classify are; refused
// credentials or permissions, invalid requests (a bad filter), missing
// features and a closed client are not.
func transient(err error) bool {
	var e *esdb.Error
	if errors.As(err, &e) {
		switch e.Code() {
		case esdb.ErrorCodeNotLeader, esdb.ErrorUnavailable, esdb.ErrorCodeDeadlineExceeded, esdb.ErrorAborted:
			return true
		case esdb.ErrorCodeUnauthenticated, esdb.ErrorCodeAccessDenied, esdb.ErrorCodeUnsupportedFeature,
			esdb.ErrorCodeConnectionClosed, esdb.ErrorCodeParsing, esdb.ErrorCodeInternalClient:
			return false
		}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.Unauthenticated, codes.PermissionDenied, codes.InvalidArgument, codes.NotFound,
			codes.Unimplemented, codes.FailedPrecondition, codes.OutOfRange, codes.AlreadyExists, codes.DataLoss:
			return false
		}
	}
	return true
}

// backoff is a capped exponential backoff: next doubles from initial up to
// max, and waits a random time in [d/2, d] of its nominal d so that
// subscribers dropped together do not return together.
type backoff struct {
	initial, max time.Duration
	cur          time.Duration
}

// nominal is the next nominal wait; it advances the backoff.
func (b *backoff) nominal() time.Duration {
	switch {
	case b.cur == 0:
		b.cur = b.initial
	case b.cur < b.max:
		b.cur = min(2*b.cur, b.max)
	}
	return b.cur
}

func (b *backoff) next() time.Duration {
	d := b.nominal()
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

func (b *backoff) reset() { b.cur = 0 }

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
