package services

import (
	"context"
	"log/slog"
	"sync"

	"citizen/events"
	"citizen/events/bus"
	"citizen/events/bus/transport"
	"citizen/gateway"
	"citizen/memory"
	"citizen/memory/lessons"
)

// The worker roles' consumer groups and the event types each consumes:
// the workers subscribe with these, and the backlog watch reads what each
// group owes.
var (
	groupReflection = []string{events.TypeInteractionRecorded, events.TypeFeedbackReceived, events.TypeFeedbackInterpreted}
	groupDetectors  = []string{events.TypeInteractionEvaluated, events.TypeRolloutStarted, events.TypeRolloutPromoted}
	groupFeedback   = []string{events.TypeFeedbackReceived}
)

// workerTopics maps each worker role's consumer group to its bus topics.
func workerTopics() map[string][]string {
	out := map[string][]string{}
	for g, types := range workerGroups() {
		out[g] = topicsOf(types)
	}
	return out
}

// workerGroups maps each worker role's consumer group to its event types.
func workerGroups() map[string][]string {
	return map[string][]string{
		"reflection": groupReflection,
		"detectors":  groupDetectors,
		"feedback":   groupFeedback,
		"memory":     memory.IndexedTypes,
		"lessons":    lessons.Topics,
	}
}

// topicsOf returns the bus topics of event types.
func topicsOf(types []string) []string {
	out := make([]string, len(types))
	for i, t := range types {
		out[i] = bus.Topic(t)
	}
	return out
}

// backlogSource is where the gateway's watch reads the workers' backlog,
// once every module is initialised: this process's bus, or the brokers
// where the bus runs elsewhere (a gateway-only process on Kafka); nil
// where no worker's backlog can be seen (the in-process bus of another
// process). relay is this process's relay, if it has one.
func (a *App) backlogSource() (src bus.Backlogger, relay *bus.Relay, err error) {
	if a.Bus != nil {
		return a.Bus, a.relay, nil
	}
	lag, err := transport.OpenBacklog(a.Config.Bus)
	return lag, nil, err
}

// gatewayService runs the gateway and, once every module is initialised,
// the watch of the workers' backlog it admits requests by.
type gatewayService struct {
	srv    *gateway.Server
	watch  *transport.BacklogWatch
	source func() (bus.Backlogger, *bus.Relay, error)
	log    *slog.Logger
	ready  chan struct{} // closed by AllStarted
	once   sync.Once
}

func (g *gatewayService) AllStarted() { g.once.Do(func() { close(g.ready) }) }

func (g *gatewayService) Run(ctx context.Context) error {
	go func() {
		select {
		case <-g.ready:
		case <-ctx.Done():
			return
		}
		src, relay, err := g.source()
		if err != nil {
			g.log.Error("cannot watch the workers' backlog", "err", err)
			return
		}
		if src != nil && g.watch.Bounded() {
			g.watch.Run(ctx, src, relay)
		}
	}()
	return g.srv.Run(ctx, "")
}
