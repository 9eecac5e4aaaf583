// Command citizen is the single binary of citizen: every component, the
// operator commands, the workplace harness and the benchmarks. See
// `citizen help`.
package main

import (
	"context"
	"os"

	"citizen/bench"
	"citizen/cli"
	"citizen/pretrain"
	"citizen/services"
)

func main() {
	cli.Register("bench", bench.Summary, bench.Command)
	cli.Register("pretrain", pretrain.Summary, func(ctx context.Context, args []string, env services.Env) error {
		return pretrain.Command(ctx, args, env.Stderr)
	})
	os.Exit(cli.Main(context.Background(), os.Args[1:], services.Env{Stdout: os.Stdout, Stderr: os.Stderr}))
}
