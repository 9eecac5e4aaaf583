package distill

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"citizen/events"
	"citizen/model"
)

// VersionAdder is what serving needs from an engine to serve a trained
// version (gateway/embedded's Engine has it).
type VersionAdder interface {
	AddVersion(id, parent string, a *model.Adapter) error
}

// Fallbacker is an engine that can serve another version's weights in
// place of a version it cannot load (gateway/embedded's Engine has it).
type Fallbacker interface {
	AddFallback(id, servedBy, reason string) error
}

// SyncVersions keeps an engine serving every accepted version: it follows
// the store's weights.trained events from the beginning and loads each
// accepted version's adapter (checking its sha256; relative artifact
// paths resolve against root, the distiller's data directory) into e, so
// the rollout controller can route traffic to a candidate. A version the
// offline gate rejected is loaded when a rollout.started names it (an
// operator started its canary: rollout.Start). A version whose
// artifact cannot be loaded is never a silent gap: when e is a Fallbacker
// it serves the version's parent (or the base) in its place, and a
// version.unavailable event records why (once per artifact: its id is
// deterministic). It blocks until ctx ends or the store fails, like
// events.Store.Subscribe.
func SyncVersions(ctx context.Context, s events.Store, e VersionAdder, root string, base model.Config, logger *slog.Logger) error {
	fb, _ := e.(Fallbacker)
	return syncVersions(ctx, s, fb, logger, func(wt *events.WeightsTrained) error {
		a, err := LoadVersion(*wt, root, base)
		if err != nil {
			return err
		}
		return e.AddVersion(wt.Version, wt.Parent, a)
	})
}

// ArtifactLoader is an engine that has its weights loaded from a
// version's artifact directory by a server of its own (gateway's Upstream
// hands the directory to its inference server).
type ArtifactLoader interface {
	// LoadArtifact serves version id, trained from parent, from the PEFT
	// directory dir (its path here, under SyncArtifacts' root).
	LoadArtifact(ctx context.Context, id, parent, dir string) error
}

// SyncArtifacts is SyncVersions for an engine that loads artifacts
// itself: for each version SyncVersions would load, it checks the
// artifact's sha256 against the lineage and hands the directory to
// e.LoadArtifact. Fallbacks and version.unavailable are as SyncVersions'.
func SyncArtifacts(ctx context.Context, s events.Store, e ArtifactLoader, root string, logger *slog.Logger) error {
	fb, _ := e.(Fallbacker)
	return syncVersions(ctx, s, fb, logger, func(wt *events.WeightsTrained) error {
		if wt.Artifact == nil {
			return fmt.Errorf("distill: version %s has no artifact", wt.Version)
		}
		dir := ArtifactDir(root, wt.Artifact.Path)
		got, err := fileSHA256(filepath.Join(dir, "adapter_model.safetensors"))
		if err != nil {
			return err
		}
		if wt.Artifact.SHA256 != "" && got != wt.Artifact.SHA256 {
			return fmt.Errorf("%s: sha256 %s, lineage says %s", dir, got, wt.Artifact.SHA256)
		}
		return e.LoadArtifact(ctx, wt.Version, wt.Parent, dir)
	})
}

// syncVersions follows weights.trained and rollout.started and calls load
// for every version to serve (SyncVersions' rules), serving a version that
// load fails for by its parent through fb and recording why.
func syncVersions(ctx context.Context, s events.Store, fb Fallbacker, logger *slog.Logger, loadVersion func(*events.WeightsTrained) error) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	log := logger.With("component", "distill-sync")
	unavailable := func(wt *events.WeightsTrained, cause error) {
		servedBy := wt.Parent
		if servedBy == "" {
			servedBy = "base"
		}
		log.Error("version unavailable: serving its parent in its place", "version", wt.Version, "served_by", servedBy, "err", cause)
		if fb != nil {
			if err := fb.AddFallback(wt.Version, servedBy, cause.Error()); err != nil {
				log.Error("cannot serve a fallback", "version", wt.Version, "err", err)
			}
		}
		sum := ""
		if wt.Artifact != nil {
			sum = wt.Artifact.SHA256
		}
		ev, err := events.Encode(&events.VersionUnavailable{Version: wt.Version, ServedBy: servedBy, Reason: cause.Error(), SHA256: sum},
			events.Meta{Stream: events.VersionStream(wt.Version), CorrelationID: wt.Version,
				ID: events.DeterministicID(events.TypeVersionUnavailable, wt.Version, sum)})
		if err == nil {
			_, err = s.Append(ctx, ev.Stream, events.Any, ev)
		}
		if err != nil && ctx.Err() == nil {
			log.Warn("cannot record version.unavailable", "version", wt.Version, "err", err)
		}
	}
	load := func(wt *events.WeightsTrained) {
		if err := loadVersion(wt); err != nil {
			unavailable(wt, err)
			return
		}
		log.Info("serving version", "version", wt.Version, "parent", wt.Parent, "accepted", wt.Accepted)
	}
	// The rejected versions a rollout may yet start, and the ones loaded.
	rejected := map[string]*events.WeightsTrained{}
	loaded := map[string]bool{}
	f := events.Filter{Types: []string{events.TypeWeightsTrained, events.TypeRolloutStarted}}
	return s.Subscribe(ctx, 0, f, func(_ context.Context, ev events.Event) error {
		p, err := events.Decode(&ev)
		if err != nil {
			log.Warn("undecodable event", "type", ev.Type, "position", ev.Position, "err", err)
			return nil
		}
		switch x := p.(type) {
		case *events.WeightsTrained:
			switch {
			case x.Accepted:
				loaded[x.Version] = true
				load(x)
			case x.Artifact != nil:
				rejected[x.Version] = x
			}
		case *events.RolloutStarted:
			if wt := rejected[x.Candidate]; wt != nil && !loaded[x.Candidate] {
				loaded[x.Candidate] = true
				load(wt)
			}
		}
		return nil
	})
}
