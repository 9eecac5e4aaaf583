package cli

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"text/tabwriter"
	"time"

	"citizen/gateway"
	"citizen/ops"
	"citizen/services"
	"citizen/workplace"
)

func init() {
	extraCommands["config"] = extraCommand{summary: "the effective configuration, or the reference (config print [--markdown])", run: cmdConfig}
	extraCommands["keys"] = extraCommand{summary: "create, list or revoke API keys (create|list|revoke)", run: cmdKeys}
	extraCommands["workplace"] = extraCommand{summary: "drive a running citizen with simulated users (workplace run|corpus)", run: cmdWorkplace}
	extraCommands["ops"] = extraCommand{summary: "operate a running citizen (ops rollout status|pause|resume|promote|abort, versions, stream)", run: cmdOps}
}

func cmdKeys(ctx context.Context, args []string, env services.Env) error {
	if len(args) == 0 {
		return services.UsageError{Msg: "usage: citizen keys create --tenant T [--user U] [--name N] [--rpm N] [--tpm N] | list | revoke ID"}
	}
	sub := args[0]
	fs := flag.NewFlagSet("keys "+sub, flag.ContinueOnError)
	var spec gateway.KeySpec
	fs.StringVar(&spec.Tenant, "tenant", "", "tenant the key belongs to (create)")
	fs.StringVar(&spec.User, "user", "", "user the key acts as, optional (create)")
	fs.StringVar(&spec.Name, "name", "", "a label for the key (create)")
	fs.IntVar(&spec.RequestsPerMinute, "rpm", 0, "requests per minute, 0 = the gateway's default (create)")
	fs.IntVar(&spec.TokensPerMinute, "tpm", 0, "tokens per minute, 0 = the gateway's default (create)")
	build := services.ConfigFlags(fs, env.LookupEnv)
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
			return services.UsageError{Msg: "usage: citizen keys revoke ID"}
		}
		if err := gateway.RevokeKey(path, fs.Arg(0)); err != nil {
			return err
		}
		fmt.Fprintf(env.Stderr, "revoked %s\n", fs.Arg(0))
	default:
		return services.UsageError{Msg: fmt.Sprintf("unknown keys subcommand %q (create, list, revoke)", sub)}
	}
	return nil
}

func cmdWorkplace(ctx context.Context, args []string, env services.Env) error {
	ctx, stop := services.SignalContext(ctx)
	defer stop()
	if rc := workplace.Main(args, env.Stdout, env.Stderr); rc != 0 {
		return exitCode(rc)
	}
	return nil
}

func cmdOps(ctx context.Context, args []string, env services.Env) error {
	ctx, stop := services.SignalContext(ctx)
	defer stop()
	if rc := ops.Main(ctx, args, env.Stdout, env.Stderr, "", ""); rc != 0 {
		return exitCode(rc)
	}
	return nil
}
func cmdConfig(_ context.Context, args []string, env services.Env) error {
	if len(args) == 0 || args[0] != "print" {
		return services.UsageError{Msg: "usage: citizen config print [--markdown] [flags]"}
	}
	fs := flag.NewFlagSet("config print", flag.ContinueOnError)
	markdown := fs.Bool("markdown", false, "print the configuration reference (every setting's flag, environment variable, default and help) as Markdown instead of the effective configuration")
	cfg, err := services.ParseConfig(fs, args[1:], env)
	if err != nil {
		return err
	}
	if *markdown {
		fmt.Fprint(env.Stdout, services.Reference())
		return nil
	}
	fmt.Fprint(env.Stdout, cfg.Print())
	return nil
}
