package services

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"
	"time"

	"citizen/events"
)

// Version is set at build time with -ldflags "-X citizen/services.Version=...".
var Version = "dev"

// Env abstracts the process environment for tests.
type Env struct {
	Stdout, Stderr io.Writer
	LookupEnv      func(string) (string, bool)
}

// Main runs the citizen command line and returns the exit code.
func Main(ctx context.Context, args []string, env Env) int {
	if env.LookupEnv == nil {
		env.LookupEnv = os.LookupEnv
	}
	if len(args) == 0 {
		usage(env.Stderr)
		return 2
	}
	cmd, rest := args[0], args[1:]
	var err error
	switch cmd {
	case "serve":
		err = cmdServe(ctx, rest, env)
	case "events":
		err = cmdEvents(ctx, rest, env)
	case "config":
		err = cmdConfig(rest, env)
	case "version":
		fmt.Fprintln(env.Stdout, versionString())
	case "help", "-h", "--help":
		usage(env.Stdout)
	default:
		if c, ok := extraCommands[cmd]; ok {
			err = c.run(ctx, rest, env)
			break
		}
		fmt.Fprintf(env.Stderr, "citizen: unknown command %q\n", cmd)
		usage(env.Stderr)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var ec exitCode
	if errors.As(err, &ec) {
		return int(ec) // the subcommand has said why
	}
	if err != nil {
		var ue UsageError
		fmt.Fprintf(env.Stderr, "citizen %s: %v\n", cmd, err)
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

// UsageError is a command's complaint about its arguments: Main prints it
// and exits 2.
type UsageError struct{ Msg string }

func (u UsageError) Error() string { return u.Msg }

// extraCommand is a subcommand registered by another file of this package
// (keys, workplace, pretrain, ops) or by the binary (RegisterCommand:
// bench), keeping Main's switch short.
type extraCommand struct {
	summary string
	run     func(ctx context.Context, args []string, env Env) error
}

var extraCommands = map[string]extraCommand{}

func usage(w io.Writer) {
	fmt.Fprint(w, `citizen: one deployed model that learns on the job.

Usage:
  citizen serve [--target=all|a,b] [--data-dir=DIR] [flags]   run components (see citizen config print)
  citizen events tail [--follow] [--type=T] [--stream=PREFIX] [--after=N]
  citizen events replay                                      rebuild every projection from the store
  citizen events stats                                       counts per type, positions, streams
  citizen events repair [--yes]                              move a damaged log suffix aside (plan without --yes)
  citizen config print [--markdown] [flags]                  the effective configuration (--markdown: the reference)
  citizen version
`)
	names := make([]string, 0, len(extraCommands))
	for n := range extraCommands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  citizen %-50s %s\n", n+" ...", extraCommands[n].summary)
	}
}

func versionString() string {
	s := "citizen " + Version
	if bi, ok := debug.ReadBuildInfo(); ok {
		s += " (" + bi.GoVersion + ")"
	}
	return s
}

// parseConfig parses config flags (plus any extra ones the caller
// registered on fs) and returns the effective configuration.
func parseConfig(fs *flag.FlagSet, args []string, env Env) (Config, error) {
	build := ConfigFlags(fs, env.LookupEnv)
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

func cmdServe(ctx context.Context, args []string, env Env) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg, err := parseConfig(fs, args, env)
	if err != nil {
		return err
	}
	log := NewLogger(cfg.Log, env.Stderr)
	ctx, stop := signalContext(ctx)
	defer stop()
	app := &App{Config: cfg, Log: log, Progress: env.Stderr}
	log.Info("citizen starting", "version", Version, "target", strings.Join(cfg.Target, ","), "data_dir", cfg.DataDir)
	return NewManager(log, app.Modules()...).Run(ctx, cfg.Target, cfg.ShutdownTimeout)
}

func cmdConfig(args []string, env Env) error {
	if len(args) == 0 || args[0] != "print" {
		return UsageError{"usage: citizen config print [--markdown] [flags]"}
	}
	fs := flag.NewFlagSet("config print", flag.ContinueOnError)
	markdown := fs.Bool("markdown", false, "print the configuration reference (every setting's flag, environment variable, default and help) as Markdown instead of the effective configuration")
	cfg, err := parseConfig(fs, args[1:], env)
	if err != nil {
		return err
	}
	if *markdown {
		fmt.Fprint(env.Stdout, Reference())
		return nil
	}
	fmt.Fprint(env.Stdout, cfg.Print())
	return nil
}

func cmdEvents(ctx context.Context, args []string, env Env) error {
	if len(args) == 0 {
		return UsageError{"usage: citizen events tail|replay|stats [flags]"}
	}
	sub := args[0]
	if sub == "repair" { // before OpenStore: Open refuses a damaged log
		return cmdEventsRepair(ctx, args[1:], env)
	}
	fs := flag.NewFlagSet("events "+sub, flag.ContinueOnError)
	var (
		follow  = fs.Bool("follow", false, "keep printing new events (tail)")
		types   = fs.String("type", "", "only these event types, comma separated (tail)")
		prefix  = fs.String("stream", "", "only streams with this prefix (tail)")
		after   = fs.Uint64("after", 0, "start after this global position (tail)")
		asJSON  = fs.Bool("json", false, "print results as JSON (stats, replay)")
		verbose = fs.Bool("v", false, "print each event's data (tail)")
	)
	cfg, err := parseConfig(fs, args[1:], env)
	if err != nil {
		return err
	}
	st, err := OpenStore(cfg, NewLogger(cfg.Log, env.Stderr))
	if err != nil {
		return err
	}
	defer st.Close()
	switch sub {
	case "tail":
		f := events.Filter{}
		if *types != "" {
			f.Types = strings.Split(*types, ",")
		}
		if *prefix != "" {
			f.StreamPrefixes = []string{*prefix}
		}
		return tail(ctx, st, *after, f, *follow, *verbose, env.Stdout)
	case "stats":
		s, err := Stats(ctx, st)
		if err != nil {
			return err
		}
		return printResult(env.Stdout, s, *asJSON)
	case "replay":
		r, err := Replay(ctx, st)
		if err != nil {
			return err
		}
		return printResult(env.Stdout, r, *asJSON)
	default:
		return UsageError{fmt.Sprintf("unknown events subcommand %q (tail, replay, stats)", sub)}
	}
}

func tail(ctx context.Context, st events.Store, after uint64, f events.Filter, follow, verbose bool, w io.Writer) error {
	print := func(ev events.Event) {
		if verbose {
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", ev.Position, ev.Time.Format(time.RFC3339Nano), ev.Type, ev.Stream, ev.Data)
		} else {
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", ev.Position, ev.Time.Format(time.RFC3339Nano), ev.Type, ev.Stream)
		}
	}
	if follow {
		ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
		err := st.Subscribe(ctx, after, f, func(_ context.Context, ev events.Event) error { print(ev); return nil })
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	return events.Scan(ctx, st, after, f, func(ev events.Event) error { print(ev); return nil })
}

// printResult writes v as indented JSON, or through its String method.
func printResult(w io.Writer, v fmt.Stringer, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	_, err := fmt.Fprint(w, v.String())
	return err
}

// signalContext is cancelled on SIGINT or SIGTERM.
// RegisterCommand adds `citizen NAME` to Main, for commands that live
// outside this package (the benchmarks); summary is its line in the usage.
// The last registration of a name wins.
func RegisterCommand(name, summary string, run func(ctx context.Context, args []string, env Env) error) {
	extraCommands[name] = extraCommand{summary: summary, run: run}
}

// Serve is `citizen serve ARGS`: it runs the configured modules until ctx
// is cancelled or SIGINT/SIGTERM arrives.
func Serve(ctx context.Context, args []string, env Env) error { return cmdServe(ctx, args, env) }

// SignalContext is ctx, cancelled on SIGINT or SIGTERM.
func SignalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return signalContext(ctx)
}

func signalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}
