package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"

	"citizen/events"
)

// ModelName is the public model: "citizen" routes to the stable version or,
// for a sticky share of conversations, to the canary; "citizen@<version>"
// pins a version.
const ModelName = "citizen"

// Rollout is the routing state: the stable version and, during a rollout, a
// candidate with its traffic share.
type Rollout struct {
	Stable    string
	Candidate string
	Weight    float64 // candidate's share in [0, 1]
}

// Router chooses the model version of each request. The sticky key is
// the conversation id (metadata "conversation_id"), else the user; a
// request with neither has no key and is assigned on its own.
//
// Assignment to the candidate is a quota with a random draw, kept per
// stratum and remembered per key for the candidate's whole rollout. The
// stratum is the request's declared task type (metadata "task_type", else
// "type"; DeclaredType), so a canary's evidence covers every type in step
// with the traffic. A key seen for the first time during a rollout step
// goes to the candidate when StickyFraction(key) < weight·(n+1) − c, where
// n keys of its stratum were new in this step before it and c of them went
// to the candidate, provided the candidate has fewer than weight·(N+1) of
// the step's N new conversations before it over all strata. So the
// candidate never has more than ⌈weight·N⌉ of the step's N new
// conversations, nor more than ⌈weight·n⌉ of a stratum's n, and a stratum
// falls at most about two behind weight·n.
//
// Why each part: a hash alone (StickyFraction(key) < weight) left a 4%
// canary serving 5.5–6.3% of a 240–350-conversation rollout, the binomial
// spread rather than the share the controller set; one quota over all
// types left a canary with 1 arithmetic conversation of 45 while
// arithmetic was 17% of the traffic, and the controller waits for every
// common type's evidence; quotas per stratum without the overall bound
// each ran up to one ahead, and over six types a bad candidate served
// 24 of 526 conversations (⌈0.04·526⌉ is 22).
//
// A key keeps its arm (and the stratum of its first request) until the
// candidate changes (steps do not move conversations between versions); a
// rollback or promotion moves everything to the new stable. At most
// maxStrata types get their own quota per step; further types share one.
//
// The memory is rebuilt from the store: FollowRollouts replays rollout.*
// and interaction.recorded events in store order, and a recorded
// interaction of the public model (not a pinned version) that the
// candidate or the stable answered during the rollout sets its key's arm
// when the router has none for it (observe), counting toward its
// stratum's quota in the step. So a gateway that restarts mid-rollout
// keeps every conversation on the version that answered it, and replicas
// following one store learn each other's assignments within the
// subscription's delay (a conversation whose requests alternate between
// replicas faster than that can still be assigned twice; a load balancer
// should keep a conversation on one replica). Requests without a key are
// not remembered, so after a restart the step's quota counts only keyed
// conversations. At most maxAssignedKeys keys are remembered per rollout;
// beyond that a new key falls back to the hash rule, unremembered. Safe
// for concurrent use; the rollout controller (or FollowRollouts) updates
// it.
type Router struct {
	mu      sync.RWMutex
	r       Rollout
	changed chan struct{} // closed and replaced on every SetRollout

	arms  map[string]bool       // sticky key → assigned to the candidate, for r.Candidate
	step  map[string]*stepQuota // stratum → its quota in the current step
	all   stepQuota             // the current step over all strata
	draws uint64                // counter for keyless requests' draws
}

// stepQuota counts one stratum's keys first seen in the current step and,
// of those, the ones assigned to the candidate.
type stepQuota struct{ keys, cand int }

const (
	// maxAssignedKeys bounds the router's memory of assignments per rollout.
	maxAssignedKeys = 1 << 20
	// maxStrata bounds the strata with their own quota per step (types
	// are client-declared); further types share otherStratum's.
	maxStrata    = 64
	otherStratum = "\x00other"
)

// DeclaredType is a request's task type as its client declared it:
// metadata "task_type", else "type" (the reflection workers read the same
// keys, in the same order, as a given type). Empty when neither is set.
func DeclaredType(metadata map[string]string) string {
	return declaredType(metadata["task_type"], metadata["type"])
}

func declaredType(taskType, typ string) string {
	if taskType != "" {
		return taskType
	}
	return typ
}

// NewRouter returns a router that sends everything to stable.
func NewRouter(stable string) *Router {
	return &Router{r: Rollout{Stable: stable}, changed: make(chan struct{}), arms: map[string]bool{}, step: map[string]*stepQuota{}}
}

// Changed returns a channel that is closed at the next SetRollout (for
// callers that wait for a routing change, such as tests and ops views).
func (rt *Router) Changed() <-chan struct{} {
	rt.mu.RLock()
	defer rt.mu.RUnlock()
	return rt.changed
}

// SetRollout sets the routing state. A weight outside [0,1] is clamped; an
// empty candidate means no rollout.
func (rt *Router) SetRollout(stable, candidate string, weight float64) {
	if weight < 0 || weight != weight {
		weight = 0
	}
	if weight > 1 {
		weight = 1
	}
	if candidate == "" {
		weight = 0
	}
	rt.mu.Lock()
	if candidate != rt.r.Candidate || stable != rt.r.Stable {
		clear(rt.arms)
		clear(rt.step)
		rt.all = stepQuota{}
	} else if weight != rt.r.Weight {
		clear(rt.step) // a new step: its own quotas
		rt.all = stepQuota{}
	}
	rt.r = Rollout{Stable: stable, Candidate: candidate, Weight: weight}
	close(rt.changed)
	rt.changed = make(chan struct{})
	rt.mu.Unlock()
}

// Rollout returns the current routing state.
func (rt *Router) Rollout() Rollout {
	rt.mu.RLock()
	defer rt.mu.RUnlock()
	return rt.r
}

// errUnknownModel: the model name is neither "citizen" nor "citizen@<v>"
// with a served version.
var errUnknownModel = errors.New("gateway: unknown model")

// Route resolves a requested model to a version. known reports whether a
// pinned version is served. stickyKey is the conversation or user; empty
// when the request has neither. stratum is the request's declared type
// (DeclaredType); empty when it has none.
func (rt *Router) Route(model, stickyKey, stratum string, known func(string) bool) (version string, err error) {
	if model == ModelName {
		r := rt.Rollout()
		if r.Candidate != "" && r.Weight > 0 {
			// Assignment writes the router's memory.
			rt.mu.Lock()
			r = rt.r
			onCandidate := r.Candidate != "" && r.Weight > 0 && rt.assign(stickyKey, stratum)
			rt.mu.Unlock()
			if onCandidate {
				return r.Candidate, nil
			}
		}
		if r.Stable == "" {
			return "", errUnknownModel
		}
		return r.Stable, nil
	}
	if v, ok := strings.CutPrefix(model, ModelName+"@"); ok && v != "" && known(v) {
		return v, nil
	}
	return "", errUnknownModel
}

// assign reports whether key goes to the candidate (rt.mu held, a
// rollout with a positive weight in progress): a remembered key keeps its
// arm; a new one is drawn against its stratum's quota in the step (see
// Router).
func (rt *Router) assign(key, stratum string) bool {
	if key != "" {
		if arm, ok := rt.arms[key]; ok {
			return arm
		}
		if len(rt.arms) >= maxAssignedKeys {
			return StickyFraction(key) < rt.r.Weight
		}
	}
	draw := key
	if draw == "" {
		rt.draws++
		draw = "\x00keyless\x00" + strconv.FormatUint(rt.draws, 10)
	}
	q := rt.quota(stratum)
	arm := StickyFraction(draw) < rt.r.Weight*float64(q.keys+1)-float64(q.cand) &&
		float64(rt.all.cand) < rt.r.Weight*float64(rt.all.keys+1)-1e-9
	q.count(arm)
	rt.all.count(arm)
	if key != "" {
		rt.arms[key] = arm
	}
	return arm
}

// quota returns stratum's quota in the current step (rt.mu held).
func (rt *Router) quota(stratum string) *stepQuota {
	q, ok := rt.step[stratum]
	if ok {
		return q
	}
	if len(rt.step) >= maxStrata {
		stratum = otherStratum
		if q, ok := rt.step[stratum]; ok {
			return q
		}
	}
	q = &stepQuota{}
	rt.step[stratum] = q
	return q
}

// count adds a key first seen in the step, assigned to the candidate or not.
func (q *stepQuota) count(candidate bool) {
	q.keys++
	if candidate {
		q.cand++
	}
}

// StickyFraction maps a key to [0,1): FNV-1a (64 bit) followed by the
// splitmix64 finalizer (FNV alone leaves the high bits of similar short
// keys correlated). Stable across processes and releases.
func StickyFraction(key string) float64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / (1 << 53)
}

// stickyKey is the key a request's assignment sticks to: its conversation
// id, else its user. Routing a request and observing a recorded
// interaction must agree on it.
func stickyKey(conversation, user string) string {
	if conversation != "" {
		return conversation
	}
	return user
}

// remembered returns how many sticky keys have an arm in this rollout.
func (rt *Router) remembered() int {
	rt.mu.RLock()
	defer rt.mu.RUnlock()
	return len(rt.arms)
}

// recordedRoute is the part of an interaction.recorded payload that says
// how it was routed.
type recordedRoute struct {
	User, Conversation, Model, ModelVersion string
	Stratum                                 string // the declared type: task_type, else metadata's (DeclaredType)
}

// routeOf reads the routing fields of an interaction.recorded payload,
// stopping at model_version: events.InteractionRecorded declares user,
// conversation, task_type, metadata and model before it, so the gateway's
// encoder has written whichever of them are set by then, and the
// messages, token ids and logprobs after it are never scanned: 3.0 µs per
// 2.2 KB interaction without metadata instead of 11.6 µs for a full
// decoding; 8.1 µs with the workplace's three metadata keys, which are
// decoded for the type a store written before task_type was recorded
// holds only there (0.08 of a core at 10,000 interactions/s during a
// rollout; BenchmarkRouterApplyRecorded, idle machine). Another producer
// that wrote conversation after model_version would have it ignored (its
// user is then the sticky key); the fuzz test holds the gateway's own
// encoding to the full decoding.
func routeOf(data []byte) (recordedRoute, error) {
	var r recordedRoute
	var taskType string
	var meta struct {
		TaskType string `json:"task_type"`
		Type     string `json:"type"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return r, fmt.Errorf("gateway: interaction.recorded payload is not a JSON object")
	}
	stratum := func() string { return declaredType(taskType, declaredType(meta.TaskType, meta.Type)) }
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return r, err
		}
		var dst any
		switch t {
		case "user":
			dst = &r.User
		case "conversation":
			dst = &r.Conversation
		case "task_type":
			dst = &taskType
		case "metadata":
			dst = &meta
		case "model":
			dst = &r.Model
		case "model_version":
			dst = &r.ModelVersion
		}
		if dst == nil {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return r, err
			}
			continue
		}
		if err := dec.Decode(dst); err != nil {
			return r, err
		}
		if dst == &r.ModelVersion {
			r.Stratum = stratum()
			return r, nil
		}
	}
	r.Stratum = stratum()
	_, err := dec.Token() // the closing brace
	return r, err
}

// observe remembers, during a rollout, the arm of a recorded interaction's
// sticky key (its conversation, else its user) when the router has none
// for it: the candidate's if the candidate answered it, the stable's if
// the stable did, counted in its stratum's quota. Interactions of a pinned
// version ("citizen@v"), of other versions, without a key, or outside a
// rollout change nothing.
func (rt *Router) observe(rec recordedRoute) {
	key := stickyKey(rec.Conversation, rec.User)
	if rec.Model != ModelName || key == "" {
		return
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	r := rt.r
	if r.Candidate == "" || (rec.ModelVersion != r.Candidate && rec.ModelVersion != r.Stable) {
		return
	}
	if _, ok := rt.arms[key]; ok || len(rt.arms) >= maxAssignedKeys {
		return
	}
	arm := rec.ModelVersion == r.Candidate
	rt.arms[key] = arm
	rt.quota(rec.Stratum).count(arm)
	rt.all.count(arm)
}

// Apply updates the routing state from a rollout.* event, or its memory of
// assignments from an interaction.recorded one (observe); other events are
// ignored. started/advanced/resumed set candidate and weight; paused keeps
// the current assignment (the weight stays where it was); promoted makes the
// candidate stable; rolled_back sends everything back to stable.
func (rt *Router) Apply(ev *events.Event) error {
	if ev.Type == events.TypeInteractionRecorded {
		if rt.Rollout().Candidate == "" {
			return nil // nothing to remember: skip the decoding
		}
		rec, err := routeOf(ev.Data)
		if err != nil {
			return err
		}
		rt.observe(rec)
		return nil
	}
	if !strings.HasPrefix(ev.Type, "rollout.") {
		return nil
	}
	p, err := events.Decode(ev)
	if err != nil {
		return err
	}
	c, _ := events.RolloutChangeOf(p)
	switch x := p.(type) {
	case *events.RolloutStarted, *events.RolloutAdvanced, *events.RolloutResumed:
	case *events.RolloutPaused:
		cur := rt.Rollout()
		if cur.Candidate == c.Candidate {
			return nil
		}
	case *events.RolloutPromoted:
		rt.SetRollout(x.Candidate, "", 0)
		return nil
	case *events.RolloutRolledBack:
		rt.SetRollout(x.Stable, "", 0)
		return nil
	default:
		return nil
	}
	rt.SetRollout(c.Stable, c.Candidate, c.Weight)
	return nil
}

// FollowRollouts replays and then follows rollout.* and
// interaction.recorded events from store into rt (Apply) until ctx is
// cancelled. Undecodable events are skipped.
func (rt *Router) FollowRollouts(ctx context.Context, store events.Store) error {
	f := events.Filter{Types: []string{events.TypeRolloutStarted, events.TypeRolloutAdvanced, events.TypeRolloutPaused,
		events.TypeRolloutResumed, events.TypeRolloutPromoted, events.TypeRolloutRolledBack, events.TypeInteractionRecorded}}
	return store.Subscribe(ctx, 0, f, func(_ context.Context, ev events.Event) error {
		_ = rt.Apply(&ev)
		return nil
	})
}
