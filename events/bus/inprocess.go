package bus

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/ThreeDotsLabs/watermill/message"

	"citizen/events"
)

// InProcessConfig configures an InProcess bus. The zero value is usable.
type InProcessConfig struct {
	// MaxBacklog bounds the messages a topic retains (default 65536).
	// When a group that has live subscribers lags this far behind,
	// Publish blocks until it catches up (back-pressure, nothing lost).
	// Otherwise the oldest messages are dropped: a group with no live
	// subscriber (or a group created later) misses them, with a warning.
	MaxBacklog int
	// OrderingKey is the metadata key whose value orders messages within
	// a group (default MetaStream): messages with the same key are
	// delivered one at a time, in publish order. Messages without the key
	// share the key "" and are therefore delivered strictly one at a time.
	OrderingKey string
}

func (c *InProcessConfig) setDefaults() {
	if c.MaxBacklog <= 0 {
		c.MaxBacklog = 1 << 16
	}
	if c.OrderingKey == "" {
		c.OrderingKey = MetaStream
	}
}

// InProcess is an in-memory message bus with consumer groups, for a
// single process. Each topic is a log; each consumer group has its own
// position in it, like a Kafka consumer group:
//
//   - subscribers in the same group share the group's messages (each
//     message goes to one of them), different groups each get all of them;
//   - a new group starts at the oldest retained message, so messages
//     published before anyone subscribed are delivered too;
//   - delivery is at-least-once: a Nack, a cancelled subscription or a
//     closed subscriber puts an unacknowledged message back for
//     redelivery to the group;
//   - order: messages with the same ordering key (the event's stream by
//     default) reach a group one at a time in publish order; the next one
//     is handed out only after the previous one is acked. With
//     SubscriberConfig.Parallelism > 1 messages of different keys are
//     handled at once, but a group hands messages out in log order, so a
//     message whose key is busy holds back the ones behind it until its
//     predecessor is acked (like a Kafka partition with one consumer).
//
// Messages are copied on Publish; message contexts are not carried over
// (a delivered message's context derives from the Subscribe context and
// is cancelled once the message is acked, nacked or its subscriber goes).
// Nothing survives the process: the event store, not the bus, is durable.
// All methods are safe for concurrent use.
type InProcess struct {
	cfg    InProcessConfig
	logger *slog.Logger

	mu      sync.Mutex
	topics  map[string]*topic
	closed  bool
	closing chan struct{}
	anon    atomic.Uint64
}

type entry struct {
	msg *message.Message
	// carried is the event msg was made from (see carried), if any.
	carried *carried
	key     string
	pos     uint64 // the event's store position (MetaPosition), 0 if none
}

type topic struct {
	name    string
	base    uint64 // offset of log[0]
	log     []entry
	groups  map[string]*group
	space   chan struct{} // closed and replaced when the backlog shrinks, if waiting
	waiting bool          // a publisher waits on space
}

// signalSpace wakes publishers waiting for the backlog to shrink.
func (t *topic) signalSpace() {
	if t.waiting {
		close(t.space)
		t.space = make(chan struct{})
		t.waiting = false
	}
}

func (t *topic) end() uint64 { return t.base + uint64(len(t.log)) }

type pending struct {
	off uint64
	e   entry
}

type group struct {
	name      string
	anonymous bool
	members   int
	next      uint64              // next offset to hand out
	inflight  map[uint64]entry    // handed out, not yet settled
	redeliver []pending           // nacked, by offset
	busy      map[string]struct{} // keys with a message in flight or waiting for redelivery
	skipped   uint64              // messages dropped before this group took them
	wake      chan struct{}       // closed and replaced on every change
}

func (g *group) notify() {
	close(g.wake)
	g.wake = make(chan struct{})
}

// NewInProcess returns an empty bus. logger may be nil.
func NewInProcess(cfg InProcessConfig, logger *slog.Logger) *InProcess {
	cfg.setDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &InProcess{cfg: cfg, logger: logger.With("component", "bus"), topics: map[string]*topic{}, closing: make(chan struct{})}
}

// Close ends every subscription (their channels close) and makes Publish
// and Subscribe fail with events.ErrClosed. It does not wait for
// subscribers' goroutines; close the Subscriber handles for that.
func (b *InProcess) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		close(b.closing)
	}
	return nil
}

// Publisher returns a publisher on the bus. Closing it does not close the
// bus; it only makes later Publish calls on it fail. Publish blocks while a
// live group lags MaxBacklog messages behind, until it catches up or the
// bus is closed (not when a caller's context ends: a Relay stuck there
// returns once the consumers catch up).
func (b *InProcess) Publisher() message.Publisher { return &inprocPublisher{b: b} }

// SubscriberConfig configures a Subscriber of an InProcess bus.
type SubscriberConfig struct {
	// Group is the consumer group. Empty: every Subscribe call gets a
	// group of its own (it receives every message, from the oldest
	// retained), forgotten when the subscription ends.
	Group string
	// Parallelism is how many messages one Subscribe call may have in
	// flight at once (default 1). Order per ordering key holds whatever
	// the value.
	Parallelism int
}

// Subscriber returns a subscriber on the bus. Its Close ends its
// subscriptions, waits until their channels are closed and puts their
// unacknowledged messages back to their groups; it does not close the bus.
func (b *InProcess) Subscriber(cfg SubscriberConfig) message.Subscriber {
	if cfg.Parallelism <= 0 {
		cfg.Parallelism = 1
	}
	return &inprocSubscriber{b: b, cfg: cfg, closing: make(chan struct{})}
}

// topicLocked returns (creating) a topic. b.mu must be held.
func (b *InProcess) topicLocked(name string) *topic {
	t, ok := b.topics[name]
	if !ok {
		t = &topic{name: name, groups: map[string]*group{}, space: make(chan struct{})}
		b.topics[name] = t
	}
	return t
}

// blockedLocked reports whether a group with live members lags by
// MaxBacklog or more.
func (b *InProcess) blockedLocked(t *topic) bool {
	for _, g := range t.groups {
		if g.members > 0 && t.end()-g.next >= uint64(b.cfg.MaxBacklog) {
			return true
		}
	}
	return false
}

func (b *InProcess) publish(name string, msgs []*message.Message) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.topicLocked(name)
	defer func() {
		for _, g := range t.groups {
			g.notify()
		}
	}()
	for _, m := range msgs {
		for !b.closed && b.blockedLocked(t) {
			space := t.space
			t.waiting = true
			for _, g := range t.groups {
				g.notify()
			}
			b.mu.Unlock()
			select {
			case <-space:
			case <-b.closing:
			}
			b.mu.Lock()
		}
		if b.closed {
			return fmt.Errorf("bus: publish to %s: %w", name, events.ErrClosed)
		}
		c := message.NewMessage(m.UUID, slices.Clone(m.Payload))
		for k, v := range m.Metadata {
			c.Metadata.Set(k, v)
		}
		pos, _ := strconv.ParseUint(c.Metadata.Get(MetaPosition), 10, 64)
		var cv *carried
		if x := carriedOf(m); x != nil && bytes.Equal(x.payload, c.Payload) {
			cv = x
		}
		t.log = append(t.log, entry{msg: c, carried: cv, key: c.Metadata.Get(b.cfg.OrderingKey), pos: pos})
		if len(t.log) > b.cfg.MaxBacklog {
			b.dropLocked(t, len(t.log)-b.cfg.MaxBacklog)
		}
	}
	return nil
}

// dropLocked drops the n oldest messages of t; groups that had not
// consumed them skip them.
func (b *InProcess) dropLocked(t *topic, n int) {
	clear(t.log[:n])
	t.log = t.log[n:]
	t.base += uint64(n)
	for _, g := range t.groups {
		if g.next < t.base {
			k := t.base - g.next
			if g.skipped == 0 || g.skipped/10000 != (g.skipped+k)/10000 { // first, then every 10,000
				b.logger.Warn("bus: backlog full, a group without live subscribers skips messages",
					"topic", t.name, "group", g.name, "skipped_total", g.skipped+k)
			}
			g.skipped += k
			g.next = t.base
		}
	}
	b.compactLocked(t)
}

// trimLocked drops the messages every group has taken.
func (b *InProcess) trimLocked(t *topic) {
	if len(t.groups) == 0 {
		return
	}
	low := t.end()
	for _, g := range t.groups {
		low = min(low, g.next)
	}
	if low > t.base {
		n := int(low - t.base)
		clear(t.log[:n])
		t.log = t.log[n:]
		t.base = low
		b.compactLocked(t)
	}
}

// compactLocked releases the log's dead prefix now and then and wakes
// blocked publishers.
func (b *InProcess) compactLocked(t *topic) {
	if cap(t.log) > 1024 && len(t.log) < cap(t.log)/4 {
		t.log = slices.Clone(t.log)
	}
	t.signalSpace()
}

// join adds a member to group name of topic (creating both).
func (b *InProcess) join(topicName, groupName string, anonymous bool) (*topic, *group, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, nil, fmt.Errorf("bus: subscribe to %s: %w", topicName, events.ErrClosed)
	}
	t, g := b.groupLocked(topicName, groupName, anonymous)
	g.members++
	return t, g, nil
}

// groupLocked returns (creating) a topic and one of its groups.
func (b *InProcess) groupLocked(topicName, groupName string, anonymous bool) (*topic, *group) {
	t := b.topicLocked(topicName)
	g, ok := t.groups[groupName]
	if !ok {
		g = &group{name: groupName, anonymous: anonymous, next: t.base, inflight: map[uint64]entry{},
			busy: map[string]struct{}{}, wake: make(chan struct{})}
		t.groups[groupName] = g
	}
	return t, g
}

// SettledThrough returns the highest store position p ≤ published such
// that every message with a position ≤ p has been acknowledged by every
// named consumer group of its topic. A topic without a named group holds
// its retained messages (nobody has consumed them yet). Messages without
// a position are ignored. The relay checkpoints no further than this,
// since nothing on this bus survives the process.
func (b *InProcess) SettledThrough(published uint64) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	low := published
	hold := func(e entry) {
		if e.pos > 0 && e.pos-1 < low {
			low = e.pos - 1
		}
	}
	for _, t := range b.topics {
		named := false
		for _, g := range t.groups {
			if g.anonymous {
				continue
			}
			named = true
			for _, e := range g.inflight {
				hold(e)
			}
			for _, p := range g.redeliver {
				hold(p.e)
			}
			if g.next < t.end() {
				hold(t.log[g.next-t.base])
			}
		}
		if !named && len(t.log) > 0 {
			hold(t.log[0])
		}
	}
	return low
}

// Backlog returns how many messages of topics group has not yet
// acknowledged: the messages it has not taken, those in flight and those
// waiting for redelivery. A topic the group has not joined or reserved
// yet is owed every message it retains. known is false when the group has
// joined or reserved none of the topics (nobody consumes for it).
func (b *InProcess) Backlog(_ context.Context, group string, topics []string) (n int64, known bool, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, name := range topics {
		t, ok := b.topics[name]
		if !ok {
			continue
		}
		g, ok := t.groups[group]
		if !ok {
			n += int64(len(t.log))
			continue
		}
		known = true
		n += int64(t.end()-g.next) + int64(len(g.inflight)) + int64(len(g.redeliver))
	}
	if !known {
		return 0, false, nil
	}
	return n, true, nil
}

func (b *InProcess) leave(t *topic, g *group) {
	b.mu.Lock()
	defer b.mu.Unlock()
	g.members--
	if g.members == 0 && g.anonymous {
		delete(t.groups, g.name)
		b.trimLocked(t)
	}
	if g.members == 0 {
		t.signalSpace() // a publisher may be waiting for this group
	}
}

// take waits for the next message the group may hand out.
func (b *InProcess) take(ctx context.Context, t *topic, g *group, closing <-chan struct{}) (uint64, entry, bool) {
	b.mu.Lock()
	for {
		if b.closed {
			b.mu.Unlock()
			return 0, entry{}, false
		}
		if len(g.redeliver) > 0 {
			p := g.redeliver[0]
			g.redeliver = g.redeliver[1:]
			g.inflight[p.off] = p.e
			b.mu.Unlock()
			return p.off, p.e, true
		}
		if g.next < t.end() {
			e := t.log[g.next-t.base]
			if _, busy := g.busy[e.key]; !busy {
				off := g.next
				g.next++
				g.busy[e.key] = struct{}{}
				g.inflight[off] = e
				b.trimLocked(t)
				if t.waiting {
					t.signalSpace() // this group may have been the one lagging
				}
				b.mu.Unlock()
				return off, e, true
			}
		}
		wake := g.wake
		b.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return 0, entry{}, false
		case <-closing:
			return 0, entry{}, false
		case <-b.closing:
			return 0, entry{}, false
		}
		b.mu.Lock()
	}
}

// settle records the outcome of a handed-out message.
func (b *InProcess) settle(g *group, off uint64, e entry, acked bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(g.inflight, off)
	if acked {
		delete(g.busy, e.key)
	} else {
		i, _ := slices.BinarySearchFunc(g.redeliver, off, func(p pending, off uint64) int {
			switch {
			case p.off < off:
				return -1
			case p.off > off:
				return 1
			}
			return 0
		})
		g.redeliver = slices.Insert(g.redeliver, i, pending{off: off, e: e})
	}
	g.notify()
}

type inprocPublisher struct {
	b      *InProcess
	closed atomic.Bool
}

// Publish copies msgs onto topic in order. It blocks while a live group
// lags MaxBacklog messages behind (see InProcessConfig).
func (p *inprocPublisher) Publish(topic string, msgs ...*message.Message) error {
	if p.closed.Load() {
		return fmt.Errorf("bus: publish to %s: publisher %w", topic, events.ErrClosed)
	}
	return p.b.publish(topic, msgs)
}

// SettledThrough is the bus's SettledThrough (see Settler).
func (p *inprocPublisher) SettledThrough(published uint64) uint64 {
	return p.b.SettledThrough(published)
}

func (p *inprocPublisher) Close() error {
	p.closed.Store(true)
	return nil
}

type inprocSubscriber struct {
	b       *InProcess
	cfg     SubscriberConfig
	mu      sync.Mutex
	closed  bool
	closing chan struct{}
	subs    sync.WaitGroup // one per subscription, done once its channel is closed
}

// Subscribe starts a subscription to topic in the subscriber's group. The
// channel closes when ctx is cancelled, the subscriber or the bus is
// closed; unacknowledged messages then go back to the group.
func (s *inprocSubscriber) Subscribe(ctx context.Context, topicName string) (<-chan *message.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("bus: subscribe to %s: subscriber %w", topicName, events.ErrClosed)
	}
	groupName, anonymous := s.cfg.Group, false
	if groupName == "" {
		groupName, anonymous = "anonymous-"+strconv.FormatUint(s.b.anon.Add(1), 10), true
	}
	t, g, err := s.b.join(topicName, groupName, anonymous)
	if err != nil {
		return nil, err
	}
	out := make(chan *message.Message)
	var members sync.WaitGroup
	members.Add(s.cfg.Parallelism)
	for range s.cfg.Parallelism {
		go func() {
			defer members.Done()
			s.member(ctx, t, g, out)
		}()
	}
	s.subs.Add(1)
	go func() {
		members.Wait()
		s.b.leave(t, g)
		close(out)
		s.subs.Done()
	}()
	return out, nil
}

// member hands the group's messages to out, one at a time.
func (s *inprocSubscriber) member(ctx context.Context, t *topic, g *group, out chan<- *message.Message) {
	for {
		off, e, ok := s.b.take(ctx, t, g, s.closing)
		if !ok {
			return
		}
		m := e.msg.Copy()
		mctx, cancel := context.WithCancel(ctx)
		if e.carried != nil {
			m.SetContext(context.WithValue(mctx, carriedKey{}, e.carried))
		} else {
			m.SetContext(mctx)
		}
		acked, stop := false, false
		select {
		case out <- m:
			select {
			case <-m.Acked():
				acked = true
			case <-m.Nacked():
			case <-ctx.Done():
				stop = true
			case <-s.closing:
				stop = true
			case <-s.b.closing:
				stop = true
			}
		case <-ctx.Done():
			stop = true
		case <-s.closing:
			stop = true
		case <-s.b.closing:
			stop = true
		}
		cancel()
		s.b.settle(g, off, e, acked)
		if stop {
			return
		}
	}
}

// Reserve creates the subscriber's consumer group on topic now, before
// anything subscribes: messages published from then on wait for the
// group instead of being trimmed once another group has taken them. An
// anonymous subscriber (no Group) reserves nothing.
func (s *inprocSubscriber) Reserve(topic string) {
	if s.cfg.Group == "" {
		return
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	s.b.groupLocked(topic, s.cfg.Group, false)
}

// Close ends the subscriber's subscriptions and returns once their
// channels are closed.
func (s *inprocSubscriber) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.closing)
	}
	s.mu.Unlock()
	s.subs.Wait()
	return nil
}
