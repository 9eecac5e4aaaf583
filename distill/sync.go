package distill

import (
	"context"
	"log/slog"

	"citizen/events"
	"citizen/model"
)

// VersionAdder is what serving needs from an engine to serve a trained
// version (gateway/embedded's Engine has it).
type VersionAdder interface {
	AddVersion(id, parent string, a *model.Adapter) error
}

// SyncVersions keeps an engine serving every accepted version: it follows
// the store's weights.trained events from the beginning and loads each
// accepted version's adapter (checking its sha256) into e, so the rollout
// controller can route traffic to a candidate. A version whose artifact
// cannot be loaded is logged and skipped. It blocks until ctx ends or the
// store fails, like events.Store.Subscribe.
func SyncVersions(ctx context.Context, s events.Store, e VersionAdder, base model.Config, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	log := logger.With("component", "distill-sync")
	return s.Subscribe(ctx, 0, events.Filter{Types: []string{events.TypeWeightsTrained}}, func(_ context.Context, ev events.Event) error {
		p, err := events.Decode(&ev)
		if err != nil {
			log.Warn("undecodable weights.trained", "position", ev.Position, "err", err)
			return nil
		}
		wt := p.(*events.WeightsTrained)
		if !wt.Accepted {
			return nil
		}
		a, err := LoadVersion(*wt, base)
		if err != nil {
			log.Warn("cannot load version", "version", wt.Version, "err", err)
			return nil
		}
		if err := e.AddVersion(wt.Version, wt.Parent, a); err != nil {
			log.Warn("cannot serve version", "version", wt.Version, "err", err)
			return nil
		}
		log.Info("serving version", "version", wt.Version, "parent", wt.Parent)
		return nil
	})
}
