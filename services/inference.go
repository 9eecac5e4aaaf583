package services

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"citizen/distill"
	"citizen/gateway"
	"citizen/gateway/embedded"
	"citizen/gateway/inference"
	"citizen/internal/modules"
	"citizen/model"
	"citizen/model/chat"
)

// The inference tier (docs/adr/0016-inference-tier.md): target inference
// serves the embedded model in vLLM's dialect, and a gateway with
// model.engine=upstream loads the distiller's adapters into such a server
// (or into vLLM itself) by name.

// InferenceConfig configures the inference server (target inference).
type InferenceConfig struct {
	Listen string `yaml:"listen" help:"address the inference server (target inference) listens on (vLLM's default port)"`
	APIKey string `yaml:"api_key" secret:"true" help:"bearer token the inference server requires (vLLM's --api-key; empty: none)"`
	// ServedModelName: see inference.Config.ServedModelName.
	ServedModelName string `yaml:"served_model_name" help:"name the base model is requested by at the inference server (vLLM's --served-model-name; empty: model.name, or the checkpoint's file name)"`
}

// Validate reports invalid settings.
func (c InferenceConfig) Validate() error {
	if c.Listen == "" {
		return errors.New("inference.listen must not be empty")
	}
	return nil
}

// initInference serves the embedded model (model.name or
// model.checkpoint) in vLLM's dialect on inference.listen. It needs no
// store: it records nothing and serves the adapters the gateways load.
func (a *App) initInference(ctx context.Context) (modules.Service, error) {
	ic := a.Config.Inference
	if err := ic.Validate(); err != nil {
		return nil, err
	}
	log := a.logger("inference")
	path, err := a.checkpoint(ctx)
	if err != nil {
		return nil, err
	}
	cm, err := chat.Open(path, model.EngineConfig{})
	if err != nil {
		return nil, fmt.Errorf("inference: %w", err)
	}
	eng := embedded.New(cm, embedded.Config{DefaultTemperature: a.Config.Model.Temperature})
	name := ic.ServedModelName
	if name == "" {
		name = a.modelName()
	}
	base := cm.Engine.Model().Config
	srv, err := inference.New(inference.Config{ServedModelName: name, BaseRoot: path, APIKey: ic.APIKey,
		Load: func(dir string) (*model.Adapter, error) { return model.LoadPEFT(dir, base) }}, eng, log)
	if err != nil {
		cm.Close()
		return nil, err
	}
	log.Info("inference model loaded", "model", name, "checkpoint", path, "parameters", base.NumParams())
	return modules.WithStop(
		func(ctx context.Context) error { return srv.Run(ctx, ic.Listen, a.Config.ShutdownTimeout) },
		func(context.Context) error { cm.Close(); return nil },
	), nil
}

// initUpstream builds the upstream engine and, with
// model.upstream_adapters, keeps the upstream server serving every
// version the distiller trains: distill.SyncArtifacts checks each
// artifact under data_dir/distill (a volume shared with the trainer) and
// the engine loads it upstream under its version id.
func (a *App) initUpstream(ctx context.Context) (modules.Service, error) {
	mc := a.Config.Model
	up, err := gateway.NewUpstream(gateway.UpstreamConfig{BaseURL: mc.UpstreamURL, APIKey: mc.UpstreamKey, Model: mc.UpstreamModel,
		RequestTokenIDs: mc.UpstreamTokenIDs})
	if err != nil {
		return nil, err
	}
	a.Engine = up
	if !mc.UpstreamAdapters {
		return nil, nil
	}
	root, err := filepath.Abs(filepath.Join(a.Config.DataDir, "distill"))
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	remote := mc.UpstreamAdapterDir
	if remote == "" {
		remote = root
	}
	l := upstreamLoader{up: up, root: root, remote: remote}
	log := a.logger("engine")
	log.Info("loading trained versions into the upstream server", "url", mc.UpstreamURL, "adapters", root, "as_seen_there", remote)
	return modules.Func(func(ctx context.Context) error {
		err := distill.SyncArtifacts(ctx, a.Store, l, root, log)
		if ctx.Err() != nil {
			return nil
		}
		return err
	}), nil
}

// upstreamLoader loads artifacts into the upstream server: a directory
// under root (here) is lora_path under remote (there).
type upstreamLoader struct {
	up           *gateway.Upstream
	root, remote string
}

func (l upstreamLoader) LoadArtifact(ctx context.Context, id, parent, dir string) error {
	rel, err := filepath.Rel(l.root, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		if l.remote != l.root {
			return fmt.Errorf("engine: artifact %s of %s is outside %s, so model.upstream_adapter_dir cannot name it", dir, id, l.root)
		}
		return l.up.LoadAdapter(ctx, id, parent, dir)
	}
	return l.up.LoadAdapter(ctx, id, parent, filepath.Join(l.remote, rel))
}

func (l upstreamLoader) AddFallback(id, servedBy, reason string) error {
	return l.up.AddFallback(id, servedBy, reason)
}
