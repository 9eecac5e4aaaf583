// Package bus carries citizen's events from the event store to the workers
// (docs/architecture.md section 1): the mapping between events and watermill
// messages, an in-process bus with consumer groups, the relay (outbox) that
// publishes the store to the bus, and the router setup every worker uses.
// The Kafka adapter is in the subpackage kafka.
//
// # Messages and topics
//
// An event travels as a watermill message whose UUID is the event id,
// whose payload is the event's JSON envelope and whose metadata repeats
// the envelope's attributes (type, stream, position, revision, schema,
// correlation_id, causation_id, tenant); see ToMessage and FromMessage.
//
// There is one topic per event type, Topic(type) = "citizen." + type, for
// example "citizen.interaction.recorded", and the stream is the ordering
// (partition) key. We chose this over one topic for everything because
// each worker then receives only the types it handles (interaction.recorded
// carries token ids and logprobs and is by far the largest event; most
// workers do not want it), and a topic's retention and partition count can
// follow its volume. The price: the bus orders events per stream within a
// topic, not across topics. Nothing needs more: the relay publishes in
// store order only events already committed, so a handler that needs an
// event's predecessors (feedback.received needs its interaction.recorded)
// reads them from the store, where they are guaranteed to be.
// Messages that fail for good go to PoisonTopic, "citizen.poison".
//
// # Delivery
//
// Delivery is at-least-once everywhere: the relay may publish an event
// again after a restart, and a nacked or unacknowledged message is
// redelivered. Consumers dedupe by event id; AddEventHandler makes that
// automatic by appending derived events with deterministic ids, which the
// store stores once.
//
// # The in-process bus
//
// InProcess is a bus for one process with consumer groups: subscribers of
// the same group share the group's messages, different groups each get
// every message, a new group starts from the oldest retained message,
// messages with the same stream reach a group one at a time in order, and
// a live group that lags too far blocks publishers rather than losing
// messages. See InProcess for the details. The Kafka adapter
// (citizen/events/bus/kafka) offers the same semantics across processes.
//
// # A worker
//
// (ExampleAddEventHandler is the runnable version.)
//
//	b := bus.NewInProcess(bus.InProcessConfig{}, logger)
//	relay, err := bus.NewRelay(store, b.Publisher(), bus.RelayConfig{}, logger)
//	if err != nil { ... }
//	go relay.Run(ctx)
//
//	router, err := bus.NewRouter(bus.RouterConfig{Poison: b.Publisher()}, logger)
//	if err != nil { ... }
//	err = bus.AddEventHandler(router, bus.EventHandler{
//		Name:       "reflection",
//		Topics:     []string{bus.Topic(events.TypeInteractionRecorded)},
//		Subscriber: b.Subscriber(bus.SubscriberConfig{Group: "reflection"}),
//		Store:      store,
//		Handle: func(ctx context.Context, ev events.Event) ([]events.Event, error) {
//			p, err := events.Decode(&ev)
//			if err != nil {
//				return nil, bus.Permanent(err) // straight to the poison topic
//			}
//			out, err := events.Encode(grade(p.(*events.InteractionRecorded)), events.Meta{
//				ID: events.DeterministicID(ev.ID.String(), "reflection"), // same id on a retry
//			}) // stream, correlation, causation and tenant are filled in from ev
//			return []events.Event{out}, err
//		},
//	})
//	if err != nil { ... }
//	return router.Run(ctx) // until ctx is cancelled
//
// A handler that leaves a derived event's ID zero gets a deterministic one
// (see AddEventHandler); events.Encode fills a random id unless Meta.ID is
// set, so set it as above.
package bus
