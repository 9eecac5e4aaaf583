package esdb

import (
	"context"
	"errors"
	"fmt"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
)

// client is the part of the EventStoreDB client the store calls. The
// production one is grpcClient; tests drive the store through a fake that
// models the server's documented semantics. Errors that the store decides
// on are translated to errWrongVersion and errNotFound (wrapping the
// client's error), so that the store's decisions do not depend on how the
// client spells them.
type client interface {
	AppendToStream(ctx context.Context, stream string, opts esdb.AppendToStreamOptions, evs ...esdb.EventData) (*esdb.WriteResult, error)
	ReadStream(ctx context.Context, stream string, opts esdb.ReadStreamOptions, count uint64) (recvStream, error)
	ReadAll(ctx context.Context, opts esdb.ReadAllOptions, count uint64) (recvStream, error)
	SubscribeToAll(ctx context.Context, opts esdb.SubscribeToAllOptions) (subscription, error)
	SetStreamMetadata(ctx context.Context, stream string, opts esdb.AppendToStreamOptions, meta esdb.StreamMetadata) (*esdb.WriteResult, error)
	Close() error
}

// recvStream is a read in progress: Recv returns io.EOF at its end and
// errNotFound (wrapped) for a stream that does not exist.
type recvStream interface {
	Recv() (*esdb.ResolvedEvent, error)
	Close()
}

// subscription is a catch-up subscription in progress. Recv blocks for the
// next message; a SubscriptionDropped message ends it.
type subscription interface {
	Recv() *esdb.SubscriptionEvent
	Close() error
}

var (
	// errWrongVersion: the server refused an append's expected revision
	// (or, for Any and StreamExists, found the batch partially stored).
	errWrongVersion = errors.New("wrong expected version")
	// errNotFound: the stream does not exist.
	errNotFound = errors.New("stream not found")
)

// translate maps the client's error codes the store decides on onto
// errWrongVersion and errNotFound, keeping the original in the chain.
func translate(err error) error {
	var e *esdb.Error
	if err == nil || !errors.As(err, &e) {
		return err
	}
	switch e.Code() {
	case esdb.ErrorCodeWrongExpectedVersion:
		return fmt.Errorf("%w: %w", errWrongVersion, err)
	case esdb.ErrorCodeResourceNotFound:
		return fmt.Errorf("%w: %w", errNotFound, err)
	}
	return err
}

// grpcClient is client on github.com/EventStore/EventStore-Client-Go.
type grpcClient struct{ c *esdb.Client }

func (g grpcClient) AppendToStream(ctx context.Context, stream string, opts esdb.AppendToStreamOptions, evs ...esdb.EventData) (*esdb.WriteResult, error) {
	r, err := g.c.AppendToStream(ctx, stream, opts, evs...)
	return r, translate(err)
}

func (g grpcClient) ReadStream(ctx context.Context, stream string, opts esdb.ReadStreamOptions, count uint64) (recvStream, error) {
	rs, err := g.c.ReadStream(ctx, stream, opts, count)
	if err != nil {
		return nil, translate(err)
	}
	return grpcRead{rs}, nil
}

func (g grpcClient) ReadAll(ctx context.Context, opts esdb.ReadAllOptions, count uint64) (recvStream, error) {
	rs, err := g.c.ReadAll(ctx, opts, count)
	if err != nil {
		return nil, translate(err)
	}
	return grpcRead{rs}, nil
}

func (g grpcClient) SubscribeToAll(ctx context.Context, opts esdb.SubscribeToAllOptions) (subscription, error) {
	sub, err := g.c.SubscribeToAll(ctx, opts)
	if err != nil {
		return nil, translate(err)
	}
	return sub, nil
}

func (g grpcClient) SetStreamMetadata(ctx context.Context, stream string, opts esdb.AppendToStreamOptions, meta esdb.StreamMetadata) (*esdb.WriteResult, error) {
	r, err := g.c.SetStreamMetadata(ctx, stream, opts, meta)
	return r, translate(err)
}

func (g grpcClient) Close() error { return g.c.Close() }

type grpcRead struct{ rs *esdb.ReadStream }

func (r grpcRead) Recv() (*esdb.ResolvedEvent, error) {
	ev, err := r.rs.Recv()
	return ev, translate(err)
}

func (r grpcRead) Close() { r.rs.Close() }
