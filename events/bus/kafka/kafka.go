// Package kafka is a watermill Publisher and Subscriber for Apache Kafka
// built on github.com/segmentio/kafka-go, with the semantics of citizen's
// bus (see package citizen/events/bus):
//
//   - the message key is a metadata value (KeyMetadata, default the event's
//     stream), hashed to a partition, so one interaction's events stay in
//     order in one partition; messages without it are spread round-robin;
//   - consumer groups (Kafka's own): subscribers in one group share the
//     partitions, different groups each read everything; a new group
//     starts at the oldest retained offset;
//   - a subscription's consumer keeps one message in flight (which is at
//     most one per partition, so order within a partition holds), commits
//     its offset only after Ack, and hands a Nacked message out again until
//     it is acked: delivery is at-least-once; SubscriberConfig.Consumers
//     runs several consumers (group members) per subscription to handle
//     several partitions at once;
//   - the message UUID travels in the header "_uuid", metadata in the
//     other headers, the payload as the value.
//
// Topics are created on first use (Publish, SubscribeInitialize) with
// TopicConfig unless DisableTopicCreation is set.
package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	kafkago "github.com/segmentio/kafka-go"
)

// UUIDHeader carries the message UUID; metadata must not use this key.
const UUIDHeader = "_uuid"

// ErrClosed is returned by a closed Publisher or Subscriber.
var ErrClosed = errors.New("kafka: closed")

// TopicConfig is how missing topics are created.
type TopicConfig struct {
	// Partitions (default 1) and ReplicationFactor (default 1).
	Partitions, ReplicationFactor int
	// MaxMessageBytes is the topic's max.message.bytes (default 8 MiB,
	// above events.MaxEventSize; Kafka's own default is 1 MiB).
	MaxMessageBytes int
	// DisableTopicCreation leaves topic creation to the operator (or the
	// broker's auto-creation).
	DisableTopicCreation bool
}

func (c *TopicConfig) setDefaults() {
	if c.Partitions <= 0 {
		c.Partitions = 1
	}
	if c.ReplicationFactor <= 0 {
		c.ReplicationFactor = 1
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = 8 << 20
	}
}

// topics creates missing topics once per name.
type topics struct {
	brokers []string
	cfg     TopicConfig
	mu      sync.Mutex
	known   map[string]bool
}

func (t *topics) ensure(ctx context.Context, name string) error {
	if t.cfg.DisableTopicCreation {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.known[name] {
		return nil
	}
	if err := CreateTopics(ctx, t.brokers, t.cfg, name); err != nil {
		return err
	}
	t.known[name] = true
	return nil
}

// CreateTopics creates the named topics with cfg; topics that exist
// already are left as they are.
func CreateTopics(ctx context.Context, brokers []string, cfg TopicConfig, names ...string) error {
	cfg.setDefaults()
	req := &kafkago.CreateTopicsRequest{}
	for _, n := range names {
		req.Topics = append(req.Topics, kafkago.TopicConfig{Topic: n, NumPartitions: cfg.Partitions,
			ReplicationFactor: cfg.ReplicationFactor, ConfigEntries: []kafkago.ConfigEntry{
				{ConfigName: "max.message.bytes", ConfigValue: strconv.Itoa(cfg.MaxMessageBytes)}}})
	}
	client := &kafkago.Client{Addr: kafkago.TCP(brokers...), Timeout: 10 * time.Second}
	resp, err := client.CreateTopics(ctx, req)
	if err != nil {
		return fmt.Errorf("kafka: creating topics %v: %w", names, err)
	}
	for n, err := range resp.Errors {
		if err != nil && !errors.Is(err, kafkago.TopicAlreadyExists) {
			return fmt.Errorf("kafka: creating topic %s: %w", n, err)
		}
	}
	return waitTopicsLed(ctx, client, names)
}

// waitTopicsLed returns once every named topic is in the broker's
// metadata with a leader for each of its partitions. A created topic
// reaches the metadata a little later than the create request returns;
// a group member that joins in between finds no partitions ("Unknown
// Topic Or Partition") and waits for the next rebalance, seconds later.
func waitTopicsLed(ctx context.Context, client *kafkago.Client, names []string) error {
	delay := 10 * time.Millisecond
	for {
		md, err := client.Metadata(ctx, &kafkago.MetadataRequest{Topics: names})
		if err == nil && topicsLed(md, names) {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = errors.New("a partition has no leader")
			}
			return fmt.Errorf("kafka: waiting for topics %v: %w (%w)", names, ctx.Err(), err)
		case <-time.After(delay):
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}

// topicsLed reports whether md lists every named topic without an error
// and with a leader for each of its partitions.
func topicsLed(md *kafkago.MetadataResponse, names []string) bool {
	led := map[string]bool{}
	for _, t := range md.Topics {
		ok := t.Error == nil && len(t.Partitions) > 0
		for _, p := range t.Partitions {
			if p.Error != nil || p.Leader.ID < 0 || p.Leader.Host == "" {
				ok = false
			}
		}
		led[t.Name] = ok
	}
	for _, n := range names {
		if !led[n] {
			return false
		}
	}
	return true
}

func logf(l *slog.Logger, level slog.Level) kafkago.LoggerFunc {
	return func(format string, args ...any) { l.Log(context.Background(), level, fmt.Sprintf(format, args...)) }
}

// PublisherConfig configures a Publisher. Zero fields take the defaults
// noted.
type PublisherConfig struct {
	Brokers []string
	// KeyMetadata names the metadata value used as the message key
	// (default "stream").
	KeyMetadata string
	// BatchSize (default 1000 messages), BatchBytes (default 16 MiB) and
	// BatchTimeout (default 5 ms) bound a produce batch per partition.
	// kafka-go's default timeout (1 s) makes a lone synchronous Publish
	// take a second; ours costs a lone Publish about 5 ms.
	BatchSize    int
	BatchBytes   int64
	BatchTimeout time.Duration
	// WriteTimeout bounds one Publish (default 30 s).
	WriteTimeout time.Duration
	Topic        TopicConfig
}

// Publisher publishes synchronously: Publish returns once every message
// is acknowledged by all in-sync replicas. Safe for concurrent use.
type Publisher struct {
	cfg    PublisherConfig
	w      *kafkago.Writer
	topics *topics
	closed atomic.Bool
}

// NewPublisher returns a publisher; logger may be nil.
func NewPublisher(cfg PublisherConfig, logger *slog.Logger) (*Publisher, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("kafka: publisher needs Brokers")
	}
	if cfg.KeyMetadata == "" {
		cfg.KeyMetadata = "stream"
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 1000
	}
	if cfg.BatchBytes <= 0 {
		cfg.BatchBytes = 16 << 20
	}
	if cfg.BatchTimeout <= 0 {
		cfg.BatchTimeout = 5 * time.Millisecond
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	cfg.Topic.setDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("component", "kafka-publisher")
	w := &kafkago.Writer{
		Addr:         kafkago.TCP(cfg.Brokers...),
		Balancer:     &kafkago.Hash{},
		BatchSize:    cfg.BatchSize,
		BatchBytes:   cfg.BatchBytes,
		BatchTimeout: cfg.BatchTimeout,
		RequiredAcks: kafkago.RequireAll,
		Logger:       logf(logger, slog.LevelDebug),
		ErrorLogger:  logf(logger, slog.LevelWarn),
	}
	return &Publisher{cfg: cfg, w: w, topics: &topics{brokers: cfg.Brokers, cfg: cfg.Topic, known: map[string]bool{}}}, nil
}

// Publish writes msgs to topic in order (per key) and waits for the
// broker's acknowledgement.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	if p.closed.Load() {
		return ErrClosed
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.WriteTimeout)
	defer cancel()
	if err := p.topics.ensure(ctx, topic); err != nil {
		return err
	}
	kms := make([]kafkago.Message, len(msgs))
	for i, m := range msgs {
		km := kafkago.Message{Topic: topic, Value: m.Payload,
			Headers: make([]kafkago.Header, 0, len(m.Metadata)+1)}
		km.Headers = append(km.Headers, kafkago.Header{Key: UUIDHeader, Value: []byte(m.UUID)})
		for k, v := range m.Metadata {
			km.Headers = append(km.Headers, kafkago.Header{Key: k, Value: []byte(v)})
		}
		if key := m.Metadata.Get(p.cfg.KeyMetadata); key != "" {
			km.Key = []byte(key)
		}
		kms[i] = km
	}
	if err := p.w.WriteMessages(ctx, kms...); err != nil {
		return fmt.Errorf("kafka: publishing %d message(s) to %s: %w", len(msgs), topic, err)
	}
	return nil
}

// Close flushes and closes the writer.
func (p *Publisher) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	return p.w.Close()
}

// SubscriberConfig configures a Subscriber. Zero fields take the defaults
// noted.
type SubscriberConfig struct {
	Brokers []string
	// Group is the consumer group (required).
	Group string
	// Consumers is how many group members (kafka-go readers) one
	// Subscribe call runs, merged into its channel (default 1). Each has
	// one message in flight, so up to Consumers messages of different
	// partitions are handled at once; order within a partition holds.
	Consumers int
	// CommitInterval: 0 (default) commits each acked offset synchronously;
	// a positive value commits in the background at that interval (faster;
	// a crash then redelivers up to an interval of acked messages).
	CommitInterval time.Duration
	// MaxWait bounds how long a fetch waits for new data (default 500 ms).
	MaxWait time.Duration
	// NackDelay is the pause before a nacked message is handed out again
	// (default none; the router's retry middleware has its own backoff).
	NackDelay time.Duration
	// SessionTimeout, RebalanceTimeout and HeartbeatInterval of the group
	// membership (kafka-go defaults 30 s, 30 s, 3 s). A member notices a
	// rebalance at its next heartbeat.
	SessionTimeout, RebalanceTimeout, HeartbeatInterval time.Duration
	Topic                                               TopicConfig
}

// Subscriber consumes topics in a consumer group. Safe for concurrent
// use.
type Subscriber struct {
	cfg    SubscriberConfig
	logger *slog.Logger
	topics *topics

	mu     sync.Mutex
	closed bool
	stops  []context.CancelFunc
	wg     sync.WaitGroup
}

// NewSubscriber returns a subscriber; logger may be nil.
func NewSubscriber(cfg SubscriberConfig, logger *slog.Logger) (*Subscriber, error) {
	if len(cfg.Brokers) == 0 || cfg.Group == "" {
		return nil, errors.New("kafka: subscriber needs Brokers and a Group")
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 500 * time.Millisecond
	}
	if cfg.Consumers <= 0 {
		cfg.Consumers = 1
	}
	cfg.Topic.setDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Subscriber{cfg: cfg, logger: logger.With("component", "kafka-subscriber", "group", cfg.Group),
		topics: &topics{brokers: cfg.Brokers, cfg: cfg.Topic, known: map[string]bool{}}}, nil
}

// SubscribeInitialize creates topic if it is missing (Subscribe does too).
func (s *Subscriber) SubscribeInitialize(topic string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s.topics.ensure(ctx, topic)
}

// Subscribe creates topic if it is missing (see TopicConfig) and joins the
// group on it. The channel closes when ctx is
// cancelled or the subscriber is closed; an unacked message is then
// redelivered (to this group) later.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	// a group member that joins before its topic exists gets no partitions
	// and would not notice the topic appear: create it first
	ictx, icancel := context.WithTimeout(ctx, 30*time.Second)
	err := s.topics.ensure(ictx, topic)
	icancel()
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(ctx)
	s.stops = append(s.stops, stop)
	out := make(chan *message.Message)
	var members sync.WaitGroup
	for range s.cfg.Consumers {
		r := kafkago.NewReader(kafkago.ReaderConfig{
			Brokers:           s.cfg.Brokers,
			GroupID:           s.cfg.Group,
			Topic:             topic,
			MaxWait:           s.cfg.MaxWait,
			CommitInterval:    s.cfg.CommitInterval,
			StartOffset:       kafkago.FirstOffset,
			SessionTimeout:    s.cfg.SessionTimeout,
			RebalanceTimeout:  s.cfg.RebalanceTimeout,
			HeartbeatInterval: s.cfg.HeartbeatInterval,
			// notice partitions added later (or a topic created by someone else)
			WatchPartitionChanges: true,
			MaxBytes:              s.cfg.Topic.MaxMessageBytes * 2,
			Logger:                logf(s.logger, slog.LevelDebug),
			ErrorLogger:           logf(s.logger, slog.LevelWarn),
		})
		members.Add(1)
		go func() {
			defer members.Done()
			defer r.Close()
			s.consume(ctx, r, topic, out)
		}()
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		members.Wait()
		close(out)
	}()
	return out, nil
}

func (s *Subscriber) consume(ctx context.Context, r *kafkago.Reader, topic string, out chan<- *message.Message) {
	backoff := 100 * time.Millisecond
	for {
		km, err := r.FetchMessage(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, io.EOF) {
				return
			}
			s.logger.Warn("kafka: fetch failed", "topic", topic, "err", err)
			select {
			case <-time.After(backoff):
				backoff = min(2*backoff, 5*time.Second)
				continue
			case <-ctx.Done():
				return
			}
		}
		backoff = 100 * time.Millisecond
		msg := toMessage(km)
		for acked := false; !acked; {
			m := msg.Copy()
			mctx, cancel := context.WithCancel(ctx)
			m.SetContext(mctx)
			select {
			case out <- m:
			case <-ctx.Done():
				cancel()
				return
			}
			select {
			case <-m.Acked():
				acked = true
			case <-m.Nacked():
			case <-ctx.Done():
				cancel()
				return
			}
			cancel()
			if !acked && s.cfg.NackDelay > 0 {
				select {
				case <-time.After(s.cfg.NackDelay):
				case <-ctx.Done():
					return
				}
			}
		}
		// commit even if the subscription is ending, so the ack counts
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		if err := r.CommitMessages(cctx, km); err != nil {
			s.logger.Warn("kafka: commit failed; the message may be delivered again", "topic", topic,
				"partition", km.Partition, "offset", km.Offset, "err", err)
		}
		cancel()
	}
}

func toMessage(km kafkago.Message) *message.Message {
	m := message.NewMessage("", km.Value)
	for _, h := range km.Headers {
		if h.Key == UUIDHeader {
			m.UUID = string(h.Value)
		} else {
			m.Metadata.Set(h.Key, string(h.Value))
		}
	}
	if m.UUID == "" { // not published by us: name it by its place
		m.UUID = fmt.Sprintf("%s-%d-%d", km.Topic, km.Partition, km.Offset)
	}
	return m
}

// Close ends every subscription and returns once their channels are
// closed and their readers have left the group.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		for _, stop := range s.stops {
			stop()
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}
