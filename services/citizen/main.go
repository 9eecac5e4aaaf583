// Command citizen is the single binary of citizen: every component, the
// operator commands and the workplace harness. See `citizen help`.
package main

import (
	"context"
	"os"

	"citizen/services"
)

func main() {
	os.Exit(services.Main(context.Background(), os.Args[1:], services.Env{Stdout: os.Stdout, Stderr: os.Stderr}))
}
