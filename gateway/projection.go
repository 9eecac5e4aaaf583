package gateway

import (
	"sort"
	"sync"

	"citizen/events"
)

// projection is the in-memory index of recorded interactions that serves
// GET /v1/chat/completions: per tenant, the interaction ids in id order
// (UUIDv7: creation order) with their metadata. It is rebuilt from the
// store on Start and kept current by a subscription and by the gateway's own
// appends (adds are idempotent). Safe for concurrent use.
type projection struct {
	mu       sync.RWMutex
	byTenant map[string][]entry
	seen     map[string]bool
	changed  chan struct{} // closed and replaced on every add
}

type entry struct {
	ID       string
	Created  int64
	Model    string
	Metadata map[string]string
	tenant   string
}

func newProjection() *projection {
	return &projection{byTenant: map[string][]entry{}, seen: map[string]bool{}, changed: make(chan struct{})}
}

func entryOf(iid, tenant string, created int64, rec *events.InteractionRecorded) entry {
	return entry{ID: iid, Created: created, Model: publicModel(rec.ModelVersion), Metadata: rec.Metadata, tenant: tenant}
}

func (p *projection) apply(ev *events.Event) {
	if ev.Type != events.TypeInteractionRecorded {
		return
	}
	// The gateway's own appends are already in (added on append); skip
	// decoding them again. The correlation id of interaction.recorded is
	// the interaction id.
	p.mu.RLock()
	seen := p.seen[ev.CorrelationID]
	p.mu.RUnlock()
	if seen {
		return
	}
	pl, err := events.Decode(ev)
	if err != nil {
		return
	}
	rec, ok := pl.(*events.InteractionRecorded)
	if !ok || rec.InteractionID == "" {
		return
	}
	p.add(entryOf(rec.InteractionID, ev.Tenant, ev.Time.Unix(), rec))
}

func (p *projection) add(e entry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen[e.ID] {
		return
	}
	p.seen[e.ID] = true
	list := p.byTenant[e.tenant]
	i := len(list)
	if i > 0 && list[i-1].ID > e.ID {
		i = sort.Search(len(list), func(k int) bool { return list[k].ID > e.ID })
	}
	list = append(list, entry{})
	copy(list[i+1:], list[i:])
	list[i] = e
	p.byTenant[e.tenant] = list
	close(p.changed)
	p.changed = make(chan struct{})
}

// watch returns a channel that is closed at the next add.
func (p *projection) watch() <-chan struct{} {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.changed
}

// list returns up to limit entries of tenant after the id `after` (exclusive;
// "" from the start) in the given order, whose metadata contains every pair
// of filter, and whether more follow.
func (p *projection) list(tenant, after string, limit int, desc bool, filter map[string]string) ([]entry, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	all := p.byTenant[tenant]
	var out []entry
	match := func(e entry) bool {
		for k, v := range filter {
			if e.Metadata[k] != v {
				return false
			}
		}
		return true
	}
	if !desc {
		i := 0
		if after != "" {
			i = sort.Search(len(all), func(k int) bool { return all[k].ID > after })
		}
		for ; i < len(all); i++ {
			if match(all[i]) {
				if len(out) == limit {
					return out, true
				}
				out = append(out, all[i])
			}
		}
		return out, false
	}
	i := len(all) - 1
	if after != "" {
		i = sort.Search(len(all), func(k int) bool { return all[k].ID >= after }) - 1
	}
	for ; i >= 0; i-- {
		if match(all[i]) {
			if len(out) == limit {
				return out, true
			}
			out = append(out, all[i])
		}
	}
	return out, false
}
