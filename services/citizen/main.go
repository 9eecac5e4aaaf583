// Command citizen is the single binary of citizen: every component, the
// operator commands, the workplace harness and the benchmarks. See
// `citizen help`.
package main

import (
	"context"
	"os"

	"citizen/bench"
	"citizen/pretrain"
	"citizen/services"
)

func main() {
	services.RegisterCommand("bench", bench.Summary, bench.Command)
	services.RegisterCommand("pretrain", pretrain.Summary, func(ctx context.Context, args []string, env services.Env) error {
		return pretrain.Command(ctx, args, env.Stderr)
	})
	os.Exit(services.Main(context.Background(), os.Args[1:], services.Env{Stdout: os.Stdout, Stderr: os.Stderr}))
}
