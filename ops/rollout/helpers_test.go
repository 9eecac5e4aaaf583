package rollout

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"citizen/events"
	"citizen/events/memstore"
	"citizen/gateway"
)

// profile draws one interaction's outcome for a version.
type profile struct {
	reward, rewardSD float64
	length           float64 // mean answer length
	tools            float64 // probability of one tool call
	latency          float64 // mean ms
	errRate          float64 // model-attributed faults
	dropRate         float64 // outcome timeout
}

var base = profile{reward: 0.5, rewardSD: 0.3, length: 100, tools: 0.2, latency: 200}

// harness drives a controller with synthetic traffic routed by the
// gateway's real Router, which follows the rollout events from the store.
type harness struct {
	t        testing.TB
	ctx      context.Context
	store    *memstore.Store
	ctrl     *Controller
	router   *gateway.Router
	rng      *rand.Rand
	profiles map[string]profile
	n        int
	served   map[string]int
	// servedAtStep counts requests per version and step of the active
	// rollout at the time they were routed.
	routerPos uint64
	events    []events.Event // rollout events seen by the router, in order
}

func newHarness(t testing.TB, cfg Config, stable string, seed uint64) *harness {
	t.Helper()
	store := memstore.New(memstore.Config{})
	cfg.Stable = stable
	ctrl, err := New(cfg, store, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, ctx: context.Background(), store: store, ctrl: ctrl, router: gateway.NewRouter(stable),
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), profiles: map[string]profile{stable: base},
		served: map[string]int{}}
}

func (h *harness) append(stream string, p events.Payload, tenant string) events.Event {
	h.t.Helper()
	ev, err := events.Encode(p, events.Meta{Stream: stream, Tenant: tenant})
	if err != nil {
		h.t.Fatal(err)
	}
	res, err := h.store.Append(h.ctx, stream, events.Any, ev)
	if err != nil {
		h.t.Fatal(err)
	}
	ev.Position, ev.Revision = res.LastPosition, res.NextRevision
	return ev
}

// train appends an accepted weights.trained for version.
func (h *harness) train(version, parent string, p profile) {
	h.profiles[version] = p
	h.append(events.VersionStream(version), &events.WeightsTrained{Version: version, Parent: parent, Accepted: true,
		Objective: "test", KLToParent: 0.01}, "")
}

// catchUp lets the controller decide and the router follow.
func (h *harness) catchUp() {
	h.t.Helper()
	if err := h.ctrl.CatchUp(h.ctx); err != nil {
		h.t.Fatal(err)
	}
	head, err := h.store.LastPosition(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	evs, err := h.store.ReadAll(h.ctx, h.routerPos, events.Filter{StreamPrefixes: []string{"rollout-"}}, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	defer func() { h.routerPos = max(h.routerPos, head) }()
	for i := range evs {
		if err := h.router.Apply(&evs[i]); err != nil {
			h.t.Fatal(err)
		}
		h.routerPos = evs[i].Position
		h.events = append(h.events, evs[i])
	}
}

// serve routes, records and evaluates n requests, letting the controller
// decide after each; it stops early when stop returns true.
func (h *harness) serve(n int, stop func() bool) {
	h.t.Helper()
	for i := 0; i < n; i++ {
		h.one()
		h.catchUp()
		if stop != nil && stop() {
			return
		}
	}
}

func (h *harness) one() {
	h.t.Helper()
	h.n++
	id := fmt.Sprintf("i%07d", h.n)
	typ := []string{"qa", "code", "chat"}[h.n%3]
	v, err := h.router.Route(gateway.ModelName, "conv-"+id, typ, func(string) bool { return true })
	if err != nil {
		h.t.Fatal(err)
	}
	h.served[v]++
	p := h.profiles[v]
	r := h.rng
	length := max(1, int(p.length*(0.7+0.6*r.Float64())))
	tools := 0
	if r.Float64() < p.tools {
		tools = 1
	}
	ev := &events.InteractionEvaluated{InteractionID: id, Seq: 1, TaskType: typ,
		ModelVersion: v, Reward: p.reward + p.rewardSD*r.NormFloat64(), AnswerLength: length, ToolCalls: tools,
		RubricVersion: "r1", EvaluatorVersion: "e1"}
	if r.Float64() < p.errRate {
		ev.Faults = []events.Fault{{Kind: "invalid_tool_args", Attribution: "model"}}
	}
	if r.Float64() < p.dropRate {
		ev.Outcome = "timeout"
	}
	rec := &events.InteractionRecorded{InteractionID: id, Tenant: "acme", TaskType: typ, Model: "citizen", ModelVersion: v, Engine: "stub",
		LatencyMS: p.latency * (0.5 + r.Float64())}
	stream := events.InteractionStream(id)
	a, err := events.Encode(rec, events.Meta{Stream: stream, Tenant: "acme"})
	if err != nil {
		h.t.Fatal(err)
	}
	b, err := events.Encode(ev, events.Meta{Stream: stream, Tenant: "acme"})
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.store.Append(h.ctx, stream, events.NoStream, a, b); err != nil {
		h.t.Fatal(err)
	}
}

// rolloutEvents returns the decoded rollout changes in store order with
// their types.
func (h *harness) decisions() []typedChange {
	h.t.Helper()
	evs, err := h.store.ReadAll(h.ctx, 0, events.Filter{StreamPrefixes: []string{"rollout-"}}, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	return decodeChanges(h.t, evs)
}

type typedChange struct {
	typ string
	ev  events.Event
	events.RolloutChange
}

func decodeChanges(t testing.TB, evs []events.Event) []typedChange {
	t.Helper()
	var out []typedChange
	for i := range evs {
		p, err := events.Decode(&evs[i])
		if err != nil {
			t.Fatal(err)
		}
		ch, _ := events.RolloutChangeOf(p)
		out = append(out, typedChange{typ: evs[i].Type, ev: evs[i], RolloutChange: ch})
	}
	return out
}

// ended reports whether the last rollout event the router saw ended a
// rollout.
func (h *harness) ended() bool {
	n := len(h.events)
	return n > 0 && (h.events[n-1].Type == events.TypeRolloutPromoted || h.events[n-1].Type == events.TypeRolloutRolledBack)
}

func types(ds []typedChange) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.typ)
	}
	return out
}

// waitFor is a deadline for tests that wait on events (not a sleep).
const waitFor = 10 * time.Second
