// Package cli is citizen's command line: `citizen serve` (the
// components, wired by package services) and the operator commands beside
// it (events, config, keys, models, ops, workplace). The binary registers
// the commands that live in other packages (bench, pretrain) with Register.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"

	"citizen/services"
)

// Main runs the citizen command line and returns the exit code.
func Main(ctx context.Context, args []string, env services.Env) int {
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
		err = services.Serve(ctx, rest, env)
	case "events":
		err = cmdEvents(ctx, rest, env)
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
		var ue services.UsageError
		fmt.Fprintf(env.Stderr, "citizen %s: %v\n", cmd, err)
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

// extraCommand is a subcommand registered by another file of this package
// (keys, workplace, ops, models) or by the binary (Register: bench,
// pretrain), keeping Main's switch short.
type extraCommand struct {
	summary string
	run     func(ctx context.Context, args []string, env services.Env) error
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

// Register adds `citizen NAME` to Main, for commands that live outside
// this package (the benchmarks, pretraining); summary is its line in the
// usage. The last registration of a name wins.
func Register(name, summary string, run func(ctx context.Context, args []string, env services.Env) error) {
	extraCommands[name] = extraCommand{summary: summary, run: run}
}

// exitCode carries a subcommand's own exit code (its message is already
// printed).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func versionString() string {
	s := "citizen " + services.Version
	if bi, ok := debug.ReadBuildInfo(); ok {
		s += " (" + bi.GoVersion + ")"
	}
	return s
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
