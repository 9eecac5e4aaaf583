package services

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"text/tabwriter"
	"time"

	"citizen/gateway"
	"citizen/ops"
	"citizen/workplace"
)

func init() {
	extraCommands["keys"] = extraCommand{summary: "create, list or revoke API keys (create|list|revoke)", run: cmdKeys}
	extraCommands["workplace"] = extraCommand{summary: "drive a running citizen with simulated users (workplace run|corpus)", run: cmdWorkplace}
	extraCommands["ops"] = extraCommand{summary: "operate a running citizen (ops rollout status|pause|resume|promote|abort, versions, stream)", run: cmdOps}
}

func cmdKeys(ctx context.Context, args []string, env Env) error {
	if len(args) == 0 {
		return UsageError{"usage: citizen keys create --tenant T [--user U] [--name N] [--rpm N] [--tpm N] | list | revoke ID"}
	}
	sub := args[0]
	fs := flag.NewFlagSet("keys "+sub, flag.ContinueOnError)
	var spec gateway.KeySpec
	fs.StringVar(&spec.Tenant, "tenant", "", "tenant the key belongs to (create)")
	fs.StringVar(&spec.User, "user", "", "user the key acts as, optional (create)")
	fs.StringVar(&spec.Name, "name", "", "a label for the key (create)")
	fs.IntVar(&spec.RequestsPerMinute, "rpm", 0, "requests per minute, 0 = the gateway's default (create)")
	fs.IntVar(&spec.TokensPerMinute, "tpm", 0, "tokens per minute, 0 = the gateway's default (create)")
	build := ConfigFlags(fs, env.LookupEnv)
	fs.SetOutput(env.Stderr)
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	cfg, err := build()
	if err != nil {
		return err
	}
	path := cfg.Gateway.KeysFile
	if path == "" {
		path = filepath.Join(cfg.DataDir, "keys.json")
	}
	switch sub {
	case "create":
		secret, key, err := gateway.CreateKey(path, spec)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "%s\n", secret)
		fmt.Fprintf(env.Stderr, "created key %s for tenant %s (shown once; stored hashed in %s)\n", key.ID, key.Tenant, path)
	case "list":
		keys, err := gateway.ListKeys(path)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(env.Stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tTENANT\tUSER\tNAME\tRPM\tTPM\tCREATED\tSTATE")
		for _, k := range keys {
			state := "active"
			if !k.Active() {
				state = "revoked " + k.Revoked.Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", k.ID, k.Tenant, k.User, k.Name, k.RequestsPerMinute, k.TokensPerMinute, k.Created.Format(time.RFC3339), state)
		}
		return tw.Flush()
	case "revoke":
		if fs.NArg() != 1 {
			return UsageError{"usage: citizen keys revoke ID"}
		}
		if err := gateway.RevokeKey(path, fs.Arg(0)); err != nil {
			return err
		}
		fmt.Fprintf(env.Stderr, "revoked %s\n", fs.Arg(0))
	default:
		return UsageError{fmt.Sprintf("unknown keys subcommand %q (create, list, revoke)", sub)}
	}
	return nil
}

func cmdWorkplace(ctx context.Context, args []string, env Env) error {
	ctx, stop := signalContext(ctx)
	defer stop()
	if rc := workplace.Main(args, env.Stdout, env.Stderr); rc != 0 {
		return exitCode(rc)
	}
	return nil
}

// exitCode carries a subcommand's own exit code (its message is already
// printed).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func cmdOps(ctx context.Context, args []string, env Env) error {
	ctx, stop := signalContext(ctx)
	defer stop()
	if rc := ops.Main(ctx, args, env.Stdout, env.Stderr, "", ""); rc != 0 {
		return exitCode(rc)
	}
	return nil
}
