package services

import (
	"citizen/internal/modules"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Version is set at build time with -ldflags "-X citizen/services.Version=...".
var Version = "dev"

// Env abstracts the process environment for tests.
type Env struct {
	Stdout, Stderr io.Writer
	LookupEnv      func(string) (string, bool)
}

// lookup is env.LookupEnv, or the process environment.
func (env Env) lookup() func(string) (string, bool) {
	if env.LookupEnv == nil {
		return os.LookupEnv
	}
	return env.LookupEnv
}

// UsageError is a command's complaint about its arguments: the command
// line prints it and exits 2.
type UsageError struct{ Msg string }

func (u UsageError) Error() string { return u.Msg }

// ParseConfig parses the config flags (plus any extra ones the caller
// registered on fs) and returns the effective configuration.
func ParseConfig(fs *flag.FlagSet, args []string, env Env) (Config, error) {
	build := ConfigFlags(fs, env.lookup())
	fs.SetOutput(env.Stderr)
	if err := fs.Parse(args); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, UsageError{fmt.Sprintf("unexpected arguments: %s", strings.Join(fs.Args(), " "))}
	}
	return build()
}

// NewLogger builds the process logger from the config.
func NewLogger(cfg LogConfig, w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.Level))
	opts := &slog.HandlerOptions{Level: lvl}
	if cfg.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// Serve is `citizen serve ARGS`: it runs the configured modules until ctx
// is cancelled or SIGINT/SIGTERM arrives.
func Serve(ctx context.Context, args []string, env Env) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg, err := ParseConfig(fs, args, env)
	if err != nil {
		return err
	}
	log := NewLogger(cfg.Log, env.Stderr)
	ctx, stop := SignalContext(ctx)
	defer stop()
	app := &App{Config: cfg, Log: log, Progress: env.Stderr}
	log.Info("citizen starting", "version", Version, "target", strings.Join(cfg.Target, ","), "data_dir", cfg.DataDir)
	return modules.New(log, app.Modules()...).Run(ctx, cfg.Target, cfg.ShutdownTimeout)
}

// SignalContext is ctx, cancelled on SIGINT or SIGTERM.
func SignalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}
