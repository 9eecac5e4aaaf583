package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"citizen/events"
)

// RelayConfig configures a Relay. Zero fields take the defaults noted.
type RelayConfig struct {
	// Name of the relay's durable checkpoint in the store (default
	// "relay"). Two relays with the same name must not run at once:
	// where several processes share a store, run Run under a lease
	// (events.RunLeased with the store's events.Leaser). Two that overlap
	// briefly (a holder that has not yet noticed it lost its lease) only
	// publish some events twice.
	Name string
	// Filter selects the events to publish (default: all).
	Filter events.Filter
	// Topic maps an event to its topic (default: Topic(ev.Type)).
	Topic func(ev events.Event) string
	// BatchSize bounds the events handed to one Publish call per topic
	// (default 256). Events are batched only when they are already
	// waiting; a lone event is published at once.
	BatchSize int
	// CheckpointEvery and CheckpointInterval: the checkpoint is saved
	// once the position it can save (published and, with a Settler,
	// acknowledged by every consumer group) passed the saved one by
	// CheckpointEvery (positions, so events the Filter skips count too),
	// or that long after the first unsaved one (defaults 1024 and 1 s),
	// and when Run returns. A restart republishes at most the unsaved events.
	CheckpointEvery    int
	CheckpointInterval time.Duration
	// RetryInitial and RetryMax bound the backoff between failed Publish
	// attempts (defaults 50 ms and 5 s). A failed publish is retried until
	// it succeeds or ctx is cancelled; nothing is ever skipped.
	RetryInitial, RetryMax time.Duration
}

func (c *RelayConfig) setDefaults() {
	if c.Name == "" {
		c.Name = "relay"
	}
	if c.Topic == nil {
		c.Topic = func(ev events.Event) string { return Topic(ev.Type) }
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 256
	}
	if c.CheckpointEvery <= 0 {
		c.CheckpointEvery = 1024
	}
	if c.CheckpointInterval <= 0 {
		c.CheckpointInterval = time.Second
	}
	if c.RetryInitial <= 0 {
		c.RetryInitial = 50 * time.Millisecond
	}
	if c.RetryMax <= 0 {
		c.RetryMax = 5 * time.Second
	}
}

// Relay is the outbox: it publishes the store's events to the bus in
// position order, at least once. It resumes after its durable checkpoint
// (Store.Checkpoint under RelayConfig.Name), follows the store with
// Store.Subscribe (catch-up, then live), publishes each event
// (ToMessage) to its topic and saves the checkpoint only for events whose
// Publish has returned and, when the publisher is a Settler (the
// in-process bus, which holds messages only in memory), whose messages
// every consumer group has acknowledged. A crash or cancellation therefore
// can only make it publish some events again after a restart, never skip
// one; consumers dedupe by event id (the message UUID).
type Relay struct {
	store  events.Store
	pub    message.Publisher
	cfg    RelayConfig
	logger *slog.Logger
	// published is the position of the last event published while Run
	// runs (0 before the first).
	published atomic.Uint64
}

// Published returns the store position of the last event this relay has
// published, 0 before the first: LastPosition minus it is what the bus has
// not received yet.
func (r *Relay) Published() uint64 { return r.published.Load() }

// NewRelay returns a relay from store to pub. logger may be nil.
func NewRelay(store events.Store, pub message.Publisher, cfg RelayConfig, logger *slog.Logger) (*Relay, error) {
	if store == nil || pub == nil {
		return nil, errors.New("bus: relay needs a store and a publisher")
	}
	cfg.setDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Relay{store: store, pub: pub, cfg: cfg, logger: logger.With("component", "relay", "relay", cfg.Name)}, nil
}

// Run relays until ctx is cancelled (it then saves the checkpoint of what
// was published and returns nil) or the store fails or returns an event
// that cannot be mapped to a message (it returns the error, having saved
// the checkpoint of what was published). A failing Publish is retried
// with backoff, never skipped. It does not close the publisher.
func (r *Relay) Run(ctx context.Context) error {
	after, _, err := r.store.Checkpoint(ctx, r.cfg.Name)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("bus: relay %s: reading checkpoint: %w", r.cfg.Name, err)
	}
	r.published.Store(after)
	r.logger.Info("relay starting", "after", after)

	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	feed := make(chan events.Event, r.cfg.BatchSize)
	subErr := make(chan error, 1)
	go func() {
		subErr <- r.store.Subscribe(ctx, after, r.cfg.Filter, func(ctx context.Context, ev events.Event) error {
			select {
			case feed <- ev:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()

	saved, published := after, after
	var timer <-chan time.Time
	settler, _ := r.pub.(Settler)
	settled := func() uint64 {
		if settler != nil {
			return min(published, settler.SettledThrough(published))
		}
		return published
	}
	save := func(ctx context.Context) error {
		target := settled()
		timer = nil
		if target > saved {
			if err := r.store.SaveCheckpoint(ctx, r.cfg.Name, target); err != nil {
				return err
			}
			saved = target
		}
		if saved < published {
			timer = time.After(r.cfg.CheckpointInterval) // the consumers still owe acks
		}
		return nil
	}
	finish := func(err error) error {
		// save what was published, even though ctx may be cancelled
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer scancel()
		if serr := save(sctx); serr != nil {
			r.logger.Warn("relay could not save its checkpoint on exit", "position", published, "err", serr)
		}
		return err
	}

	batch := make([]events.Event, 0, r.cfg.BatchSize)
	for {
		batch = batch[:0]
		select {
		case ev := <-feed:
			batch = append(batch, ev)
		case err := <-subErr:
			if parent.Err() != nil {
				return finish(nil)
			}
			return finish(fmt.Errorf("bus: relay %s: subscription: %w", r.cfg.Name, err))
		case <-timer:
			if err := save(ctx); err != nil && ctx.Err() == nil {
				r.logger.Warn("relay could not save its checkpoint", "position", published, "err", err)
				timer = time.After(r.cfg.CheckpointInterval)
			}
			continue
		}
	drain:
		for len(batch) < r.cfg.BatchSize {
			select {
			case ev := <-feed:
				batch = append(batch, ev)
			default:
				break drain
			}
		}
		if err := r.publish(ctx, batch); err != nil {
			cancel()
			<-subErr
			if parent.Err() != nil {
				return finish(nil)
			}
			return finish(err)
		}
		published = batch[len(batch)-1].Position
		r.published.Store(published)
		// The count is of what can be saved: while consumers owe acks for
		// more than CheckpointEvery events, a test of published alone
		// would save (write, fsync, rename) after every batch.
		if published-saved >= uint64(r.cfg.CheckpointEvery) && settled()-saved >= uint64(r.cfg.CheckpointEvery) {
			if err := save(ctx); err != nil && ctx.Err() == nil {
				r.logger.Warn("relay could not save its checkpoint", "position", published, "err", err)
			}
		}
		if timer == nil && published != saved {
			timer = time.After(r.cfg.CheckpointInterval)
		}
	}
}

// publish publishes batch (in position order) grouped by topic, keeping
// the order within each topic, retrying until it succeeds or ctx ends.
func (r *Relay) publish(ctx context.Context, batch []events.Event) error {
	var topics []string
	byTopic := map[string][]*message.Message{}
	for _, ev := range batch {
		msg, err := ToMessage(ev)
		if err != nil {
			// a store never returns such an event; stop rather than skip it
			return fmt.Errorf("bus: relay %s: event at position %d cannot be published: %w", r.cfg.Name, ev.Position, err)
		}
		t := r.cfg.Topic(ev)
		if _, ok := byTopic[t]; !ok {
			topics = append(topics, t)
		}
		byTopic[t] = append(byTopic[t], msg)
	}
	for _, t := range topics {
		msgs := byTopic[t]
		if err := r.retry(ctx, func() error { return r.pub.Publish(t, msgs...) }); err != nil {
			return err
		}
	}
	return nil
}

func (r *Relay) retry(ctx context.Context, f func() error) error {
	wait := r.cfg.RetryInitial
	for {
		err := f()
		if err == nil {
			return nil
		}
		r.logger.Error("relay publish failed, retrying", "wait", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, r.cfg.RetryMax)
	}
}
