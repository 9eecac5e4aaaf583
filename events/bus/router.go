package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/google/uuid"

	"citizen/events"
)

// RouterConfig configures NewRouter. Zero fields take the defaults noted.
type RouterConfig struct {
	// Poison receives messages that failed MaxAttempts times or failed
	// permanently (required).
	Poison message.Publisher
	// PoisonTopic defaults to PoisonTopic ("citizen.poison").
	PoisonTopic string
	// MaxAttempts is how many times a message is handled before it goes to
	// the poison topic: the first attempt plus MaxAttempts-1 retries
	// (default 5).
	MaxAttempts int
	// InitialInterval is the wait before the first retry (default 100 ms);
	// each later wait is Multiplier (default 2) times longer, up to
	// MaxInterval (default 10 s).
	InitialInterval time.Duration
	Multiplier      float64
	MaxInterval     time.Duration
	// CloseTimeout bounds how long Close waits for running handlers
	// (default 30 s).
	CloseTimeout time.Duration
}

func (c *RouterConfig) setDefaults() {
	if c.PoisonTopic == "" {
		c.PoisonTopic = PoisonTopic
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 5
	}
	if c.InitialInterval == 0 {
		c.InitialInterval = 100 * time.Millisecond
	}
	if c.Multiplier == 0 {
		c.Multiplier = 2
	}
	if c.MaxInterval == 0 {
		c.MaxInterval = 10 * time.Second
	}
	if c.CloseTimeout == 0 {
		c.CloseTimeout = 30 * time.Second
	}
}

// Validate reports a config NewRouter cannot use.
func (c RouterConfig) Validate() error {
	switch {
	case c.Poison == nil:
		return errors.New("bus: router config: Poison publisher is required")
	case c.MaxAttempts < 1:
		return fmt.Errorf("bus: router config: MaxAttempts must be at least 1, got %d", c.MaxAttempts)
	case c.InitialInterval < 0 || c.MaxInterval < 0 || c.Multiplier < 1:
		return errors.New("bus: router config: intervals must be positive and Multiplier at least 1")
	}
	return nil
}

// NewRouter returns the watermill router every citizen worker uses, with
// these middlewares, outermost first:
//
//  1. correlation id: messages a handler returns inherit the incoming
//     message's correlation_id metadata (AddEventHandler also propagates
//     it to derived events);
//  2. poison queue: a message whose handling still fails after the retries
//     (or fails permanently, see Permanent) is published to PoisonTopic
//     with the reason in metadata "reason_poisoned", logged, and acked;
//     errors caused by shutdown (context cancelled) are not poisoned but
//     nacked, so the message is redelivered later;
//  3. retry: MaxAttempts attempts with exponential backoff
//     (InitialInterval × Multiplier^n, capped at MaxInterval); permanent
//     errors are not retried;
//  4. recoverer: a panic in a handler becomes an error (and so is retried
//     and finally poisoned).
//
// Run the router with router.Run(ctx); it stops when ctx is cancelled.
func NewRouter(cfg RouterConfig, logger *slog.Logger) (*message.Router, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("component", "router")
	r, err := message.NewRouter(message.RouterConfig{CloseTimeout: cfg.CloseTimeout}, routerLogger(logger))
	if err != nil {
		return nil, fmt.Errorf("bus: router: %w", err)
	}
	poison, err := middleware.PoisonQueueWithFilter(cfg.Poison, cfg.PoisonTopic, func(err error) bool {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return false
		}
		logger.Error("bus: handler failed, message goes to the poison topic", "topic", cfg.PoisonTopic,
			"permanent", IsPermanent(err), "err", err)
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("bus: router: %w", err)
	}
	r.AddMiddleware(
		middleware.CorrelationID,
		poison,
		middleware.Retry{
			MaxRetries:      cfg.MaxAttempts - 1,
			InitialInterval: cfg.InitialInterval,
			Multiplier:      cfg.Multiplier,
			MaxInterval:     cfg.MaxInterval,
			ShouldRetry:     func(p middleware.RetryParams) bool { return !IsPermanent(p.Err) },
			Logger:          watermill.NewSlogLogger(logger),
		}.Middleware,
		middleware.Recoverer,
	)
	return r, nil
}

// routerLogger adapts logger for watermill's router, whose INFO lines are
// lifecycle chatter (one "Adding handler" and one "Starting handler" per
// handler at every start, "Closing router" at every stop): they go to
// DEBUG, and its DEBUG lines to watermill's TRACE. Errors keep their level.
func routerLogger(logger *slog.Logger) watermill.LoggerAdapter {
	return watermill.NewSlogLoggerWithLevelMapping(logger, map[slog.Level]slog.Level{
		slog.LevelInfo:  slog.LevelDebug,
		slog.LevelDebug: watermill.LevelTrace,
	})
}

type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks err as one that retrying cannot fix: the router sends
// the message to the poison topic at once. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err was marked with Permanent or is one of
// the errors that no retry can fix: a message that is not an event
// (ErrBadPayload, ErrMetadataMismatch) or a derived event the store
// rejects as such (events.ErrMalformed, ErrTooLarge, ErrInvalidStream,
// ErrUnknownType, ErrUnknownSchema).
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p) ||
		errors.Is(err, events.ErrMalformed) || errors.Is(err, events.ErrTooLarge) ||
		errors.Is(err, events.ErrInvalidStream) || errors.Is(err, events.ErrUnknownType) ||
		errors.Is(err, events.ErrUnknownSchema)
}

// Appender is the part of events.Store that AddEventHandler needs.
type Appender interface {
	Append(ctx context.Context, stream string, expected events.ExpectedRevision, evs ...events.Event) (events.AppendResult, error)
}

// HandlerFunc handles one event and returns the events it derives from it
// (none is fine). It must not write any other state: the helper appends
// the derived events. A returned error nacks the message (retry, then
// poison); wrap it with Permanent when retrying cannot help.
type HandlerFunc func(ctx context.Context, ev events.Event) ([]events.Event, error)

// EventHandler describes a worker's handler for AddEventHandler.
type EventHandler struct {
	// Name identifies the handler in logs and poison metadata; unique per
	// router. With several topics each gets a router handler named
	// Name+"@"+topic.
	Name string
	// Topics to consume, e.g. Topic(events.TypeInteractionRecorded).
	Topics []string
	// Subscriber delivers the topics, in the worker's consumer group.
	Subscriber message.Subscriber
	// Store receives the derived events.
	Store Appender
	// Handle is the handler.
	Handle HandlerFunc
}

// AddEventHandler registers h on r. For each message it decodes the event
// (FromMessage; a message that is not an event is poisoned), calls Handle,
// and appends the derived events to the store, which makes the handling
// idempotent under at-least-once delivery. Before appending, each derived
// event that leaves a field empty gets:
//
//   - ID: events.DeterministicID(cause ID, Name, type, index in the
//     returned slice), so a retry appends the same IDs and the store keeps
//     one copy (a handler that sets IDs itself must derive them
//     deterministically too);
//   - Stream: the cause's stream;
//   - CorrelationID and Tenant: the cause's; CausationID: the cause's ID;
//   - Time: now.
//
// Derived events are appended per stream, in the order returned, with
// events.Any. The message is acked only after the append succeeded.
func AddEventHandler(r *message.Router, h EventHandler) error {
	switch {
	case h.Name == "":
		return errors.New("bus: event handler needs a Name")
	case len(h.Topics) == 0:
		return fmt.Errorf("bus: event handler %s needs at least one topic", h.Name)
	case h.Subscriber == nil || h.Store == nil || h.Handle == nil:
		return fmt.Errorf("bus: event handler %s needs a Subscriber, a Store and Handle", h.Name)
	}
	existing := r.Handlers()
	for _, topic := range h.Topics {
		name := h.Name
		if len(h.Topics) > 1 {
			name += "@" + topic
		}
		if _, dup := existing[name]; dup {
			return fmt.Errorf("bus: a handler named %s is already registered", name)
		}
	}
	for _, topic := range h.Topics {
		name := h.Name
		if len(h.Topics) > 1 {
			name += "@" + topic
		}
		if rs, ok := h.Subscriber.(Reserver); ok {
			rs.Reserve(topic)
		}
		r.AddConsumerHandler(name, topic, h.Subscriber, h.handle)
	}
	return nil
}

// Reserver is a subscriber that can create its consumer group on a topic
// before it subscribes (the in-process bus), so that messages published in
// between are kept for it. AddEventHandler reserves every topic it
// registers.
type Reserver interface {
	Reserve(topic string)
}

// Settler is a publisher whose published messages are not yet durable
// (the in-process bus): SettledThrough(published) is the highest store
// position through which every message is acknowledged by its consumers.
// The relay never checkpoints past it, so after a crash every event not
// yet handled by every worker is published again.
type Settler interface {
	SettledThrough(published uint64) uint64
}

// Backlogger reports how many messages of topics a consumer group has not
// yet acknowledged: the in-process bus counts its own, kafka.Backlog asks
// the brokers. known is false for a group that consumes none of the
// topics (it has never joined them, or has never committed on them).
type Backlogger interface {
	Backlog(ctx context.Context, group string, topics []string) (n int64, known bool, err error)
}

func (h EventHandler) handle(msg *message.Message) error {
	cause, err := FromMessage(msg)
	if err != nil {
		return Permanent(err)
	}
	ctx := msg.Context()
	derived, err := h.Handle(ctx, cause)
	if err != nil {
		return err
	}
	if len(derived) == 0 {
		return nil
	}
	Derive(h.Name, cause, derived)
	// append per stream, keeping the returned order within each stream
	var order []string
	byStream := map[string][]events.Event{}
	for _, d := range derived {
		if _, ok := byStream[d.Stream]; !ok {
			order = append(order, d.Stream)
		}
		byStream[d.Stream] = append(byStream[d.Stream], d)
	}
	for _, stream := range order {
		if _, err := h.Store.Append(ctx, stream, events.Any, byStream[stream]...); err != nil {
			return fmt.Errorf("bus: %s appending %d derived event(s) to %s: %w", h.Name, len(byStream[stream]), stream, err)
		}
	}
	return nil
}

// Derive fills the empty envelope fields of events derived from cause by
// the handler called name, as AddEventHandler does (see there). It is
// exported for workers that subscribe to the store directly.
func Derive(name string, cause events.Event, derived []events.Event) {
	now := time.Now().UTC()
	for i := range derived {
		d := &derived[i]
		if d.ID == uuid.Nil {
			d.ID = events.DeterministicID(cause.ID.String(), name, d.Type, strconv.Itoa(i))
		}
		if d.Stream == "" {
			d.Stream = cause.Stream
		}
		if d.CorrelationID == "" {
			d.CorrelationID = cause.CorrelationID
		}
		if d.CausationID == "" {
			d.CausationID = cause.ID.String()
		}
		if d.Tenant == "" {
			d.Tenant = cause.Tenant
		}
		if d.Time.IsZero() {
			d.Time = now
		}
	}
}
