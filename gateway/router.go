package gateway

import (
	"context"
	"errors"
	"hash/fnv"
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

// Router chooses the model version of each request. Assignment to the
// candidate is sticky: a request goes to the candidate when
// hash(sticky key) in [0,1) < weight, where the sticky key is the
// conversation id (metadata "conversation_id"), else the user, else the
// interaction id (no stickiness possible). Raising the weight only moves
// conversations from stable to candidate, never back. Safe for concurrent
// use; the rollout controller (or FollowRollouts) updates it.
type Router struct {
	mu      sync.RWMutex
	r       Rollout
	changed chan struct{} // closed and replaced on every SetRollout
}

// NewRouter returns a router that sends everything to stable.
func NewRouter(stable string) *Router {
	return &Router{r: Rollout{Stable: stable}, changed: make(chan struct{})}
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
// pinned version is served. stickyKey is the conversation or user.
func (rt *Router) Route(model, stickyKey string, known func(string) bool) (version string, err error) {
	if model == ModelName {
		r := rt.Rollout()
		if r.Candidate != "" && r.Weight > 0 && StickyFraction(stickyKey) < r.Weight {
			return r.Candidate, nil
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

// Apply updates the routing state from a rollout.* event; other events are
// ignored. started/advanced/resumed set candidate and weight; paused keeps
// the current assignment (the weight stays where it was); promoted makes the
// candidate stable; rolled_back sends everything back to stable.
func (rt *Router) Apply(ev *events.Event) error {
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

// FollowRollouts replays and then follows rollout.* events from store into
// rt until ctx is cancelled. Undecodable events are skipped.
func (rt *Router) FollowRollouts(ctx context.Context, store events.Store) error {
	f := events.Filter{StreamPrefixes: []string{events.RolloutStream("")}}
	return store.Subscribe(ctx, 0, f, func(_ context.Context, ev events.Event) error {
		_ = rt.Apply(&ev)
		return nil
	})
}
