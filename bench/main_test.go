package bench

import (
	"context"
	"os"
	"testing"

	"citizen/cli"
	"citizen/services"
)

// TestMain makes the test binary a citizen binary with the bench command:
// re-executed with CITIZEN_TEST_MAIN=1 (the harness's mock and serve
// children run os.Executable), it runs cli.Main on its arguments.
func TestMain(m *testing.M) {
	cli.Register("bench", Summary, Command)
	if os.Getenv("CITIZEN_TEST_MAIN") == "1" {
		os.Exit(cli.Main(context.Background(), os.Args[1:], services.Env{Stdout: os.Stdout, Stderr: os.Stderr}))
	}
	os.Exit(m.Run())
}
