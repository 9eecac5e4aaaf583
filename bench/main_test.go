package bench

import (
	"context"
	"os"
	"testing"

	"citizen/services"
)

// TestMain makes the test binary a citizen binary with the bench command:
// re-executed with CITIZEN_TEST_MAIN=1 (the harness's mock and serve
// children run os.Executable), it runs services.Main on its arguments.
func TestMain(m *testing.M) {
	services.RegisterCommand("bench", Summary, Command)
	if os.Getenv("CITIZEN_TEST_MAIN") == "1" {
		os.Exit(services.Main(context.Background(), os.Args[1:], services.Env{Stdout: os.Stdout, Stderr: os.Stderr}))
	}
	os.Exit(m.Run())
}
