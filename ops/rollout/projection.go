package rollout

import (
	"context"
	"fmt"
	"sync"

	"citizen/events"
)

// Projection is a State kept up to date on demand: Sync reads what the
// store gained since the last call. It decides nothing; it is the read
// side for processes that do not run the controller (the ops HTTP API).
// Safe for concurrent use.
type Projection struct {
	store events.Store
	mu    sync.Mutex
	st    *State
}

// NewProjection returns an empty projection of store with cfg (defaults
// applied; the configuration only shapes the evidence shown).
func NewProjection(cfg Config, store events.Store) *Projection {
	return &Projection{store: store, st: NewState(cfg)}
}

// Sync applies every event stored since the last Sync and returns the
// status and the version lineage.
func (p *Projection) Sync(ctx context.Context) (Status, []Version, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		evs, err := p.store.ReadAll(ctx, p.st.pos, Filter(), 1024)
		if err != nil {
			return Status{}, nil, fmt.Errorf("rollout: projection: %w", err)
		}
		for i := range evs {
			_ = p.st.Apply(&evs[i]) // undecodable events are skipped, as the controller does
		}
		if len(evs) < 1024 {
			return p.st.Status(), p.st.Versions(), nil
		}
	}
}
