package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"citizen/events"
	"citizen/events/eventlog"
	"citizen/events/stores"
	"citizen/replay"
	"citizen/services"
)

func cmdEvents(ctx context.Context, args []string, env services.Env) error {
	if len(args) == 0 {
		return services.UsageError{Msg: "usage: citizen events tail|replay|stats [flags]"}
	}
	sub := args[0]
	if sub == "repair" { // before stores.Open: the log refuses to open damaged
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
	cfg, err := services.ParseConfig(fs, args[1:], env)
	if err != nil {
		return err
	}
	st, err := stores.Open(cfg.Store, cfg.DataDir, services.NewLogger(cfg.Log, env.Stderr))
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
		s, err := events.ReadStats(ctx, st)
		if err != nil {
			return err
		}
		return printResult(env.Stdout, s, *asJSON)
	case "replay":
		r, err := replay.Run(ctx, st)
		if err != nil {
			return err
		}
		return printResult(env.Stdout, r, *asJSON)
	default:
		return services.UsageError{Msg: fmt.Sprintf("unknown events subcommand %q (tail, replay, stats)", sub)}
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

// cmdEventsRepair is `citizen events repair [--data-dir=DIR] [--yes]
// [--json]`: it runs eventlog.Repair on the embedded store. Without --yes
// it prints the plan and changes nothing; with --yes it moves the damaged
// part of the log into DATA_DIR/events/quarantine/<time>/ (never deleting)
// and resets checkpoints beyond the new end. The store must not be open
// (citizen stopped). Exit status: 0 when the log is sound or was
// repaired, 3 when damage was found and --yes was not given, 1 on error.
func cmdEventsRepair(ctx context.Context, args []string, env services.Env) error {
	fs := flag.NewFlagSet("events repair", flag.ContinueOnError)
	yes := fs.Bool("yes", false, "apply the plan: move the damaged part aside and truncate the log (default: print the plan only)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	cfg, err := services.ParseConfig(fs, args, env)
	if err != nil {
		return err
	}
	if cfg.Store.Backend != "embedded" {
		return fmt.Errorf("repair works on the embedded store only (store.backend is %q)", cfg.Store.Backend)
	}
	rep, err := eventlog.Repair(stores.EmbeddedDir(cfg.DataDir), eventlog.RepairOptions{Apply: *yes, Logger: services.NewLogger(cfg.Log, env.Stderr)})
	if err != nil {
		return err
	}
	if err := printResult(env.Stdout, rep, *asJSON); err != nil {
		return err
	}
	if !rep.Applied && (rep.Problem != "" || len(rep.Moved) > 0) {
		return exitCode(3)
	}
	return nil
}
