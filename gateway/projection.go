package gateway

import (
	"bytes"
	"encoding/json"
	"sort"
	"sync"

	"citizen/events"
)

// projection is the in-memory index of stored completions that serves
// GET /v1/chat/completions: per tenant, the interaction ids in id order
// (UUIDv7: creation order) with their current metadata. Interactions
// recorded with "store": false are not in it, and a deletion removes one
// (docs/adr/0012-stored-completions.md). It is rebuilt from the store on
// Start and kept current by a subscription and by the gateway's own appends
// (every change is idempotent, and a metadata update older than the one
// applied is ignored). Safe for concurrent use.
type projection struct {
	mu       sync.RWMutex
	byTenant map[string][]entry
	seen     map[string]bool // every interaction id applied, listed or not
	deleted  map[string]bool
	changed  chan struct{} // closed and replaced on every add
}

type entry struct {
	ID       string
	Created  int64
	Model    string
	Metadata map[string]string
	tenant   string
	stored   bool
	metaPos  uint64 // store position of the metadata in use (0: as recorded)
}

func newProjection() *projection {
	return &projection{byTenant: map[string][]entry{}, seen: map[string]bool{}, deleted: map[string]bool{}, changed: make(chan struct{})}
}

// recordedEntry is what the projection reads of an interaction.recorded
// (events.DecodeView): the fields entryOf uses.
type recordedEntry struct {
	InteractionID string            `json:"interaction_id"`
	ModelVersion  string            `json:"model_version"`
	Metadata      map[string]string `json:"metadata"`
	Params        json.RawMessage   `json:"params"`
}

// projectionTypes are the event types the projection folds.
var projectionTypes = []string{events.TypeInteractionRecorded, events.TypeInteractionMetadataUpdated, events.TypeInteractionDeleted}

func entryOf(iid, tenant string, created int64, rec *events.InteractionRecorded) entry {
	return entry{ID: iid, Created: created, Model: publicModel(rec.ModelVersion), Metadata: rec.Metadata, tenant: tenant,
		stored: storeRequested(rec.Params)}
}

// storeRequested reports whether the recorded request params ask for the
// completion to be stored: everything is, unless the request said
// "store": false.
func storeRequested(params json.RawMessage) bool {
	if !bytes.Contains(params, []byte(`"store":false`)) {
		return true
	}
	var p struct {
		Store *bool `json:"store"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return true
	}
	return p.Store == nil || *p.Store
}

func (p *projection) apply(ev *events.Event) {
	switch ev.Type {
	case events.TypeInteractionRecorded:
		// The gateway's own appends are already in (added on append); skip
		// decoding them again. The correlation id of interaction.recorded
		// is the interaction id.
		p.mu.RLock()
		seen := p.seen[ev.CorrelationID]
		p.mu.RUnlock()
		if seen {
			return
		}
		// An own append may also arrive here before Append returned (the
		// store delivers it first): read only what the entry holds.
		var rec recordedEntry
		if err := events.DecodeView(ev, &rec); err != nil || rec.InteractionID == "" {
			return
		}
		p.add(entryOf(rec.InteractionID, ev.Tenant, ev.Time.Unix(), &events.InteractionRecorded{
			InteractionID: rec.InteractionID, ModelVersion: rec.ModelVersion, Metadata: rec.Metadata, Params: rec.Params}))
	case events.TypeInteractionMetadataUpdated:
		pl, err := events.Decode(ev)
		if err != nil {
			return
		}
		if u, ok := pl.(*events.InteractionMetadataUpdated); ok {
			p.setMetadata(ev.Tenant, u.InteractionID, u.Metadata, ev.Position)
		}
	case events.TypeInteractionDeleted:
		pl, err := events.Decode(ev)
		if err != nil {
			return
		}
		if d, ok := pl.(*events.InteractionDeleted); ok {
			p.remove(ev.Tenant, d.InteractionID)
		}
	}
}

func (p *projection) add(e entry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen[e.ID] {
		return
	}
	p.seen[e.ID] = true
	if !e.stored || p.deleted[e.ID] {
		return
	}
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

// find returns the index of iid in tenant's list, or -1. Callers hold mu.
func (p *projection) find(tenant, iid string) int {
	list := p.byTenant[tenant]
	i := sort.Search(len(list), func(k int) bool { return list[k].ID >= iid })
	if i < len(list) && list[i].ID == iid {
		return i
	}
	return -1
}

// setMetadata replaces the metadata of a listed interaction with that of
// the update at store position pos, unless a later update is in use.
func (p *projection) setMetadata(tenant, iid string, md map[string]string, pos uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := p.find(tenant, iid)
	if i < 0 {
		return
	}
	e := &p.byTenant[tenant][i]
	if pos != 0 && pos <= e.metaPos {
		return
	}
	e.Metadata, e.metaPos = md, pos
}

// remove takes a deleted interaction out of the list for good.
func (p *projection) remove(tenant, iid string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.deleted[iid] = true
	if i := p.find(tenant, iid); i >= 0 {
		list := p.byTenant[tenant]
		p.byTenant[tenant] = append(list[:i], list[i+1:]...)
	}
}

// get returns the listed entry of iid.
func (p *projection) get(tenant, iid string) (entry, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if i := p.find(tenant, iid); i >= 0 {
		return p.byTenant[tenant][i], true
	}
	return entry{}, false
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
			if got, ok := e.Metadata[k]; !ok || got != v {
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
