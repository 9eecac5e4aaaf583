package services

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"citizen/distill"
	"citizen/events/bus/transport"
	"citizen/events/stores"
	"citizen/gateway"
	"citizen/internal/settings"
	"citizen/memory/lessons"
	"citizen/model/catalog"
	"citizen/ops/rollout"
	"citizen/reflection"
	"citizen/reflection/feedback"
)

// Config is the whole configuration of a citizen process. Every leaf field
// is settable, in increasing precedence, by its default, the YAML file
// (--config), the environment (CITIZEN_ + the dotted yaml path in upper case
// with dots as underscores, e.g. CITIZEN_GATEWAY_LISTEN) and flags (the
// dotted yaml path with underscores as dashes, e.g. --gateway.listen).
type Config struct {
	// Target lists the components to run ("all" = every one). Its help
	// lists App.Modules' names ({components}).
	Target  []string  `yaml:"target" help:"components to run: all (every one but inference, the inference server), or a comma list of {components}"`
	DataDir string    `yaml:"data_dir" help:"directory for the event store, checkpoints, keys and weights"`
	Log     LogConfig `yaml:"log"`

	Store   stores.Config    `yaml:"store"`
	Bus     transport.Config `yaml:"bus"`
	Gateway gateway.Config   `yaml:"gateway"`
	// Reflection: the rubric file, reward weights, the timeout and
	// abandonment policy and the detectors' thresholds.
	Reflection reflection.Config `yaml:"reflection"`
	Distill    distill.Settings  `yaml:"distill"`
	// Rollout.Stable is the one stable-version setting: the gateway routes
	// to it and the detectors compare with it before any rollout event.
	Rollout rollout.Config `yaml:"rollout"`
	Memory  MemoryConfig   `yaml:"memory"`
	// Feedback: the feedback interpreter (the embedded one, or with an
	// LLM judge beside it).
	Feedback feedback.Config `yaml:"feedback"`
	Model    ModelConfig     `yaml:"model"`
	// Inference: the inference server (target inference).
	Inference InferenceConfig `yaml:"inference"`

	// ShutdownTimeout bounds how long each component may take to stop on
	// SIGINT/SIGTERM; the gateway drains in-flight requests for as long.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout" help:"how long each component may take to stop on shutdown (the gateway drains in-flight requests for as long)"`
}

// removedKeys are settings that no longer exist, with what replaces them:
// a config file or environment variable that names one is refused with
// that hint instead of being ignored or refused as unknown
// (docs/adr/0014-configuration.md).
var removedKeys = []struct{ path, instead string }{
	{"gateway.stable_version", "rollout.stable (the gateway routes to it before any rollout event)"},
	{"gateway.shutdown_timeout", "shutdown_timeout (the gateway drains in-flight requests for as long)"},
}

// LogConfig configures the process logger.
type LogConfig struct {
	Level  string `yaml:"level" help:"debug, info, warn or error"`
	Format string `yaml:"format" help:"text or json"`
}

// MemoryConfig configures the vector memory.
type MemoryConfig struct {
	Backend   string `yaml:"backend" help:"embedded or qdrant"`
	QdrantURL string `yaml:"qdrant_url" help:"Qdrant gRPC URL, e.g. http://127.0.0.1:6334 (backend qdrant)"`
	Dim       int    `yaml:"dim" help:"dimension of the hashed n-gram embedder"`
	// Lessons: the evidence rules of the lesson learner and fast memory.
	Lessons lessons.Config `yaml:"lessons"`
}

// ModelConfig selects the serving engine.
type ModelConfig struct {
	Engine        string  `yaml:"engine" help:"embedded, upstream or stub"`
	Name          string  `yaml:"name" help:"model the embedded engine serves: smollm2-135m-instruct (fetched once into the model cache) or tiny (the built-in 3.7M workplace model)"`
	Checkpoint    string  `yaml:"checkpoint" help:"serve this checkpoint instead of model.name: a checkpoint directory or a .gguf file"`
	Temperature   float64 `yaml:"temperature" help:"embedded engine's temperature when a request sets none (0 = greedy)"`
	UpstreamURL   string  `yaml:"upstream_url" help:"base URL of an OpenAI-compatible server (engine upstream)"`
	UpstreamKey   string  `yaml:"upstream_key" secret:"true" help:"API key for the upstream server"`
	UpstreamModel string  `yaml:"upstream_model" help:"model name at the upstream server"`
	// The inference path in front of vLLM: see initUpstream.
	UpstreamTokenIDs   bool   `yaml:"upstream_token_ids" help:"ask the upstream server for the exact prompt and completion token ids (vLLM's return_token_ids), recorded for training; off for servers that reject the field (ids are then recorded as -1)"`
	UpstreamAdapters   bool   `yaml:"upstream_adapters" help:"load every version the distiller trains into the upstream server with vLLM's POST /v1/load_lora_adapter (lora_name: the version id) and request it by that model name; off: the upstream serves the base only"`
	UpstreamAdapterDir string `yaml:"upstream_adapter_dir" help:"the distiller's directory (data_dir/distill, a shared volume) as the upstream server sees it: an adapter's lora_path is this joined with its artifact path (empty: the same absolute path as in this process)"`
}

// DefaultConfig is the embedded-defaults configuration: everything in one
// process, data under ./data, no external servers.
func DefaultConfig() Config {
	return Config{
		Target:          []string{"all"},
		DataDir:         "./data",
		Log:             LogConfig{Level: "info", Format: "text"},
		Store:           stores.DefaultConfig(),
		Bus:             transport.DefaultConfig(),
		Gateway:         gateway.DefaultConfig(),
		Reflection:      reflection.DefaultConfig(),
		Memory:          MemoryConfig{Backend: "embedded", Dim: 512},
		Feedback:        feedback.DefaultConfig(),
		Distill:         distill.DefaultSettings(),
		Rollout:         rollout.DefaultConfig(),
		Model:           ModelConfig{Engine: "embedded", Name: catalog.Default, UpstreamTokenIDs: true, UpstreamAdapters: true},
		Inference:       InferenceConfig{Listen: ":8000"},
		ShutdownTimeout: 30 * time.Second,
	}
}

// Validate reports every invalid setting.
func (c *Config) Validate() error {
	var errs []error
	if c.DataDir == "" {
		errs = append(errs, errors.New("data_dir must not be empty"))
	}
	if err := c.Store.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Bus.Validate(); err != nil {
		errs = append(errs, err)
	}
	switch c.Model.Engine {
	case "embedded", "stub":
	case "upstream":
		if c.Model.UpstreamURL == "" {
			errs = append(errs, errors.New("model.upstream_url is required with model.engine=upstream"))
		}
	default:
		errs = append(errs, fmt.Errorf("model.engine %q: want embedded, upstream or stub", c.Model.Engine))
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log.level %q: want debug, info, warn or error", c.Log.Level))
	}
	if err := c.Rollout.WithDefaults().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("rollout: %w", err))
	}
	if err := c.Gateway.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Reflection.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("shutdown_timeout %v: want a positive duration", c.ShutdownTimeout))
	}
	switch c.Memory.Backend {
	case "embedded":
	case "qdrant":
		if c.Memory.QdrantURL == "" {
			errs = append(errs, errors.New("memory.qdrant_url is required with memory.backend=qdrant"))
		}
	default:
		errs = append(errs, fmt.Errorf("memory.backend %q: want embedded or qdrant", c.Memory.Backend))
	}
	if err := c.Distill.Validate(); err != nil {
		errs = append(errs, err)
	}
	for _, t := range c.Target {
		if t != "all" && !slices.Contains(targetNames(), t) {
			errs = append(errs, fmt.Errorf("target %q: unknown component (known: all, %s)", t, strings.Join(targetNames(), ", ")))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// targetNames lists the --target values: the names of App's modules,
// sorted. They come from App.Modules itself, so a new module is a target
// (and is listed in --target's help) without being named twice.
func targetNames() []string {
	var names []string
	for _, m := range (&App{}).Modules() {
		names = append(names, m.Name)
	}
	sort.Strings(names)
	return names
}

// options are the settings' environment prefix, removed keys and the
// placeholders in their help.
func options() settings.Options {
	removed := make([]settings.Removed, len(removedKeys))
	for i, k := range removedKeys {
		removed[i] = settings.Removed{Path: k.path, Instead: k.instead}
	}
	return settings.Options{Prefix: "CITIZEN_", Removed: removed, Expand: func(help string) string {
		return strings.ReplaceAll(help, "{components}", strings.Join(targetNames(), ","))
	}}
}

// ConfigFlags registers --config and one flag per config leaf on fs; the
// returned function, called after fs.Parse, builds the Config with the
// precedence defaults < file < environment < flags and validates it.
func ConfigFlags(fs *flag.FlagSet, lookupEnv func(string) (string, bool)) func() (Config, error) {
	build := settings.Register(fs, lookupEnv, DefaultConfig, options())
	return func() (Config, error) {
		cfg, err := build()
		if err != nil {
			return Config{}, err
		}
		return cfg, cfg.Validate()
	}
}

// Print writes cfg as YAML, followed by the environment variable and flag
// of each key; secrets (fields tagged secret) are redacted.
func (c Config) Print() string { return settings.Print(&c, options()) }

// Reference writes the configuration reference as Markdown: every setting
// with its flag, environment variable, default and help, one table per
// section. docs/configuration.md is its output (citizen config print
// --markdown); a test fails when the committed file differs.
func Reference() string {
	def := DefaultConfig()
	var b strings.Builder
	b.WriteString(`# Configuration reference

Generated by ` + "`citizen config print --markdown`" + `; do not edit by hand (a test in
` + "`services`" + ` fails when this file differs from the command's output).

Every setting is a key of the YAML file named by ` + "`--config`" + ` (or ` + "`CITIZEN_CONFIG`" + `), an
environment variable and a flag of ` + "`citizen serve`" + ` and of the other commands that read
the configuration. Precedence: default < file < environment < flag. A dotted setting
is nested in the file: ` + "`gateway.listen`" + ` is

` + "```yaml" + `
gateway:
  listen: 127.0.0.1:8080
` + "```" + `

Lists are comma-separated in the environment and in flags; durations are Go durations
(` + "`30s`, `10m`" + `). Unknown keys are refused with their line. ` + "`citizen config print`" + ` shows
the effective configuration, secrets redacted.
`)

	b.WriteString(settings.Reference(&def, "process", options()))
	return b.String()
}
