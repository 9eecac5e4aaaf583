package services

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"

	"citizen/events/eventlog"
)

// cmdEventsRepair is `citizen events repair [--data-dir=DIR] [--yes]
// [--json]`: it runs eventlog.Repair on the embedded store. Without --yes
// it prints the plan and changes nothing; with --yes it moves the damaged
// part of the log into DATA_DIR/events/quarantine/<time>/ (never deleting)
// and resets checkpoints beyond the new end. The store must not be open
// (citizen stopped). Exit status: 0 when the log is sound or was
// repaired, 3 when damage was found and --yes was not given, 1 on error.
func cmdEventsRepair(ctx context.Context, args []string, env Env) error {
	fs := flag.NewFlagSet("events repair", flag.ContinueOnError)
	yes := fs.Bool("yes", false, "apply the plan: move the damaged part aside and truncate the log (default: print the plan only)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	cfg, err := parseConfig(fs, args, env)
	if err != nil {
		return err
	}
	if cfg.Store.Backend != "embedded" {
		return fmt.Errorf("repair works on the embedded store only (store.backend is %q)", cfg.Store.Backend)
	}
	// The same directory OpenStore opens.
	dir := filepath.Join(cfg.DataDir, "events")
	rep, err := eventlog.Repair(dir, eventlog.RepairOptions{Apply: *yes, Logger: NewLogger(cfg.Log, env.Stderr)})
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
