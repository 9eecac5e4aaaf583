// Package transport opens the bus a citizen process is configured with:
// the in-process bus (one process) or Kafka (many), behind the one
// interface the workers and the relay use, with its settings
// (`bus.*`) and their validation.
package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"citizen/events/bus"
	"citizen/events/bus/kafka"

	"github.com/ThreeDotsLabs/watermill/message"
)

// Config selects the bus backend and sizes it.
type Config struct {
	Backend      string   `yaml:"backend" help:"inprocess or kafka"`
	KafkaBrokers []string `yaml:"kafka_brokers" help:"Kafka bootstrap brokers (backend kafka)"`
	MaxAttempts  int      `yaml:"max_attempts" help:"handler attempts before a message goes to the poison topic"`
	// KafkaNamespace prefixes citizen's topic and consumer-group names,
	// so that several deployments can share one Kafka cluster.
	KafkaNamespace string `yaml:"kafka_namespace" help:"prefix of citizen's topic and consumer-group names on the brokers (backend kafka): deployments sharing a cluster each need their own; empty: none"`
	// KafkaPartitions: see kafka.TopicConfig.Partitions. The partitions
	// bound how many processes share a worker role's consumer group.
	KafkaPartitions int `yaml:"kafka_partitions" help:"partitions of each topic citizen creates (backend kafka): how many consumers a worker role's group can use at once"`
	// KafkaConsumers: see kafka.SubscriberConfig.Consumers.
	KafkaConsumers int `yaml:"kafka_consumers" help:"consumer-group members per topic a worker process runs (backend kafka): messages of that many partitions in flight at once"`
	// KafkaSessionTimeout: see kafka.SubscriberConfig.SessionTimeout.
	KafkaSessionTimeout time.Duration `yaml:"kafka_session_timeout" help:"how long a consumer of a dead process keeps its partitions before the group hands them to the others (backend kafka; the broker allows 6s to 5m by default)"`
	// MaxBacklog bounds the work the worker roles owe (docs/adr/0017).
	MaxBacklog int64 `yaml:"max_backlog" help:"messages a worker role may owe (unacknowledged on the bus plus events the relay has not published) before /readyz says not ready and the gateway refuses new completions with 503 overloaded; 0: no bound"`
}

// DefaultConfig is the in-process bus.
func DefaultConfig() Config {
	return Config{Backend: "inprocess", MaxAttempts: 5, KafkaPartitions: 8, KafkaConsumers: 4, KafkaSessionTimeout: 10 * time.Second, MaxBacklog: 20000}
}

// Validate reports every invalid setting.
func (c Config) Validate() error {
	var errs []error
	if c.MaxBacklog < 0 {
		errs = append(errs, fmt.Errorf("bus.max_backlog %d: want 0 (no bound) or more", c.MaxBacklog))
	}
	switch c.Backend {
	case "inprocess":
	case "kafka":
		if len(c.KafkaBrokers) == 0 {
			errs = append(errs, errors.New("bus.kafka_brokers is required with bus.backend=kafka"))
		}
		if c.KafkaPartitions < 1 || c.KafkaConsumers < 1 {
			errs = append(errs, fmt.Errorf("bus.kafka_partitions %d and bus.kafka_consumers %d: want at least 1", c.KafkaPartitions, c.KafkaConsumers))
		}
		if c.KafkaSessionTimeout < 0 {
			errs = append(errs, fmt.Errorf("bus.kafka_session_timeout %v: want a positive duration (0: kafka-go's 30s)", c.KafkaSessionTimeout))
		}
	default:
		errs = append(errs, fmt.Errorf("bus.backend %q: want inprocess or kafka", c.Backend))
	}
	return errors.Join(errs...)
}

// Bus is what the workers need of a bus backend: a publisher (the relay's
// and the poison topic's), subscribers per consumer group, and what each
// group owes.
type Bus interface {
	Publisher() message.Publisher
	Subscriber(group string) message.Subscriber
	bus.Backlogger
	Close() error
}

// Open opens the configured bus.
func Open(c Config, log *slog.Logger) (Bus, error) {
	if c.Backend != "kafka" {
		return &InProcess{InProcess: bus.NewInProcess(bus.InProcessConfig{}, log), Parallelism: 16}, nil
	}
	topic := kafka.TopicConfig{Partitions: c.KafkaPartitions}
	pub, err := kafka.NewPublisher(kafka.PublisherConfig{Brokers: c.KafkaBrokers, Topic: topic}, log)
	if err != nil {
		return nil, err
	}
	lag, err := OpenBacklog(c)
	if err != nil {
		return nil, errors.Join(err, pub.Close())
	}
	return &kafkaBus{pub: pub, log: log, ns: c.KafkaNamespace, Backlogger: lag, sub: kafka.SubscriberConfig{Brokers: c.KafkaBrokers,
		Consumers: c.KafkaConsumers, SessionTimeout: c.KafkaSessionTimeout, RebalanceTimeout: c.KafkaSessionTimeout, Topic: topic}}, nil
}

// OpenBacklog is what each consumer group owes on the configured bus, for
// a process that runs no bus itself (a gateway beside workers elsewhere):
// on Kafka the brokers' committed offsets; nil for the in-process bus,
// whose groups no other process can see.
func OpenBacklog(c Config) (bus.Backlogger, error) {
	if c.Backend != "kafka" {
		return nil, nil
	}
	lag, err := kafka.NewBacklog(c.KafkaBrokers)
	if err != nil {
		return nil, err
	}
	return kafkaBacklog{lag, c.KafkaNamespace}, nil
}

// InProcess is the in-process bus, with Parallelism messages of different
// streams in flight per consumer group: their derived events' durable
// appends then share group commits.
type InProcess struct {
	*bus.InProcess
	Parallelism int
}

// Subscriber is a subscriber of group.
func (b *InProcess) Subscriber(group string) message.Subscriber {
	return b.InProcess.Subscriber(bus.SubscriberConfig{Group: group, Parallelism: b.Parallelism})
}

// kafkaBus makes a subscriber per consumer group on the brokers.
type kafkaBus struct {
	pub  *kafka.Publisher
	log  *slog.Logger
	sub  kafka.SubscriberConfig // Brokers, Consumers, timeouts and Topic
	subs []*kafka.Subscriber
	ns   string // bus.kafka_namespace
	bus.Backlogger
}

func (b *kafkaBus) Publisher() message.Publisher { return namespacedPublisher{b.pub, b.ns} }
func (b *kafkaBus) Subscriber(group string) message.Subscriber {
	cfg := b.sub
	cfg.Group = b.ns + group
	s, err := kafka.NewSubscriber(cfg, b.log)
	if err != nil {
		return failingSubscriber{err}
	}
	b.subs = append(b.subs, s)
	return namespacedSubscriber{s, b.ns}
}
func (b *kafkaBus) Close() error {
	errs := []error{b.pub.Close()}
	for _, s := range b.subs {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

// failingSubscriber reports a subscriber that could not be built when the
// router subscribes (the router then fails, stopping citizen cleanly).
type failingSubscriber struct{ err error }

func (f failingSubscriber) Subscribe(context.Context, string) (<-chan *message.Message, error) {
	return nil, f.err
}
func (f failingSubscriber) Close() error { return nil }

// namespacedPublisher and namespacedSubscriber put bus.kafka_namespace in
// front of every topic name on the brokers.
type namespacedPublisher struct {
	message.Publisher
	ns string
}

func (p namespacedPublisher) Publish(topic string, msgs ...*message.Message) error {
	return p.Publisher.Publish(p.ns+topic, msgs...)
}

type namespacedSubscriber struct {
	message.Subscriber
	ns string
}

func (s namespacedSubscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	return s.Subscriber.Subscribe(ctx, s.ns+topic)
}

// kafkaBacklog is kafka.Backlog under bus.kafka_namespace.
type kafkaBacklog struct {
	lag *kafka.Backlog
	ns  string
}

// Backlog asks the brokers what group owes on topics.
func (k kafkaBacklog) Backlog(ctx context.Context, group string, topics []string) (int64, bool, error) {
	names := make([]string, len(topics))
	for i, t := range topics {
		names[i] = k.ns + t
	}
	return k.lag.Backlog(ctx, k.ns+group, names)
}
